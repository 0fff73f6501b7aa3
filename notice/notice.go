// Package notice is what the updater tells Argo CD Notifications: the last
// write, failure, revert and wait of each Application, each in an
// annotation of its own that a trigger's condition and a template read.
// A notice holds only versions and messages the updater's events hold too,
// within MaxBytes, so that a notification carries no secret and an
// Application stays small.
package notice

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/image-updater/argocd-image-updater/settings"
)

// Kind is what happened: the key, without its prefix, of the annotation
// that holds the last notice of its kind.
type Kind string

// The kinds.
const (
	// Updated: new versions written (a patch accepted, a commit pushed).
	Updated Kind = settings.KeyLastUpdate
	// Failed: a check or a write failed, or a setting is wrong.
	Failed Kind = settings.KeyLastFailure
	// Reverted: the health gate wrote back the version before one that
	// broke the Application.
	Reverted Kind = settings.KeyLastRevert
	// Waiting: a newer version is held back (its minimum release age,
	// the update windows, its stage).
	Waiting Kind = settings.KeyLastWait
)

// Kinds lists every kind, in the order the catalog has them.
func Kinds() []Kind { return []Kind{Updated, Failed, Reverted, Waiting} }

// Annotation is the annotation, with its prefix, that holds the last
// notice of kind.
func (k Kind) Annotation() string { return settings.AnnotationPrefix + string(k) }

// MaxBytes bounds a notice as encoded: an Application may carry one of
// each kind, and Argo CD and the updater keep them with it.
const MaxBytes = 4096

// maxMessage bounds the message, as an event's.
const maxMessage = 1000

// maxField bounds each name and version: an image reference is at most
// a few hundred bytes.
const maxField = 512

// Version is one image or chart of a notice: for an update or a revert,
// the version before (From) and the one written (To); for a wait, the one
// waiting (To).
type Version struct {
	Alias string `json:"alias,omitempty"`
	// Image is the image as image-list has it, without its version;
	// Chart the chart's name. One of them is set.
	Image string `json:"image,omitempty"`
	Chart string `json:"chart,omitempty"`
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
}

// Notice is one annotation's value.
type Notice struct {
	// At is when it happened, to the second: the notifications
	// controller's oncePer tells two notices apart by it.
	At time.Time `json:"at"`
	// Images and Charts are the versions it is about, at most as many as
	// MaxBytes holds; Omitted counts those left out.
	Images  []Version `json:"images,omitempty"`
	Charts  []Version `json:"charts,omitempty"`
	Omitted int       `json:"omitted,omitempty"`
	// Message says what happened, as the event of it does.
	Message string `json:"message,omitempty"`
}

// Encode is the annotation's value: JSON of at most MaxBytes, its fields
// cut (at a character) and its versions dropped from the end until it
// fits.
func (n Notice) Encode() string {
	n.At = n.At.UTC().Truncate(time.Second)
	n.Message = cut(n.Message, maxMessage)
	n.Images, n.Charts = bound(n.Images), bound(n.Charts)
	for {
		b, err := json.Marshal(n)
		if err != nil {
			// Strings and a time only: json cannot fail on them.
			panic(fmt.Sprintf("notice: %v", err))
		}
		if len(b) <= MaxBytes {
			return string(b)
		}
		switch {
		case len(n.Charts) > 0:
			n.Charts = n.Charts[:len(n.Charts)-1]
		case len(n.Images) > 0:
			n.Images = n.Images[:len(n.Images)-1]
		default:
			// Only the message is left: maxMessage and the fixed fields
			// fit in MaxBytes.
			n.Message = cut(n.Message, len(n.Message)/2)
			continue
		}
		n.Omitted++
	}
}

// Decode reads an annotation's value; the annotation may have been edited
// by anyone who may edit the Application.
func Decode(value string) (Notice, error) {
	var n Notice
	if len(value) > MaxBytes {
		return n, fmt.Errorf("notice of %d bytes, more than %d", len(value), MaxBytes)
	}
	if err := json.Unmarshal([]byte(value), &n); err != nil {
		return Notice{}, fmt.Errorf("not a notice: %w", err)
	}
	return n, nil
}

// Same tells whether value, an annotation's, holds n but for when: a
// failure or a wait told already is not told again.
func Same(value string, n Notice) bool {
	old, err := Decode(value)
	if err != nil {
		return false
	}
	fresh, err := Decode(n.Encode())
	if err != nil {
		return false
	}
	old.At, fresh.At = time.Time{}, time.Time{}
	return old.Message == fresh.Message && old.Omitted == fresh.Omitted &&
		slices.Equal(old.Images, fresh.Images) && slices.Equal(old.Charts, fresh.Charts)
}

func bound(vs []Version) []Version {
	if len(vs) == 0 {
		return nil
	}
	out := make([]Version, len(vs))
	for i, v := range vs {
		out[i] = Version{Alias: cut(v.Alias, maxField), Image: cut(v.Image, maxField), Chart: cut(v.Chart, maxField), From: cut(v.From, maxField), To: cut(v.To, maxField)}
	}
	return out
}

// cut shortens s to at most n bytes, at the start of a character, marking
// the cut with "...".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := max(n-len("..."), 0)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "..."
}
