package transport

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckRedirect(t *testing.T) {
	from := httptest.NewRequest(http.MethodGet, "https://registry.example.com/v2/app/blobs/sha256:abc", nil)
	for _, tc := range []struct {
		to string
		ok bool
	}{
		{"https://registry.example.com/other", true},
		{"https://storage.example.net/blob", true},
		{"http://169.254.169.254/latest/meta-data/", false},
		{"http://10.0.0.1/x", false},
		{"http://localhost:8080/x", false},
		{"http://[::1]:8080/x", false},
	} {
		err := CheckRedirect(httptest.NewRequest(http.MethodGet, tc.to, nil), []*http.Request{from})
		if (err == nil) != tc.ok {
			t.Errorf("redirect to %s: %v, want allowed=%v", tc.to, err, tc.ok)
		}
	}
}

// The guard applies CheckRedirect to requests made to follow a redirect:
// http.Client tells them by their Response.
func TestRedirectGuard(t *testing.T) {
	chain := func(urls ...string) *http.Request {
		var req *http.Request
		for _, u := range urls {
			next := httptest.NewRequest(http.MethodGet, u, nil)
			if req != nil {
				next.Response = &http.Response{StatusCode: http.StatusFound, Request: req}
			}
			req = next
		}
		return req
	}
	many := make([]string, 12)
	for i := range many {
		many[i] = "https://registry.example.com/v2/app/manifests/" + strings.Repeat("x", i+1)
	}
	for _, tc := range []struct {
		name string
		req  *http.Request
		ok   bool
	}{
		{"no redirect", chain("https://registry.example.com/v2/"), true},
		{"to storage", chain("https://registry.example.com/v2/app/blobs/sha256:abc", "https://storage.example.net/blob"), true},
		{"to localhost", chain("https://registry.example.com/v2/app/blobs/sha256:abc", "http://localhost:8080/x"), false},
		{"to the metadata service", chain("https://registry.example.com/v2/app/blobs/sha256:abc", "http://169.254.169.254/latest/meta-data/"), false},
		{"eleventh redirect", chain(many...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := false
			rt := NewRedirectGuard(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent = true
				return statusResponse(r, 200), nil
			}))
			_, err := rt.RoundTrip(tc.req)
			if (err == nil) != tc.ok || sent != tc.ok {
				t.Errorf("error %v, sent %v; want allowed=%v", err, sent, tc.ok)
			}
		})
	}
}
