package cycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// slots hands out the --max-concurrency slots (registry and chart
// repository requests in flight) to the Applications of every pass under
// way: round-robin across namespaces, then across the Applications of a
// namespace, and never more than a namespace's or an Application's even
// share while others have work left. An Application with 200 images thus
// gets its turn as one with a single image does, and its share grows only
// as the others finish; a registry that never answers holds its own
// Application's slots, not the others'.
type slots struct {
	mu   sync.Mutex
	max  int
	held int
	// nss are the namespaces with work left, in the order they came.
	nss []*nsSlots
	// next is the index in nss of the namespace served next.
	next int
}

type nsSlots struct {
	name string
	apps []*appSlots
	next int
	held int
}

// appSlots is one Application's part of the slots, from join to leave.
type appSlots struct {
	s       *slots
	ns      *nsSlots
	held    int
	waiting []chan struct{}
	// first is called once, when the Application gets its first slot.
	first     func()
	firstOnce sync.Once
}

func newSlots(max int) *slots { return &slots{max: max} }

// join counts an Application of namespace as having work left, from now
// until leave; first is called when it gets its first slot.
func (s *slots) join(namespace string, first func()) *appSlots {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.nss, func(ns *nsSlots) bool { return ns.name == namespace })
	if i < 0 {
		s.nss = append(s.nss, &nsSlots{name: namespace})
		i = len(s.nss) - 1
	}
	a := &appSlots{s: s, ns: s.nss[i], first: first}
	a.ns.apps = append(a.ns.apps, a)
	return a
}

// leave ends the Application's part: the others' shares grow. Its slots
// must have been released.
func (a *appSlots) leave() {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := a.ns
	if i := slices.Index(ns.apps, a); i >= 0 {
		ns.apps = slices.Delete(ns.apps, i, i+1)
		if ns.next > i {
			ns.next--
		}
	}
	if len(ns.apps) == 0 {
		if i := slices.Index(s.nss, ns); i >= 0 {
			s.nss = slices.Delete(s.nss, i, i+1)
			if s.next > i {
				s.next--
			}
		}
	}
	s.dispatch()
}

// acquire waits for a slot, or for ctx to end.
func (a *appSlots) acquire(ctx context.Context) error {
	s := a.s
	ch := make(chan struct{})
	s.mu.Lock()
	a.waiting = append(a.waiting, ch)
	s.dispatch()
	s.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		s.mu.Lock()
		i := slices.Index(a.waiting, ch)
		if i >= 0 {
			a.waiting = slices.Delete(a.waiting, i, i+1)
		}
		s.mu.Unlock()
		if i < 0 { // granted meanwhile
			a.release()
		}
		return context.Cause(ctx)
	}
	if a.first != nil {
		a.firstOnce.Do(a.first)
	}
	return nil
}

// release gives a slot back.
func (a *appSlots) release() {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	a.held--
	a.ns.held--
	s.held--
	s.dispatch()
}

// dispatch hands out the free slots, fairly. The caller holds s.mu.
func (s *slots) dispatch() {
	for s.held < s.max && len(s.nss) > 0 {
		nsShare := ceilDiv(s.max, len(s.nss))
		granted := false
		for k := range len(s.nss) {
			i := (s.next + k) % len(s.nss)
			ns := s.nss[i]
			if ns.held >= nsShare {
				continue
			}
			appShare := ceilDiv(nsShare, len(ns.apps))
			if a := ns.pick(appShare); a != nil {
				ch := a.waiting[0]
				a.waiting = a.waiting[1:]
				a.held++
				ns.held++
				s.held++
				close(ch)
				s.next = (i + 1) % len(s.nss)
				granted = true
				break
			}
		}
		if !granted {
			return
		}
	}
}

// pick is the namespace's next Application, round-robin, that waits for a
// slot and holds less than share.
func (ns *nsSlots) pick(share int) *appSlots {
	for k := range len(ns.apps) {
		i := (ns.next + k) % len(ns.apps)
		if a := ns.apps[i]; len(a.waiting) > 0 && a.held < share {
			ns.next = (i + 1) % len(ns.apps)
			return a
		}
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// defaultApplicationTimeoutFactor times the image timeout is how long the
// registry and chart repository requests of one Application may take in a
// pass, all together, unless WithApplicationTimeout says otherwise: twice
// the time of one image, so that an image that waited for a slot behind
// another that timed out still gets its own.
const defaultApplicationTimeoutFactor = 2

// WithApplicationTimeout bounds, in place of twice the image timeout, the
// time all the listings and choices of one Application's images and
// charts may take in a pass, counted from its first request. When it
// passes, the images and charts not checked yet fail with one error that
// names the Application and how many; the other Applications go on, and
// theirs are written without waiting for it for more than half of d.
func WithApplicationTimeout(d time.Duration) Option {
	return func(u *Updater) { u.applicationTimeout = d }
}

// applicationTimeoutError is the cause of an Application's context whose
// time ran out.
type applicationTimeoutError struct{ d time.Duration }

func (e applicationTimeoutError) Error() string {
	return fmt.Sprintf("the time allowed for one Application (%s) ran out", e.d)
}

// appContext is the context of one Application's requests in a pass: it
// ends with ctx, and d after start is called.
func appContext(ctx context.Context, d time.Duration) (actx context.Context, start func(), cancel func()) {
	actx, cancelCause := context.WithCancelCause(ctx)
	var timer *time.Timer
	var mu sync.Mutex
	start = func() {
		mu.Lock()
		defer mu.Unlock()
		if timer == nil {
			timer = time.AfterFunc(d, func() { cancelCause(applicationTimeoutError{d}) })
		}
	}
	cancel = func() {
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancelCause(context.Canceled)
	}
	return actx, start, cancel
}

// outOfTime tells whether actx, an Application's context, ended because
// its time ran out (and not because the pass was stopped).
func outOfTime(actx context.Context) bool {
	var e applicationTimeoutError
	return errors.As(context.Cause(actx), &e)
}

// listings are the listings of one pass (tags, or chart versions), each
// made once for every Application that needs it. A listing runs on the
// slot of the Application that asked first, for the image timeout, and
// is stopped once every Application waiting for it gave up: one whose
// time ran out stops waiting, and leaves the listing to the others.
type listings[T any] struct {
	// ctx is the pass's.
	ctx     context.Context
	timeout time.Duration
	// done is called when a listing finished.
	done func()
	mu   sync.Mutex
	m    map[string]*listing[T]
	// running counts the listings under way, which wait waits for.
	running sync.WaitGroup
}

type listing[T any] struct {
	users   int
	started chan struct{}
	done    chan struct{}
	val     T
	cancel  context.CancelFunc
}

func newListings[T any](ctx context.Context, timeout time.Duration, done func()) *listings[T] {
	return &listings[T]{ctx: ctx, timeout: timeout, done: done, m: map[string]*listing[T]{}}
}

// get returns key's listing, which list makes once (with a context ending
// at the image timeout), or actx's cause when it ends first. a's slots
// run it if it has not started.
func (ls *listings[T]) get(actx context.Context, a *appSlots, key string, list func(context.Context) T) (T, error) {
	ls.mu.Lock()
	l, ok := ls.m[key]
	if !ok {
		l = &listing[T]{started: make(chan struct{}), done: make(chan struct{})}
		ls.m[key] = l
	}
	l.users++
	ls.mu.Unlock()
	defer ls.leave(l)

	select {
	case <-l.started:
	default:
		// Wait for a slot, unless another Application starts it first.
		wctx, stop := context.WithCancel(actx)
		go func() {
			select {
			case <-l.started:
				stop()
			case <-wctx.Done():
			}
		}()
		err := a.acquire(wctx)
		stop()
		if err == nil {
			ls.mu.Lock()
			select {
			case <-l.started:
				ls.mu.Unlock()
				a.release()
			default:
				lctx, cancel := context.WithTimeoutCause(ls.ctx, ls.timeout, errImageTimeout)
				l.cancel = cancel
				close(l.started)
				ls.running.Add(1)
				ls.mu.Unlock()
				go func() {
					defer ls.running.Done()
					defer a.release()
					defer cancel()
					l.val = list(lctx)
					close(l.done)
					if ls.done != nil {
						ls.done()
					}
				}()
			}
		}
	}
	select {
	case <-l.done:
		return l.val, nil
	case <-actx.Done():
		var zero T
		return zero, context.Cause(actx)
	}
}

// leave stops a listing nobody waits for any more.
func (ls *listings[T]) leave(l *listing[T]) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l.users--
	if l.users == 0 && l.cancel != nil {
		l.cancel()
	}
}

// wait waits for the listings under way: those nobody waits for any more
// were stopped (see leave), and end as their requests do. A pass leaves
// no request of its own behind.
func (ls *listings[T]) wait() { ls.running.Wait() }

// results are the listings that finished, by key.
func (ls *listings[T]) results() map[string]T {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make(map[string]T, len(ls.m))
	for k, l := range ls.m {
		select {
		case <-l.done:
			out[k] = l.val
		default:
		}
	}
	return out
}
