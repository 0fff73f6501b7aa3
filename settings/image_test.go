package settings

import "testing"

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
