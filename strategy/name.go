package strategy

import (
	"fmt"
	"strings"
)

// Name of an update strategy, as written in the update-strategy annotation.
type Name string

const (
	// SemVer picks the highest semantic version allowed by the constraint.
	// It is the default.
	SemVer Name = "semver"
	// NewestBuild picks the tag whose image was created most recently.
	// "latest" is accepted as an old alias.
	NewestBuild Name = "newest-build"
	// Digest follows one mutable tag (the constraint) and updates when the
	// digest it points at changes.
	Digest Name = "digest"
	// Alphabetical picks the last tag in byte order. "name" is accepted as an
	// old alias.
	Alphabetical Name = "alphabetical"
	// Numeric picks the highest tag read as a decimal number (build
	// numbers, timestamps). "numerical", Flux's name, is accepted too.
	Numeric Name = "numeric"
)

// validNames is spelled out in unknown-strategy errors so users see the fix.
const validNames = "semver, newest-build (alias latest), digest, alphabetical (alias name), numeric (alias numerical)"

// ParseName maps an annotation value to a strategy. Surrounding space and
// letter case are ignored; "" means SemVer; the old aliases "latest" and
// "name" map to NewestBuild and Alphabetical, Flux's "numerical" to
// Numeric. Anything else is an error (a
// *SettingError wrapping ErrUnknownStrategy) rather than a silent fallback,
// because a typo must not quietly switch an image to a different strategy.
func ParseName(s string) (Name, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", string(SemVer):
		return SemVer, nil
	case string(NewestBuild), "latest":
		return NewestBuild, nil
	case string(Digest):
		return Digest, nil
	case string(Alphabetical), "name":
		return Alphabetical, nil
	case string(Numeric), "numerical":
		return Numeric, nil
	}
	return "", &SettingError{
		Field: FieldStrategy,
		Value: s,
		Err:   fmt.Errorf("%w; valid names are %s", ErrUnknownStrategy, validNames),
	}
}
