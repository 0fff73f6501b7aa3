package settings

import (
	"strings"
	"testing"
	"time"
)

func TestSplitKustomizeImage(t *testing.T) {
	tests := []struct{ in, orig, name, version string }{
		{"nginx", "nginx", "nginx", ""},
		{"nginx=registry.local:5000/mirror/nginx:1.27", "nginx", "registry.local:5000/mirror/nginx", "1.27"},
		{"localhost:5000/app:v1@sha256:abc", "localhost:5000/app", "localhost:5000/app", "v1@sha256:abc"},
		{"ghcr.io/x/y@sha256:abc", "ghcr.io/x/y", "ghcr.io/x/y", "sha256:abc"},
		{"localhost:5000/app:1.0", "localhost:5000/app", "localhost:5000/app", "1.0"},
		{"localhost:5000/a=localhost:5000/b:1", "localhost:5000/a", "localhost:5000/b", "1"},
		{"nginx=nginx", "nginx", "nginx", ""},
	}
	for _, tt := range tests {
		orig, name, version := SplitKustomizeImage(tt.in)
		if orig != tt.orig || name != tt.name || version.String() != tt.version {
			t.Errorf("SplitKustomizeImage(%q) = %q %q %q", tt.in, orig, name, version)
		}
	}
}

// TestParseHealthGate: on, off, or a window within its bounds; anything
// else is an error naming the value.
func TestParseHealthGate(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "", want: 0},
		{in: "false", want: 0},
		{in: "False", want: 0},
		{in: "true", want: DefaultHealthGateWindow},
		{in: "TRUE", want: DefaultHealthGateWindow},
		{in: "90s", want: 90 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "1s", want: time.Second},
		{in: "24h", want: 24 * time.Hour},
		{in: "999ms", wantErr: true},
		{in: "25h", wantErr: true},
		{in: "-5m", wantErr: true},
		{in: "5", wantErr: true},
		{in: "yes", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseHealthGate(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseHealthGate(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), tt.in) {
			t.Errorf("error %q does not name %q", err, tt.in)
		}
	}
}

func FuzzParseHealthGate(f *testing.F) {
	for _, s := range []string{"true", "5m", "1h2m3.5s", "0", "9999999999h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseHealthGate(s)
		if err == nil && d != 0 && (d < MinHealthGateWindow || d > MaxHealthGateWindow) {
			t.Fatalf("%q: window %v out of bounds", s, d)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Fatalf("%q: error of %d bytes", s, len(err.Error()))
		}
	})
}
