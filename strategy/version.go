package strategy

import (
	"cmp"
	"strings"
)

// This file holds a small semantic-version parser used for tags. It accepts
// exactly what github.com/Masterminds/semver/v3 NewVersion accepts in its
// default (coercing) mode, and orders versions the same way, but it works on
// substrings of the tag and does not allocate. Tag lists can hold hundreds of
// thousands of entries, and the regular-expression parser dominated the cost
// of a choice. Differential fuzz tests keep the two in agreement.
//
// It stays because it measures: a whole semver choice over 10,000 tags runs
// 12 to 18 times as fast as with the library's NewVersion and Check, above the
// 3 times that justifies hand-written code (BenchmarkSemverVsLibrary,
// docs/benchmarks.md).

// maxVersionLen mirrors semver.MaxVersionLen.
const maxVersionLen = 256

// version is a parsed tag. pre and meta point into tag.
type version struct {
	tag                 string
	major, minor, patch uint64
	pre, meta           string
}

// parseVersion parses tag as a (possibly partial, possibly v-prefixed)
// semantic version: v?MAJOR(.MINOR(.PATCH)?)?(-PRE)?(+META)?.
func parseVersion(tag string) (version, bool) {
	v := version{tag: tag}
	n := len(tag)
	if n == 0 || n > maxVersionLen {
		return v, false
	}
	i := 0
	if tag[0] == 'v' {
		i = 1
	}
	var ok bool
	if v.major, i, ok = parseNumber(tag, i); !ok {
		return v, false
	}
	if i < n && tag[i] == '.' {
		if v.minor, i, ok = parseNumber(tag, i+1); !ok {
			return v, false
		}
		if i < n && tag[i] == '.' {
			if v.patch, i, ok = parseNumber(tag, i+1); !ok {
				return v, false
			}
		}
	}
	if i < n && tag[i] == '-' {
		start := i + 1
		if i, ok = scanIdentifiers(tag, start, true); !ok {
			return v, false
		}
		v.pre = tag[start:i]
	}
	if i < n && tag[i] == '+' {
		start := i + 1
		if i, ok = scanIdentifiers(tag, start, false); !ok {
			return v, false
		}
		v.meta = tag[start:i]
	}
	return v, i == n
}

// parseNumber reads a run of decimal digits starting at i. Leading zeros are
// accepted (coercing mode); values beyond uint64 are rejected.
func parseNumber(s string, i int) (uint64, int, bool) {
	start := i
	var x uint64
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		d := uint64(s[i] - '0')
		if x > (^uint64(0)-d)/10 {
			return 0, i, false
		}
		x = x*10 + d
		i++
	}
	return x, i, i > start
}

// scanIdentifiers reads dot-separated, non-empty [0-9A-Za-z-] identifiers
// from i and returns where they end. For pre-releases, purely numeric
// identifiers must not have leading zeros.
func scanIdentifiers(s string, i int, pre bool) (int, bool) {
	for {
		start := i
		digitsOnly := true
		for i < len(s) && isIdentChar(s[i]) {
			if s[i] < '0' || s[i] > '9' {
				digitsOnly = false
			}
			i++
		}
		if i == start {
			return i, false
		}
		if pre && digitsOnly && i-start > 1 && s[start] == '0' {
			return i, false
		}
		if i < len(s) && s[i] == '.' {
			i++
			continue
		}
		return i, true
	}
}

func isIdentChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-'
}

// compareVersions orders by semantic-version precedence: major, minor, patch,
// then a release above its pre-releases, then pre-release identifiers. Build
// metadata is ignored.
func compareVersions(a, b *version) int {
	switch {
	case a.major != b.major:
		return cmpUint(a.major, b.major)
	case a.minor != b.minor:
		return cmpUint(a.minor, b.minor)
	case a.patch != b.patch:
		return cmpUint(a.patch, b.patch)
	}
	switch {
	case a.pre == b.pre:
		return 0
	case a.pre == "":
		return 1
	case b.pre == "":
		return -1
	}
	return comparePrerelease(a.pre, b.pre)
}

func cmpUint(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

// comparePrerelease compares dot-separated identifiers in turn: numeric ones
// numerically, others in byte order, numeric below alphanumeric, and a shorter
// list below a longer one it prefixes.
func comparePrerelease(a, b string) int {
	for {
		var pa, pb string
		pa, a = cutDot(a)
		pb, b = cutDot(b)
		if pa == "" && pb == "" {
			return 0
		}
		if d := comparePreIdent(pa, pb); d != 0 {
			return d
		}
	}
}

func cutDot(s string) (head, rest string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

func comparePreIdent(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	na, aNum := identNumber(a)
	nb, bNum := identNumber(b)
	switch {
	case aNum && bNum:
		return cmpUint(na, nb)
	case aNum:
		return -1
	case bNum:
		return 1
	case a > b:
		return 1
	default:
		return -1
	}
}

// identNumber reports whether an identifier is a number that fits uint64;
// larger digit strings compare as text, as they do in the semver library.
func identNumber(s string) (uint64, bool) {
	x, end, ok := parseNumber(s, 0)
	return x, ok && end == len(s)
}

// higher reports whether a ranks above b in a semver choice: higher precedence
// first, and among equal precedence (different spellings such as "1.2" and
// "v1.2.0", or different build metadata) the tag that is greater in byte
// order, so the answer never depends on input order.
func higher(a, b *version) bool {
	if d := compareVersions(a, b); d != 0 {
		return d > 0
	}
	return a.tag > b.tag
}

// CompareTags orders two tags as semantic versions, as the semver
// strategy does (-1, 0 or 1); ok is false when either is not one. The
// health gate and the cycle order the versions they hold with it, so that
// "older" means there what it means to the choice.
func CompareTags(a, b string) (cmp int, ok bool) {
	va, okA := parseVersion(a)
	vb, okB := parseVersion(b)
	if !okA || !okB {
		return 0, false
	}
	return compareVersions(&va, &vb), true
}

// decimal reports whether s is a run of decimal digits, and returns it
// without leading zeros ("" for zero), ready for compareDecimals.
func decimal(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", false
		}
	}
	return strings.TrimLeft(s, "0"), true
}

// compareDecimals orders two numbers as decimal returns them: the longer
// is the greater, equal lengths compare digit by digit.
func compareDecimals(a, b string) int {
	if len(a) != len(b) {
		return cmp.Compare(len(a), len(b))
	}
	return strings.Compare(a, b)
}
