package strategy

import (
	"slices"
	"testing"

	"github.com/Masterminds/semver/v3"
)

func TestConstraintPoints(t *testing.T) {
	tests := []struct {
		in   string
		want []uint64
	}{
		{"", []uint64{0}},
		{"~1.26", []uint64{0, 1, 26}},
		{">=1.2 <2 || 1.2.3-rc.10", []uint64{0, 1, 2, 3, 10}},
		{"^0.0.7", []uint64{0, 7}},
		{"1.x", []uint64{0, 1}},
		{"<99999999999999999999", nil},
	}
	for _, tt := range tests {
		if got := constraintPoints(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("constraintPoints(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestRangeCheckMatchesLibrary(t *testing.T) {
	constraints := []string{
		"~1.26", "^2", ">=1.2 <2", "1.x", "~0", "^0.2.3", "^0.0.3", "!=1.2.x", "1.2 - 1.4.5", ">1.x", "<=1.2.x",
		">=1.0.0-0", "~1.2.3-beta.2", "*", "~*", "^*", "1.2.3 || >=4", "=1.2.3", ">1", "<2.0.0-alpha",
	}
	var versions []string
	for _, ma := range []string{"0", "1", "2", "3", "26", "27", "1000"} {
		for _, mi := range []string{"0", "1", "2", "3", "26", "27"} {
			for _, pa := range []string{"0", "1", "2", "3", "4", "6"} {
				v := ma + "." + mi + "." + pa
				versions = append(versions, v, v+"-beta.2", v+"-beta.10", v+"-alpha", v+"-0")
			}
		}
	}
	for _, cs := range constraints {
		c, err := semver.NewConstraint(cs)
		if err != nil {
			t.Fatalf("NewConstraint(%q): %v", cs, err)
		}
		rc := newRangeCheck(c, constraintPoints(cs))
		for _, vs := range versions {
			v, _ := parseVersion(vs)
			if got, want := rc.allows(&v), c.Check(semver.MustParse(vs)); got != want {
				t.Errorf("constraint %q, version %q: rangeCheck %v, library %v", cs, vs, got, want)
			}
		}
	}
}

// FuzzRangeCheck checks that mapping version numbers onto the numbers written
// in a constraint never changes the library's answer.
func FuzzRangeCheck(f *testing.F) {
	for _, s := range [][3]string{
		{"~1.26", "1.27.3", "1.26.0"}, {"^2", "3.0.0", "2.9.9"}, {">=1.2 <2", "1.99.0", "2.0.0"},
		{"1.x", "1.4", "2"}, {"!=1.2.x", "1.2.7", "1.3.0"}, {"1.2 - 1.4.5", "1.4.6", "1.4.5"},
		{">=1.0.0-0", "1.1.0-rc.1", "0.9.0-rc.1"}, {"^0.0.3", "0.0.4", "0.0.3"}, {"~1.2.3-beta.2", "1.2.3-beta.10", "1.2.4-beta.1"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, cs, a, b string) {
		c, err := semver.NewConstraint(cs)
		if err != nil {
			return
		}
		rc := newRangeCheck(c, constraintPoints(cs))
		for _, s := range []string{a, b, a} {
			v, ok := parseVersion(s)
			if !ok {
				continue
			}
			lv, err := semver.NewVersion(s)
			if err != nil {
				t.Fatalf("parseVersion accepted %q, semver did not: %v", s, err)
			}
			if got, want := rc.allows(&v), c.Check(lv); got != want {
				t.Fatalf("constraint %q, version %q: rangeCheck %v, library %v", cs, s, got, want)
			}
		}
	})
}
