package testenv

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"
)

// HoldProxy is an HTTP reverse proxy in front of a test server that holds
// the requests a test chooses until the test lets them go: a way to stop a
// client in the middle of a git push or a registry listing, at a moment
// the test picks, with the server itself left as it is.
type HoldProxy struct {
	// URL is the proxy's base URL, to use in place of the server's.
	URL string

	mu    sync.Mutex
	holds []*Hold
}

// Hold is one set of held requests.
type Hold struct {
	match    func(*http.Request) bool
	arrived  chan struct{}
	released chan struct{}
	answered chan struct{}
	once     struct{ arrived, released, answered sync.Once }

	mu         sync.Mutex
	answeredAt time.Time
}

// StartHoldProxy serves target (an http:// base URL) on a loopback port.
func StartHoldProxy(t testing.TB, target string) *HoldProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &HoldProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		// The server has answered; the client has not seen it yet.
		if h, ok := resp.Request.Context().Value(holdKey{}).(*Hold); ok {
			h.once.answered.Do(func() {
				h.mu.Lock()
				h.answeredAt = time.Now()
				h.mu.Unlock()
				close(h.answered)
			})
		}
		return nil
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := p.holding(r); h != nil {
			h.once.arrived.Do(func() { close(h.arrived) })
			select {
			case <-h.released:
			case <-r.Context().Done():
				// The client gave up; nothing reaches the server.
				return
			}
			r = r.WithContext(contextWithHold(r.Context(), h))
		}
		rp.ServeHTTP(w, r)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		p.mu.Lock()
		for _, h := range p.holds {
			h.Release()
		}
		p.mu.Unlock()
		_ = srv.Close()
	})
	p.URL = "http://" + l.Addr().String()
	return p
}

// Hold holds, from now until Release, every request that match accepts.
func (p *HoldProxy) Hold(match func(*http.Request) bool) *Hold {
	h := &Hold{match: match, arrived: make(chan struct{}), released: make(chan struct{}), answered: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holds = append(p.holds, h)
	return h
}

// holding returns the unreleased hold that catches r, if any.
func (p *HoldProxy) holding(r *http.Request) *Hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.holds {
		select {
		case <-h.released:
			continue
		default:
		}
		if h.match(r) {
			return h
		}
	}
	return nil
}

// Arrived is closed when the first request is held.
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Release lets the held requests, and later ones, through.
func (h *Hold) Release() { h.once.released.Do(func() { close(h.released) }) }

// Answered is closed when the server has answered the first request let
// through, before the client reads the answer.
func (h *Hold) Answered() <-chan struct{} { return h.answered }

// AnsweredAt is when Answered was closed; zero before.
func (h *Hold) AnsweredAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.answeredAt
}

type holdKey struct{}

// contextWithHold marks a request that was held, so that its answer is
// recorded.
func contextWithHold(ctx context.Context, h *Hold) context.Context {
	return context.WithValue(ctx, holdKey{}, h)
}
