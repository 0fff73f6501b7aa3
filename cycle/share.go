package cycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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
//
// What waits for a slot is a task, kept as data: a goroutine starts only
// when the task gets its slot. A pass over 20,000 Applications thus runs
// on at most as many goroutines as there are slots, not on one or more
// per Application waiting its turn (BenchmarkPassApplications).
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
	ctx     context.Context
	held    int
	waiting []*task
	// first is called once, when the Application gets its first slot.
	first     func()
	firstOnce sync.Once
	// stop stops the dropping of the tasks waiting when ctx ends.
	stop func() bool
}

// task is work that runs on one of an Application's slots.
type task struct {
	// run runs on a goroutine of its own, holding the slot, which is
	// given back when it returns.
	run func()
	// gone, when set, is called instead of run when the Application's
	// context ends before the task got its slot.
	gone func(cause error)
	// skip, when set, tells when the task comes to its turn that it is
	// no longer needed: it is dropped, and nothing is called. It must
	// not lock anything.
	skip func() bool
}

func newSlots(max int) *slots { return &slots{max: max} }

// join counts an Application of namespace as having work left, from now
// until leave; first is called when it gets its first slot. Its tasks
// still waiting when ctx ends are dropped.
func (s *slots) join(ctx context.Context, namespace string, first func()) *appSlots {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.nss, func(ns *nsSlots) bool { return ns.name == namespace })
	if i < 0 {
		s.nss = append(s.nss, &nsSlots{name: namespace})
		i = len(s.nss) - 1
	}
	a := &appSlots{s: s, ns: s.nss[i], ctx: ctx, first: first}
	a.ns.apps = append(a.ns.apps, a)
	a.stop = context.AfterFunc(ctx, a.drop)
	return a
}

// leave ends the Application's part: the others' shares grow. Slots it
// still holds are counted until given back.
func (a *appSlots) leave() {
	a.stop()
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	a.waiting = nil
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

// submit queues t for one of the Application's slots; when its context
// has ended, t.gone is called at once.
func (a *appSlots) submit(t *task) {
	s := a.s
	s.mu.Lock()
	if a.ctx.Err() != nil {
		s.mu.Unlock()
		if t.gone != nil {
			t.gone(context.Cause(a.ctx))
		}
		return
	}
	a.waiting = append(a.waiting, t)
	s.dispatch()
	s.mu.Unlock()
}

// drop ends the tasks waiting, once the Application's context ended.
func (a *appSlots) drop() {
	s := a.s
	s.mu.Lock()
	gone := a.waiting
	a.waiting = nil
	s.mu.Unlock()
	cause := context.Cause(a.ctx)
	for _, t := range gone {
		if t.gone != nil {
			t.gone(cause)
		}
	}
}

// runTask runs t on a slot of a's, and gives the slot back.
func (a *appSlots) runTask(t *task) {
	defer a.release()
	if a.first != nil {
		a.firstOnce.Do(a.first)
	}
	t.run()
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
		served := false
		for k := range len(s.nss) {
			i := (s.next + k) % len(s.nss)
			ns := s.nss[i]
			if ns.held >= nsShare {
				continue
			}
			appShare := ceilDiv(nsShare, len(ns.apps))
			a := ns.pick(appShare)
			if a == nil {
				continue
			}
			t := a.waiting[0]
			a.waiting[0] = nil
			a.waiting = a.waiting[1:]
			served = true
			if t.skip != nil && t.skip() {
				break
			}
			a.held++
			ns.held++
			s.held++
			go a.runTask(t)
			s.next = (i + 1) % len(s.nss)
			break
		}
		if !served {
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
// slot of the Application whose turn comes first, for the image timeout,
// and is stopped once every Application waiting for it gave up: one
// whose time ran out stops waiting, and leaves the listing to the others.
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
	// started is read without the lock, by a task's skip.
	started  atomic.Bool
	finished bool
	val      T
	cancel   context.CancelFunc
	waiters  map[*waiter[T]]struct{}
}

// waiter is one Application's wait for a listing.
type waiter[T any] struct {
	then func(T, error)
	// stop stops the call of then when the Application's context ends.
	stop func() bool
}

func newListings[T any](ctx context.Context, timeout time.Duration, done func()) *listings[T] {
	return &listings[T]{ctx: ctx, timeout: timeout, done: done, m: map[string]*listing[T]{}}
}

// request calls then, once, with key's listing, which list makes once
// (with a context ending at the image timeout), or with actx's cause when
// it ends first. Until the listing starts, a's slots may run it: it
// starts on the slot of the first Application to get one. then is called
// at once when the listing finished already, else on the goroutine that
// finishes it or ends actx.
func (ls *listings[T]) request(actx context.Context, a *appSlots, key string, list func(context.Context) T, then func(T, error)) {
	ls.mu.Lock()
	l, ok := ls.m[key]
	if !ok {
		l = &listing[T]{waiters: map[*waiter[T]]struct{}{}}
		ls.m[key] = l
	}
	if l.finished {
		val := l.val
		ls.mu.Unlock()
		then(val, nil)
		return
	}
	w := &waiter[T]{then: then}
	l.waiters[w] = struct{}{}
	w.stop = context.AfterFunc(actx, func() { ls.giveUp(l, w, context.Cause(actx)) })
	started := l.started.Load()
	ls.mu.Unlock()
	if !started {
		a.submit(&task{skip: l.started.Load, run: func() { ls.run(l, list) }})
	}
}

// giveUp ends w's wait, whose Application's context ended: a listing
// nobody waits for any more is stopped.
func (ls *listings[T]) giveUp(l *listing[T], w *waiter[T], cause error) {
	ls.mu.Lock()
	delete(l.waiters, w)
	if len(l.waiters) == 0 && l.cancel != nil && !l.finished {
		l.cancel()
	}
	ls.mu.Unlock()
	var zero T
	w.then(zero, cause)
}

// run makes l, unless it started on another slot or nobody waits for it.
func (ls *listings[T]) run(l *listing[T], list func(context.Context) T) {
	ls.mu.Lock()
	if l.started.Load() || len(l.waiters) == 0 {
		ls.mu.Unlock()
		return
	}
	lctx, cancel := context.WithTimeoutCause(ls.ctx, ls.timeout, errImageTimeout)
	l.cancel = cancel
	l.started.Store(true)
	ls.running.Add(1)
	ls.mu.Unlock()

	val := list(lctx)
	cancel()

	ls.mu.Lock()
	l.val, l.finished = val, true
	var told []*waiter[T]
	for w := range l.waiters {
		// A waiter whose context ended meanwhile is told by giveUp.
		if w.stop() {
			told = append(told, w)
		}
	}
	l.waiters = nil
	ls.mu.Unlock()
	ls.running.Done()
	if ls.done != nil {
		ls.done()
	}
	for _, w := range told {
		w.then(val, nil)
	}
}

// wait waits for the listings under way: those nobody waits for any more
// were stopped (see giveUp), and end as their requests do. A pass leaves
// no request of its own behind.
func (ls *listings[T]) wait() { ls.running.Wait() }

// results are the listings that finished, by key.
func (ls *listings[T]) results() map[string]T {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make(map[string]T, len(ls.m))
	for k, l := range ls.m {
		if l.finished {
			out[k] = l.val
		}
	}
	return out
}
