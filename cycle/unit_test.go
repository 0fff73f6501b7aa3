package cycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/strategy"
	"github.com/image-updater/argocd-image-updater/test/poll"
)

func TestOrderedMetadata(t *testing.T) {
	policy, err := strategy.New(strategy.Settings{Strategy: "newest-build", IgnoreTags: []string{"skip-*"}})
	if err != nil {
		t.Fatal(err)
	}
	tags := []string{"build-30", "skip-me", "build-10", "build-20"}
	tests := []struct {
		mode config.TagSortMode
		want string
	}{
		{config.TagSortLatestFirst, "build-30"},
		{config.TagSortLatestLast, "build-20"},
	}
	for _, tt := range tests {
		res, err := policy.Choose(context.Background(), tags, imageref.Version{Tag: "build-10"}, orderedMetadata(tags, tt.mode))
		if err != nil {
			t.Fatal(err)
		}
		if res.Tag != tt.want || !res.Update {
			t.Errorf("%s: chose %+v, want %s", tt.mode, res, tt.want)
		}
	}
}

func TestMetadataMemo(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fetch answers the first call; later ones answer v1.
		fetch func(ctx context.Context, leave context.CancelFunc) (strategy.TagInfo, error)
		calls int // fetches over three gets
	}{
		{
			name: "answer remembered",
			fetch: func(context.Context, context.CancelFunc) (strategy.TagInfo, error) {
				return strategy.TagInfo{Tag: "v1"}, nil
			},
			calls: 1,
		},
		{
			name: "failure remembered",
			fetch: func(context.Context, context.CancelFunc) (strategy.TagInfo, error) {
				return strategy.TagInfo{}, errors.New("HTTP 500")
			},
			calls: 1,
		},
		{
			// The only caller's time ran out: the fetch is cancelled, and
			// the next image asks again.
			name: "cancelled fetch not remembered",
			fetch: func(ctx context.Context, leave context.CancelFunc) (strategy.TagInfo, error) {
				leave()
				<-ctx.Done()
				return strategy.TagInfo{}, ctx.Err()
			},
			calls: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newPassMemo()
			calls := 0
			for range 3 {
				ctx, leave := context.WithCancel(t.Context())
				returned := make(chan struct{})
				fetched := false
				_, _ = m.meta.get(ctx, "k", func(fctx context.Context) (strategy.TagInfo, error) {
					defer close(returned)
					fetched = true
					calls++
					if calls == 1 {
						return tc.fetch(fctx, leave)
					}
					return strategy.TagInfo{Tag: "v1"}, nil
				})
				leave()
				// A fetch the caller left may finish after get returned;
				// the memo remembers only what get itself received.
				if fetched {
					<-returned
				}
			}
			if calls != tc.calls {
				t.Errorf("fetched %d times, want %d", calls, tc.calls)
			}
		})
	}
}

// Liveness: Stalled turns true when a cycle under way has made no
// progress for longer than allowed, and never while no pass is under way.
func TestStalled(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	block := make(chan struct{})
	apps := &blockingApps{block: block, entered: make(chan struct{})}
	u := mustNew(t, apps, nil, nil, withClock(clock))
	if u.Stalled(time.Minute) {
		t.Fatal("stalled before Run")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { u.Run(ctx, time.Minute); close(done) }()
	<-apps.entered // the first cycle is under way and held
	advance(30 * time.Second)
	if u.Stalled(time.Minute) {
		t.Error("stalled within the limit")
	}
	advance(time.Minute)
	if !u.Stalled(time.Minute) {
		t.Error("not stalled after the limit")
	}
	close(block) // the cycle finishes
	poll.True(t, 15*time.Second, "the unit to stop counting as stalled once its cycle finished", func() bool { return !u.Stalled(time.Minute) })
	cancel()
	<-done
	advance(time.Hour)
	if u.Stalled(time.Minute) {
		t.Error("stalled after Run returned")
	}
}

// blockingApps holds the cycle that lists it until block is closed, and
// closes entered when the first cycle asks.
type blockingApps struct {
	block   chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (b *blockingApps) Applications(...imageref.Option) []*application.Application {
	b.once.Do(func() { close(b.entered) })
	<-b.block
	return nil
}

// TestMetricSeriesBound: at most MaxApplicationSeries Applications have
// series of their own, kept while they are managed; the others are counted
// together per ImageUpdater under an empty application label.
func TestMetricSeriesBound(t *testing.T) {
	app := func(name string, images int) *application.Application {
		return &application.Application{Namespace: "argocd", Name: name, Settings: settings.Settings{Images: make([]settings.ImageSpec, images)}}
	}
	a, b, c, d := app("a", 1), app("b", 2), app("c", 3), app("d", 4)
	byResource := &application.Application{Namespace: "team", Name: "e", ImageUpdater: types.NamespacedName{Namespace: "team", Name: "u"},
		Settings: settings.Settings{Images: make([]settings.ImageSpec, 5)}}
	type cycle struct {
		apps    []*application.Application
		updated []*application.Application // one image updated each
		want    string                     // images_watched_total, then images_updated_total
	}
	series := func(metric, app, cr, ns string, v int) string {
		return fmt.Sprintf("argocd_image_updater_%s{application=%q,image_updater_cr_name=%q,image_updater_cr_namespace=%q} %d\n", metric, app, cr, ns, v)
	}
	for _, tc := range []struct {
		name   string
		max    int
		cycles []cycle
	}{
		{name: "under the bound", max: 10, cycles: []cycle{{
			apps: []*application.Application{a, b}, updated: []*application.Application{b},
			want: series("images_watched_total", "argocd/a", "", "", 1) + series("images_watched_total", "argocd/b", "", "", 2) +
				series("images_updated_total", "argocd/b", "", "", 1),
		}}},
		{name: "no bound", max: 0, cycles: []cycle{{
			apps: []*application.Application{a, b, c},
			want: series("images_watched_total", "argocd/a", "", "", 1) + series("images_watched_total", "argocd/b", "", "", 2) +
				series("images_watched_total", "argocd/c", "", "", 3),
		}}},
		{name: "over the bound, then a slot freed", max: 2, cycles: []cycle{
			{
				apps: []*application.Application{a, b, c, d, byResource}, updated: []*application.Application{a, c, d, byResource},
				want: series("images_watched_total", "", "", "", 7) + series("images_watched_total", "", "u", "team", 5) +
					series("images_watched_total", "argocd/a", "", "", 1) + series("images_watched_total", "argocd/b", "", "", 2) +
					series("images_updated_total", "", "", "", 2) + series("images_updated_total", "", "u", "team", 1) +
					series("images_updated_total", "argocd/a", "", "", 1),
			},
			{
				// b is gone: c takes its place and keeps it, a keeps its own.
				apps: []*application.Application{a, c, d, byResource},
				want: series("images_watched_total", "", "", "", 4) + series("images_watched_total", "", "u", "team", 5) +
					series("images_watched_total", "argocd/a", "", "", 1) + series("images_watched_total", "argocd/c", "", "", 3) +
					series("images_updated_total", "", "", "", 2) + series("images_updated_total", "", "u", "team", 1) +
					series("images_updated_total", "argocd/a", "", "", 1),
			},
			{
				// Nothing over the bound any more: the shared series go.
				apps: []*application.Application{a, c},
				want: series("images_watched_total", "argocd/a", "", "", 1) + series("images_watched_total", "argocd/c", "", "", 3) +
					series("images_updated_total", "argocd/a", "", "", 1),
			},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg, MaxApplicationSeries(tc.max))
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range tc.cycles {
				m.applicationsWatched(c.apps)
				for _, app := range c.updated {
					m.imagesUpdated(app, 1)
				}
				var want strings.Builder
				for _, line := range strings.SplitAfter(c.want, "\n") {
					if strings.HasPrefix(line, "argocd_image_updater_images_watched_total") && !strings.Contains(want.String(), "TYPE argocd_image_updater_images_watched_total") {
						want.WriteString("# HELP argocd_image_updater_images_watched_total Number of images managed, by Application.\n# TYPE argocd_image_updater_images_watched_total gauge\n")
					}
					if strings.HasPrefix(line, "argocd_image_updater_images_updated_total") && !strings.Contains(want.String(), "TYPE argocd_image_updater_images_updated_total") {
						want.WriteString("# HELP argocd_image_updater_images_updated_total Number of images updated, by Application.\n# TYPE argocd_image_updater_images_updated_total counter\n")
					}
					want.WriteString(line)
				}
				if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String()),
					"argocd_image_updater_images_watched_total", "argocd_image_updater_images_updated_total"); err != nil {
					t.Errorf("cycle %d: %v", i+1, err)
				}
			}
		})
	}
}

// TestMetricLabels: the per-Application series carry v0.18's application
// label and v1.x's ImageUpdater labels; series of Applications and
// resources that are gone are deleted.
func TestMetricLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	annotated := &application.Application{Namespace: "argocd", Name: "web", Settings: settings.Settings{Images: make([]settings.ImageSpec, 1)}}
	byResource := &application.Application{Namespace: "team-a", Name: "shop", ImageUpdater: types.NamespacedName{Namespace: "team-a", Name: "updater"}}
	m.applicationsWatched([]*application.Application{annotated, byResource})
	m.imagesUpdated(byResource, 2)
	want := `
# HELP argocd_image_updater_applications_watched_total Number of Applications whose images are managed, by the ImageUpdater configuring them (empty for annotations).
# TYPE argocd_image_updater_applications_watched_total gauge
argocd_image_updater_applications_watched_total{image_updater_cr_name="",image_updater_cr_namespace=""} 1
argocd_image_updater_applications_watched_total{image_updater_cr_name="updater",image_updater_cr_namespace="team-a"} 1
# HELP argocd_image_updater_images_updated_total Number of images updated, by Application.
# TYPE argocd_image_updater_images_updated_total counter
argocd_image_updater_images_updated_total{application="team-a/shop",image_updater_cr_name="updater",image_updater_cr_namespace="team-a"} 2
# HELP argocd_image_updater_images_watched_total Number of images managed, by Application.
# TYPE argocd_image_updater_images_watched_total gauge
argocd_image_updater_images_watched_total{application="argocd/web",image_updater_cr_name="",image_updater_cr_namespace=""} 1
argocd_image_updater_images_watched_total{application="team-a/shop",image_updater_cr_name="updater",image_updater_cr_namespace="team-a"} 0
`
	names := []string{"argocd_image_updater_applications_watched_total", "argocd_image_updater_images_updated_total", "argocd_image_updater_images_watched_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// The resource is gone: its series go; annotated Applications are
	// still counted, as none.
	m.applicationsWatched(nil)
	want = `
# HELP argocd_image_updater_applications_watched_total Number of Applications whose images are managed, by the ImageUpdater configuring them (empty for annotations).
# TYPE argocd_image_updater_applications_watched_total gauge
argocd_image_updater_applications_watched_total{image_updater_cr_name="",image_updater_cr_namespace=""} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// mustNew is New, failing the test on an error.
func mustNew(t testing.TB, apps Applications, reg Registry, argocd ApplicationWriter, opts ...Option) *Updater {
	t.Helper()
	u, err := New(apps, reg, argocd, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// New refuses options that cannot work, naming each.
func TestNewChecksOptions(t *testing.T) {
	_, err := New(nil, nil, nil, WithMaxConcurrency(0), WithImageTimeout(-time.Second), WithRegistryConfig(nil),
		WithSignatures(nil, nil, nil))
	for _, want := range []string{"a maximum concurrency of 0", "an image timeout of -1s", "no registries configuration"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
	if _, err := New(nil, nil, nil, WithMaxConcurrency(1), WithImageTimeout(time.Second)); err != nil {
		t.Errorf("valid options refused: %v", err)
	}
}

// TestNotWrittenCounted: changes whose write cannot start (this replica
// does not hold the Lease) are no error, but the summary counts them, so
// that whoever ran the check can run it again.
func TestNotWrittenCounted(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "web", "namespace": "argocd", "annotations": map[string]any{
			"argocd-image-updater.argoproj.io/chart-list":        "c=web:^1",
			"argocd-image-updater.argoproj.io/write-back-method": "argocd",
		}},
		"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": "oci://registry.example.com/charts", "chart": "web", "targetRevision": "1.0.0"}},
	}}
	app, err := application.FromUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		gate       error
		sent       int64
		notWritten int
	}{
		{"writes", nil, 1, 0},
		{"no Lease", errors.New("this replica does not hold the leader Lease"), 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &benchWriter{}
			u := mustNew(t, benchApps{app}, &benchRegistry{tags: []string{"1.0.0", "1.1.0"}}, w, WithWriteGate(func() error { return tc.gate }))
			sum := u.RunOnce(t.Context())
			if w.changes.Load() != tc.sent || sum.NotWritten != tc.notWritten || sum.Errors != 0 {
				t.Errorf("%d changes sent, summary %+v; want %d sent, %d not written, no error", w.changes.Load(), sum, tc.sent, tc.notWritten)
			}
		})
	}
}

// TestChartListProblemsStopNoImage: a chart-list that cannot be used
// (empty, or over the bound) is an error for the charts alone; the
// Application's images are still updated.
func TestChartListProblemsStopNoImage(t *testing.T) {
	for _, list := range []string{" ", strings.Repeat("c,", settings.MaxCharts+1)} {
		app, err := application.FromUnstructured(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": "web", "namespace": "argocd", "annotations": map[string]any{
				"argocd-image-updater.argoproj.io/image-list":        "app=nginx",
				"argocd-image-updater.argoproj.io/chart-list":        list,
				"argocd-image-updater.argoproj.io/write-back-method": "argocd",
			}},
			"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": "https://git.example.com/r.git", "path": "p", "kustomize": map[string]any{}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(app.Settings.Problems) == 0 {
			t.Fatalf("chart-list %q: no problem", list)
		}
		if applicationBroken(app) {
			t.Errorf("chart-list %q stops the Application's images: %v", list, app.Settings.Problems)
		}
	}
}

// A waiting version's message is kept as its event is sent: within
// maxEventMessage bytes, valid UTF-8.
func TestWaitingMessageBounded(t *testing.T) {
	app := &application.Application{Namespace: "argocd", Name: "shop"}
	r := newResults([]*application.Application{app})
	r.waiting(app, WaitingVersion{Key: "web", Message: strings.Repeat("é", 1500)})
	got := r.list()[0].Waiting[0].Message
	if len(got) > maxEventMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Errorf("message of %d bytes (valid UTF-8: %v)", len(got), utf8.ValidString(got))
	}
}
