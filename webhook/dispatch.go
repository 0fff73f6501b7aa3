package webhook

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/safe"
)

// Rechecks: a repository one of whose images was skipped because its
// Application does not run it is checked again, a few times: after
// DefaultRecheckAfter, then 4 and 16 times that. Argo CD's status can list
// none of an image's versions while it rolls one out, for a second or so
// after a sync, and a push during that time would otherwise wait for the
// next cycle.
const (
	DefaultRecheckAfter = time.Second
	DefaultRechecks     = 3
)

// backoff is how long after a check the next recheck of a repository
// waits, when it has had n before: base, then 4 and 16 times base.
func backoff(base time.Duration, n int) time.Duration { return base << (2 * min(n, 8)) }

// Unlisted tags: a registry may announce a push before its listing shows
// the tag (the Distribution registry sends the manifest's event before it
// links the tag), so the check that follows at once can miss it. A
// repository whose notified tag the check did not list is checked again
// after unlistedAfter, then 4 and 16 times that (the first recheck
// usually finds it), while it has had fewer than maxUnlistedRechecks.
const (
	unlistedAfter       = 200 * time.Millisecond
	maxUnlistedRechecks = 3
)

// maxTags bounds the notified tags kept for one pending repository; the
// latest are kept, since a later push is the one the listing may lack.
const maxTags = 16

// maxPending bounds the repositories waiting for a check; a sender that
// names more while a long cycle holds the checks is told to retry.
const maxPending = 10000

// maxReceived bounds the receipt times kept for one pending repository's
// latency metric, so that a sender repeating one repository while a long
// cycle holds the checks cannot grow memory; the earliest are kept.
const maxReceived = 100

// Errors Notify returns; the handler answers them with 503.
var (
	ErrNotRunning = errors.New("this replica runs no checks now (it does not hold the leader Lease) and cannot forward the notification to the replica that does; the registry should retry")
	ErrBusy       = errors.New("too many repositories are waiting for a check; retry later")
)

// Checker runs targeted checks: the update cycle restricted to some
// repositories. A repository may be named once for each notified tag.
type Checker interface {
	CheckRepositories(ctx context.Context, repos []imageref.Reference, trigger string) CheckResult
}

// CheckerFunc adapts a function to Checker.
type CheckerFunc func(ctx context.Context, repos []imageref.Reference, trigger string) CheckResult

// CheckRepositories calls f.
func (f CheckerFunc) CheckRepositories(ctx context.Context, repos []imageref.Reference, trigger string) CheckResult {
	return f(ctx, repos, trigger)
}

// CheckResult is what the dispatcher needs to know of a check.
type CheckResult struct {
	// Updated: the check wrote a new version somewhere.
	Updated bool
	// NotRunning are repositories of images skipped because their
	// Application does not run them (see DefaultRechecks).
	NotRunning []imageref.Reference
	// Unlisted are repositories, each with a tag it was named with, whose
	// listing lacked that tag (see unlistedAfter).
	Unlisted []imageref.Reference
}

// Dispatcher coalesces notifications into checks. Checks run only while
// Run runs, which is where the update cycles run: on the replica that
// holds the leader Lease. Without a relay (WithRelay) it accepts
// notifications only then; with one, a replica that does not lead keeps
// them and Forward hands them to the leader.
//
// A notification's check starts at once when no check runs (the leading
// edge). What is notified while a check runs, or while one waits to start,
// is merged, by repository, into the one check that follows it (the
// trailing edge): a burst of notifications, such as a push of several tags
// or of one image to several repositories, costs at most two checks of
// each repository, and the repositories notified meanwhile share one call.
type Dispatcher struct {
	checker      Checker
	recheckAfter time.Duration
	rechecks     int
	metrics      *Metrics
	logger       *slog.Logger
	now          func() time.Time
	relay        *relay // nil: notifications are refused while not leading

	mu      sync.Mutex
	running bool
	pending map[string]*pendingRepo // by repository name
	wake    chan struct{}           // Run's, while running
	forward chan struct{}           // Forward's, while not running
}

type pendingRepo struct {
	ref      imageref.Reference // the repository, without a version
	sources  map[string]bool
	tags     []string // notified, oldest first, at most maxTags
	received []time.Time
	// last is when its latest notification arrived: one kept while no
	// replica can take it expires relayMaxAge after that.
	last time.Time
	// recheck counts the checks of this repository before, made again
	// for a notified tag not listed (see unlistedAfter) or for images
	// skipped as not running (see DefaultRechecks); both share it, so that
	// a notification costs at most four checks with the defaults.
	recheck int
}

// addTags adds tags not yet kept, dropping the oldest past maxTags.
func (p *pendingRepo) addTags(tags ...string) {
	for _, t := range tags {
		if t == "" || slices.Contains(p.tags, t) {
			continue
		}
		p.tags = append(p.tags, t)
	}
	if n := len(p.tags) - maxTags; n > 0 {
		p.tags = slices.Delete(p.tags, 0, n)
	}
}

// refs is what a check is asked for: the repository with each notified
// tag, or alone when none was named.
func (p *pendingRepo) refs() []imageref.Reference {
	if len(p.tags) == 0 {
		return []imageref.Reference{p.ref}
	}
	out := make([]imageref.Reference, 0, len(p.tags))
	for _, t := range p.tags {
		if r, err := p.ref.WithTag(t); err == nil {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return []imageref.Reference{p.ref}
	}
	return out
}

// DispatcherOption configures a Dispatcher.
type DispatcherOption func(*Dispatcher)

// WithRechecks sets how many times a repository is checked again when an
// Application it notified about did not run the image, and how long after
// the check the first recheck waits (see DefaultRechecks); n = 0 disables
// these rechecks.
func WithRechecks(n int, after time.Duration) DispatcherOption {
	return func(x *Dispatcher) { x.rechecks, x.recheckAfter = n, after }
}

// WithDispatcherMetrics records checks and their latency; nil records nothing.
func WithDispatcherMetrics(m *Metrics) DispatcherOption {
	return func(x *Dispatcher) { x.metrics = m }
}

// WithDispatcherLogger sets the logger.
func WithDispatcherLogger(l *slog.Logger) DispatcherOption {
	return func(x *Dispatcher) { x.logger = l }
}

// WithDispatcherClock replaces time.Now, for tests.
func WithDispatcherClock(now func() time.Time) DispatcherOption {
	return func(x *Dispatcher) { x.now = now }
}

// NewDispatcher returns a Dispatcher that checks through c.
func NewDispatcher(c Checker, opts ...DispatcherOption) *Dispatcher {
	d := &Dispatcher{
		checker:      c,
		recheckAfter: DefaultRecheckAfter,
		rechecks:     DefaultRechecks,
		logger:       slog.New(slog.DiscardHandler),
		now:          time.Now,
		pending:      map[string]*pendingRepo{},
		wake:         make(chan struct{}, 1),
		forward:      make(chan struct{}, 1),
	}
	for _, opt := range opts {
		opt(d)
	}
	return d
}

// Notify queues the repositories of n for the next check: this replica's
// when it leads; otherwise, with a relay, the leader's, through Forward.
func (d *Dispatcher) Notify(n Notification) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		if err := d.relay.admit(); err != nil {
			return err
		}
	}
	for _, ref := range n.Repositories {
		p := &pendingRepo{ref: ref.WithoutVersion(), sources: map[string]bool{n.Source: true}, received: []time.Time{n.Received}, last: n.Received}
		p.addTags(ref.Tag())
		if !d.merge(p) {
			return ErrBusy
		}
	}
	d.signal()
	return nil
}

// merge adds p to what is pending, merged with what is pending for its
// repository; false when too many repositories are pending. d.mu is held.
func (d *Dispatcher) merge(p *pendingRepo) bool {
	q, ok := d.pending[p.ref.Name()]
	if !ok {
		if len(d.pending) >= maxPending {
			return false
		}
		q = &pendingRepo{ref: p.ref, sources: map[string]bool{}, recheck: p.recheck}
		d.pending[p.ref.Name()] = q
	}
	for s := range p.sources {
		q.sources[s] = true
	}
	q.addTags(p.tags...)
	// The earliest receipts are kept, for the latency metric.
	q.received = append(q.received, p.received...)
	slices.SortFunc(q.received, time.Time.Compare)
	q.received = q.received[:min(len(q.received), maxReceived)]
	if p.last.After(q.last) {
		q.last = p.last
	}
	return true
}

// signal wakes whichever loop takes what is pending: Run while it runs,
// Forward otherwise. d.mu is held.
func (d *Dispatcher) signal() {
	ch := d.wake
	if !d.running {
		ch = d.forward
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run checks what was notified until ctx ends: at once, and again after
// each check for what arrived meanwhile. What was kept before, while
// another replica led or none did, is checked at once too. What is still
// pending when ctx ends is dropped; the cycles will see it.
func (d *Dispatcher) Run(ctx context.Context) {
	d.mu.Lock()
	d.running = true
	if len(d.pending) > 0 {
		d.signal()
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.running = false
		d.pending = map[string]*pendingRepo{}
		d.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		}
		// A batch named by notifications must not stop the checks of
		// later ones.
		batch := d.take()
		safe.Log(d.logger, "checking after push notifications", safe.Call(func() error { d.check(ctx, batch); return nil }))
	}
}

func (d *Dispatcher) take() []*pendingRepo {
	d.mu.Lock()
	defer d.mu.Unlock()
	batch := make([]*pendingRepo, 0, len(d.pending))
	for _, p := range d.pending {
		batch = append(batch, p)
	}
	d.pending = map[string]*pendingRepo{}
	sort.Slice(batch, func(i, j int) bool { return batch[i].ref.Name() < batch[j].ref.Name() })
	return batch
}

func (d *Dispatcher) check(ctx context.Context, batch []*pendingRepo) {
	if len(batch) == 0 {
		return
	}
	var refs, names []imageref.Reference
	sources := map[string]bool{}
	var received []time.Time
	for _, p := range batch {
		refs = append(refs, p.refs()...)
		names = append(names, p.ref)
		for s := range p.sources {
			sources[s] = true
		}
		received = append(received, p.received...)
	}
	trigger := describe(sources)
	d.logger.Info("checking after push notifications", "repositories", sortedNames(names), "trigger", trigger)
	sum := d.checker.CheckRepositories(ctx, refs, trigger)
	d.metrics.checked(sum.Updated, received, d.now())

	// Unlisted tags are looked for again soon; repositories an Application
	// does not run yet, later (see DefaultRechecks). One recheck serves
	// both.
	// By repository, so that a batch of many costs linear time.
	unlisted := map[string][]string{}
	for _, r := range sum.Unlisted {
		unlisted[r.Name()] = append(unlisted[r.Name()], r.Tag())
	}
	notRunning := map[string]bool{}
	for _, r := range sum.NotRunning {
		notRunning[r.Name()] = true
	}
	again := map[time.Duration][]*pendingRepo{}
	for _, p := range batch {
		var missing []string
		for _, tag := range unlisted[p.ref.Name()] {
			if slices.Contains(p.tags, tag) {
				missing = append(missing, tag)
			}
		}
		a := &pendingRepo{ref: p.ref, sources: p.sources, recheck: p.recheck + 1}
		if !sum.Updated {
			// The latency of a push is observed once, when it updates.
			a.received = p.received
		}
		switch {
		case len(missing) > 0 && p.recheck < maxUnlistedRechecks:
			a.addTags(missing...)
			after := backoff(unlistedAfter, p.recheck)
			again[after] = append(again[after], a)
		case p.recheck < d.rechecks && notRunning[p.ref.Name()]:
			after := backoff(d.recheckAfter, p.recheck)
			again[after] = append(again[after], a)
		}
	}
	for after, repos := range again {
		d.logger.Debug("checking again", "repositories", len(repos), "after", after)
		safe.Go(d.logger, "rechecking after a push notification", func() { d.requeue(ctx, repos, after) })
	}
}

// requeue queues repositories for a check again after after, unless ctx
// ends first or the checks stopped meanwhile.
func (d *Dispatcher) requeue(ctx context.Context, again []*pendingRepo, after time.Duration) {
	timer := time.NewTimer(after)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return
	case <-timer.C:
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		return
	}
	for _, a := range again {
		if !d.merge(a) {
			break
		}
	}
	d.signal()
}

// describe names what triggered a check, for events and logs: "a push
// notification from quay.io", "push notifications from docker.io and
// harbor".
func describe(sources map[string]bool) string {
	names := make([]string, 0, len(sources))
	for s := range sources {
		names = append(names, s)
	}
	sort.Strings(names)
	if len(names) == 1 {
		return "a push notification from " + names[0]
	}
	last := len(names) - 1
	return "push notifications from " + strings.Join(names[:last], ", ") + " and " + names[last]
}
