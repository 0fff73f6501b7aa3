package strategy

import (
	"path/filepath"
	"testing"

	"github.com/Masterminds/semver/v3"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in                  string
		ok                  bool
		major, minor, patch uint64
		pre, meta           string
	}{
		{in: "1.2.3", ok: true, major: 1, minor: 2, patch: 3},
		{in: "v1.2.3", ok: true, major: 1, minor: 2, patch: 3},
		{in: "1.2", ok: true, major: 1, minor: 2},
		{in: "v1", ok: true, major: 1},
		{in: "01.002.0003", ok: true, major: 1, minor: 2, patch: 3},
		{in: "1.2.3-rc.1", ok: true, major: 1, minor: 2, patch: 3, pre: "rc.1"},
		{in: "1.2-rc-1", ok: true, major: 1, minor: 2, pre: "rc-1"},
		{in: "1.2.3-alpine3.20", ok: true, major: 1, minor: 2, patch: 3, pre: "alpine3.20"},
		{in: "1.2.3+build.7", ok: true, major: 1, minor: 2, patch: 3, meta: "build.7"},
		{in: "1.2.3-0+00", ok: true, major: 1, minor: 2, patch: 3, pre: "0", meta: "00"},
		{in: "1.2.3--", ok: true, major: 1, minor: 2, patch: 3, pre: "-"},
		{in: "18446744073709551615", ok: true, major: 18446744073709551615},
		{in: "18446744073709551616"},
		{in: ""},
		{in: "v"},
		{in: "V1.2.3"},
		{in: "latest"},
		{in: "1.2.3.4"},
		{in: "1.x"},
		{in: "1."},
		{in: "1.2.3-"},
		{in: "1.2.3+"},
		{in: "1.2.3-rc..1"},
		{in: "1.2.3-01"},
		{in: "1.2.3_1"},
		{in: " 1.2.3"},
	}
	for _, tt := range tests {
		v, ok := parseVersion(tt.in)
		if ok != tt.ok {
			t.Errorf("parseVersion(%q) ok = %v, want %v", tt.in, ok, tt.ok)
			continue
		}
		if ok && (v.major != tt.major || v.minor != tt.minor || v.patch != tt.patch || v.pre != tt.pre || v.meta != tt.meta || v.tag != tt.in) {
			t.Errorf("parseVersion(%q) = %+v", tt.in, v)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	// Each is lower than the next, per semver precedence.
	ordered := []string{
		"0.9.0", "1.0.0-0", "1.0.0-1", "1.0.0-2", "1.0.0-10", "1.0.0-99999999999999999999", "1.0.0-A", "1.0.0-a",
		"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
		"1.0.0-rc.1", "1.0.0", "1.0.1", "1.1", "1.10.0", "2", "10.0.0",
	}
	for i := range ordered {
		for j := range ordered {
			a, _ := parseVersion(ordered[i])
			b, _ := parseVersion(ordered[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := compareVersions(&a, &b); got != want {
				t.Errorf("compareVersions(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

// FuzzParseVersion checks the tag parser against the semver library it stands
// in for: same acceptance, same parts, same ordering.
func FuzzParseVersion(f *testing.F) {
	if !semver.CoerceNewVersion {
		f.Skip("semver.CoerceNewVersion changed; the parser mirrors the default")
	}
	seeds := [][2]string{
		{"1.2.3", "v1.2.3"}, {"1.2", "1.2.0"}, {"v1", "1.0.0+x"}, {"1.0.0-rc.1", "1.0.0-rc.10"},
		{"1.0.0-alpha", "1.0.0-alpha.1"}, {"1.0.0-1", "1.0.0-a"}, {"01.2.3", "1.02"},
		{"1.2.3-01", "1.2.3-0a"}, {"1.2.3+build.01", "1.2.3--"}, {"latest", "1.2.3.4"},
		{"18446744073709551616", "1.0.0-18446744073709551616"}, {"1.2.3-", "1.2.3+"}, {"v", ""},
		{"1.2.3-rc..1", "1.x"}, {"2024.01.15", "20240115"}, {"1.0.0-x.7.z.92", "1.0.0-x-y-z.--"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		va, okA := checkAgainstLibrary(t, a)
		vb, okB := checkAgainstLibrary(t, b)
		if !okA || !okB {
			return
		}
		la, _ := semver.NewVersion(a)
		lb, _ := semver.NewVersion(b)
		if got, want := compareVersions(&va, &vb), la.Compare(lb); got != want {
			t.Errorf("compareVersions(%q, %q) = %d, semver says %d", a, b, got, want)
		}
	})
}

func checkAgainstLibrary(t *testing.T, s string) (version, bool) {
	v, ok := parseVersion(s)
	lv, err := semver.NewVersion(s)
	if ok != (err == nil) {
		t.Fatalf("parseVersion(%q) ok = %v, semver.NewVersion error = %v", s, ok, err)
	}
	if ok && (v.major != lv.Major() || v.minor != lv.Minor() || v.patch != lv.Patch() || v.pre != lv.Prerelease() || v.meta != lv.Metadata()) {
		t.Fatalf("parseVersion(%q) = %+v, semver.NewVersion = %v", s, v, lv)
	}
	return v, ok
}

func TestGlobKinds(t *testing.T) {
	tests := []struct {
		pattern string
		kind    globKind
	}{
		{"latest", globExact},
		{"main-*", globPrefix},
		{"*-debug", globSuffix},
		{"*", globGeneral},
		{"*-rc.*", globGeneral},
		{"v1.?", globGeneral},
		{"[0-9]*", globGeneral},
		{`a\*`, globGeneral},
	}
	for _, tt := range tests {
		g, err := compileGlob(tt.pattern)
		if err != nil || g.kind != tt.kind {
			t.Errorf("compileGlob(%q) = kind %d, %v; want kind %d", tt.pattern, g.kind, err, tt.kind)
		}
	}
}

// FuzzGlob checks the fast glob paths against filepath.Match.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"latest", "latest"}, {"main-*", "main-abc"}, {"main-*", "main-a/b"}, {"*-debug", "x-debug"},
		{"*-debug", "a/x-debug"}, {"*", ""}, {"v1.*", "v1."}, {"a*", "a"}, {"*a", "a"}, {"[", "x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		g, err := compileGlob(pattern)
		_, wantErr := filepath.Match(pattern, "")
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("compileGlob(%q) error %v, filepath.Match error %v", pattern, err, wantErr)
		}
		if err != nil {
			return
		}
		want, _ := filepath.Match(pattern, name)
		if got := g.match(name); got != want {
			t.Fatalf("glob %q on %q = %v, filepath.Match says %v", pattern, name, got, want)
		}
	})
}
