package healthgate

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// Event reasons of the gate.
const (
	// ReasonReverted (Warning): a version broke its Application and was
	// written back.
	ReasonReverted = "HealthGateReverted"
	// ReasonSkipped (Warning): a version broke its Application and is
	// skipped, but was not written back (another version replaced it).
	ReasonSkipped = "HealthGateSkipped"
	// ReasonRevertFailed (Warning): writing a broken version back failed;
	// it is tried again.
	ReasonRevertFailed = "HealthGateRevertFailed"
	// ReasonVerified (Normal): a version was Healthy for its window.
	ReasonVerified = "HealthGateVerified"
	// ReasonUnverified (Normal): a version was kept without being judged
	// by health.
	ReasonUnverified = "HealthGateUnverified"
	// ReasonCleared (Normal): a person cleared skipped versions.
	ReasonCleared = "HealthGateCleared"
	// ReasonHeld (Warning): someone else replaced a version the updater
	// wrote by an older one; the image is held there, the version
	// rolled back from skipped.
	ReasonHeld = "ImageHeld"
)

// Applications finds an Application as last seen (appwatch.Watcher).
type Applications interface {
	Get(namespace, name string) (*application.Snapshot, bool)
}

// Reverter writes versions back by their Applications' write-back
// methods (cycle.Updater).
type Reverter interface {
	Revert(ctx context.Context, reverts []cycle.Revert) []cycle.RevertResult
}

// RevertFunc is a Reverter of a function.
type RevertFunc func(ctx context.Context, reverts []cycle.Revert) []cycle.RevertResult

// Revert calls f.
func (f RevertFunc) Revert(ctx context.Context, reverts []cycle.Revert) []cycle.RevertResult {
	return f(ctx, reverts)
}

// Gate follows the versions the update cycle writes for images with a
// health gate, and judges each from what Argo CD says of its Application:
// broken (written back, and skipped from then on), verified, or kept
// without a verdict (see judge). Its state is kept in the Application's
// annotation or the ImageUpdater's status (see State), read back by Load
// when the controller starts, so that a restart resumes what was
// followed. Only the replica that writes runs it.
type Gate struct {
	apps      Applications
	reverter  Reverter
	store     store
	recorder  record.EventRecorder
	metrics   *Metrics
	logger    *slog.Logger
	now       func() time.Time
	writeGate func() error
	poll      time.Duration
	refOpts   func() []imageref.Option

	// saveMu keeps the saves in the order of the changes they carry.
	saveMu sync.Mutex
	mu     sync.Mutex
	states map[types.NamespacedName]*appState
	// clears are Applications without state carrying health-gate-clear.
	clears map[types.NamespacedName]bool
	// unsaved are the ImageUpdaters whose Applications' records Written
	// changed since the last Flush: their status is saved once per batch
	// of writes, not once per Application, which would write a status
	// of n records n times.
	unsaved map[types.NamespacedName]bool
	// retries pace the saves of the ImageUpdaters' statuses the API
	// server refused.
	retries map[types.NamespacedName]statusRetry
	// prepared are the states Record gave writes to carry, until Written
	// is told of them.
	prepared map[types.NamespacedName]preparedRecord
	wake     chan struct{}
	// swept is when the records of Applications since deleted were last
	// looked for, once per poll interval.
	swept time.Time
}

// appState is the State of one Application, with what the gate keeps of
// it in memory only.
type appState struct {
	State
	// owner is the ImageUpdater whose status keeps the state; zero for
	// the Application's annotation.
	owner types.NamespacedName
	// dirty: the last save failed; the next evaluation saves again.
	dirty bool
	// causes of the broken versions being written back, by image.
	causes map[string]string
	// retryAt and failures pace the retries of a failed write-back.
	retryAt  map[string]time.Time
	failures map[string]int
	// pushes are the git pushes that carried the versions followed, by
	// image, to tell a sync of a later commit of the same push (see
	// syncOfWrite). Kept in memory only: after a restart, a revision
	// other than the record's commit is judged without them.
	pushes map[string]*writeback.Push
}

// clone is a copy of st that a change leaves st as it is; nil for nil.
func (st *appState) clone() *appState {
	if st == nil {
		return nil
	}
	c := &appState{State: State{Records: slices.Clone(st.Records), Skipped: slices.Clone(st.Skipped)}, owner: st.owner}
	c.pushes = maps.Clone(st.pushes)
	return c
}

// Option configures a Gate.
type Option func(*Gate)

// WithEvents records the gate's events; nil records none.
func WithEvents(r record.EventRecorder) Option { return func(g *Gate) { g.recorder = r } }

// WithMetrics records the gate's metrics; nil records none.
func WithMetrics(m *Metrics) Option { return func(g *Gate) { g.metrics = m } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(g *Gate) { g.logger = l } }

// WithWriteGate is asked before each write of the gate's state, as
// before every other write: the controller refuses writes once it stops
// or no longer leads.
func WithWriteGate(gate func() error) Option { return func(g *Gate) { g.writeGate = gate } }

// WithPollInterval is how often Run looks at the versions it follows
// when nothing tells it to sooner; DefaultPollInterval by default.
func WithPollInterval(d time.Duration) Option {
	return func(g *Gate) {
		if d > 0 {
			g.poll = d
		}
	}
}

// DefaultPollInterval: Run also wakes on each change of a followed
// Application and at the end of each window.
const DefaultPollInterval = 30 * time.Second

// WithReferenceOptions gives the image reference options the cycle reads
// Applications with (registries.conf's default registry and namespace).
// An Application keeps the settings parsed with the last options asked,
// so the gate asks with the same ones: else each of its looks would parse
// a followed Application anew, and the next cycle again.
func WithReferenceOptions(opts func() []imageref.Option) Option {
	return func(g *Gate) { g.refOpts = opts }
}

// withClock replaces time.Now, for tests.
func withClock(now func() time.Time) Option { return func(g *Gate) { g.now = now } }

// withStore replaces the API server, for tests.
func withStore(s store) Option { return func(g *Gate) { g.store = s } }

// New returns a Gate that reads Applications from apps, writes versions
// back through reverter, and keeps its state through client.
func New(apps Applications, reverter Reverter, client dynamic.Interface, opts ...Option) *Gate {
	g := &Gate{
		apps: apps, reverter: reverter, store: kubeStore{client: client},
		logger: slog.New(slog.DiscardHandler), now: time.Now, poll: DefaultPollInterval,
		states: map[types.NamespacedName]*appState{}, clears: map[types.NamespacedName]bool{},
		unsaved: map[types.NamespacedName]bool{}, retries: map[types.NamespacedName]statusRetry{},
		prepared: map[types.NamespacedName]preparedRecord{}, wake: make(chan struct{}, 1),
	}
	for _, opt := range opts {
		opt(g)
	}
	return g
}

var _ cycle.HealthGate = (*Gate)(nil)

func (g *Gate) referenceOptions() []imageref.Option {
	if g.refOpts == nil {
		return nil
	}
	return g.refOpts()
}

func keyOf(app *application.Application) types.NamespacedName {
	return types.NamespacedName{Namespace: app.Namespace, Name: app.Name}
}

// Load reads the state kept for apps: the annotation of each
// Application its own annotations configure, the status of updaters for
// the others. It replaces what the gate held.
func (g *Gate) Load(apps []*application.Application, updaters []*api.ImageUpdater) {
	byName := map[types.NamespacedName]*api.ImageUpdater{}
	for _, iu := range updaters {
		byName[types.NamespacedName{Namespace: iu.Namespace, Name: iu.Name}] = iu
	}
	states := map[types.NamespacedName]*appState{}
	var clears []types.NamespacedName
	for _, app := range apps {
		if app.Annotation(ClearAnnotation) != "" {
			clears = append(clears, keyOf(app))
		}
		var st State
		if app.ImageUpdater.Name == "" {
			var err error
			if st, err = ParseState(app.Annotation(StateAnnotation)); err != nil {
				g.logger.Warn("the health gate starts afresh for an Application: its state annotation cannot be read",
					"application", app.Key(), "annotation", StateAnnotation, "error", err)
				continue
			}
		} else if iu := byName[app.ImageUpdater]; iu != nil {
			st = State{Records: slices.Clone(iu.Status.HealthGate), Skipped: slices.Clone(iu.Status.SkippedVersions)}
			st.normalize(app.Name)
			for i := range st.Records {
				st.Records[i].Application = ""
			}
			for i := range st.Skipped {
				st.Skipped[i].Application = ""
			}
		}
		if len(st.Records) > 0 || len(st.Skipped) > 0 {
			states[keyOf(app)] = &appState{State: st, owner: app.ImageUpdater}
		}
	}
	g.mu.Lock()
	g.states = states
	for _, k := range clears {
		g.clears[k] = true
	}
	n := g.following()
	g.mu.Unlock()
	g.metrics.following(n)
	g.logger.Info("health gate state read", "applications", len(states), "following", n)
}

// Flush saves the status of the ImageUpdaters whose Applications' records
// Written or Skipped changed since the last Flush (or look): the cycle
// calls it after each batch of writes, and at the end of each pass.
func (g *Gate) Flush(ctx context.Context) {
	g.saveOwners(ctx, g.takeUnsaved())
}

// OnUpdate is told of each change of an Application (appwatch.Watcher's
// OnUpdate): one the gate follows, or that carries health-gate-clear, is
// looked at now.
func (g *Gate) OnUpdate(s *application.Snapshot) {
	key := types.NamespacedName{Namespace: s.Namespace(), Name: s.Name()}
	clear := s.Annotation(ClearAnnotation) != ""
	g.mu.Lock()
	if p, ok := g.prepared[key]; ok && !p.adopted && s.Annotation(StateAnnotation) == p.value {
		// The Application holds the record Record gave a write, so the
		// write landed, even where its answer was lost (the cycle then
		// saw an error, and nothing tells the gate otherwise): it is
		// followed from the time it carries.
		if st, changed := g.applyWrite(g.states[key], p.app, p.res.Changed, commitOf(p.res), p.res.Push, p.at); changed {
			st.normalize("")
			g.states[key] = st
		}
		p.adopted = true
		g.prepared[key] = p
		defer g.metrics.following(g.following())
	}
	st := g.states[key]
	look := clear || st != nil && slices.ContainsFunc(st.Records, active)
	if clear {
		g.clears[key] = true
	}
	g.mu.Unlock()
	if look {
		g.poke()
	}
}

func (g *Gate) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// Run evaluates the versions followed until ctx ends: at each change of a
// followed Application, at the end of each window, and every poll
// interval.
func (g *Gate) Run(ctx context.Context) {
	for {
		var next time.Time
		if err := safe.Call(func() error { next = g.Evaluate(ctx); return nil }); err != nil {
			safe.Log(g.logger, "evaluating the health gate", err)
			next = g.now().Add(g.poll)
		}
		wait := min(max(next.Sub(g.now()), 100*time.Millisecond), g.poll)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-g.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// forget drops the state of an Application that is gone or no longer
// read; its ImageUpdater is added to owners, whose status is saved
// without it.
func (g *Gate) forget(key types.NamespacedName, owners map[types.NamespacedName]bool) {
	g.mu.Lock()
	st := g.states[key]
	delete(g.states, key)
	g.mu.Unlock()
	if st != nil && st.owner.Name != "" {
		owners[st.owner] = true
	}
}

// following counts the records followed; the caller holds g.mu.
func (g *Gate) following() int {
	n := 0
	for _, st := range g.states {
		for _, r := range st.Records {
			if active(r) {
				n++
			}
		}
	}
	return n
}

func (g *Gate) mayWrite() error {
	if g.writeGate == nil {
		return nil
	}
	return g.writeGate()
}

// event records an event on app, its message bounded.
func (g *Gate) event(app *application.Application, kind, reason, msg string) {
	if g.recorder == nil {
		return
	}
	g.recorder.Event(app.Object(), kind, reason, clip(msg, maxEventMessage))
}

// maxEventMessage keeps events under the API server's 1 KiB note limit.
const maxEventMessage = 1000
