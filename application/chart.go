package application

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
)

// ChartRepository is where a Helm chart source's versions are listed, read
// from its repoURL once per version of the Application: an HTTP(S) Helm
// repository serving index.yaml, or an OCI registry, which Argo CD takes
// as a host and path with or without oci://.
type ChartRepository struct {
	// URL is the HTTP(S) repository, without a final '/'; "" for OCI.
	URL string
	// OCI is the chart's repository in the registry (<repoURL>/<chart>);
	// zero for HTTP.
	OCI imageref.Reference
	// Err is why repoURL names neither; the chart is then not updated.
	Err error
	// Range tells that the source's targetRevision is not a version but
	// a semver range (or empty, which Argo CD reads as "*"): Argo CD
	// resolves it to the highest version in it at each refresh.
	Range bool
}

// IsOCI tells whether the chart is in an OCI registry.
func (r ChartRepository) IsOCI() bool { return !r.OCI.IsZero() }

// String names the repository in messages: its URL, or the OCI
// repository as oci://.
func (r ChartRepository) String() string {
	if r.IsOCI() {
		return "oci://" + r.OCI.Name()
	}
	return r.URL
}

// chartRepository reads the repository of a chart source and tells
// whether its targetRevision is a range.
func chartRepository(repoURL, chart, targetRevision string) *ChartRepository {
	r := chartRepo(repoURL, chart)
	_, err := semver.NewVersion(strings.TrimSpace(targetRevision))
	r.Range = err != nil
	return r
}

func chartRepo(repoURL, chart string) *ChartRepository {
	u := strings.TrimSpace(repoURL)
	lower := strings.ToLower(u)
	switch {
	case u == "":
		return &ChartRepository{Err: fmt.Errorf("the source of chart %s has no repoURL", chart)}
	case strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "http://"):
		return &ChartRepository{URL: strings.TrimRight(u, "/")}
	case strings.Contains(u, "://") && !strings.HasPrefix(lower, "oci://"):
		return &ChartRepository{Err: fmt.Errorf("repoURL %q of chart %s is neither an http(s):// Helm repository nor an OCI registry", u, chart)}
	}
	path := strings.TrimRight(u[len(u)-len(strings.TrimPrefix(lower, "oci://")):], "/")
	ref, err := imageref.Parse(path + "/" + chart)
	if err != nil {
		return &ChartRepository{Err: fmt.Errorf("OCI repository %s/%s of chart %s: %w", path, chart, chart, err)}
	}
	if ref.Tag() != "" || ref.Digest() != "" {
		return &ChartRepository{Err: fmt.Errorf("OCI repository %s/%s of chart %s names a version; the version is targetRevision", path, chart, chart)}
	}
	return &ChartRepository{OCI: ref}
}

// ChartSource is the source whose chart field names c's chart: the first
// in spec.sources order (a dry source renders no chart).
func (a *Application) ChartSource(c settings.ChartSpec) (Source, bool) {
	if c.GitTag {
		return Source{}, false
	}
	for _, s := range a.Sources {
		if !s.Dry && s.Chart == c.Chart && s.ChartRepo != nil {
			return s, true
		}
	}
	return Source{}, false
}
