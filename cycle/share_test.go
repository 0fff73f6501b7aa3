package cycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// hostileRegistry holds every request for a repository on host hostile
// until the request's context ends, as a registry that accepts
// connections and never answers; other repositories list tags.
type hostileRegistry struct {
	hostile string
	tags    []string
	// held counts the requests held now; listed, the listings answered.
	held   atomic.Int32
	listed atomic.Int32
	// onTags, when set, runs at the start of each listing.
	onTags func(ref imageref.Reference)
}

func (r *hostileRegistry) Tags(ctx context.Context, ref imageref.Reference, _ credref.Ref) ([]string, error) {
	if r.onTags != nil {
		r.onTags(ref)
	}
	if ref.Registry() == r.hostile {
		r.held.Add(1)
		defer r.held.Add(-1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	r.listed.Add(1)
	return r.tags, nil
}
func (r *hostileRegistry) Metadata(context.Context, imageref.Reference, credref.Ref, []v1.Platform, ...registry.MetadataOption) (registry.ImageMetadata, error) {
	return registry.ImageMetadata{}, errors.New("no metadata here")
}
func (r *hostileRegistry) ForgetTags(imageref.Reference) {}
func (*hostileRegistry) PushTimes(context.Context, imageref.Reference, credref.Ref, []string) (map[string]time.Time, error) {
	return nil, registry.ErrNoPushTimes
}
func (r *hostileRegistry) Endpoint(imageref.Reference) config.Endpoint { return config.Endpoint{} }

// watchingWriter accepts every change, and calls onWrite with each
// Application written first.
type watchingWriter struct {
	onWrite func(app string)
}

func (w *watchingWriter) Write(_ context.Context, changes []writeback.Change) []writeback.Result {
	out := make([]writeback.Result, len(changes))
	for i, c := range changes {
		w.onWrite(c.App.Key())
		out[i] = writeback.Result{Namespace: c.App.Namespace, Name: c.App.Name, Changed: c.Images, Written: true}
	}
	return out
}
func (w *watchingWriter) Refresh(context.Context, string, string, map[string]string) error {
	return nil
}

// recordingObserver keeps the results of the last pass.
type recordingObserver struct {
	mu      sync.Mutex
	results []AppResult
}

func (o *recordingObserver) CycleDone(_ context.Context, _ time.Time, results []AppResult, _ []types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results = results
}

// semverApp is an Application in namespace running each of images at
// v1.0.0, with the semver strategy and argocd write-back.
func semverApp(t testing.TB, namespace, name string, images ...string) *application.Application {
	t.Helper()
	var list, running []string
	annotations := map[string]string{"write-back-method": "argocd"}
	for i, img := range images {
		alias := fmt.Sprintf("i%d", i)
		list = append(list, alias+"="+img)
		running = append(running, img+":v1.0.0")
		annotations[alias+".update-strategy"] = "semver"
	}
	annotations["image-list"] = strings.Join(list, ",")
	obj := appObject(name, annotations, nil, running...)
	obj.SetNamespace(namespace)
	app, err := application.FromUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// Fair share: an Application whose 60 images are on a registry that
// accepts and never answers holds its own images only. Another team's
// Application, in another namespace, gets its slot at once and its new
// version is written while the hostile registry still holds the hostile
// Application's requests, long before they would all have timed out
// (60 / 3 slots x 1 minute); the hostile images then fail together, at
// the Application's timeout, with one error naming it.
func TestFairShareHostileApplication(t *testing.T) {
	const hostile = "hostile.example.com"
	var hostileImages []string
	for i := range 60 {
		hostileImages = append(hostileImages, fmt.Sprintf("%s/img-%02d", hostile, i))
	}
	apps := benchApps{
		semverApp(t, "hostile", "hog", hostileImages...),
		semverApp(t, "team", "web", "good.example.com/web"),
	}
	reg := &hostileRegistry{hostile: hostile, tags: []string{"v1.0.0", "v1.1.0"}}
	start := time.Now()
	written := make(chan int32, 2) // the requests held when team/web was written
	var delay atomic.Int64
	w := &watchingWriter{onWrite: func(app string) {
		if app == "team/web" {
			delay.Store(int64(time.Since(start)))
			written <- reg.held.Load()
		}
	}}
	obs := &recordingObserver{}
	const appTimeout = 4 * time.Second
	u := mustNew(t, apps, reg, w, WithMaxConcurrency(3), WithImageTimeout(time.Minute),
		WithApplicationTimeout(appTimeout), WithObserver(obs))

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a safety net only
	defer cancel()
	done := make(chan Summary, 1)
	go func() { done <- u.RunOnce(ctx) }()
	select {
	case held := <-written:
		// Written while the hostile registry still held requests: before
		// the hostile Application's time was up.
		if held == 0 {
			t.Errorf("team/web was written after the hostile registry let go of every request")
		}
	case sum := <-done:
		t.Fatalf("the cycle ended (%+v) without writing team/web while the hostile registry held its requests", sum)
	}
	sum := <-done
	t.Logf("team/web written %s after the cycle began; the cycle took %s", time.Duration(delay.Load()).Round(time.Millisecond), sum.Duration.Round(time.Millisecond))
	if sum.Updated != 1 || sum.Errors != len(hostileImages) {
		t.Errorf("summary %+v, want 1 updated and %d errors", sum, len(hostileImages))
	}
	var hogErrors []error
	for _, r := range obs.results {
		if r.App.Key() == "hostile/hog" {
			hogErrors = r.Errors
		}
	}
	want := fmt.Sprintf("Application hostile/hog: gave up after %s, the time allowed for the registry and chart repository requests of one Application: 60 of its 60 images", appTimeout)
	if len(hogErrors) != 1 || !strings.Contains(hogErrors[0].Error(), want) {
		t.Errorf("hostile/hog's errors %q, want one saying %q", hogErrors, want)
	}
	if n := reg.held.Load(); n != 0 {
		t.Errorf("%d requests still held after the cycle", n)
	}
}

// Liveness measures progress: a cycle far longer than the stall limit is
// not stalled while images are checked, and is once nothing is checked
// for longer than the limit.
func TestStalledMeasuresProgress(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	var images []string
	for i := range 10 {
		images = append(images, fmt.Sprintf("registry.example.com/img-%d", i))
	}
	images = append(images, "stuck.example.com/img")
	const limit = time.Minute
	var stalledWhileProgressing, stalledWhileStuck atomic.Int32
	reg := &hostileRegistry{tags: []string{"v1.0.0"}}
	var u *Updater
	reg.onTags = func(ref imageref.Reference) {
		if ref.Registry() == "stuck.example.com" {
			// Nothing else is checked meanwhile: one slot.
			advance(2 * limit)
			if u.Stalled(limit) {
				stalledWhileStuck.Add(1)
			}
			return
		}
		advance(limit * 2 / 3)
		if u.Stalled(limit) {
			stalledWhileProgressing.Add(1)
		}
	}
	cycled := make(chan struct{}, 1)
	u = mustNew(t, benchApps{semverApp(t, "team", "web", images...)}, reg, &benchWriter{},
		WithMaxConcurrency(1), withClock(clock), WithObserver(observerFunc(func() {
			select {
			case cycled <- struct{}{}:
			default:
			}
		})))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { u.Run(ctx, time.Hour); close(done) }()
	<-cycled
	cancel()
	<-done
	if n := stalledWhileProgressing.Load(); n != 0 {
		t.Errorf("stalled in %d of 10 listings of a cycle that checks an image every %s (limit %s)", n, limit*2/3, limit)
	}
	if stalledWhileStuck.Load() != 1 {
		t.Errorf("not stalled while nothing was checked for %s (limit %s)", 2*limit, limit)
	}
	if u.Stalled(limit) {
		t.Error("stalled with no pass under way")
	}
}

type observerFunc func()

func (f observerFunc) CycleDone(context.Context, time.Time, []AppResult, []types.NamespacedName) { f() }

// The slots go round-robin across namespaces, then across the
// Applications of a namespace, each within its share while the others
// have work left; an Application's share grows as they leave.
func TestSlotsFair(t *testing.T) {
	ctx := t.Context()
	s := newSlots(4)
	hog := s.join(ctx, "a", nil)
	hog2 := s.join(ctx, "a", nil)
	team := s.join(ctx, "b", nil)
	// Each task holds its slot until its Application is let go.
	running := make(chan string, 20)
	let := map[*appSlots]chan struct{}{hog: make(chan struct{}), hog2: make(chan struct{}), team: make(chan struct{})}
	hold := func(a *appSlots, name string) {
		a.submit(&task{run: func() { running <- name; <-let[a] }})
	}
	// hog asks for 10 slots at once: it gets its share of namespace a's
	// (2 of 4, split with hog2: 1), leaving the rest for others.
	for range 10 {
		hold(hog, "hog")
	}
	if got := <-running; got != "hog" {
		t.Fatalf("first to run: %s", got)
	}
	hold(team, "team")
	hold(team, "team")
	hold(hog2, "hog2")
	got := map[string]int{}
	for range 3 {
		got[<-running]++
	}
	if want := map[string]int{"team": 2, "hog2": 1}; !maps.Equal(got, want) {
		t.Errorf("ran next: %v, want %v", got, want)
	}
	// Every slot is out: 1 hog, 1 hog2, 2 team.
	s.mu.Lock()
	held := [3]int{hog.held, hog2.held, team.held}
	s.mu.Unlock()
	if held != [3]int{1, 1, 2} {
		t.Errorf("held by hog, hog2, team: %v, want [1 1 2]", held)
	}
	// The others leave: hog's share grows to every slot.
	close(let[team])
	close(let[hog2])
	team.leave()
	hog2.leave()
	for range 3 {
		if got := <-running; got != "hog" {
			t.Fatalf("ran after the others left: %s", got)
		}
	}
	s.mu.Lock()
	if hog.held != 4 {
		t.Errorf("hog holds %d slots alone, want 4", hog.held)
	}
	s.mu.Unlock()
	close(let[hog])
	for range 6 {
		<-running
	}
}

// A task waiting for its turn when its Application's time ends is told
// so, and never runs; a task no longer needed is dropped at its turn
// without taking a slot.
func TestSlotsDropAndSkip(t *testing.T) {
	s := newSlots(1)
	busy := s.join(t.Context(), "a", nil)
	let := make(chan struct{})
	started := make(chan struct{})
	busy.submit(&task{run: func() { close(started); <-let }})
	<-started

	actx, cancel := context.WithCancelCause(t.Context())
	late := s.join(actx, "b", nil)
	gone := make(chan error, 1)
	late.submit(&task{run: func() { t.Error("ran after its Application's time ended") }, gone: func(err error) { gone <- err }})
	stop := errors.New("out of time")
	cancel(stop)
	if err := <-gone; !errors.Is(err, stop) {
		t.Errorf("gone with %v, want the context's cause", err)
	}
	// Once ended, a new task is told at once.
	late.submit(&task{run: func() { t.Error("ran after its Application's time ended") }, gone: func(err error) { gone <- err }})
	if err := <-gone; !errors.Is(err, stop) {
		t.Errorf("gone with %v, want the context's cause", err)
	}
	late.leave()

	other := s.join(t.Context(), "c", nil)
	ran := make(chan string, 2)
	other.submit(&task{skip: func() bool { return true }, run: func() { ran <- "skipped" }})
	other.submit(&task{run: func() { ran <- "needed" }})
	close(let)
	if got := <-ran; got != "needed" {
		t.Errorf("ran %q, want only the task still needed", got)
	}
	busy.leave()
	other.leave()
}

// Checks of ImageUpdaters (the v1.x line's interval 0) overlap: that of an
// ImageUpdater whose registry never answers does not hold another's.
func TestImageUpdaterChecksOverlap(t *testing.T) {
	const hostile = "hostile.example.com"
	hog := semverApp(t, "hostile", "hog", hostile+"/img")
	hog.ImageUpdater = types.NamespacedName{Namespace: "hostile", Name: "hog"}
	web := semverApp(t, "team", "web", "good.example.com/web")
	web.ImageUpdater = types.NamespacedName{Namespace: "team", Name: "web"}
	reg := &hostileRegistry{hostile: hostile, tags: []string{"v1.0.0", "v1.1.0"}}
	u := mustNew(t, benchApps{hog, web}, reg, &watchingWriter{onWrite: func(string) {}}, WithImageTimeout(time.Minute))

	ctx, cancel := context.WithCancel(t.Context())
	held := make(chan Summary, 1)
	go func() { held <- u.CheckImageUpdaters(ctx, []types.NamespacedName{hog.ImageUpdater}, "test") }()
	poll.True(t, 15*time.Second, "the hostile registry to hold hog's listing", func() bool { return reg.held.Load() > 0 })

	checked := make(chan Summary, 1)
	go func() { checked <- u.CheckImageUpdaters(t.Context(), []types.NamespacedName{web.ImageUpdater}, "test") }()
	select {
	case sum := <-checked:
		if sum.Updated != 1 || sum.Errors != 0 {
			t.Errorf("web's check: %+v, want its image updated", sum)
		}
		if reg.held.Load() == 0 {
			t.Error("web's check ended after the hostile registry let go")
		}
	case <-time.After(30 * time.Second): // a safety net only
		t.Error("web's check waited for hog's")
	}
	cancel()
	<-held
}
