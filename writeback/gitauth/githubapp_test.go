package gitauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/forge"
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

// The token request goes only to a GitHub API the operator allows, and
// what it answers reaches the error bounded: GitHub's message on one line
// and cut short, an answer past 1 MiB not read on.
func TestGitHubTokenRequest(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	var requests atomic.Int64
	// Set by each case; a handler of the case before may still be
	// running when the next one sets it.
	var answer atomic.Pointer[http.HandlerFunc]
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if h := answer.Load(); h != nil {
			(*h)(w, r)
		}
	}))
	defer api.Close()
	allowed, err := forge.NewHosts([]string{api.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("internal ", 1000)
	for _, tc := range []struct {
		name    string
		apis    *forge.Hosts
		answer  func(w http.ResponseWriter, r *http.Request)
		sent    bool
		want    []string
		notWant string
		// timeout, when set, bounds the request in place of
		// githubAPITimeout; the call must end within a second of it.
		timeout time.Duration
	}{
		{name: "not allowed", apis: nil, sent: false,
			want: []string{`githubAppEnterpriseBaseUrl "` + api.URL + `" in Secret argocd/app: not a github API the controller may use (https://api.github.com); the operator allows a GitHub Enterprise Server with --github-enterprise-api-url`}},
		{name: "a token", apis: allowed, sent: true, answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"token":"ghs_x","expires_at":"2099-01-01T00:00:00Z"}`)
		}},
		{name: "a long refusal on several lines", apis: allowed, sent: true, answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"message":"Bad\ncredentials `+long+`"}`)
		}, want: []string{`401 Unauthorized: "Bad credentials internal internal`, `..."`}, notWant: strings.Repeat("internal ", 40)},
		{name: "an answer past 1 MiB", apis: allowed, sent: true, answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"token":"`+strings.Repeat("x", 2<<20)+`"}`)
		}, want: []string{"the GitHub API answer is larger than 1 MiB, the most the client reads"}},
		{name: "no answer", apis: allowed, sent: true, timeout: 200 * time.Millisecond, answer: func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, want: []string{"context deadline exceeded"}},
		{name: "an answer that stops halfway", apis: allowed, sent: true, timeout: 200 * time.Millisecond, answer: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"token":"ghs_`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, want: []string{"context deadline exceeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app, err := parseGitHubApp("Secret argocd/app", "1", "2", keyPEM, api.URL)
			if err != nil {
				t.Fatal(err)
			}
			h := http.HandlerFunc(tc.answer)
			answer.Store(&h)
			before := requests.Load()
			g := NewGitHubTokens(tc.apis)
			if tc.timeout > 0 {
				g.timeout = tc.timeout
			}
			// The caller would wait far longer.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			tok, err := g.token(ctx, app, "org", "Secret argocd/app", http.DefaultTransport)
			if took := time.Since(start); tc.timeout > 0 && took > tc.timeout+time.Second {
				t.Errorf("the request took %s, want about %s", took, tc.timeout)
			}
			if sent := requests.Load() > before; sent != tc.sent {
				t.Errorf("sent %v, want %v", sent, tc.sent)
			}
			if len(tc.want) == 0 {
				if err != nil || tok != "ghs_x" {
					t.Errorf("got %q, %v", tok, err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want an error containing %q", err, w)
				}
			}
			if err != nil && (strings.Contains(err.Error(), "\n") || tc.notWant != "" && strings.Contains(err.Error(), tc.notWant)) {
				t.Errorf("the error quotes too much of the answer: %d bytes", len(err.Error()))
			}
		})
	}
}

func TestRepositoryOwner(t *testing.T) {
	for path, want := range map[string]string{
		"Example/deploy":      "example",
		"/example/deploy.git": "example",
		"example/group/sub":   "example",
		"deploy":              "",
		"example/":            "",
		"example/.git":        "",
		"":                    "",
	} {
		if got := repositoryOwner(path); got != want {
			t.Errorf("repositoryOwner(%q) = %q, want %q", path, got, want)
		}
	}
}
