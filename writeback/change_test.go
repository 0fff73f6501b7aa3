package writeback

import (
	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/imageref"
)

// mustRef parses an image name as the annotations would.
func mustRef(s string) imageref.Reference {
	r, err := imageref.Parse(s)
	if err != nil {
		panic(err)
	}
	return r
}

// mustTarget parses a write-back-target as the annotations would.
func mustTarget(s string) appwatch.WriteBackTarget {
	t, err := appwatch.ParseWriteBackTarget(s)
	if err != nil {
		panic(err)
	}
	return t
}
