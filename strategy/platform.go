package strategy

import (
	"fmt"
	"strings"
)

// Platform is an OCI platform: operating system, CPU architecture and an
// optional CPU variant.
type Platform struct {
	OS           string
	Architecture string
	Variant      string
}

// String renders the platform as os/arch or os/arch/variant.
func (p Platform) String() string {
	if p.Variant == "" {
		return p.OS + "/" + p.Architecture
	}
	return p.OS + "/" + p.Architecture + "/" + p.Variant
}

// ParsePlatforms parses a comma-separated list such as
// "linux/amd64,linux/arm64/v8". Items are trimmed and lower-cased; empty items
// (a trailing comma) are skipped and repeated items kept once. Each part must
// be non-empty and made of letters, digits, '.', '_' or '-'. An error is a
// *SettingError for FieldPlatforms naming the bad item.
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := parsePlatform(item)
		if err != nil {
			return nil, err
		}
		if !containsPlatform(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func parsePlatform(item string) (Platform, error) {
	parts := strings.Split(strings.ToLower(item), "/")
	if len(parts) < 2 || len(parts) > 3 {
		return Platform{}, &SettingError{Field: FieldPlatforms, Value: item, Err: ErrPlatformSyntax}
	}
	for _, part := range parts {
		if !validPlatformPart(part) {
			return Platform{}, &SettingError{
				Field: FieldPlatforms,
				Value: item,
				Err:   fmt.Errorf("%w: bad part %q", ErrPlatformSyntax, part),
			}
		}
	}
	p := Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

// normalizePlatform validates a Platform built by a caller rather than parsed,
// so New applies the same rules as ParsePlatforms.
func normalizePlatform(p Platform) (Platform, error) {
	q := Platform{
		OS:           strings.ToLower(strings.TrimSpace(p.OS)),
		Architecture: strings.ToLower(strings.TrimSpace(p.Architecture)),
		Variant:      strings.ToLower(strings.TrimSpace(p.Variant)),
	}
	if !validPlatformPart(q.OS) || !validPlatformPart(q.Architecture) ||
		(q.Variant != "" && !validPlatformPart(q.Variant)) {
		return Platform{}, &SettingError{Field: FieldPlatforms, Value: p.String(), Err: ErrPlatformSyntax}
	}
	return q, nil
}

func validPlatformPart(s string) bool {
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

func containsPlatform(list []Platform, p Platform) bool {
	for _, q := range list {
		if q == p {
			return true
		}
	}
	return false
}

// platformMatches reports whether an image platform (have) satisfies a
// requested one (want). OS and architecture must be equal. A request without
// a variant accepts any variant. For arm64 an empty variant means v8, because
// registries commonly omit it for the only arm64 variant in use.
func platformMatches(want, have Platform) bool {
	if !strings.EqualFold(want.OS, have.OS) || !strings.EqualFold(want.Architecture, have.Architecture) {
		return false
	}
	if want.Variant == "" {
		return true
	}
	return strings.EqualFold(variantOf(want), variantOf(have))
}

func variantOf(p Platform) string {
	if p.Variant == "" && strings.EqualFold(p.Architecture, "arm64") {
		return "v8"
	}
	return p.Variant
}

// anyPlatformMatches reports whether any platform an image offers satisfies
// any requested platform. With nothing requested, or nothing known about the
// image, it is true: there is nothing to rule the image out on.
func anyPlatformMatches(want, have []Platform) bool {
	if len(want) == 0 || len(have) == 0 {
		return true
	}
	for _, w := range want {
		for _, h := range have {
			if platformMatches(w, h) {
				return true
			}
		}
	}
	return false
}
