package strategy

import "testing"

func TestPlatformMatches(t *testing.T) {
	p := func(os, arch, variant string) Platform { return Platform{OS: os, Architecture: arch, Variant: variant} }
	tests := []struct {
		want, have Platform
		match      bool
	}{
		{p("linux", "amd64", ""), p("linux", "amd64", ""), true},
		{p("linux", "amd64", ""), p("linux", "arm64", ""), false},
		{p("linux", "amd64", ""), p("windows", "amd64", ""), false},
		{p("linux", "arm", ""), p("linux", "arm", "v7"), true},
		{p("linux", "arm", "v7"), p("linux", "arm", "v6"), false},
		{p("linux", "arm", "v7"), p("linux", "arm", ""), false},
		{p("linux", "arm64", "v8"), p("linux", "arm64", ""), true},
		{p("linux", "arm64", ""), p("linux", "arm64", "v8"), true},
		{p("linux", "arm64", "v8"), p("linux", "arm64", "v9"), false},
		{p("linux", "amd64", ""), p("Linux", "AMD64", ""), true},
	}
	for _, tt := range tests {
		if got := platformMatches(tt.want, tt.have); got != tt.match {
			t.Errorf("platformMatches(%v, %v) = %v, want %v", tt.want, tt.have, got, tt.match)
		}
	}
	if !anyPlatformMatches(nil, []Platform{p("linux", "s390x", "")}) {
		t.Error("no requested platform must match anything")
	}
	if !anyPlatformMatches([]Platform{p("linux", "amd64", "")}, nil) {
		t.Error("an image of unknown platform must not be ruled out")
	}
}
