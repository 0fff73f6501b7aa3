package writeback

import (
	"errors"
	"fmt"
)

// Source types an Application source can have for the argocd write-back,
// spelled as Argo CD reports them in status.sourceType(s).
const (
	SourceTypeKustomize = "Kustomize"
	SourceTypeHelm      = "Helm"
)

// Helm parameter names used when the annotations name none.
const (
	DefaultHelmImageName = "image.name"
	DefaultHelmImageTag  = "image.tag"
)

// ImageUpdate is one image whose new version should be written.
type ImageUpdate struct {
	Alias string
	// Image is the image name as written in the image-list annotation,
	// without tag (for example "nginx" or
	// "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app").
	Image string
	// KustomizeImageName is the original image name a Kustomize override
	// replaces (<alias>.kustomize.image-name); empty means Image.
	KustomizeImageName string
	// HelmImageName and HelmImageTag name the Helm parameters receiving the
	// image name and the version (empty: image.name and image.tag).
	// HelmImageSpec, when set, names one parameter receiving "name:version"
	// instead, and the other two are ignored.
	HelmImageName, HelmImageTag, HelmImageSpec string
	NewTag                                     string
	// NewDigest is empty or "sha256:..."; when set the written version is
	// "tag@digest".
	NewDigest string
	// OldTag is only reported, never written.
	OldTag string
}

// ApplicationUpdate is what to write to one Application.
type ApplicationUpdate struct {
	Namespace, Name string
	// SourceIndex indexes spec.sources; -1 means spec.source.
	SourceIndex int
	// SourceType is SourceTypeKustomize or SourceTypeHelm.
	SourceType string
	Images     []ImageUpdate
}

// version is what follows the image name: "tag", "tag@digest" or, with no
// tag, "digest" alone (Helm tag parameters then hold just the digest).
func (i ImageUpdate) version() string {
	switch {
	case i.NewDigest == "":
		return i.NewTag
	case i.NewTag == "":
		return i.NewDigest
	default:
		return i.NewTag + "@" + i.NewDigest
	}
}

// reference is the full image reference "name:tag", "name:tag@digest" or
// "name@digest".
func (i ImageUpdate) reference() string {
	ref := i.Image
	if i.NewTag != "" {
		ref += ":" + i.NewTag
	}
	if i.NewDigest != "" {
		ref += "@" + i.NewDigest
	}
	return ref
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
	if u.SourceType != SourceTypeKustomize && u.SourceType != SourceTypeHelm {
		errs = append(errs, fmt.Errorf("source type %q cannot be written (want %s or %s)", u.SourceType, SourceTypeKustomize, SourceTypeHelm))
	}
	for _, img := range u.Images {
		if img.Image == "" {
			errs = append(errs, fmt.Errorf("image %q: empty image name", img.Alias))
		}
		if img.NewTag == "" && img.NewDigest == "" {
			errs = append(errs, fmt.Errorf("image %s: neither a tag nor a digest to write", img.Image))
		}
	}
	return errors.Join(errs...)
}
