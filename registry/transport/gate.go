package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Gate defaults: up to 32 requests of one registry host wait for an answer
// at a time, and a Retry-After holds the host for at most 5 minutes.
const (
	DefaultMaxInFlight = 32
	defaultMaxPause    = 5 * time.Minute
)

// ErrRegistryPaused is wrapped by the error of a request that would have to
// wait, for a registry's Retry-After, past its own deadline.
var ErrRegistryPaused = errors.New("the registry asked the client to wait")

// Gate is what the client remembers of one registry host's load, across
// update cycles: how many requests may wait for an answer at once (the
// window), and until when the host asked not to be sent any (its last
// Retry-After). A 429 or 503 answer halves the window and, with a
// Retry-After, pauses the host; each window's worth of other answers in a
// row widens it by one again, up to its maximum. Nothing is held back
// while the registry answers well: the window starts at its maximum.
type Gate struct {
	max      int
	maxPause time.Duration
	now      func() time.Time

	mu       sync.Mutex
	window   int
	inFlight int
	waiting  int // requests waiting for a place in the window
	good     int // answers without 429 or 503 since the window last changed
	until    time.Time
	wake     chan struct{} // closed when a slot frees or the window widens
}

// GateOption configures NewGate.
type GateOption func(*Gate)

// WithMaxInFlight sets how many requests may wait for an answer at once
// while the registry answers well; a non-positive value keeps
// DefaultMaxInFlight.
func WithMaxInFlight(n int) GateOption {
	return func(g *Gate) {
		if n > 0 {
			g.max = n
		}
	}
}

// WithMaxPause caps how long one Retry-After holds the host; a
// non-positive value keeps the default of 5 minutes.
func WithMaxPause(d time.Duration) GateOption {
	return func(g *Gate) {
		if d > 0 {
			g.maxPause = d
		}
	}
}

// NewGate returns the gate of one registry host.
func NewGate(opts ...GateOption) *Gate {
	g := &Gate{max: DefaultMaxInFlight, maxPause: defaultMaxPause, now: time.Now, wake: make(chan struct{})}
	for _, opt := range opts {
		opt(g)
	}
	g.window = g.max
	return g
}

// Window is how many requests may wait for an answer at once now.
func (g *Gate) Window() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.window
}

// PausedUntil is the end of the host's last Retry-After; zero or past when
// it is not paused.
func (g *Gate) PausedUntil() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.until
}

// acquire waits for the pause to end and for a place in the window. A
// request whose deadline comes before the pause ends fails at once rather
// than waiting for nothing.
func (g *Gate) acquire(ctx context.Context, host string) error {
	for {
		g.mu.Lock()
		now := g.now()
		if wait := g.until.Sub(now); wait > 0 {
			until := g.until
			g.mu.Unlock()
			if deadline, ok := ctx.Deadline(); ok && deadline.Before(until) {
				return fmt.Errorf("%w: %s answered 429 or 503 with a Retry-After until %s, after this request's deadline",
					ErrRegistryPaused, host, until.UTC().Format(time.RFC3339))
			}
			if err := sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		if g.inFlight < g.window {
			g.inFlight++
			g.mu.Unlock()
			return nil
		}
		wake := g.wake
		g.waiting++
		g.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		}
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// release frees a place and learns from the answer: its status (0 when
// there was none) and Retry-After header.
func (g *Gate) release(status int, retryAfter string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		g.window = max(1, g.window/2)
		g.good = 0
		if d, ok := parseRetryAfter(retryAfter, g.now()); ok {
			if until := g.now().Add(min(d, g.maxPause)); until.After(g.until) {
				g.until = until
			}
		}
	default:
		if status == 0 || g.window >= g.max {
			break
		}
		g.good++
		if g.good >= g.window {
			g.window++
			g.good = 0
		}
	}
	close(g.wake)
	g.wake = make(chan struct{})
}

// NewGated sends each request through gate: it waits for the host's pause
// and for a place in its window, and the answer's status adjusts both. The
// place is held until the answer's headers arrive.
func NewGated(next http.RoundTripper, gate *Gate) http.RoundTripper {
	return &gated{next: next, gate: gate}
}

type gated struct {
	next http.RoundTripper
	gate *Gate
}

func (t *gated) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.gate.acquire(req.Context(), req.URL.Host); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.gate.release(0, "")
		return nil, err
	}
	t.gate.release(resp.StatusCode, resp.Header.Get("Retry-After"))
	return resp, nil
}
