package transport

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestPingOnce(t *testing.T) {
	const challenge = `Bearer realm="https://auth.example.com/token",service="registry.example.com"`
	for _, tc := range []struct {
		name      string
		status    int
		path      string
		wantSent  int // of 3 requests
		wantKept  bool
		challenge bool
	}{
		{name: "a challenge is kept", status: http.StatusUnauthorized, path: "/v2/", wantSent: 1, wantKept: true, challenge: true},
		{name: "an open registry's answer is kept", status: http.StatusOK, path: "/v2/", wantSent: 1, wantKept: true},
		{name: "a failure is not", status: http.StatusServiceUnavailable, path: "/v2/", wantSent: 3},
		{name: "not found is not", status: http.StatusNotFound, path: "/v2/", wantSent: 3},
		{name: "other requests pass", status: http.StatusUnauthorized, path: "/v2/app/tags/list", wantSent: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sent.Add(1)
				if tc.challenge {
					w.Header().Add("WWW-Authenticate", challenge)
					w.Header().Add("WWW-Authenticate", `Basic realm="x"`)
				}
				w.WriteHeader(tc.status)
			}))
			t.Cleanup(srv.Close)
			host := strings.TrimPrefix(srv.URL, "http://")
			p := NewPingOnce(http.DefaultTransport, host)
			for i := range 3 {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+tc.path, nil)
				resp, err := p.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Errorf("request %d: status %d, want %d", i, resp.StatusCode, tc.status)
				}
				if got := resp.Header.Values("WWW-Authenticate"); tc.challenge && (len(got) != 2 || got[0] != challenge) {
					t.Errorf("request %d: WWW-Authenticate %q", i, got)
				}
				if resp.Request == nil || resp.Request.URL.Scheme != "http" || resp.Request.URL.Host != host {
					t.Errorf("request %d: answered for %v", i, resp.Request)
				}
			}
			if n := int(sent.Load()); n != tc.wantSent {
				t.Errorf("%d requests sent, want %d", n, tc.wantSent)
			}
			if p.Pinged() != tc.wantKept {
				t.Errorf("answer kept: %v, want %v", p.Pinged(), tc.wantKept)
			}
		})
	}
}

// Pings that start together send one request; one whose context ends
// while it waits gives up.
func TestPingOnceConcurrent(t *testing.T) {
	var sent atomic.Int32
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sent.Add(1) == 1 {
			close(arrived)
		}
		<-release
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	p := NewPingOnce(http.DefaultTransport, strings.TrimPrefix(srv.URL, "http://"))
	ping := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v2/", nil)
		resp, err := p.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				err = errors.New(resp.Status)
			}
		}
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	wg.Go(func() { errs <- ping(t.Context()) })
	<-arrived
	// The first is on the wire: a caller that stops waiting gets its
	// context's error, the others the one answer.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := ping(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait gave %v", err)
	}
	for range 4 {
		wg.Go(func() { errs <- ping(t.Context()) })
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("%d pings sent, want 1", n)
	}
}
