package healthgate

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	"github.com/Masterminds/semver/v3"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/settings"
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

// Skipped are the versions of image skipped for app, which holds current
// of it now. A version the updater wrote, once seen in the Application,
// then replaced by an older one by someone else (see rolledBack) was
// rolled back: unless the hold is turned off (see holdOff), it is skipped
// from then on, which holds the image at what that person chose until a
// newer version appears or health-gate-clear lifts the hold; HeldFrom is
// that version while the hold lasts. Someone else replaced it when:
//   - the Application holds an older version (the override set back, the
//     commit reverted and deployed);
//   - or it still holds the version written, but a person's sync started
//     since the write deployed an older one from another source: Argo
//     CD's rollback to an earlier history entry, which leaves the spec as
//     it is. The image is then held at the version deployed, which HoldAt
//     asks the cycle to write where the spec holds the version rolled back
//     from, until it does.
//
// A zero current tells nothing.
func (g *Gate) Skipped(ctx context.Context, app *application.Application, image string, current imageref.Version) cycle.Skips {
	key := keyOf(app)
	now := g.now()
	g.mu.Lock()
	st := g.states[key]
	if st == nil {
		g.mu.Unlock()
		return cycle.Skips{}
	}
	var out cycle.Skips
	save, held := false, ""
	if r := st.record(image); r != nil && !current.IsZero() {
		synced, syncedAt, bySync := syncedVersion(app, image)
		written := r.WrittenAt.Time.Truncate(time.Second)
		switch {
		case sameVersion(current, imageref.ParseVersion(r.Version)) && bySync && !syncedAt.Before(written) && seen(*r) && rolledBack(synced, *r) && !holdOff(app):
			// Argo CD's rollback: the spec still holds the version written.
			held = g.hold(st, r, image, synced, "Argo CD's rollback (a sync of an earlier source)", now)
			out.HoldAt = synced
			save = true
		case sameVersion(current, imageref.ParseVersion(r.Version)):
			if r.State == api.HealthGateWritten && r.DeployedAt == nil {
				t := metav1.NewTime(now)
				r.DeployedAt, r.Message = &t, "written; seen in the Application"
				save = true
			}
		case seen(*r) && rolledBack(current, *r) && !holdOff(app):
			held = g.hold(st, r, image, current, "someone else", now)
			if held != "" {
				// Once: the write-back's target (a git file) may still
				// hold the version rolled back from.
				out.HoldAt = current
			}
			save = true
		}
		if r.State == api.HealthGateRolledBack && bySync && !syncedAt.Before(written) && sameVersion(current, imageref.ParseVersion(r.Version)) {
			// Not yet written where the spec holds the version rolled
			// back from (the write failed, or the controller restarted).
			out.HoldAt = synced
		}
	}
	out.Versions = st.skippedVersions(image)
	if r := st.record(image); r != nil && r.State == api.HealthGateRolledBack && slices.Contains(out.Versions, imageref.ParseVersion(r.Version)) {
		out.HeldFrom = imageref.ParseVersion(r.Version)
	} else {
		// The hold was lifted: nothing is written for it.
		out.HoldAt = imageref.Version{}
	}
	g.mu.Unlock()
	if held != "" {
		g.event(app, corev1.EventTypeWarning, ReasonHeld, held)
		g.logger.Warn("a version the updater wrote was rolled back by someone else; the image is held", "application", key, "image", image, "current", current.String())
	}
	if save {
		g.saveSoon(ctx, key)
	}
	return out
}

// hold records that r's version of image was rolled back to current by
// who, and skips it unless it is skipped already; it returns the event's
// message for a new hold, "" otherwise. The caller holds g.mu.
func (g *Gate) hold(st *appState, r *api.HealthGateRecord, image string, current imageref.Version, who string, now time.Time) string {
	already := slices.Contains(st.skippedVersions(image), imageref.ParseVersion(r.Version))
	t := metav1.NewTime(now)
	reason := fmt.Sprintf("rolled back to %s by %s: held; not written again", current, who)
	r.State, r.RevertedAt = api.HealthGateRolledBack, &t
	r.Message = fmt.Sprintf("rolled back to %s by %s; %s is skipped until %s lifts the hold", current, who, r.Version, ClearAnnotation)
	if already {
		return ""
	}
	st.skip(image, r.Version, reason, now)
	return fmt.Sprintf("image %s: version %s, which the updater wrote, was rolled back to %s by %s; the image is held: neither %s nor an older version is written again, a newer one is when it appears; set %s to %q to lift the hold", image, r.Version, current, who, r.Version, ClearAnnotation, image+":"+r.Version)
}

// syncedVersion is the version of image (by its settings.ImageSpec Key)
// a person's sync of another source than the spec's deployed, with when
// it started (application.Application.SyncedVersion).
func syncedVersion(app *application.Application, image string) (imageref.Version, time.Time, bool) {
	at := slices.IndexFunc(app.Settings.Images, func(s settings.ImageSpec) bool { return s.Key() == image })
	if at < 0 {
		return imageref.Version{}, time.Time{}, false
	}
	return app.SyncedVersion(app.Settings.Images[at])
}

// holdOff tells whether the Application turned holds off: its
// rollback-hold annotation "false", or the rollbackHold field of the
// ImageUpdater that configures it false.
func holdOff(app *application.Application) bool {
	return app.Settings.RollbackHoldOff || app.Annotation(RollbackHoldAnnotation) == "false"
}

// seen tells whether the version of a record was seen in its Application
// (Argo CD ran it, or the updater's patch put it there): only then does
// an older version in its place tell a rollback, not a write Argo CD has
// not yet seen.
func seen(r api.HealthGateRecord) bool {
	switch r.State {
	case api.HealthGateVerified, api.HealthGateUnverified:
		return true
	case api.HealthGateWritten, api.HealthGatePending, api.HealthGateSuperseded:
		return r.DeployedAt != nil
	}
	// The gate's own reverts, and holds already taken.
	return false
}

// rolledBack tells whether current, found where the updater wrote r's
// version, is older: the version it replaced, or a lower semantic
// version. Any other version (newer, or not comparable) was moved
// forward or elsewhere by someone, and is left to the strategy.
func rolledBack(current imageref.Version, r api.HealthGateRecord) bool {
	if r.PreviousVersion != "" && sameVersion(current, imageref.ParseVersion(r.PreviousVersion)) {
		return true
	}
	written := imageref.ParseVersion(r.Version)
	if current.Tag == "" || written.Tag == "" {
		return false
	}
	a, errA := semver.NewVersion(current.Tag)
	b, errB := semver.NewVersion(written.Tag)
	return errA == nil && errB == nil && a.LessThan(b)
}

// sameVersion: equal, or the same tag where one side knows no digest.
func sameVersion(a, b imageref.Version) bool {
	return a == b || a.Tag != "" && a.Tag == b.Tag && (a.Digest == "" || b.Digest == "")
}

// Record is the Record of a writeback.Change to app (see
// writeback.Change): the gate's state of app once the images changed are
// written, as its annotation, so that the patch of the versions carries
// it and Written saves nothing more. None for an Application whose
// ImageUpdater's status keeps its state.
func (g *Gate) Record(app *application.Application) func(writeback.Result) (annotation, value string) {
	if app.ImageUpdater.Name != "" {
		return nil
	}
	key := keyOf(app)
	return func(res writeback.Result) (string, string) {
		now := g.now()
		g.mu.Lock()
		defer g.mu.Unlock()
		next, changedState := g.applyWrite(g.states[key].clone(), app, res.Changed, commitOf(res), res.Push, now)
		if !changedState {
			return "", ""
		}
		next.normalize("")
		value := next.Encode()
		if value == "" {
			return "", ""
		}
		// Kept for Written, which computes the same state at the same
		// time, and for OnUpdate, should the write land without its
		// answer; the sweep drops what neither took (a failed write).
		g.prepared[key] = preparedRecord{value: value, at: now, app: app, res: res}
		return StateAnnotation, value
	}
}

// preparedRecord is a state Record gave a write to carry, when, and the
// write.
type preparedRecord struct {
	value string
	at    time.Time
	app   *application.Application
	res   writeback.Result
	// adopted: OnUpdate saw the value in the Application before Written
	// was told of the write, and took the write as done.
	adopted bool
}

// Written starts following the versions a write persisted for images
// with a health gate; a version written for an image without one is
// recorded (Written) only to tell a rollback (see Skipped). A write that
// carried the state Record gave (res.Recorded) saved it: nothing more is
// sent.
func (g *Gate) Written(ctx context.Context, app *application.Application, res writeback.Result) {
	key := keyOf(app)
	now := g.now()
	g.mu.Lock()
	p, prepared := g.prepared[key]
	delete(g.prepared, key)
	carried := prepared && res.Recorded != "" && res.Recorded == p.value
	if carried && p.adopted {
		// OnUpdate took it already.
		g.mu.Unlock()
		return
	}
	if carried {
		now = p.at
	}
	st, changed := g.applyWrite(g.states[key], app, res.Changed, commitOf(res), res.Push, now)
	if st != nil {
		g.states[key] = st
	}
	n := g.following()
	owner := types.NamespacedName{}
	follow, saved := false, false
	if st != nil {
		owner = st.owner
		follow = slices.ContainsFunc(st.Records, active)
		if changed && carried && owner.Name == "" {
			// The same state as Record's unless the gate changed it
			// meanwhile (a look judged a record): then it is saved.
			st.normalize("")
			saved = st.Encode() == res.Recorded
			st.dirty = st.dirty && !saved
		}
	}
	if changed && owner.Name != "" {
		g.unsaved[owner] = true
	}
	g.mu.Unlock()
	if !changed {
		return
	}
	g.metrics.following(n)
	if owner.Name == "" && !saved {
		g.save(ctx, key)
	}
	if follow {
		g.poke()
	}
}

// commitOf is the commit of a write the gate follows: none for a pull
// request, whose merge makes another commit.
func commitOf(res writeback.Result) string {
	if res.PullRequest != "" {
		return ""
	}
	return res.Commit
}

// applyWrite records in st (nil for none yet) the versions of changed,
// written at now, and returns st, and whether it changed. The caller
// holds g.mu.
func (g *Gate) applyWrite(st *appState, app *application.Application, changed []writeback.ImageUpdate, commit string, push *writeback.Push, now time.Time) (*appState, bool) {
	modified := false
	for _, c := range changed {
		if st != nil && sameVersion(c.New, c.Old) {
			if r := st.record(c.Key()); r != nil && r.State == api.HealthGateRolledBack {
				// The version held, written where the write-back keeps
				// it: the hold stays.
				continue
			}
		}
		if st == nil {
			st = &appState{}
		}
		st.owner = app.ImageUpdater
		if c.HealthGate == 0 {
			// Not followed; kept to tell a rollback by someone else. A
			// patch of the Application holds the version at once.
			r := api.HealthGateRecord{
				Alias: c.Key(), Image: c.Image.Name(), Version: c.New.String(), PreviousVersion: c.Old.String(),
				State: api.HealthGateWritten, Commit: commit, WrittenAt: metav1.NewTime(now),
				Message: "written; not yet seen in the Application",
			}
			if app.Settings.WriteBack.Method == settings.WriteBackArgoCD {
				t := metav1.NewTime(now)
				r.DeployedAt, r.Message = &t, "written; seen in the Application"
			}
			st.setRecord(r)
			st.setPush(c.Key(), "", nil)
			modified = true
			continue
		}
		st.setRecord(api.HealthGateRecord{
			Alias: c.Key(), Image: c.Image.Name(), Version: c.New.String(), PreviousVersion: c.Old.String(),
			State: api.HealthGatePending, Window: c.HealthGate.String(), Commit: commit,
			HealthBefore: app.Status().Health, WrittenAt: metav1.NewTime(now),
			Message: "written; waiting for Argo CD to deploy it",
		})
		st.setPush(c.Key(), commit, push)
		modified = true
	}
	return st, modified
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

// pendingRevert is a broken version to write back.
type pendingRevert struct {
	revert cycle.Revert
	app    *application.Application
}

// Evaluate judges every version followed from what Argo CD says now,
// writes back those found broken (and those whose write-back failed
// before, once their retry is due), applies health-gate-clear, and saves
// what changed. It returns when it wants to look again.
func (g *Gate) Evaluate(ctx context.Context) time.Time {
	now := g.now()
	next := now.Add(g.poll)
	g.mu.Lock()
	// Only what can change: the versions followed, the saves to retry,
	// the clears asked. The records kept only to tell a rollback (one per
	// Application written) are read by the cycle, not here: looking at
	// them at each write would cost writes × Applications written.
	var keys, kept []types.NamespacedName
	sweep := !now.Before(g.swept.Add(g.poll))
	for k, st := range g.states {
		switch {
		case st.dirty || slices.ContainsFunc(st.Records, active) || g.clears[k]:
			keys = append(keys, k)
		case sweep:
			kept = append(kept, k)
		}
	}
	if sweep {
		g.swept = now
		for k, p := range g.prepared {
			if now.Sub(p.at) > g.poll {
				delete(g.prepared, k)
			}
		}
	}
	for k := range g.clears {
		if g.states[k] == nil {
			keys = append(keys, k)
		}
	}
	g.clears = map[types.NamespacedName]bool{}
	g.mu.Unlock()
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})

	// Each ImageUpdater's status is saved once for all of its
	// Applications that changed in this look.
	owners := g.takeUnsaved()
	for _, key := range kept {
		// Deleted: its records go, from the ImageUpdater's status too.
		if _, ok := g.apps.Get(key.Namespace, key.Name); !ok {
			g.forget(key, owners)
		}
	}

	var reverts []pendingRevert
	for _, key := range keys {
		snap, ok := g.apps.Get(key.Namespace, key.Name)
		var app *application.Application
		if ok {
			var err error
			if app, err = snap.Application(g.referenceOptions()...); err != nil {
				ok = false
			}
		}
		if !ok {
			g.forget(key, owners)
			continue
		}
		rs, when, save, clearValue := g.evaluateApp(ctx, key, app, now)
		reverts = append(reverts, rs...)
		if !when.IsZero() && when.Before(next) {
			next = when
		}
		if save {
			g.saveOrQueue(ctx, key, owners)
		}
		if clearValue != "" && g.mayWrite() == nil {
			if err := g.store.removeClear(ctx, key, clearValue); err != nil {
				g.logger.Warn("cannot remove the health-gate-clear annotation", "application", key, "error", err)
			}
		}
	}
	// Before the write-backs: their skips are saved first.
	g.saveOwners(ctx, owners)
	if len(reverts) > 0 {
		g.revert(ctx, reverts, now)
		for _, r := range reverts {
			if t := g.retryTime(keyOf(r.app), r.revert.Image); !t.IsZero() && t.Before(next) {
				next = t
			}
		}
	}
	g.mu.Lock()
	n := g.following()
	if at := g.statusRetryDue(); !at.IsZero() && at.Before(next) {
		next = at
	}
	g.mu.Unlock()
	g.metrics.following(n)
	return next
}

// evaluateApp judges the followed versions of one Application. It
// returns the versions to write back, when to look again (zero: at the
// poll), whether the state changed, and the health-gate-clear value to
// remove.
func (g *Gate) evaluateApp(ctx context.Context, key types.NamespacedName, app *application.Application, now time.Time) (reverts []pendingRevert, next time.Time, changed bool, clearValue string) {
	status := app.Status()
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.states[key]
	clearValue = app.Annotation(ClearAnnotation)
	if clearValue != "" {
		if st != nil {
			if cleared := st.Clear(clearValue); len(cleared) > 0 {
				changed = true
				g.event(app, corev1.EventTypeNormal, ReasonCleared, fmt.Sprintf("cleared skipped version(s) %s (%s): they may be written again", strings.Join(cleared, ", "), ClearAnnotation))
			}
		}
	}
	if st == nil {
		return nil, time.Time{}, false, clearValue
	}
	changed = changed || st.dirty
	for i := range st.Records {
		r := &st.Records[i]
		switch r.State {
		case api.HealthGatePending:
			before := *r
			j := judge(r, status, app.RunningImages, st.pushes[r.Alias], now)
			switch j.verdict {
			case follow:
				r.Message = j.message
				if r.DeployedAt != nil {
					if end := r.DeployedAt.Add(windowOf(*r)); end.After(now) && (next.IsZero() || end.Before(next)) {
						next = end
					}
				}
			case verified, unverified:
				t := metav1.NewTime(now)
				r.Message = j.message
				if j.verdict == verified {
					r.State, r.VerifiedAt = api.HealthGateVerified, &t
					g.metrics.verifiedAfter(now.Sub(r.WrittenAt.Time))
					g.event(app, corev1.EventTypeNormal, ReasonVerified, fmt.Sprintf("image %s: version %s verified: %s", r.Alias, r.Version, j.message))
				} else {
					r.State = api.HealthGateUnverified
					g.event(app, corev1.EventTypeNormal, ReasonUnverified, fmt.Sprintf("image %s: version %s %s", r.Alias, r.Version, j.message))
				}
			case broken:
				t := metav1.NewTime(now)
				r.RevertedAt = &t
				st.skip(r.Alias, r.Version, j.message, now)
				if st.causes == nil {
					st.causes = map[string]string{}
				}
				st.causes[r.Alias] = j.cause
				if r.PreviousVersion == "" {
					// Forced onto an Application that ran no version of it.
					r.State = api.HealthGateSuperseded
					r.Message = j.message + "; skipped; no version ran before it to write back"
					g.metrics.reverted(j.cause)
					g.event(app, corev1.EventTypeWarning, ReasonSkipped, fmt.Sprintf("image %s: version %s broke the Application (%s); it is skipped, and no version ran before it to write back", r.Alias, r.Version, j.message))
					break
				}
				r.State = api.HealthGateReverting
				r.Message = j.message + "; writing back " + r.PreviousVersion
				reverts = append(reverts, g.revertOf(key, app, r))
			}
			changed = changed || !sameRecord(before, *r)
			if r.State != api.HealthGatePending {
				delete(st.pushes, r.Alias)
			}
		case api.HealthGateReverting:
			if at := st.retryAt[r.Alias]; !at.After(now) {
				reverts = append(reverts, g.revertOf(key, app, r))
			} else if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return reverts, next, changed, clearValue
}

func (g *Gate) revertOf(key types.NamespacedName, app *application.Application, r *api.HealthGateRecord) pendingRevert {
	return pendingRevert{app: app, revert: cycle.Revert{Namespace: key.Namespace, Name: key.Name, Image: r.Alias,
		From: imageref.ParseVersion(r.Version), To: imageref.ParseVersion(r.PreviousVersion)}}
}

func sameRecord(a, b api.HealthGateRecord) bool {
	return a.State == b.State && a.Message == b.Message && a.DeployedAt.Equal(b.DeployedAt) && a.VerifiedAt.Equal(b.VerifiedAt) && a.RevertedAt.Equal(b.RevertedAt)
}

// revert writes the broken versions back, once their skips are saved,
// and records what became of each.
func (g *Gate) revert(ctx context.Context, reverts []pendingRevert, now time.Time) {
	list := make([]cycle.Revert, len(reverts))
	for i, r := range reverts {
		list[i] = r.revert
	}
	if err := g.mayWrite(); err != nil {
		g.logger.Info("broken versions not written back now", "versions", len(list), "reason", err)
		return
	}
	var results []cycle.RevertResult
	err := safe.Call(func() error {
		results = g.reverter.Revert(ctx, list)
		if len(results) != len(list) {
			return fmt.Errorf("%d results for %d reverts", len(results), len(list))
		}
		return nil
	})
	if err != nil {
		safe.Log(g.logger, "writing back broken versions", err)
		results = make([]cycle.RevertResult, len(list))
		for i := range results {
			results[i].Err = err
		}
	}
	saved := map[types.NamespacedName]bool{}
	for i, res := range results {
		r := reverts[i]
		key := keyOf(r.app)
		g.mu.Lock()
		st := g.states[key]
		var rec *api.HealthGateRecord
		if st != nil {
			rec = st.record(r.revert.Image)
		}
		if rec == nil || rec.State != api.HealthGateReverting || rec.Version != r.revert.From.String() {
			g.mu.Unlock()
			continue
		}
		cause := st.causes[rec.Alias]
		reason := strings.TrimSuffix(rec.Message, "; writing back "+rec.PreviousVersion)
		switch {
		case res.Done:
			rec.State = api.HealthGateReverted
			where := ""
			switch {
			case res.PullRequest != "":
				where = " in " + res.PullRequest
			case res.Commit != "":
				where = " in commit " + shortCommit(res.Commit)
			}
			rec.Message = reason + "; wrote back " + rec.PreviousVersion + where
			delete(st.retryAt, rec.Alias)
			delete(st.failures, rec.Alias)
			g.metrics.reverted(cmp.Or(cause, causeDegraded))
			g.event(r.app, corev1.EventTypeWarning, ReasonReverted, fmt.Sprintf("image %s: version %s broke the Application (%s); wrote back %s%s and skipped %s", rec.Alias, rec.Version, reason, rec.PreviousVersion, where, rec.Version))
			g.logger.Warn("health gate: broken version written back", "application", key, "image", rec.Alias, "version", rec.Version, "to", rec.PreviousVersion, "reason", reason)
		case res.Superseded:
			rec.State = api.HealthGateSuperseded
			rec.Message = reason + "; skipped; not written back: the Application no longer holds it"
			g.metrics.reverted(cmp.Or(cause, causeDegraded))
			g.event(r.app, corev1.EventTypeWarning, ReasonSkipped, fmt.Sprintf("image %s: version %s broke the Application (%s); it is skipped, and was not written back: the Application no longer holds it", rec.Alias, rec.Version, reason))
		default:
			if st.retryAt == nil {
				st.retryAt, st.failures = map[string]time.Time{}, map[string]int{}
			}
			st.failures[rec.Alias]++
			n := st.failures[rec.Alias]
			st.retryAt[rec.Alias] = now.Add(min(10*time.Second<<min(n-1, 5), 5*time.Minute))
			g.metrics.revertFailed()
			if n == 1 {
				g.event(r.app, corev1.EventTypeWarning, ReasonRevertFailed, fmt.Sprintf("image %s: version %s broke the Application (%s); writing back %s failed, and is tried again: %v", rec.Alias, rec.Version, reason, rec.PreviousVersion, res.Err))
			}
			g.logger.Warn("health gate: writing back a broken version failed; it is tried again", "application", key, "image", rec.Alias, "version", rec.Version, "attempt", n, "error", res.Err)
			g.mu.Unlock()
			continue
		}
		g.mu.Unlock()
		saved[key] = true
	}
	// An ImageUpdater's status holds all of its Applications' records:
	// saved once, however many of them changed.
	owners := map[types.NamespacedName]bool{}
	for key := range saved {
		g.saveOrQueue(ctx, key, owners)
	}
	g.saveOwners(ctx, owners)
}

func shortCommit(c string) string { return c[:min(len(c), 12)] }

// retryTime is when the write-back of image of app is tried again; zero
// when none is due.
func (g *Gate) retryTime(key types.NamespacedName, image string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.states[key]; st != nil {
		return st.retryAt[image]
	}
	return time.Time{}
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
