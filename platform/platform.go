// Package platform is the one definition of what an image's platform is
// and when it serves a requested one. The value is go-containerregistry's
// v1.Platform, used unchanged by the registry client (which picks an
// index's child) and by the strategies (which skip images built for other
// platforms), so the two can never disagree.
//
// # Matching
//
// Platforms are compared after normalisation as containerd does it: the
// OS and architecture are lower-cased, architecture aliases are folded
// (x86_64 and x86-64 are amd64, aarch64 is arm64, i386 is 386, armhf is
// arm/v7 and armel is arm/v6), and a missing variant is the architecture's
// default (arm is arm/v7, arm64 is arm64/v8, amd64 is amd64/v1). A request
// that names no variant accepts any variant of its architecture; one that
// names a variant accepts only that variant. OS versions and features are
// not compared.
package platform

import (
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ErrSyntax is matched (errors.Is) by every error Parse returns.
var ErrSyntax = errors.New("a platform is os/arch or os/arch/variant")

// Error names the item of a platform list that could not be read.
type Error struct {
	Item string
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("invalid platform %q: %v", e.Item, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// Parse reads a comma-separated list such as "linux/amd64,linux/arm64/v8"
// as users write it in annotations and flags. Items are trimmed and
// lower-cased, empty items (a trailing comma) skipped and repeated items
// kept once; each part is letters, digits, '.', '_' or '-'.
func Parse(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := parseOne(item)
		if err != nil {
			return nil, err
		}
		if !contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func parseOne(item string) (v1.Platform, error) {
	parts := strings.Split(strings.ToLower(item), "/")
	if len(parts) < 2 || len(parts) > 3 {
		return v1.Platform{}, &Error{Item: item, Err: ErrSyntax}
	}
	for _, part := range parts {
		if !validPart(part) {
			return v1.Platform{}, &Error{Item: item, Err: fmt.Errorf("%w: bad part %q", ErrSyntax, part)}
		}
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

func validPart(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

func contains(list []v1.Platform, p v1.Platform) bool {
	for _, q := range list {
		if q.Equals(p) {
			return true
		}
	}
	return false
}

// Normalize returns p's OS, architecture and variant as containerd
// normalises them (see the package documentation); other fields are kept.
func Normalize(p v1.Platform) v1.Platform {
	p.OS = strings.ToLower(p.OS)
	p.Architecture = strings.ToLower(p.Architecture)
	p.Variant = strings.ToLower(p.Variant)
	switch p.Architecture {
	case "x86_64", "x86-64":
		p.Architecture = "amd64"
	case "aarch64":
		p.Architecture = "arm64"
	case "i386":
		p.Architecture = "386"
	case "armhf":
		p.Architecture, p.Variant = "arm", "v7"
	case "armel":
		p.Architecture, p.Variant = "arm", "v6"
	}
	if p.Variant == "" {
		switch p.Architecture {
		case "arm":
			p.Variant = "v7"
		case "arm64":
			p.Variant = "v8"
		case "amd64":
			p.Variant = "v1"
		}
	}
	if p.Architecture == "arm64" && p.Variant == "8" {
		p.Variant = "v8"
	}
	return p
}

// Matches reports whether an image built for have serves a request for
// want, by the rule of the package documentation.
func Matches(want, have v1.Platform) bool {
	w, h := Normalize(want), Normalize(have)
	if w.OS != h.OS || w.Architecture != h.Architecture {
		return false
	}
	return want.Variant == "" || w.Variant == h.Variant
}

// Any reports whether any platform an image offers (have) serves any
// requested one (want). With nothing requested, or nothing known about the
// image, it is true: there is nothing to rule the image out on.
func Any(want, have []v1.Platform) bool {
	if len(want) == 0 || len(have) == 0 {
		return true
	}
	for _, w := range want {
		for _, h := range have {
			if Matches(w, h) {
				return true
			}
		}
	}
	return false
}

// Join lists platforms for messages: "linux/amd64, linux/arm64/v8".
func Join(ps []v1.Platform) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
