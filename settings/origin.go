package settings

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Origin is where a setting is written, as messages name it: an
// Application's annotation ("annotation argocd-image-updater.argoproj.io/
// <key>") or a field of an ImageUpdater ("ImageUpdater <namespace>/<name>
// spec.applicationRefs[0].images[1].imageName"). Both sources of settings
// name their values this one way, so an error reads the same whichever the
// user wrote.
type Origin string

// AnnotationOrigin is the origin of the annotation key, given without
// AnnotationPrefix.
func AnnotationOrigin(key string) Origin { return Origin("annotation " + AnnotationPrefix + key) }

// FieldOrigin is the origin of a field of an ImageUpdater; path starts at
// "spec".
func FieldOrigin(resource types.NamespacedName, path string) Origin {
	return Origin("ImageUpdater " + resource.String() + " " + path)
}

// Child is the origin of a field under this one: ".images[1]", ".method".
func (o Origin) Child(format string, args ...any) Origin {
	return o + Origin(fmt.Sprintf(format, args...))
}

// Or is o, or else the origin given: where a setting would be written when
// nothing set it.
func (o Origin) Or(other Origin) Origin {
	if o == "" {
		return other
	}
	return o
}

// Problem is something wrong with an Application's settings. Image is
// empty for Application-level problems. A problem with Image set disables
// only that image; an Application-level error disables the Application.
type Problem struct {
	Image   string // alias or image of the affected image, "" for the Application
	Origin  Origin // where the wrong value is written
	Message string
	Warning bool // reported, but nothing is disabled
	// Chart tells that the problem concerns charts only: the chart Image
	// names, or with Image empty, the list of charts. It stops no image.
	// GitTag tells that those are git sources (git-tag-list).
	Chart, GitTag bool
}

func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(string(p.Origin))
	switch {
	case p.Image != "" && p.GitTag:
		fmt.Fprintf(&b, " (git source %s)", p.Image)
	case p.Image != "" && p.Chart:
		fmt.Fprintf(&b, " (chart %s)", p.Image)
	case p.Image != "":
		fmt.Fprintf(&b, " (image %s)", p.Image)
	}
	b.WriteString(": ")
	b.WriteString(p.Message)
	return b.String()
}
