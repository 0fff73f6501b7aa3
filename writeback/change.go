package writeback

import (
	"errors"
	"fmt"

	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/imageref"
)

// ImageUpdate is one image whose new version should be written: the image
// as the Application's annotations describe it, and its versions.
type ImageUpdate struct {
	appwatch.ImageSpec
	// New is written; Old is only reported.
	New, Old imageref.Version
}

// ApplicationUpdate is what to write to one Application.
type ApplicationUpdate struct {
	Namespace, Name string
	// SourceIndex indexes spec.sources; -1 means spec.source.
	SourceIndex int
	// SourceType is Kustomize or Helm.
	SourceType appwatch.SourceType
	Images     []ImageUpdate
}

// reference is the image as written back: the user's spelling of its name
// with the new version ("nginx:1.27", "nginx:1.27@sha256:...").
func (i ImageUpdate) reference() string {
	ref, err := i.Image.WithVersion(i.New)
	if err != nil {
		// validate refuses such updates before anything is written.
		return i.Image.OriginalName()
	}
	return ref.Original()
}

// validateImages checks what every write-back needs of its images.
func validateImages(images []ImageUpdate) []error {
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

func (u ApplicationUpdate) key() string { return u.Namespace + "/" + u.Name }

func (u ApplicationUpdate) validate() error {
	var errs []error
	if u.Namespace == "" || u.Name == "" {
		errs = append(errs, errors.New("namespace and name are required"))
	}
	if u.SourceIndex < -1 {
		errs = append(errs, fmt.Errorf("invalid source index %d", u.SourceIndex))
	}
	if !u.SourceType.Writable() {
		errs = append(errs, fmt.Errorf("source type %q cannot be written (want %s or %s)", u.SourceType, appwatch.SourceKustomize, appwatch.SourceHelm))
	}
	errs = append(errs, validateImages(u.Images)...)
	return errors.Join(errs...)
}
