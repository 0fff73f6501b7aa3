package transport

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/test/poll"
)

func TestGateWindow(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answers    []int // status per request; 0: no answer
		wantWindow int
	}{
		{"good answers keep the maximum", []int{200, 404, 200}, 8},
		{"429 halves", []int{429}, 4},
		{"503 halves", []int{503}, 4},
		{"other 5xx do not", []int{500, 502}, 8},
		{"connection errors do not", []int{0, 0}, 8},
		{"halving stops at one", []int{429, 503, 429, 429, 429}, 1},
		{"a window of good answers widens by one", []int{429, 200, 200, 200, 200}, 5},
		{"one short of a window does not", []int{429, 200, 200, 200}, 4},
		{"a 429 restarts the count", []int{429, 200, 200, 200, 429, 200}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGate(WithMaxInFlight(8))
			i := 0
			rt := NewGated(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				code := tc.answers[i]
				i++
				if code == 0 {
					return nil, errors.New("connection reset")
				}
				return statusResponse(r, code), nil
			}), g)
			for range tc.answers {
				req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://registry.test/v2/", nil)
				if resp, err := rt.RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}
			if got := g.Window(); got != tc.wantWindow {
				t.Errorf("window %d, want %d", got, tc.wantWindow)
			}
		})
	}
}

// A misbehaving registry: it answers 429 with a Retry-After to the first
// request. The pause then holds every later request of the host, however
// many cycles later it comes, until the time the registry named.
func TestGateRetryAfterOutlivesTheRequest(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) == 1 {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	g := NewGate()
	g.now = clock
	rt := NewGated(http.DefaultTransport, g)
	get := func(timeout time.Duration) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v2/", nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}

	resp, err := get(time.Minute)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first request: %v %v, want 429", resp, err)
	}
	if want := now.Add(120 * time.Second); !g.PausedUntil().Equal(want) {
		t.Errorf("paused until %v, want %v", g.PausedUntil(), want)
	}
	// A later request (the next cycle's) whose deadline comes before the end
	// of the pause fails at once, and the registry does not see it.
	_, err = get(time.Minute)
	if !errors.Is(err, ErrRegistryPaused) {
		t.Fatalf("request during the pause: %v, want ErrRegistryPaused", err)
	}
	if n := served.Load(); n != 1 {
		t.Errorf("the registry saw %d requests during the pause, want 1", n)
	}
	// Past the pause, requests go out again.
	mu.Lock()
	now = now.Add(121 * time.Second)
	mu.Unlock()
	if resp, err := get(time.Minute); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request after the pause: %v %v, want 200", resp, err)
	}
}

func TestGateBoundsRequestsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first int // status of a first request, which narrows the window or not
		want  int
	}{
		{"at the maximum", http.StatusOK, 4},
		{"halved after a 503", http.StatusServiceUnavailable, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var inFlight, peak atomic.Int32
			release := make(chan struct{})
			first := true
			var mu sync.Mutex
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				isFirst := first
				first = false
				mu.Unlock()
				if isFirst {
					w.WriteHeader(tc.first)
					return
				}
				n := inFlight.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				<-release
				inFlight.Add(-1)
			}))
			defer srv.Close()
			gate := NewGate(WithMaxInFlight(4))
			rt := NewGated(http.DefaultTransport, gate)
			do := func() {
				req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v2/", nil)
				if resp, err := rt.RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}
			do()
			var wg sync.WaitGroup
			for range 12 {
				wg.Go(do)
			}
			// Wait until the window is full and every other request waits
			// at the gate, then let everything finish.
			poll.True(t, 10*time.Second, "a full window", func() bool {
				gate.mu.Lock()
				waiting := gate.waiting
				gate.mu.Unlock()
				return inFlight.Load() == int32(tc.want) && waiting == 12-tc.want
			})
			close(release)
			wg.Wait()
			if p := peak.Load(); p != int32(tc.want) {
				t.Errorf("at most %d requests in flight, want %d", p, tc.want)
			}
		})
	}
}
