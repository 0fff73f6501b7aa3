package healthgate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

const image = "registry.example.com/team/api"

// apps are Applications as the watcher last saw them.
type apps struct {
	mu    sync.Mutex
	snaps map[types.NamespacedName]*application.Snapshot
	gets  int
}

func (a *apps) Get(namespace, name string) (*application.Snapshot, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gets++
	s, ok := a.snaps[types.NamespacedName{Namespace: namespace, Name: name}]
	return s, ok
}

// set makes the Application name have these annotations (without the
// prefix) and status, and returns it as the cycle reads it.
func (a *apps) set(t *testing.T, name string, annotations map[string]string, status map[string]any) *application.Application {
	t.Helper()
	return a.setSource(t, name, annotations, map[string]any{}, status)
}

// setSource is set with the source's Kustomize block.
func (a *apps) setSource(t *testing.T, name string, annotations map[string]string, kustomize map[string]any, status map[string]any) *application.Application {
	t.Helper()
	ann := map[string]any{}
	for k, v := range annotations {
		ann[settings.AnnotationPrefix+k] = v
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": "argocd", "annotations": ann},
		"spec":     map[string]any{"source": map[string]any{"repoURL": "https://git.example.com/r.git", "path": "p", "kustomize": kustomize}},
		"status":   status,
	}}
	s := application.SnapshotOf(obj)
	a.mu.Lock()
	if a.snaps == nil {
		a.snaps = map[types.NamespacedName]*application.Snapshot{}
	}
	a.snaps[types.NamespacedName{Namespace: "argocd", Name: name}] = s
	a.mu.Unlock()
	app, err := s.Application()
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// snapshot is the Application name as the watcher holds it.
func (a *apps) snapshot(t *testing.T, name string) *application.Snapshot {
	t.Helper()
	s, ok := a.Get("argocd", name)
	if !ok {
		t.Fatalf("no Application %s", name)
	}
	return s
}

// argo is what Argo CD says: health, the images that run, the last sync,
// reconciled at reconciledAt, when the rig's writes are.
func argo(health string, running string, op map[string]any) map[string]any {
	st := map[string]any{"summary": map[string]any{"images": []any{image + ":" + running}}, "reconciledAt": reconciledAt}
	if health != "" {
		st["health"] = map[string]any{"status": health}
	}
	if op != nil {
		st["operationState"] = op
	}
	return st
}

// memStore keeps what the gate saves, and what it did in order.
type memStore struct {
	mu          sync.Mutex
	annotations map[types.NamespacedName]string
	status      map[types.NamespacedName][2]any
	log         *[]string
	fail        error
}

func (m *memStore) saveAnnotation(_ context.Context, app types.NamespacedName, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.annotations[app] = value
	*m.log = append(*m.log, "save "+app.Name)
	return nil
}

func (m *memStore) saveStatus(_ context.Context, iu types.NamespacedName, records []api.HealthGateRecord, skipped []api.SkippedVersion) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status[iu] = [2]any{records, skipped}
	*m.log = append(*m.log, "status "+iu.Name)
	return nil
}

func (m *memStore) removeClear(_ context.Context, app types.NamespacedName, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	*m.log = append(*m.log, "unclear "+app.Name+" "+value)
	return nil
}

// reverter writes back what it is given, answering with result.
type reverter struct {
	log    *[]string
	result func(cycle.Revert) cycle.RevertResult
	got    []cycle.Revert
}

func (r *reverter) Revert(_ context.Context, reverts []cycle.Revert) []cycle.RevertResult {
	out := make([]cycle.RevertResult, len(reverts))
	for i, rv := range reverts {
		*r.log = append(*r.log, fmt.Sprintf("revert %s %s %s->%s", rv.Name, rv.Image, rv.From, rv.To))
		r.got = append(r.got, rv)
		out[i] = cycle.RevertResult{Done: true, Written: true}
		if r.result != nil {
			out[i] = r.result(rv)
		}
	}
	return out
}

// rig is a Gate with its Applications, store, reverter, clock, events and
// metrics.
type rig struct {
	gate   *Gate
	apps   *apps
	store  *memStore
	rev    *reverter
	events *record.FakeRecorder
	reg    *prometheus.Registry
	log    []string
	now    time.Time
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{apps: &apps{}, events: record.NewFakeRecorder(100), reg: prometheus.NewRegistry(), now: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	r.store = &memStore{annotations: map[types.NamespacedName]string{}, status: map[types.NamespacedName][2]any{}, log: &r.log}
	r.rev = &reverter{log: &r.log}
	m, err := NewMetrics(r.reg)
	if err != nil {
		t.Fatal(err)
	}
	r.gate = New(r.apps, r.rev, nil, withStore(r.store), withClock(func() time.Time { return r.now }), WithEvents(r.events), WithMetrics(m))
	return r
}

// written tells the gate the cycle wrote version over old for app's
// image "app".
func (r *rig) written(t *testing.T, app *application.Application, old, version, commit string) {
	t.Helper()
	spec := app.Settings.Images[0]
	r.gate.Written(t.Context(), app, writeback.Result{Namespace: app.Namespace, Name: app.Name, Written: true, Commit: commit,
		Changed: []writeback.ImageUpdate{{ImageSpec: spec, Old: imageref.ParseVersion(old), New: imageref.ParseVersion(version)}}})
}

func (r *rig) record(t *testing.T, name string) api.HealthGateRecord {
	t.Helper()
	st, err := ParseState(r.store.annotations[types.NamespacedName{Namespace: "argocd", Name: name}])
	if err != nil || len(st.Records) != 1 {
		t.Fatalf("saved state of %s: %+v, %v", name, st, err)
	}
	return st.Records[0]
}

func (r *rig) takeEvents() []string {
	var out []string
	for {
		select {
		case e := <-r.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// reconciledAt is when Argo CD last compared the Applications of argo:
// the start of newRig's clock.
const reconciledAt = "2026-03-01T10:00:00Z"

var gated = map[string]string{"image-list": "app=" + image, "app.health-gate": "1m"}

// TestGateVerifies: a version written is followed from when Argo CD runs
// it; Healthy at the end of its window, it is verified, with the time from
// the write in the metrics.
func TestGateVerifies(t *testing.T) {
	r := newRig(t)
	app := r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	r.written(t, app, "1.0.0", "1.1.0", "")
	rec := r.record(t, "shop")
	if rec.State != api.HealthGatePending || rec.Version != "1.1.0" || rec.PreviousVersion != "1.0.0" || rec.HealthBefore != "Healthy" || rec.Window != "1m0s" || rec.Image != image {
		t.Fatalf("record %+v", rec)
	}
	r.now = r.now.Add(20 * time.Second)
	r.gate.Evaluate(t.Context())
	if rec := r.record(t, "shop"); rec.DeployedAt != nil || rec.State != api.HealthGatePending {
		t.Fatalf("deployed before Argo CD ran it: %+v", rec)
	}
	r.now = r.now.Add(10 * time.Second)
	r.apps.set(t, "shop", gated, argo("Progressing", "1.1.0", nil))
	next := r.gate.Evaluate(t.Context())
	if rec := r.record(t, "shop"); rec.DeployedAt == nil || !rec.DeployedAt.Time.Equal(r.now) || !strings.Contains(rec.Message, "followed until 2026-03-01T10:01:30Z") {
		t.Fatalf("record once deployed: %+v", rec)
	}
	if !next.Equal(r.now.Add(30 * time.Second)) {
		t.Errorf("next look at %v, want at the poll, before the window's end", next)
	}
	r.now = r.now.Add(time.Minute)
	r.apps.set(t, "shop", gated, argo("Healthy", "1.1.0", nil))
	r.gate.Evaluate(t.Context())
	rec = r.record(t, "shop")
	if rec.State != api.HealthGateVerified || rec.VerifiedAt == nil || !rec.VerifiedAt.Time.Equal(r.now) {
		t.Fatalf("record at the window's end: %+v", rec)
	}
	if ev := r.takeEvents(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal HealthGateVerified image app: version 1.1.0 verified") {
		t.Errorf("events %q", ev)
	}
	if got := testutil.ToFloat64(r.gate.metrics.verified); got != 1 {
		t.Errorf("verified %v", got)
	}
	if n := testutil.CollectAndCount(r.gate.metrics.toVerified); n != 1 {
		t.Errorf("%d histograms", n)
	}
	if len(r.rev.got) != 0 {
		t.Errorf("reverted %v", r.rev.got)
	}
}

// TestGateReadsAsTheCycle: the gate reads Applications with the cycle's
// reference options, so the settings the cycle parsed stay parsed.
func TestGateReadsAsTheCycle(t *testing.T) {
	opts := []imageref.Option{imageref.WithDefaultRegistry("registry.example.com")}
	r := newRig(t)
	r.gate.refOpts = func() []imageref.Option { return opts }
	r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	snap, _ := r.apps.Get("argocd", "shop")
	app, err := snap.Application(opts...)
	if err != nil {
		t.Fatal(err)
	}
	r.written(t, app, "1.0.0", "1.1.0", "")
	r.gate.Evaluate(t.Context())
	again, err := snap.Application(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if &again.Settings.Images[0] != &app.Settings.Images[0] {
		t.Error("the settings were parsed again after the gate read the Application")
	}
}

// TestGateLooksAtFollowedOnly: the records kept of every write only to
// tell a rollback neither wake the gate nor are read at each look (only
// once a poll interval, to forget the Applications deleted); the versions
// followed are.
func TestGateLooksAtFollowedOnly(t *testing.T) {
	r := newRig(t)
	plain := map[string]string{"image-list": "app=" + image}
	for i := range 50 {
		app := r.apps.set(t, fmt.Sprintf("plain-%02d", i), plain, argo("Healthy", "1.0.0", nil))
		r.written(t, app, "1.0.0", "1.1.0", "")
	}
	if len(r.gate.wake) != 0 {
		t.Error("a write the gate does not follow woke it")
	}
	// Once a poll interval, the look tells whether those Applications
	// are still there, and forgets those deleted.
	r.apps.mu.Lock()
	delete(r.apps.snaps, types.NamespacedName{Namespace: "argocd", Name: "plain-00"})
	r.apps.mu.Unlock()
	r.gate.Evaluate(t.Context())
	if r.apps.gets != 50 || r.gate.states[types.NamespacedName{Namespace: "argocd", Name: "plain-00"}] != nil || len(r.gate.states) != 49 {
		t.Errorf("the sweep read %d Applications and kept %d states, want 50 read and the deleted one forgotten", r.apps.gets, len(r.gate.states))
	}

	app := r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	r.written(t, app, "1.0.0", "1.1.0", "")
	if len(r.gate.wake) != 1 {
		t.Error("a write the gate follows did not wake it")
	}
	r.apps.gets = 0
	r.gate.Evaluate(t.Context())
	if r.apps.gets != 1 {
		t.Errorf("a look within the poll interval read %d Applications, want the 1 followed", r.apps.gets)
	}
	r.now = r.now.Add(DefaultPollInterval)
	r.apps.gets = 0
	r.gate.Evaluate(t.Context())
	if r.apps.gets != 50 {
		t.Errorf("a look a poll interval later read %d Applications, want the 1 followed and the 49 kept", r.apps.gets)
	}
}

// TestGateReverts: a version that breaks the Application is skipped,
// durably, before it is written back; the Warning event names the
// version, what Argo CD said and the revert; the metric counts it by
// cause.
func TestGateReverts(t *testing.T) {
	written := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	failedSync := map[string]any{"phase": "Failed", "message": "one or more objects failed to apply: admission webhook denied", "startedAt": written.Add(2 * time.Second).Format(time.RFC3339)}
	oldFailedSync := map[string]any{"phase": "Failed", "message": "old", "startedAt": written.Add(-time.Minute).Format(time.RFC3339)}
	retried := map[string]any{"phase": "Running", "retryCount": int64(1), "message": "quota exceeded. Retrying attempt #1 at 10:01AM.", "startedAt": written.Add(2 * time.Second).Format(time.RFC3339)}
	otherCommit := map[string]any{"phase": "Error", "message": "x", "startedAt": written.Add(2 * time.Second).Format(time.RFC3339), "syncResult": map[string]any{"revision": "feed"}}
	degraded := argo("Degraded", "1.1.0", nil)
	degraded["resources"] = []any{map[string]any{"kind": "Deployment", "namespace": "shop", "name": "front", "health": map[string]any{"status": "Degraded", "message": "image 1.1.0 crashes on start"}}}
	tests := []struct {
		name   string
		before string // health when written
		commit string
		after  map[string]any
		cause  string // "" for no revert
		says   string
	}{
		{name: "Degraded once deployed", before: "Healthy", after: degraded, cause: causeDegraded,
			says: "the Application became Degraded once 1.1.0 was deployed: Deployment shop/front: image 1.1.0 crashes on start"},
		{name: "Degraded from Progressing", before: "Progressing", after: argo("Degraded", "1.1.0", nil), cause: causeDegraded, says: "became Degraded"},
		{name: "Degraded before the write: not judged by health", before: "Degraded", after: argo("Degraded", "1.1.0", nil)},
		{name: "Degraded, the version not running yet", before: "Healthy", after: argo("Degraded", "1.0.0", nil)},
		{name: "a failed sync after the write", before: "Healthy", after: argo("Healthy", "1.0.0", failedSync), cause: causeSyncFailed,
			says: "the sync of 1.1.0 failed: one or more objects failed to apply: admission webhook denied"},
		{name: "a failed attempt Argo CD retries", before: "Healthy", after: argo("Healthy", "1.0.0", retried), cause: causeSyncFailed, says: "the sync of 1.1.0 failed: quota exceeded"},
		{name: "a failed sync reverts where it was Degraded before", before: "Degraded", after: argo("Degraded", "1.0.0", failedSync), cause: causeSyncFailed, says: "the sync of 1.1.0 failed"},
		{name: "a failed sync from before the write", before: "Healthy", after: argo("Healthy", "1.0.0", oldFailedSync)},
		{name: "a failed sync of another commit", before: "Healthy", commit: "beef", after: argo("Healthy", "1.0.0", otherCommit)},
		{name: "a failed sync of the commit", before: "Healthy", commit: "feed", after: argo("Healthy", "1.0.0", otherCommit), cause: causeSyncFailed, says: "the sync of 1.1.0 failed: x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			app := r.apps.set(t, "shop", gated, argo(tt.before, "1.0.0", nil))
			r.written(t, app, "1.0.0", "1.1.0", tt.commit)
			r.now = r.now.Add(5 * time.Second)
			r.apps.set(t, "shop", gated, tt.after)
			r.log = nil
			r.gate.Evaluate(t.Context())
			rec := r.record(t, "shop")
			skipped := r.gate.Skipped(t.Context(), app, "app", imageref.Version{}).Versions
			if tt.cause == "" {
				if rec.State != api.HealthGatePending || len(r.rev.got) != 0 || len(skipped) != 0 {
					t.Fatalf("judged: %+v, reverts %v, skipped %v", rec, r.rev.got, skipped)
				}
				return
			}
			if want := []string{"save shop", "revert shop app 1.1.0->1.0.0", "save shop"}; !slices.Equal(r.log, want) {
				t.Errorf("did %q, want %q: the skip saved before the write-back", r.log, want)
			}
			if rec.State != api.HealthGateReverted || rec.RevertedAt == nil || !strings.Contains(rec.Message, tt.says) || !strings.HasSuffix(rec.Message, "; wrote back 1.0.0") {
				t.Errorf("record %+v", rec)
			}
			if strings.Contains(rec.Message, "Retrying") {
				t.Errorf("message %q says when Argo CD retries", rec.Message)
			}
			if !slices.Equal(skipped, []imageref.Version{{Tag: "1.1.0"}}) {
				t.Errorf("skipped %v", skipped)
			}
			ev := r.takeEvents()
			if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning HealthGateReverted image app: version 1.1.0 broke the Application (") ||
				!strings.Contains(ev[0], tt.says) || !strings.HasSuffix(ev[0], "; wrote back 1.0.0 and skipped 1.1.0") {
				t.Errorf("events %q", ev)
			}
			if got := testutil.ToFloat64(r.gate.metrics.reverts.WithLabelValues(tt.cause)); got != 1 {
				t.Errorf("reverts{cause=%s} = %v", tt.cause, got)
			}
			// Judged once: nothing more to do.
			r.gate.Evaluate(t.Context())
			if len(r.rev.got) != 1 {
				t.Errorf("reverted %d times", len(r.rev.got))
			}
		})
	}
}

// TestGateAlreadyDegraded: where the Application was Degraded before the
// write, its health does not judge the version: Healthy at the window's
// end verifies it, still Degraded keeps it unverified.
func TestGateAlreadyDegraded(t *testing.T) {
	for _, end := range []string{"Degraded", "Healthy", "Progressing"} {
		t.Run(end, func(t *testing.T) {
			r := newRig(t)
			app := r.apps.set(t, "shop", gated, argo("Degraded", "1.0.0", nil))
			r.written(t, app, "1.0.0", "1.1.0", "")
			r.apps.set(t, "shop", gated, argo("Degraded", "1.1.0", nil))
			r.gate.Evaluate(t.Context())
			if rec := r.record(t, "shop"); !strings.Contains(rec.Message, "only a failed sync writes the version back") {
				t.Errorf("message %q", rec.Message)
			}
			r.now = r.now.Add(2 * time.Minute)
			r.apps.set(t, "shop", gated, argo(end, "1.1.0", nil))
			r.gate.Evaluate(t.Context())
			want := map[string]api.HealthGateState{"Degraded": api.HealthGateUnverified, "Healthy": api.HealthGateVerified, "Progressing": api.HealthGatePending}[end]
			if rec := r.record(t, "shop"); rec.State != want || len(r.rev.got) != 0 {
				t.Errorf("record %+v, want %s; reverts %v", rec, want, r.rev.got)
			}
		})
	}
}

// TestGateRevertRetried: a write-back that fails is tried again, later
// each time, with one Warning event; one superseded is not written, and
// the version stays skipped.
func TestGateRevertRetried(t *testing.T) {
	r := newRig(t)
	app := r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	r.written(t, app, "1.0.0", "1.1.0", "")
	r.apps.set(t, "shop", gated, argo("Degraded", "1.1.0", nil))
	attempts := 0
	r.rev.result = func(cycle.Revert) cycle.RevertResult {
		attempts++
		if attempts < 3 {
			return cycle.RevertResult{Err: errors.New("git push: connection refused")}
		}
		return cycle.RevertResult{Superseded: true}
	}
	next := r.gate.Evaluate(t.Context())
	if rec := r.record(t, "shop"); rec.State != api.HealthGateReverting || !next.Equal(r.now.Add(10*time.Second)) {
		t.Fatalf("record %+v, next %v", rec, next)
	}
	r.now = r.now.Add(5 * time.Second)
	r.gate.Evaluate(t.Context())
	if attempts != 1 {
		t.Fatalf("tried again before its time: %d attempts", attempts)
	}
	r.now = r.now.Add(5 * time.Second)
	if next := r.gate.Evaluate(t.Context()); attempts != 2 || !next.Equal(r.now.Add(20*time.Second)) {
		t.Fatalf("%d attempts, next %v", attempts, next)
	}
	r.now = r.now.Add(20 * time.Second)
	r.gate.Evaluate(t.Context())
	rec := r.record(t, "shop")
	if attempts != 3 || rec.State != api.HealthGateSuperseded || !strings.Contains(rec.Message, "not written back") {
		t.Errorf("%d attempts, record %+v", attempts, rec)
	}
	ev := r.takeEvents()
	if len(ev) != 2 || !strings.HasPrefix(ev[0], "Warning HealthGateRevertFailed") || !strings.Contains(ev[0], "connection refused") || !strings.HasPrefix(ev[1], "Warning HealthGateSkipped") {
		t.Errorf("events %q", ev)
	}
	if got := r.gate.Skipped(t.Context(), app, "app", imageref.Version{}).Versions; len(got) != 1 {
		t.Errorf("skipped %v", got)
	}
	if got := testutil.ToFloat64(r.gate.metrics.revertErrors); got != 2 {
		t.Errorf("revert errors %v", got)
	}
}

// TestGateResumes: what one controller saved, the next reads back: a
// version followed is judged by its window from when it was deployed, a
// write-back under way is done, and skips hold. The ImageUpdater's status
// keeps each entry under its Application's name.
func TestGateResumes(t *testing.T) {
	first := newRig(t)
	shop := first.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	first.written(t, shop, "1.0.0", "1.1.0", "")
	first.apps.set(t, "shop", gated, argo("Healthy", "1.1.0", nil))
	first.gate.Evaluate(t.Context())
	cart := first.apps.set(t, "cart", gated, argo("Healthy", "2.0.0", nil))
	cart.ImageUpdater = types.NamespacedName{Namespace: "argocd", Name: "iu"}
	first.written(t, cart, "2.0.0", "2.1.0", "")
	first.apps.set(t, "cart", gated, argo("Degraded", "2.1.0", nil))
	first.rev.result = func(cycle.Revert) cycle.RevertResult { return cycle.RevertResult{Err: errors.New("stopping")} }
	first.gate.Evaluate(t.Context())

	saved := first.store.status[types.NamespacedName{Namespace: "argocd", Name: "iu"}]
	records, skipped := saved[0].([]api.HealthGateRecord), saved[1].([]api.SkippedVersion)
	if len(records) != 1 || records[0].Application != "cart" || records[0].State != api.HealthGateReverting || len(skipped) != 1 || skipped[0].Application != "cart" || skipped[0].Version != "2.1.0" {
		t.Fatalf("status %+v %+v", records, skipped)
	}

	second := newRig(t)
	second.now = first.now.Add(45 * time.Second)
	shop2 := second.apps.set(t, "shop", map[string]string{"image-list": gated["image-list"], "app.health-gate": "1m", "health-gate-state": first.store.annotations[types.NamespacedName{Namespace: "argocd", Name: "shop"}]}, argo("Healthy", "1.1.0", nil))
	cart2 := second.apps.set(t, "cart", nil, argo("Degraded", "2.1.0", nil))
	cart2.ImageUpdater = types.NamespacedName{Namespace: "argocd", Name: "iu"}
	iu := &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "iu"}, Status: api.ImageUpdaterStatus{HealthGate: records, SkippedVersions: skipped}}
	second.gate.Load([]*application.Application{shop2, cart2}, []*api.ImageUpdater{iu})
	if got := second.gate.Skipped(t.Context(), cart2, "app", imageref.Version{}).Versions; !slices.Equal(got, []imageref.Version{{Tag: "2.1.0"}}) {
		t.Errorf("skipped after the restart %v", got)
	}
	second.gate.Evaluate(t.Context())
	second.gate.mu.Lock()
	rec := *second.gate.states[keyOf(shop2)].record("app")
	second.gate.mu.Unlock()
	if rec.State != api.HealthGatePending || !rec.DeployedAt.Equal(shop2Deployed(t, first)) {
		t.Errorf("verified before its window's end, or deployed anew: %+v", rec)
	}
	if want := []string{"revert cart app 2.1.0->2.0.0", "status iu"}; !slices.Equal(second.log, want) {
		t.Errorf("did %q, want %q", second.log, want)
	}
	second.now = second.now.Add(20 * time.Second)
	second.gate.Evaluate(t.Context())
	if rec := second.record(t, "shop"); rec.State != api.HealthGateVerified {
		t.Errorf("not verified after its window: %+v", rec)
	}
}

func shop2Deployed(t *testing.T, first *rig) *metav1.Time {
	t.Helper()
	return first.record(t, "shop").DeployedAt
}

// TestGateClear: health-gate-clear removes the skips it names, and is
// removed; on an Application without skips, it is removed too.
func TestGateClear(t *testing.T) {
	r := newRig(t)
	app := r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	r.gate.mu.Lock()
	st := &appState{}
	st.skip("app", "1.1.0", "broke", r.now)
	st.skip("app", "1.2.0", "broke", r.now)
	st.skip("web", "1.2.0", "broke", r.now)
	r.gate.states[keyOf(app)] = st
	r.gate.mu.Unlock()
	with := map[string]string{"image-list": gated["image-list"], "health-gate-clear": "app:1.2.0, 1.1.0"}
	app = r.apps.set(t, "shop", with, argo("Healthy", "1.0.0", nil))
	r.gate.OnUpdate(r.apps.snapshot(t, "shop"))
	r.gate.Evaluate(t.Context())
	if got := r.gate.Skipped(t.Context(), app, "app", imageref.Version{}).Versions; len(got) != 0 {
		t.Errorf("app still skips %v", got)
	}
	if got := r.gate.Skipped(t.Context(), app, "web", imageref.Version{}).Versions; len(got) != 1 {
		t.Errorf("web skips %v", got)
	}
	if want := []string{"save shop", "unclear shop app:1.2.0, 1.1.0"}; !slices.Equal(r.log, want) {
		t.Errorf("did %q, want %q", r.log, want)
	}
	if ev := r.takeEvents(); len(ev) != 1 || !strings.Contains(ev[0], "cleared skipped version(s) app:1.1.0, app:1.2.0") {
		t.Errorf("events %q", ev)
	}

	r.log = nil
	r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	other := r.apps.set(t, "other", map[string]string{"image-list": "nginx", "health-gate-clear": "all"}, nil)
	s, _ := r.apps.Get("argocd", "other")
	r.gate.OnUpdate(s)
	r.gate.Evaluate(t.Context())
	if want := []string{"unclear other all"}; !slices.Equal(r.log, want) {
		t.Errorf("did %q, want %q", r.log, want)
	}
	_ = other
}

// TestGateWriteRefused: while writes are refused (not the leader, or
// stopping), nothing is saved or written back; it is done once allowed.
func TestGateWriteRefused(t *testing.T) {
	r := newRig(t)
	refused := errors.New("this replica does not hold the leader Lease")
	var gateErr error = refused
	r.gate.writeGate = func() error { return gateErr }
	app := r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	r.written(t, app, "1.0.0", "1.1.0", "")
	r.apps.set(t, "shop", gated, argo("Degraded", "1.1.0", nil))
	r.gate.Evaluate(t.Context())
	if len(r.log) != 0 {
		t.Fatalf("did %q while refused", r.log)
	}
	gateErr = nil
	r.gate.Evaluate(t.Context())
	if want := []string{"save shop", "revert shop app 1.1.0->1.0.0", "save shop"}; !slices.Equal(r.log, want) {
		t.Errorf("did %q, want %q", r.log, want)
	}
}

// TestGateOffEndsFollowing: a version written without a gate ends what
// was followed for the image, and is only recorded (Written) to tell a
// rollback; other images keep theirs.
func TestGateOffEndsFollowing(t *testing.T) {
	r := newRig(t)
	app := r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	r.written(t, app, "1.0.0", "1.1.0", "")
	off := r.apps.set(t, "shop", map[string]string{"image-list": "app=" + image}, argo("Healthy", "1.1.0", nil))
	r.written(t, off, "1.1.0", "1.2.0", "")
	if rec := r.record(t, "shop"); rec.State != api.HealthGateWritten || rec.Version != "1.2.0" {
		t.Errorf("record %+v, want 1.2.0 Written", rec)
	}
	r.gate.mu.Lock()
	n := r.gate.following()
	r.gate.mu.Unlock()
	if n != 0 {
		t.Errorf("following %d, want 0", n)
	}
}

// TestRollbackHold: a version the updater wrote, seen in its Application,
// then replaced by an older one by someone else is skipped from then on,
// with an ImageHeld event; a version not yet seen (a commit Argo CD has
// not synced), a newer or unrelated one, and rollback-hold "false" hold
// nothing.
func TestRollbackHold(t *testing.T) {
	plain := map[string]string{"image-list": "app=" + image}
	git := map[string]string{"image-list": "app=" + image, "write-back-method": "git"}
	off := map[string]string{"image-list": "app=" + image, "rollback-hold": "false"}
	tests := []struct {
		name        string
		annotations map[string]string
		seenFirst   bool   // the cycle saw 1.1.0 in the Application first
		current     string // then what the Application holds
		holdOff     bool   // the ImageUpdater's rollbackHold is false
		held        bool
	}{
		{name: "argocd: the version before", annotations: plain, current: "1.0.0", held: true},
		{name: "argocd: an older version", annotations: plain, current: "0.9.0", held: true},
		{name: "argocd: still the version written", annotations: plain, current: "1.1.0"},
		{name: "argocd: a newer version", annotations: plain, current: "1.2.0"},
		{name: "argocd: a version not comparable", annotations: plain, current: "latest"},
		{name: "argocd: the same tag by digest", annotations: plain, current: "1.1.0@sha256:aa"},
		{name: "git: not yet synced by Argo CD", annotations: git, current: "1.0.0"},
		{name: "git: reverted once synced", annotations: git, seenFirst: true, current: "1.0.0", held: true},
		{name: "rollback-hold false", annotations: off, current: "1.0.0"},
		{name: "the ImageUpdater's rollbackHold false", annotations: plain, holdOff: true, current: "1.0.0"},
		{name: "gated: not yet deployed", annotations: gated, current: "1.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			app := r.apps.set(t, "shop", tt.annotations, argo("Healthy", "1.0.0", nil))
			app.Settings.RollbackHoldOff = tt.holdOff
			r.written(t, app, "1.0.0", "1.1.0", "c0ffee")
			if tt.seenFirst {
				if got := r.gate.Skipped(t.Context(), app, "app", imageref.Version{Tag: "1.1.0"}).Versions; len(got) != 0 {
					t.Fatalf("skipped %v while it holds what was written", got)
				}
			}
			r.takeEvents()
			var got []imageref.Version
			var heldFrom imageref.Version
			for range 2 { // a later cycle holds as the first
				sk := r.gate.Skipped(t.Context(), app, "app", imageref.ParseVersion(tt.current))
				got, heldFrom = sk.Versions, sk.HeldFrom
			}
			events := r.takeEvents()
			if !tt.held {
				if len(got) != 0 || len(events) != 0 || !heldFrom.IsZero() {
					t.Fatalf("skipped %v, held from %v, events %q; want nothing held", got, heldFrom, events)
				}
				return
			}
			if !slices.Equal(got, []imageref.Version{{Tag: "1.1.0"}}) || heldFrom != (imageref.Version{Tag: "1.1.0"}) {
				t.Fatalf("skipped %v, held from %v, want 1.1.0", got, heldFrom)
			}
			if len(events) != 1 || !strings.Contains(events[0], "Warning ImageHeld image app: version 1.1.0") || !strings.Contains(events[0], "rolled back to "+tt.current) {
				t.Errorf("events %q, want one ImageHeld naming both versions", events)
			}
			rec := r.record(t, "shop")
			if rec.State != api.HealthGateRolledBack || !strings.Contains(rec.Message, "rolled back to "+tt.current) {
				t.Errorf("record %+v", rec)
			}
			st, _ := ParseState(r.store.annotations[types.NamespacedName{Namespace: "argocd", Name: "shop"}])
			if len(st.Skipped) != 1 || !strings.Contains(st.Skipped[0].Reason, "rolled back to") {
				t.Errorf("saved skips %+v", st.Skipped)
			}
		})
	}
}

// TestRollbackHoldLifted: health-gate-clear lifts a hold; the version is
// chosen again and not held again while the Application holds what the
// person chose.
func TestRollbackHoldLifted(t *testing.T) {
	r := newRig(t)
	plain := map[string]string{"image-list": "app=" + image}
	app := r.apps.set(t, "shop", plain, argo("Healthy", "1.0.0", nil))
	r.written(t, app, "1.0.0", "1.1.0", "")
	if got := r.gate.Skipped(t.Context(), app, "app", imageref.Version{Tag: "1.0.0"}).Versions; len(got) != 1 {
		t.Fatalf("skipped %v, want 1.1.0 held", got)
	}
	r.apps.set(t, "shop", map[string]string{"image-list": "app=" + image, "health-gate-clear": "app:1.1.0"}, argo("Healthy", "1.0.0", nil))
	r.gate.OnUpdate(r.apps.snapshot(t, "shop"))
	r.gate.Evaluate(t.Context())
	if got := r.gate.Skipped(t.Context(), app, "app", imageref.Version{Tag: "1.0.0"}).Versions; len(got) != 0 {
		t.Fatalf("skipped %v after the hold was lifted", got)
	}
	if !slices.Contains(r.log, "unclear shop app:1.1.0") {
		t.Errorf("did %q, want the clear annotation removed", r.log)
	}
}

// TestRollbackHoldArgoCD: Argo CD's rollback (a person's sync of an
// earlier history entry's source, the spec left holding the version the
// updater wrote) holds the image at the version it deployed, which the
// cycle is asked to write into the spec until the spec holds it; a sync
// that started before the write, Argo CD's automated sync, a sync of a
// newer version and rollback-hold "false" hold nothing.
func TestRollbackHoldArgoCD(t *testing.T) {
	plain := map[string]string{"image-list": "app=" + image}
	off := map[string]string{"image-list": "app=" + image, "rollback-hold": "false"}
	overrides := func(tag string) map[string]any { return map[string]any{"images": []any{image + ":" + tag}} }
	// sync is Argo CD's status after a sync of a source overriding the
	// image with tag, started at the second after the write plus after.
	sync := func(tag string, after time.Duration, automated bool) map[string]any {
		initiator := map[string]any{"username": "admin"}
		if automated {
			initiator = map[string]any{"automated": true}
		}
		started := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(after).Format(time.RFC3339)
		return argo("Healthy", tag, map[string]any{"phase": "Succeeded", "startedAt": started, "operation": map[string]any{
			"initiatedBy": initiator,
			"sync":        map[string]any{"revision": "abc", "source": map[string]any{"repoURL": "https://git.example.com/r.git", "path": "p", "kustomize": overrides(tag)}},
		}})
	}
	tests := []struct {
		name        string
		annotations map[string]string
		status      map[string]any
		held        string // the version held at, "" for none
	}{
		{name: "a rollback to the version before", annotations: plain, status: sync("1.0.0", time.Minute, false), held: "1.0.0"},
		{name: "a rollback to an earlier entry", annotations: plain, status: sync("0.9.0", time.Minute, false), held: "0.9.0"},
		{name: "a rollback in the second of the write", annotations: plain, status: sync("1.0.0", 0, false), held: "1.0.0"},
		{name: "a sync that started before the write", annotations: plain, status: sync("1.0.0", -time.Second, false)},
		{name: "Argo CD's automated sync", annotations: plain, status: sync("1.0.0", time.Minute, true)},
		{name: "a sync of a newer version", annotations: plain, status: sync("1.2.0", time.Minute, false)},
		{name: "rollback-hold false", annotations: off, status: sync("1.0.0", time.Minute, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			app := r.apps.setSource(t, "shop", tt.annotations, overrides("1.0.0"), argo("Healthy", "1.0.0", nil))
			r.written(t, app, "1.0.0", "1.1.0", "")
			r.now = r.now.Add(2 * time.Minute)
			app = r.apps.setSource(t, "shop", tt.annotations, overrides("1.1.0"), tt.status)
			var sk cycle.Skips
			for range 2 { // a later cycle, before the spec holds it, as the first
				sk = r.gate.Skipped(t.Context(), app, "app", imageref.Version{Tag: "1.1.0"})
			}
			events := r.takeEvents()
			if tt.held == "" {
				if len(sk.Versions) != 0 || !sk.HoldAt.IsZero() || len(events) != 0 {
					t.Fatalf("skips %+v, events %q; want nothing held", sk, events)
				}
				return
			}
			if !slices.Equal(sk.Versions, []imageref.Version{{Tag: "1.1.0"}}) || sk.HeldFrom.Tag != "1.1.0" || sk.HoldAt.String() != tt.held {
				t.Fatalf("skips %+v, want 1.1.0 held at %s", sk, tt.held)
			}
			if len(events) != 1 || !strings.Contains(events[0], "Warning ImageHeld image app: version 1.1.0, which the updater wrote, was rolled back to "+tt.held+" by Argo CD's rollback") {
				t.Errorf("events %q, want one ImageHeld", events)
			}
			if rec := r.record(t, "shop"); rec.State != api.HealthGateRolledBack || !strings.Contains(rec.Message, "rolled back to "+tt.held) {
				t.Errorf("record %+v", rec)
			}
			// The cycle writes the version held into the spec: the hold
			// stays, and nothing more is asked.
			r.written(t, app, tt.held, tt.held, "")
			app = r.apps.setSource(t, "shop", tt.annotations, overrides(tt.held), tt.status)
			sk = r.gate.Skipped(t.Context(), app, "app", imageref.ParseVersion(tt.held))
			if !slices.Equal(sk.Versions, []imageref.Version{{Tag: "1.1.0"}}) || sk.HeldFrom.Tag != "1.1.0" || !sk.HoldAt.IsZero() {
				t.Errorf("skips %+v once the spec holds %s", sk, tt.held)
			}
			if rec := r.record(t, "shop"); rec.State != api.HealthGateRolledBack {
				t.Errorf("record %+v after the spec was written", rec)
			}
			if events := r.takeEvents(); len(events) != 0 {
				t.Errorf("events %q", events)
			}
		})
	}
}

// TestWrittenSavesAnImageUpdaterOnce: the records of an ImageUpdater's
// Applications written in one batch are saved in its status once, at the
// batch's Flush, not once per Application (a status of n records written
// n times).
func TestWrittenSavesAnImageUpdaterOnce(t *testing.T) {
	r := newRig(t)
	iu := types.NamespacedName{Namespace: "argocd", Name: "iu"}
	const n = 20
	for i := range n {
		app := r.apps.set(t, fmt.Sprintf("app-%02d", i), map[string]string{"image-list": "app=" + image}, argo("Healthy", "1.0.0", nil))
		app.ImageUpdater = iu
		r.written(t, app, "1.0.0", "1.1.0", "")
	}
	count := func() int {
		r.store.mu.Lock()
		defer r.store.mu.Unlock()
		return strings.Count(strings.Join(r.log, "\n")+"\n", "status iu\n")
	}
	if got := count(); got != 0 {
		t.Fatalf("%d status saves before the batch ended, want 0", got)
	}
	r.gate.Flush(t.Context())
	if got := count(); got != 1 {
		t.Fatalf("%d status saves for a batch of %d, want 1", got, n)
	}
	r.store.mu.Lock()
	records, _ := r.store.status[iu][0].([]api.HealthGateRecord)
	r.store.mu.Unlock()
	if len(records) != n {
		t.Errorf("%d records saved, want %d", len(records), n)
	}
	r.gate.Flush(t.Context())
	if got := count(); got != 1 {
		t.Errorf("%d status saves after a Flush with nothing new, want 1", got)
	}
}

// TestWrittenWithTheRecordCarried: the state Record gives, carried by the
// write itself, is saved: Written sends nothing, and the gate holds what
// the Application now does. A write that carried an older value, or none,
// is followed by a save.
func TestWrittenWithTheRecordCarried(t *testing.T) {
	r := newRig(t)
	app := r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	changed := []writeback.ImageUpdate{{ImageSpec: app.Settings.Images[0], Old: imageref.ParseVersion("1.0.0"), New: imageref.ParseVersion("1.1.0")}}
	key, value := r.gate.Record(app)(writeback.Result{Changed: changed})
	if key != StateAnnotation || value == "" {
		t.Fatalf("Record = %q, %q", key, value)
	}
	st, err := ParseState(value)
	if err != nil || len(st.Records) != 1 || st.Records[0].State != api.HealthGatePending || st.Records[0].Version != "1.1.0" {
		t.Fatalf("Record's state %+v, %v", st, err)
	}
	if len(r.log) != 0 {
		t.Fatalf("Record saved: %v", r.log)
	}
	// The patch takes a while: the clock moves past the second.
	r.now = r.now.Add(1500 * time.Millisecond)
	r.gate.Written(t.Context(), app, writeback.Result{Namespace: app.Namespace, Name: app.Name, Written: true, Changed: changed, Recorded: map[string]string{StateAnnotation: value}})
	if len(r.log) != 0 {
		t.Errorf("saves after a write that carried the record: %v", r.log)
	}
	r.gate.mu.Lock()
	held := r.gate.states[keyOf(app)].Encode()
	r.gate.mu.Unlock()
	if held != value {
		t.Errorf("the gate holds\n%s\nthe Application\n%s", held, value)
	}
	if n := testutil.ToFloat64(r.gate.metrics.pending); n != 1 {
		t.Errorf("following %v, want 1", n)
	}

	// A write whose answer carried no record (git, or an Application
	// without annotations) is saved as before.
	changed[0].Old, changed[0].New = changed[0].New, imageref.ParseVersion("1.2.0")
	r.gate.Record(app)(writeback.Result{Changed: changed})
	r.gate.Written(t.Context(), app, writeback.Result{Namespace: app.Namespace, Name: app.Name, Written: true, Changed: changed})
	if d := cmp.Diff([]string{"save shop"}, r.log); d != "" {
		t.Errorf("saves (-want +got):\n%s", d)
	}
	if rec := r.record(t, "shop"); rec.Version != "1.2.0" {
		t.Errorf("saved %+v", rec)
	}
}

// TestRecordOfAnImageUpdatersApplication: an ImageUpdater's status keeps
// the records of its Applications, so a write carries none.
func TestRecordOfAnImageUpdatersApplication(t *testing.T) {
	r := newRig(t)
	app := r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	app.ImageUpdater = types.NamespacedName{Namespace: "argocd", Name: "iu"}
	if rec := r.gate.Record(app); rec != nil {
		t.Error("a Record for an Application of an ImageUpdater")
	}
}

// TestWriteLandedWithoutItsAnswer: a write whose answer was lost (the
// cycle saw an error, and tells the gate nothing) is followed once the
// Application shows the record it carried; a Written that arrives after
// all saves nothing more.
func TestWriteLandedWithoutItsAnswer(t *testing.T) {
	r := newRig(t)
	app := r.apps.set(t, "shop", gated, argo("Healthy", "1.0.0", nil))
	changed := []writeback.ImageUpdate{{ImageSpec: app.Settings.Images[0], Old: imageref.ParseVersion("1.0.0"), New: imageref.ParseVersion("1.1.0")}}
	res := writeback.Result{Namespace: app.Namespace, Name: app.Name, Written: true, Changed: changed}
	_, value := r.gate.Record(app)(res)

	// Another change of the Application, before the write: nothing taken.
	r.gate.OnUpdate(r.apps.snapshot(t, "shop"))
	if n := testutil.ToFloat64(r.gate.metrics.pending); n != 0 {
		t.Fatalf("following %v before the write landed", n)
	}
	withRecord := map[string]string{"image-list": gated["image-list"], "app.health-gate": gated["app.health-gate"], settings.KeyHealthGateState: value}
	r.apps.set(t, "shop", withRecord, argo("Healthy", "1.0.0", nil))
	r.gate.OnUpdate(r.apps.snapshot(t, "shop"))
	if n := testutil.ToFloat64(r.gate.metrics.pending); n != 1 {
		t.Fatalf("following %v once the Application holds the record, want 1", n)
	}
	r.gate.mu.Lock()
	held := r.gate.states[keyOf(app)].Encode()
	r.gate.mu.Unlock()
	if held != value {
		t.Errorf("the gate holds\n%s\nthe Application\n%s", held, value)
	}
	res.Recorded = map[string]string{StateAnnotation: value}
	r.gate.Written(t.Context(), app, res)
	if len(r.log) != 0 {
		t.Errorf("saves: %v", r.log)
	}
}
