package cycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/firstseen"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/notice"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/argocd"
)

// TestNotices: with notices kept, an Application holds its last wait,
// update and failure, each set once for as long as it says the same.
func TestNotices(t *testing.T) {
	k := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	repo := reg.Repo("notice-app")
	now := time.Now()
	clock := func() time.Time { return now }
	w := newWorld(t, k, reg, worldOptions{names: "notice-*", updater: []Option{
		WithNotices(argocd.NewWriter(dynamic.NewForConfigOrDie(k.Config))),
		WithFirstSeen(firstseen.New(nil, firstseen.WithClock(clock))), withClock(clock), WithMinReleaseAge(time.Hour),
	}})
	reg.PushImage(t, "notice-app", []string{"1.0.0"})
	w.create(t,
		appObject("notice-aged", map[string]string{"image-list": "app=" + repo}, nil, repo+":1.0.0"),
		appObject("notice-failing", map[string]string{"image-list": "app=" + repo, "app.pull-secret": "pullsecret:argocd/notice-missing"}, nil, repo+":1.0.0"),
	)
	annotation := func(name string, kind notice.Kind) (string, notice.Notice) {
		t.Helper()
		value := w.get(t, name).GetAnnotations()[kind.Annotation()]
		if value == "" {
			return "", notice.Notice{}
		}
		n, err := notice.Decode(value)
		if err != nil {
			t.Fatalf("%s of %s: %v", kind.Annotation(), name, err)
		}
		return value, n
	}

	w.updater.RunOnce(t.Context())
	failure, n := annotation("notice-failing", notice.Failed)
	if !strings.Contains(n.Message, "argocd/notice-missing") || len(n.Images) != 0 {
		t.Errorf("the failure's notice %q, want its message naming the Secret", failure)
	}
	if v, _ := annotation("notice-aged", notice.Failed); v != "" {
		t.Errorf("a failure's notice on an Application that did not fail: %s", v)
	}

	reg.PushImage(t, "notice-app", []string{"1.1.0"})
	now = now.Add(time.Minute)
	w.updater.RunOnce(t.Context())
	wait, n := annotation("notice-aged", notice.Waiting)
	if len(n.Images) != 1 || n.Images[0] != (notice.Version{Alias: "app", Image: repo, To: "1.1.0"}) || !strings.Contains(n.Message, "minimum release age") {
		t.Errorf("the wait's notice %q, want app at 1.1.0 waiting for its age", wait)
	}
	if v, _ := annotation("notice-failing", notice.Failed); v != failure {
		t.Errorf("the same failure told again: %s, was %s", v, failure)
	}

	// Still waiting, a minute later: not told again.
	now = now.Add(time.Minute)
	w.updater.RunOnce(t.Context())
	if v, _ := annotation("notice-aged", notice.Waiting); v != wait {
		t.Errorf("the same wait told again: %s, was %s", v, wait)
	}

	now = now.Add(2 * time.Hour)
	if sum := w.updater.RunOnce(t.Context()); sum.Updated != 1 {
		t.Fatalf("an hour after its push: %+v, want 1.1.0 written", sum)
	}
	update, n := annotation("notice-aged", notice.Updated)
	if len(n.Images) != 1 || n.Images[0] != (notice.Version{Alias: "app", Image: repo, From: "1.0.0", To: "1.1.0"}) || !n.At.Equal(now.Truncate(time.Second)) {
		t.Errorf("the update's notice %q, want app from 1.0.0 to 1.1.0 at %v", update, now.UTC().Truncate(time.Second))
	}
}

// TestWriteNotice: a revert of the health gate is told as a revert, an
// update as an update, and a write that changed nothing not at all.
func TestWriteNotice(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	u := &Updater{notices: argocd.NewWriter(nil), now: func() time.Time { return at }}
	app := &application.Application{Namespace: "argocd", Name: "shop"}
	img, err := settings.ParseImage("registry.example/web")
	if err != nil {
		t.Fatal(err)
	}
	img.Alias = "web"
	res := writeback.Result{Changed: []writeback.ImageUpdate{{ImageSpec: img, Old: imageref.Version{Tag: "1.1.0"}, New: imageref.Version{Tag: "1.0.0"}}}}
	for _, tt := range []struct {
		name     string
		revert   bool
		res      writeback.Result
		wantKind notice.Kind
	}{
		{name: "update", res: res, wantKind: notice.Updated},
		{name: "revert", revert: true, res: res, wantKind: notice.Reverted},
		{name: "nothing changed", res: writeback.Result{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key, value := u.writeNotice(&appUpdate{app: app, revert: tt.revert}, tt.res)
			if tt.wantKind == "" {
				if value != "" {
					t.Fatalf("notice %s=%s for a write of nothing", key, value)
				}
				return
			}
			if key != tt.wantKind.Annotation() {
				t.Fatalf("annotation %s, want %s", key, tt.wantKind.Annotation())
			}
			n, err := notice.Decode(value)
			if err != nil {
				t.Fatal(err)
			}
			want := notice.Version{Alias: "web", Image: "registry.example/web", From: "1.1.0", To: "1.0.0"}
			if len(n.Images) != 1 || n.Images[0] != want || !n.At.Equal(at) {
				t.Errorf("notice %s, want %+v at %v", value, want, at)
			}
			if tt.revert != strings.Contains(n.Message, "health gate") {
				t.Errorf("message %q", n.Message)
			}
		})
	}
}

// countedNotices counts the Applications whose notices are set.
type countedNotices struct {
	mu  sync.Mutex
	set map[string]map[string]string
}

func (c *countedNotices) Annotate(_ context.Context, namespace, name string, annotations map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set[namespace+"/"+name] = annotations
	return nil
}

// TestNoticesPerPassBounded: a pass sets at most its bound of failure and
// wait notices; the others wait for the next passes.
func TestNoticesPerPassBounded(t *testing.T) {
	notices := &countedNotices{set: map[string]map[string]string{}}
	var logs strings.Builder
	u := &Updater{notices: notices, maxNotices: 2, maxConcurrency: 2, now: time.Now,
		logger: slog.New(slog.NewTextHandler(&logs, nil))}
	var results []AppResult
	for i := range 5 {
		results = append(results, AppResult{App: &application.Application{Namespace: "argocd", Name: fmt.Sprintf("app-%d", i)}, Errors: []error{errors.New("registry answered 503")}})
	}
	u.sendNotices(t.Context(), results)
	if len(notices.set) != 2 {
		t.Errorf("%d Applications' notices set in one pass, want the bound, 2", len(notices.set))
	}
	for app, set := range notices.set {
		if _, ok := set[notice.Failed.Annotation()]; !ok {
			t.Errorf("%s: notices %v, want its failure", app, set)
		}
	}
	if !strings.Contains(logs.String(), "deferred=3") {
		t.Errorf("the deferred notices are not told:\n%s", logs.String())
	}
}
