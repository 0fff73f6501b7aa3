package platform

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func p(os, arch, variant string) v1.Platform {
	return v1.Platform{OS: os, Architecture: arch, Variant: variant}
}

func TestParse(t *testing.T) {
	amd64 := p("linux", "amd64", "")
	arm64v8 := p("linux", "arm64", "v8")
	tests := []struct {
		in      string
		want    []v1.Platform
		wantErr string // the bad item
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "linux/amd64", want: []v1.Platform{amd64}},
		{in: "linux/amd64,linux/arm64/v8", want: []v1.Platform{amd64, arm64v8}},
		{in: " Linux/AMD64 , linux/arm64/v8 ,", want: []v1.Platform{amd64, arm64v8}},
		{in: "linux/amd64,linux/amd64", want: []v1.Platform{amd64}},
		{in: "windows/amd64", want: []v1.Platform{p("windows", "amd64", "")}},
		{in: "linux", wantErr: "linux"},
		{in: "linux/amd64,arm64", wantErr: "arm64"},
		{in: "linux/", wantErr: "linux/"},
		{in: "/amd64", wantErr: "/amd64"},
		{in: "linux/arm/v7/extra", wantErr: "linux/arm/v7/extra"},
		{in: "linux//v7", wantErr: "linux//v7"},
		{in: "linux/am d64", wantErr: "linux/am d64"},
		{in: "linux/amd64:latest", wantErr: "linux/amd64:latest"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.wantErr != "" {
			var pe *Error
			if !errors.As(err, &pe) || pe.Item != tt.wantErr || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse(%q) error = %v, want one naming %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.EqualFunc(got, tt.want, func(a, b v1.Platform) bool { return a.Equals(b) }) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// One rule for the registry's choice of an index child and the strategies'
// choice of a tag; before it, linux/arm satisfied "linux/arm/v7" in one and
// not in the other.
func TestMatches(t *testing.T) {
	tests := []struct {
		want, have v1.Platform
		match      bool
	}{
		{p("linux", "amd64", ""), p("linux", "amd64", ""), true},
		{p("linux", "amd64", ""), p("linux", "arm64", ""), false},
		{p("linux", "amd64", ""), p("windows", "amd64", ""), false},
		{p("linux", "amd64", ""), p("Linux", "AMD64", ""), true},
		{p("linux", "amd64", "v1"), p("linux", "amd64", ""), true},
		{p("linux", "amd64", ""), p("linux", "x86_64", ""), true},
		// arm without a variant is arm/v7.
		{p("linux", "arm", "v7"), p("linux", "arm", ""), true},
		{p("linux", "arm", ""), p("linux", "arm", "v7"), true},
		{p("linux", "arm", "v7"), p("linux", "arm", "v6"), false},
		{p("linux", "arm", "v6"), p("linux", "arm", ""), false},
		{p("linux", "arm", "v7"), p("linux", "armhf", ""), true},
		// A request without a variant accepts any variant.
		{p("linux", "arm", ""), p("linux", "arm", "v6"), true},
		// arm64 is arm64/v8.
		{p("linux", "arm64", "v8"), p("linux", "arm64", ""), true},
		{p("linux", "arm64", ""), p("linux", "arm64", "v8"), true},
		{p("linux", "arm64", "v8"), p("linux", "aarch64", ""), true},
		{p("linux", "arm64", "v8"), p("linux", "arm64", "v9"), false},
		{p("linux", "arm64", ""), p("linux", "arm64", "v9"), true},
	}
	for _, tt := range tests {
		if got := Matches(tt.want, tt.have); got != tt.match {
			t.Errorf("Matches(want %v, have %v) = %v, want %v", tt.want, tt.have, got, tt.match)
		}
	}
}

func TestAny(t *testing.T) {
	if !Any(nil, []v1.Platform{p("linux", "s390x", "")}) {
		t.Error("no requested platform must match anything")
	}
	if !Any([]v1.Platform{p("linux", "amd64", "")}, nil) {
		t.Error("an image of unknown platform must not be ruled out")
	}
	if Any([]v1.Platform{p("linux", "amd64", "")}, []v1.Platform{p("linux", "arm64", "")}) {
		t.Error("arm64 image for an amd64 request")
	}
	if got := Join([]v1.Platform{p("linux", "amd64", ""), p("linux", "arm", "v7")}); got != "linux/amd64, linux/arm/v7" {
		t.Errorf("Join = %q", got)
	}
}

// FuzzParse: what Parse accepts prints and parses back to the same list.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"linux/amd64", "linux/arm64/v8,windows/amd64", " Linux/ARM/v7 ,", "linux", "a/b/c/d", ","} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) error %v is not ErrSyntax", s, err)
			}
			return
		}
		parts := make([]string, len(ps))
		for i, q := range ps {
			if q.OS == "" || q.Architecture == "" {
				t.Fatalf("Parse(%q) gave incomplete %#v", s, q)
			}
			parts[i] = q.String()
		}
		back, err := Parse(strings.Join(parts, ","))
		if err != nil || len(back) != len(ps) {
			t.Fatalf("round trip of %q: %v, %v", s, back, err)
		}
		for _, q := range ps {
			if !Matches(q, q) {
				t.Fatalf("%v does not match itself", q)
			}
		}
	})
}
