package transport

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestSchemePinAndUserAgent(t *testing.T) {
	for _, tc := range []struct {
		name, ua, url string
		want          string // URL and User-Agent that reach the network
	}{
		{"https pinned to http", "test-agent", "https://registry.test:5000/v2/", "http://registry.test:5000/v2/ test-agent"},
		{"already http", "test-agent", "http://registry.test:5000/v2/", "http://registry.test:5000/v2/ test-agent"},
		{"other host unchanged", "test-agent", "https://auth.test/token", "https://auth.test/token test-agent"},
		{"no user agent set", "", "https://auth.test/token", "https://auth.test/token caller-agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			network := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				got = r.URL.String() + " " + r.Header.Get("User-Agent")
				return statusResponse(r, 200), nil
			})
			rt := NewSchemePin(NewUserAgent(network, tc.ua), "http", "registry.test:5000")
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, tc.url, nil)
			req.Header.Set("User-Agent", "caller-agent")
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("sent %q, want %q", got, tc.want)
			}
			if req.URL.String() != tc.url || req.Header.Get("User-Agent") != "caller-agent" {
				t.Errorf("the caller's request was changed: %s %s", req.URL, req.Header.Get("User-Agent"))
			}
		})
	}
}
