package strategy

import (
	"errors"
	"fmt"
)

// Field names used in SettingError. They match the annotation suffixes users
// write, so an error message points at the setting to fix.
const (
	FieldStrategy   = "update-strategy"
	FieldConstraint = "constraint"
	FieldAllowTags  = "allow-tags"
	FieldIgnoreTags = "ignore-tags"
)

// Sentinel causes wrapped by SettingError, for callers that branch on errors.Is.
// Errors from the semver, regexp and path/filepath packages are wrapped as they
// come (for example filepath.ErrBadPattern).
var (
	ErrUnknownStrategy = errors.New("unknown update strategy")
	ErrAllowTagsSyntax = errors.New(`allow-tags must be "regexp:<expression>", "any" or empty`)
	ErrNoFollowTag     = errors.New("the digest strategy needs the tag to follow as its constraint")
	ErrInvalidTag      = errors.New("not a valid tag name")
	ErrFilterTooLarge  = errors.New("larger than a filter may be")
)

// SettingError reports one bad user setting. Field is one of the Field*
// constants and Value is the offending value (or the offending item of a list).
type SettingError struct {
	Field string
	Value string
	Err   error
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("invalid %s %q: %v", e.Field, e.Value, e.Err)
}

func (e *SettingError) Unwrap() error { return e.Err }
