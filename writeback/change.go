// Package writeback holds what every write-back method shares: the Writer
// interface the update cycle writes through, with its Change and Result,
// the image updates to write, how a change is reported, and the errors
// callers branch on. Each method is a subpackage: argocd patches the
// Application itself, git commits to the Application's repository, and
// manifest holds the pure edits of the lists and files both of them change.
package writeback

import (
	"fmt"
	"strings"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
)

// ImageUpdate is one image whose new version should be written: the image
// as the Application's annotations describe it, and its versions.
type ImageUpdate struct {
	settings.ImageSpec
	// New is written; Old is only reported.
	New, Old imageref.Version
	// Labels are the new version's image labels, when the strategy read
	// its metadata (commit-message templates show them as .Labels).
	Labels map[string]string
}

// ChartUpdate is one Helm chart whose new version should be written into
// its source's targetRevision.
type ChartUpdate struct {
	settings.ChartSpec
	// New is written; Old is only reported.
	New, Old string
}

// ValidateCharts checks what every write-back needs of its charts.
func ValidateCharts(charts []ChartUpdate) []error {
	var errs []error
	for _, c := range charts {
		switch {
		case c.Chart == "":
			errs = append(errs, fmt.Errorf("chart %q: empty chart name", c.Alias))
		case c.New == "" || strings.ContainsAny(c.New, " \t\n/"):
			errs = append(errs, fmt.Errorf("chart %s: %q is no version to write", c.Key(), c.New))
		}
	}
	return errs
}

// ReportedChange is how Argo CD Image Updater named one change where users
// read it back: the annotations of ImagesUpdated events and the fields and
// hash of git-branch templates. Keeping its names keeps their alerting and
// their branch names as they were.
type ReportedChange struct {
	// FullName is the registry host and repository path
	// ("quay.io/org/app"); Docker Hub's host only when written.
	FullName string
	// Name is the repository path without the registry host ("org/app").
	Name string
	// OldTag and NewTag are the digest when the version has one, else the
	// tag.
	OldTag, NewTag string
}

// Reported is the change as ReportedChange names it.
func (i ImageUpdate) Reported() ReportedChange {
	host, name := reportedName(i.Image.OriginalName(), i.Constraint)
	full := name
	if host != "" && !strings.HasPrefix(name, host+"/") {
		full = host + "/" + name
	}
	return ReportedChange{FullName: full, Name: name, OldTag: reportedVersion(i.Old), NewTag: reportedVersion(i.New)}
}

func reportedVersion(v imageref.Version) string {
	if v.Digest != "" {
		return v.Digest
	}
	return v.Tag
}

// reportedName splits an image as written in image-list (without its
// constraint) into registry host and repository path the way Argo CD Image
// Updater did. With no constraint, or one that is a valid tag, the entry is
// a normal reference: Docker Hub's host is kept only when written as
// "docker.io", and "library/" only when written without a host.
// Otherwise (a semver range like "~1.2") it fell back to splitting the text:
// the first element is the host when it contains a '.', and the path ends
// at the first ':'.
func reportedName(written, constraint string) (host, name string) {
	first, rest, nested := strings.Cut(written, "/")
	if constraint != "" && !imageref.ValidTag(constraint) {
		if nested && strings.Contains(first, ".") {
			host, written = first, rest
		}
		name, _, _ = strings.Cut(written, ":")
		return host, name
	}
	if !nested || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		return "", written
	}
	switch first {
	case "docker.io":
		return first, strings.TrimPrefix(rest, "library/")
	case "index.docker.io":
		return "", strings.TrimPrefix(rest, "library/")
	}
	return first, rest
}

// Written is the image as written back: the user's spelling of its name
// with the new version ("nginx:1.27", "nginx:1.27@sha256:...").
func (i ImageUpdate) Written() string {
	ref, err := i.Image.WithVersion(i.New)
	if err != nil {
		// validate refuses such updates before anything is written.
		return i.Image.OriginalName()
	}
	return ref.Original()
}

// ValidateImages checks what every write-back needs of its images.
func ValidateImages(images []ImageUpdate) []error {
	var errs []error
	for _, img := range images {
		switch _, err := img.Image.WithVersion(img.New); {
		case img.Image.IsZero():
			errs = append(errs, fmt.Errorf("image %q: empty image name", img.Alias))
		case img.New.IsZero():
			errs = append(errs, fmt.Errorf("image %s: neither a tag nor a digest to write", img.Image.OriginalName()))
		case err != nil:
			errs = append(errs, fmt.Errorf("image %s: %w", img.Image.OriginalName(), err))
		}
	}
	return errs
}

// ImageList lists the images as written, for logs.
func ImageList(images []ImageUpdate) []string {
	out := make([]string, len(images))
	for i, img := range images {
		out[i] = img.Written()
	}
	return out
}
