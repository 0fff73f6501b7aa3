package webhook

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"
)

// places bounds the payloads read before their sender can be proven, and
// shares them: a place held for longer than hold is given up, its read
// cut, as soon as a request waits for one, and waiting requests get the
// places in the order they came. No sender, whatever address it shares
// with others, holds a place another waits for beyond hold, so a delivery
// that is read within hold gets through while slow senders take the rest.
type places struct {
	size int
	hold time.Duration

	mu      sync.Mutex
	held    []*place // oldest first
	waiting []*place // in the order they came; only while held is full
	cutting int      // of held, those being cut
}

// place is one payload's hold on places.
type place struct {
	rc    *http.ResponseController
	ready chan struct{} // closed once a waiting place is held
	kick  chan struct{} // a place was released: the cuts needed may have changed

	mu      sync.Mutex
	since   time.Time // when it was held
	cut     bool      // given up to a waiting request
	reading bool      // the payload is being read: a cut ends the read
}

// errGivenUp ends the read of a payload whose place went to a waiting
// request.
var errGivenUp = errors.New("the place went to a request waiting for one")

func newPlaces(size int, hold time.Duration) *places {
	return &places{size: size, hold: hold}
}

// take holds a place for a payload read through rc, waiting at most wait
// (or until ctx ends) for one; nil when none came.
func (s *places) take(ctx context.Context, rc *http.ResponseController, wait time.Duration) *place {
	p := &place{rc: rc, ready: make(chan struct{}), kick: make(chan struct{}, 1), reading: true}
	s.mu.Lock()
	if len(s.held) < s.size {
		s.hold1(p)
		s.mu.Unlock()
		return p
	}
	s.waiting = append(s.waiting, p)
	s.mu.Unlock()

	giveUp := time.NewTimer(wait)
	defer giveUp.Stop()
	next := time.NewTimer(time.Hour)
	defer next.Stop()
	for {
		if d, ok := s.cutFor(); ok {
			next.Reset(d)
		}
		select {
		case <-p.ready:
			return p
		case <-next.C:
			continue
		case <-p.kick:
			continue
		case <-giveUp.C:
		case <-ctx.Done():
		}
		s.mu.Lock()
		select {
		case <-p.ready: // held just now
			s.mu.Unlock()
			return p
		default:
		}
		s.waiting = slices.DeleteFunc(s.waiting, func(w *place) bool { return w == p })
		s.mu.Unlock()
		return nil
	}
}

// hold1 makes p held; s.mu is held.
func (s *places) hold1(p *place) {
	p.mu.Lock()
	p.since = time.Now()
	p.mu.Unlock()
	s.held = append(s.held, p)
	close(p.ready)
}

// cutFor cuts, oldest first, the places held past hold that the waiting
// requests need; while one still needs one, it returns when the next is
// held past hold.
func (s *places) cutFor() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, p := range s.held {
		if s.cutting >= len(s.waiting) {
			return 0, false
		}
		if p.isCut() {
			continue
		}
		if since := now.Sub(p.heldSince()); since < s.hold {
			return s.hold - since, true
		}
		p.giveUp()
		s.cutting++
	}
	return 0, false
}

// release gives p's place to the first waiting request, or frees it.
func (s *places) release(p *place) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = slices.DeleteFunc(s.held, func(h *place) bool { return h == p })
	if p.isCut() {
		s.cutting--
	}
	if len(s.waiting) > 0 {
		w := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.hold1(w)
	}
	for _, w := range s.waiting {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// count is how many places are held, and how many requests wait.
func (s *places) count() (held, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held), len(s.waiting)
}

func (p *place) heldSince() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.since
}

func (p *place) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// giveUp cuts p's read, now if it is blocked on the connection.
func (p *place) giveUp() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	if p.reading {
		_ = p.rc.SetReadDeadline(time.Unix(1, 0))
	}
}

// setReadDeadline moves the read's deadline to t, unless the place was
// given up: under p.mu, so that a cut is never undone.
func (p *place) setReadDeadline(t time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return errGivenUp
	}
	return p.rc.SetReadDeadline(t)
}

// done ends the payload's read: a cut no longer touches the connection.
// It tells whether the place was given up meanwhile.
func (p *place) done() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reading = false
	return p.cut
}
