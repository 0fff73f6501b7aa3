package healthgate

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// statusPatches counts the patches of an ImageUpdater's status a client
// sends, with their bytes, and those the API server refused.
type statusPatches struct {
	mu            sync.Mutex
	path          string
	sent, refused int
	bytes         int64
}

func (c *statusPatches) take() (sent, refused int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sent, refused, bytes = c.sent, c.refused, c.bytes
	c.sent, c.refused, c.bytes = 0, 0, 0
	return sent, refused, bytes
}

// client is a dynamic client of cfg whose status patches c counts.
func (c *statusPatches) client(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			if req.Method == http.MethodPatch && req.URL.Path == c.path {
				c.mu.Lock()
				c.sent++
				c.bytes += req.ContentLength
				if err != nil || resp.StatusCode >= 300 {
					c.refused++
				}
				c.mu.Unlock()
			}
			return resp, err
		})
	})
	return dynamic.NewForConfigOrDie(cfg)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// syncBuffer is a log both the gate and the test use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

// TestEvaluateSavesAnImageUpdaterOnce: one look saves the status of an
// ImageUpdater once, however many of its Applications changed, against
// the API server; a status the API server refuses is sent again once its
// retry is due (10s, then 20s...), not at every look nor once per
// Application, with one warning naming the ImageUpdater per attempt.
func TestEvaluateSavesAnImageUpdaterOnce(t *testing.T) {
	k := testenv.StartKube(t, testenv.WithImageUpdaterCRD(api.AddToScheme))
	k.Create(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "iu", Namespace: "argocd"},
		Spec: api.ImageUpdaterSpec{ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", Images: []api.ImageConfig{{Alias: "app", ImageName: image}}}}}})
	patches := &statusPatches{path: "/apis/" + api.Resource().Group + "/" + api.Resource().Version + "/namespaces/argocd/imageupdaters/iu/status"}
	admin := patches.client(t, k.Config)
	// A ServiceAccount without a role: the API server refuses its writes.
	refused := patches.client(t, k.ServiceAccountConfig(t, "argocd", "no-role"))

	var log []string
	a := &apps{}
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	logs := &syncBuffer{}
	g := New(a, &reverter{log: &log}, admin, withClock(func() time.Time { return now }),
		WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	iu := types.NamespacedName{Namespace: "argocd", Name: "iu"}
	const n = 400
	for i := range n {
		app := a.set(t, fmt.Sprintf("app-%03d", i), gated, argo("Healthy", "1.0.0", nil))
		app.ImageUpdater = iu
		g.Written(t.Context(), app, writeback.Result{Namespace: app.Namespace, Name: app.Name, Written: true,
			Changed: []writeback.ImageUpdate{{ImageSpec: app.Settings.Images[0], Old: imageref.ParseVersion("1.0.0"), New: imageref.ParseVersion("1.1.0")}}})
	}
	g.Flush(t.Context())
	if sent, _, _ := patches.take(); sent != 1 {
		t.Fatalf("%d status patches for the batch's writes, want 1", sent)
	}

	// Argo CD deploys every version: each record changes.
	for i := range n {
		a.set(t, fmt.Sprintf("app-%03d", i), gated, argo("Healthy", "1.1.0", nil))
	}
	now = now.Add(time.Second)
	g.Evaluate(t.Context())
	sent, bad, size := patches.take()
	t.Logf("a look where %d Applications of one ImageUpdater changed: %d status patches, %d bytes", n, sent, size)
	if sent != 1 || bad != 0 {
		t.Fatalf("%d status patches (%d refused) for one look, want 1", sent, bad)
	}

	// The windows end, while the API server refuses the status.
	g.store = kubeStore{client: refused}
	now = now.Add(2 * time.Minute)
	g.Evaluate(t.Context())
	if sent, bad, _ := patches.take(); sent != 1 || bad != 1 {
		t.Fatalf("%d status patches (%d refused) for the look that verified %d versions, want 1 refused", sent, bad, n)
	}
	warning := "imageUpdater=argocd/iu"
	if got := logs.count(warning); got != 1 {
		t.Errorf("%d log lines name the ImageUpdater after one refusal, want 1", got)
	}
	for range 3 { // looks before the retry is due, woken by changes
		now = now.Add(time.Second)
		g.Evaluate(t.Context())
	}
	sent, _, size = patches.take()
	t.Logf("three looks after the status was refused, before its retry: %d status patches, %d bytes", sent, size)
	if sent != 0 {
		t.Fatalf("%d status patches before the retry was due, want 0", sent)
	}
	now = now.Add(10 * time.Second)
	if next := g.Evaluate(t.Context()); !next.Equal(now.Add(20 * time.Second)) {
		t.Errorf("next look at %v, want at the second retry, %v", next, now.Add(20*time.Second))
	}
	if sent, bad, _ := patches.take(); sent != 1 || bad != 1 {
		t.Fatalf("%d status patches (%d refused) once the retry was due, want 1 refused", sent, bad)
	}
	if got := logs.count(warning); got != 2 {
		t.Errorf("%d log lines name the ImageUpdater after two refusals, want 2", got)
	}

	// Accepted again: saved once, and nothing is left to save.
	g.store = kubeStore{client: admin}
	now = now.Add(20 * time.Second)
	g.Evaluate(t.Context())
	now = now.Add(time.Second)
	g.Evaluate(t.Context())
	if sent, bad, _ := patches.take(); sent != 1 || bad != 0 {
		t.Fatalf("%d status patches (%d refused) once accepted, want 1", sent, bad)
	}
	saved := &api.ImageUpdater{}
	if err := k.Client.Get(t.Context(), types.NamespacedName{Namespace: "argocd", Name: "iu"}, saved); err != nil {
		t.Fatal(err)
	}
	verified := 0
	for _, r := range saved.Status.HealthGate {
		if r.State == api.HealthGateVerified {
			verified++
		}
	}
	if verified != n {
		t.Errorf("%d records Verified in the status, want %d", verified, n)
	}
}

// TestSkippedSavesAnImageUpdaterOnce: the holds a cycle finds while
// choosing, for Applications an ImageUpdater configures, are saved in its
// status once, at the pass's Flush, not at each answer of Skipped.
func TestSkippedSavesAnImageUpdaterOnce(t *testing.T) {
	r := newRig(t)
	iu := types.NamespacedName{Namespace: "argocd", Name: "iu"}
	plain := map[string]string{"image-list": "app=" + image}
	const n = 20
	var held []*application.Application
	for i := range n {
		app := r.apps.set(t, fmt.Sprintf("app-%02d", i), plain, argo("Healthy", "1.0.0", nil))
		app.ImageUpdater = iu
		r.written(t, app, "1.0.0", "1.1.0", "")
		held = append(held, app)
	}
	r.gate.Flush(t.Context())
	r.log = nil
	for _, app := range held {
		if sk := r.gate.Skipped(t.Context(), app, "app", imageref.Version{Tag: "1.0.0"}); len(sk.Versions) != 1 {
			t.Fatalf("%s: skips %+v, want 1.1.0 held", app.Name, sk)
		}
	}
	if len(r.log) != 0 {
		t.Fatalf("saved %q while the cycle chose, want nothing until its Flush", r.log)
	}
	r.gate.Flush(t.Context())
	if want := []string{"status iu"}; !slices.Equal(r.log, want) {
		t.Errorf("did %q, want %q", r.log, want)
	}
	_, skipped := r.store.status[iu][0], r.store.status[iu][1].([]api.SkippedVersion)
	if len(skipped) != n {
		t.Errorf("%d skips saved, want %d", len(skipped), n)
	}
}
