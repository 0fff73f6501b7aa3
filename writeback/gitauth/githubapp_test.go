package gitauth

import (
	"strings"
	"testing"
)

func TestParseGitHubAppBaseURL(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "", want: "https://api.github.com"},
		{in: "https://github.example.com/api/v3/", want: "https://github.example.com/api/v3"},
		{in: " https://github.example.com/api/v3 ", want: "https://github.example.com/api/v3"},
		{in: "http://127.0.0.1:8080/api/v3", want: "http://127.0.0.1:8080/api/v3"},
		{in: "http://github.example.com/api/v3", err: "refusing to send GitHub App credentials over plain http"},
		{in: "github.example.com/api/v3", err: "is not a URL such as https://github.example.com/api/v3"},
		{in: "ftp://github.example.com/api/v3", err: "is not an http(s) URL"},
	}
	for _, tt := range tests {
		app, err := parseGitHubApp("Secret argocd/app", "1", "2", "key", tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: got %v, want an error containing %q", tt.in, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case tt.err == "" && app.baseURL != tt.want:
			t.Errorf("%q: base URL %q, want %q", tt.in, app.baseURL, tt.want)
		}
	}
}
