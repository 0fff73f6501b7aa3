package transport

import (
	"context"
	"io"
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
		{"http://LOCALHOST:8080/x", false},
		{"http://localhost.:8080/x", false},
		{"http://[::1]:8080/x", false},
		{"http://[::ffff:127.0.0.1]:8080/x", false},
		{"http://kube-apiserver/x", false},
		{"http://argocd-server.argocd.svc/x", false},
		{"http://argocd-server.argocd.svc.cluster.local/x", false},
		{"http://metadata.google.internal/computeMetadata/v1/", false},
		{"http://printer.local/x", false},
		{"http://app.localhost/x", false},
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

// A request following a redirect to another host may only connect to a
// public address: a name that resolves to an internal one is refused when
// dialed, whatever CheckRedirect let through.
func TestRedirectDialsPublicOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "internal answer") }))
	defer srv.Close()
	tr := NewHTTP(false)
	defer tr.CloseIdleConnections()
	req := httptest.NewRequest(http.MethodGet, srv.URL, nil)
	req.RequestURI = ""
	if resp, err := tr.RoundTrip(req); err != nil {
		t.Fatalf("a request of the registry itself: %v", err)
	} else {
		_ = resp.Body.Close()
	}
	tr.CloseIdleConnections()
	marked := req.WithContext(context.WithValue(req.Context(), publicOnlyKey{}, true))
	if resp, err := tr.RoundTrip(marked); err == nil || !strings.Contains(err.Error(), "refusing to connect to the internal address 127.0.0.1") {
		if resp != nil {
			_ = resp.Body.Close()
		}
		t.Fatalf("got %v, want the connection refused", err)
	}
}

// Another host's refusal does not reach errors: its body is dropped.
func TestRedirectDropsOtherHostsBody(t *testing.T) {
	first := httptest.NewRequest(http.MethodGet, "https://registry.example.com/v2/app/blobs/sha256:abc", nil)
	next := httptest.NewRequest(http.MethodGet, "https://storage.example.net/blob", nil)
	next.Response = &http.Response{StatusCode: http.StatusFound, Request: first}
	rt := NewRedirectGuard(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp := statusResponse(r, http.StatusForbidden)
		resp.Body = io.NopCloser(strings.NewReader(`{"secret": "internal"}`))
		return resp, nil
	}))
	resp, err := rt.RoundTrip(next)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(resp.Body); len(body) != 0 || resp.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, body %q", resp.StatusCode, body)
	}
}
