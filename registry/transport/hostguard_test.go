package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/internal/netguard"
)

// chain is a request following redirects through urls, as http.Client
// makes it: each request knows the response that led to it.
func chain(urls ...string) *http.Request {
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

// Every request to another host than the registry's API is checked,
// whether the registry named it as its token realm or in a redirect: an
// internal name or address is refused, unless the entry's internal_hosts
// lists it; a public one goes out marked, so the dialer refuses internal
// addresses.
func TestHostGuard(t *testing.T) {
	const blob = "https://registry.example.com/v2/app/blobs/sha256:abc"
	many := make([]string, 12)
	for i := range many {
		many[i] = "https://registry.example.com/v2/app/manifests/" + strings.Repeat("x", i+1)
	}
	allowed := []string{"auth.lab.internal", "localhost:5001", "[::1]:5003"}
	for _, tc := range []struct {
		name   string
		req    *http.Request
		sent   bool
		public bool // sent marked netguard.PublicOnly
	}{
		{"the API", chain("https://registry.example.com/v2/"), true, false},
		{"the API, default port written", chain("https://registry.example.com:443/v2/"), true, false},
		{"a realm on a public host", chain("https://auth.example.net/token?scope=x"), true, true},
		{"a realm on the API's host, another port", chain("https://registry.example.com:8443/token"), true, true},
		{"a realm on localhost, another port", chain("http://localhost:5002/token"), false, false},
		{"a realm on localhost, allowed port", chain("http://localhost:5001/token"), true, false},
		{"a realm on an allowed host, any port", chain("https://auth.lab.internal:8443/token"), true, false},
		{"a realm on an allowed IPv6 loopback port", chain("http://[::1]:5003/token"), true, false},
		{"a realm on the IPv6 loopback, another port", chain("http://[::1]:5004/token"), false, false},
		{"a realm on a Service", chain("http://argocd-server.argocd.svc/token"), false, false},
		{"a realm on the metadata service", chain("http://169.254.169.254/latest/meta-data/"), false, false},
		{"a realm on Alibaba's metadata service", chain("http://100.100.100.200/latest/meta-data/"), false, false},
		{"a realm on NAT64 of the metadata service", chain("http://[64:ff9b::a9fe:a9fe]/latest/"), false, false},
		{"a realm on IPv4-mapped loopback", chain("http://[::ffff:127.0.0.1]:8080/x"), false, false},
		{"a realm on a metadata name", chain("http://metadata.goog/computeMetadata/v1/"), false, false},
		{"a redirect to storage", chain(blob, "https://storage.example.net/blob"), true, true},
		{"a redirect back to the API", chain(blob, "https://registry.example.com/v2/app/blobs/other"), true, false},
		{"a redirect to localhost", chain(blob, "http://localhost:8080/x"), false, false},
		{"a redirect to the metadata service", chain(blob, "http://169.254.169.254/latest/meta-data/"), false, false},
		{"a realm's redirect to a private address", chain("https://auth.example.net/token", "http://10.0.0.1/x"), false, false},
		{"the tenth request of a chain", chain(many[:10]...), true, false},
		{"an eleventh redirect", chain(many...), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent, public := false, false
			rt := NewHostGuard(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent, public = true, netguard.IsPublicOnly(r.Context())
				return statusResponse(r, http.StatusFound), nil
			}), "registry.example.com", allowed)
			_, err := rt.RoundTrip(tc.req)
			if (err == nil) != tc.sent || sent != tc.sent || public != tc.public {
				t.Errorf("error %v, sent %v, public only %v; want sent %v, public only %v", err, sent, public, tc.sent, tc.public)
			}
			if err != nil && !strings.Contains(err.Error(), "redirects") {
				if !errors.Is(err, netguard.ErrInternal) || !strings.Contains(err.Error(), "named as its token server or in a redirect") {
					t.Errorf("the refusal %q does not say why", err)
				}
			}
		})
	}
}

// Another host's answer other than 2xx does not reach errors: its body is
// dropped. The API's own is kept.
func TestHostGuardDropsOtherHostsBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *http.Request
		kept bool
	}{
		{"a redirect's answer", chain("https://registry.example.com/v2/app/blobs/sha256:abc", "https://storage.example.net/blob"), false},
		{"a realm's answer", chain("https://auth.example.net/token"), false},
		{"the API's answer", chain("https://registry.example.com/v2/app/tags/list"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const answer = `{"secret": "internal"}`
			rt := NewHostGuard(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp := statusResponse(r, http.StatusForbidden)
				resp.Body = io.NopCloser(strings.NewReader(answer))
				return resp, nil
			}), "registry.example.com", nil)
			resp, err := rt.RoundTrip(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusForbidden || (string(body) == answer) != tc.kept || !tc.kept && len(body) != 0 {
				t.Errorf("status %d, body %q; want the body kept=%v", resp.StatusCode, body, tc.kept)
			}
		})
	}
}

// A token server's 2xx answer is passed on as its token fields alone;
// an answer without a token, or larger than 64 KiB, fails without being
// quoted. Answers of the registry API itself are not touched.
func TestHostGuardTokenAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		url    string
		answer string
		want   string // the body passed on; "" when the request must fail
		err    string
	}{
		{"a token", "https://auth.example.net/token", `{"token":"t0k","expires_in":300,"extra":"internal data"}`, `{"token":"t0k","refresh_token":"","expires_in":300}`, ""},
		{"an access token", "https://auth.example.net/token", `{"access_token":"a"}`, `{"token":"","access_token":"a","refresh_token":"","expires_in":0}`, ""},
		{"no token", "https://auth.example.net/token", `{"secret":"internal data"}`, "", "the token server auth.example.net answered 200 OK with no token the client can read"},
		{"not JSON", "https://auth.example.net/token", `internal data`, "", "with no token the client can read"},
		{"too large", "https://auth.example.net/token", `{"token":"` + strings.Repeat("x", 64<<10) + `"}`, "", "the token answer is larger than 64 KiB"},
		{"a realm on the API's host", "https://registry.example.com/service/token", `{"secret":"internal data"}`, "", "with no token the client can read"},
		{"the API", "https://registry.example.com/v2/app/manifests/1.0", `{"internal data":1}`, `{"internal data":1}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := NewHostGuard(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp := statusResponse(r, http.StatusOK)
				resp.Status = "200 OK"
				resp.Body = io.NopCloser(strings.NewReader(tc.answer))
				return resp, nil
			}), "registry.example.com", nil)
			resp, err := rt.RoundTrip(httptest.NewRequest(http.MethodGet, tc.url, nil))
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "internal data") {
					t.Errorf("got %v, want an error containing %q and not the answer", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if body, _ := io.ReadAll(resp.Body); string(body) != tc.want {
				t.Errorf("body %s, want %s", body, tc.want)
			}
		})
	}
}

// A request the guard marks may only connect to a public address, on a
// connection of its own: a name that resolves to an internal address is
// refused when dialed, whatever the name check let through.
func TestNewHTTPPublicOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "internal answer") }))
	defer srv.Close()
	tr := NewHTTP(false)
	defer tr.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	req := httptest.NewRequest(http.MethodGet, srv.URL, nil)
	req.RequestURI = ""
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("a request of the registry itself: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	marked := req.WithContext(netguard.PublicOnly(context.Background()))
	if resp, err := tr.RoundTrip(marked); err == nil || !strings.Contains(err.Error(), "refusing to connect to the internal address 127.0.0.1") {
		if resp != nil {
			_ = resp.Body.Close()
		}
		t.Fatalf("got %v, want the connection refused", err)
	}
}
