package cycle

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/chartrepo"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// chartApps are Applications each with one chart, of repoURL+"/r<i>",
// at version current.
func chartApps(t testing.TB, repoURL string, charts []string, current string) benchApps {
	t.Helper()
	var list benchApps
	for i, chart := range charts {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": fmt.Sprintf("app-%02d", i), "namespace": "argocd", "annotations": map[string]any{
				"argocd-image-updater.argoproj.io/chart-list":        "c=" + chart + ":^1",
				"argocd-image-updater.argoproj.io/write-back-method": "argocd",
			}},
			"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": fmt.Sprintf("%s/r%d", repoURL, i), "chart": chart, "targetRevision": current}},
		}}
		app, err := application.FromUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, app)
	}
	return list
}

// heapWatch reads indexes through a chartrepo.Client, noting the most
// heap in use after each read.
type heapWatch struct {
	*chartrepo.Client
	mu   sync.Mutex
	most int64
}

func (h *heapWatch) Index(ctx context.Context, a chartrepo.Access, charts []string) (chartrepo.Index, error) {
	ix, err := h.Client.Index(ctx, a, charts)
	heap := liveHeap()
	h.mu.Lock()
	h.most = max(h.most, heap)
	h.mu.Unlock()
	return ix, err
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestChartIndexesHeld: a cycle over 50 charts, each in a repository
// whose index lists 20,000 versions of 100 charts, holds what it asked
// (200 versions a chart), not the indexes: each index is cut to the chart
// asked as it is read, and let go once the chart is chosen.
func TestChartIndexesHeld(t *testing.T) {
	const repos, charts, versions = 50, 100, 200
	var index strings.Builder
	index.WriteString("entries:\n")
	for c := range charts {
		fmt.Fprintf(&index, "  chart-%d:\n", c)
		for v := range versions {
			fmt.Fprintf(&index, "  - version: 1.%d.%d\n", v/20, v%20)
		}
	}
	body := []byte(index.String()) // not copied by each answer, in the heap measured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"1"`)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	asked := make([]string, repos)
	for i := range asked {
		asked[i] = fmt.Sprintf("chart-%d", i)
	}
	repo := &heapWatch{Client: chartrepo.NewClient(noSecrets{}, anyRepo{}, "argocd")}
	// One read at a time: the heap measured after each is then what the
	// cycle holds, not the garbage of other reads under way.
	u := mustNew(t, chartApps(t, srv.URL, asked, "1.9.19"), &benchRegistry{}, &benchWriter{}, WithChartRepositories(repo), WithMaxConcurrency(1))
	before := liveHeap()
	sum := u.RunOnce(t.Context())
	after := liveHeap()
	if sum.Errors != 0 || sum.Charts != repos || sum.ChartListings != repos {
		t.Fatalf("summary %+v", sum)
	}
	// Each index read whole holds some 0.8 MiB of versions: 40 MiB for
	// 50. What is asked is 50 charts of 200 versions, some 0.3 MiB.
	const bound = 8 << 20
	if grown := repo.most - before; grown > bound {
		t.Errorf("the heap grew by %.1f MiB during the cycle, want at most %d MiB", float64(grown)/(1<<20), bound>>20)
	}
	if kept := after - before; kept > bound/2 {
		t.Errorf("the heap grew by %.1f MiB over the cycle, want at most %d MiB", float64(kept)/(1<<20), bound>>21)
	}
	t.Logf("heap grown by %.1f MiB at most during the cycle, %.1f MiB after", float64(repo.most-before)/(1<<20), float64(after-before)/(1<<20))
	runtime.KeepAlive(u)
}

// TestChartCycleBudget: the chart whose index would pass the cycle's
// budget fails with an error naming its Application, chart and
// repository; the others are chosen and written.
func TestChartCycleBudget(t *testing.T) {
	var big strings.Builder
	big.WriteString("entries:\n  big:\n")
	for v := range 20_000 {
		fmt.Fprintf(&big, "  - version: 1.0.%d\n", v)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/r0/index.yaml" {
			_, _ = w.Write([]byte(big.String()))
			return
		}
		_, _ = w.Write([]byte("entries:\n  small:\n  - version: 1.0.1\n  - version: 1.0.0\n"))
	}))
	t.Cleanup(srv.Close)
	var logs bytes.Buffer
	var mu sync.Mutex
	w := &benchWriter{}
	u := mustNew(t, chartApps(t, srv.URL, []string{"big", "small", "small"}, "1.0.0"), &benchRegistry{}, w,
		WithChartRepositories(chartrepo.NewClient(noSecrets{}, anyRepo{}, "argocd")), WithPassBudget(256<<10),
		WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))))
	sum := u.RunOnce(t.Context())
	if sum.Errors != 1 || w.changes.Load() != 2 {
		t.Errorf("%d errors and %d changes written, want 1 and the 2 small charts", sum.Errors, w.changes.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"application=argocd/app-00", "chart c", srv.URL + "/r0", "budget of 256 KiB"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs without %q:\n%s", want, logs.String())
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// reposRegistry lists the tags given for each repository.
type reposRegistry struct {
	benchRegistry
	tags map[string][]string
}

func (r *reposRegistry) Tags(_ context.Context, ref imageref.Reference, _ credref.Ref) ([]string, error) {
	return r.tags[ref.Repository()], nil
}

// TestTagListsWithinPassBudget: the tag lists a pass holds count against
// its byte budget. A repository whose list would pass it fails its image,
// with an error naming the image, the repository and the budget; another
// team's image is written.
func TestTagListsWithinPassBudget(t *testing.T) {
	big := make([]string, 20_000)
	for i := range big {
		big[i] = fmt.Sprintf("v1.0.%d", i)
	}
	reg := &reposRegistry{tags: map[string][]string{"team-a/big": big, "team-b/web": {"v1.0.0", "v1.1.0"}}}
	var logs bytes.Buffer
	var mu sync.Mutex
	w := &benchWriter{}
	apps := benchApps{
		semverApp(t, "team-a", "hoard", "registry.example.com/team-a/big"),
		semverApp(t, "team-b", "web", "registry.example.com/team-b/web"),
	}
	u := mustNew(t, apps, reg, w, WithPassBudget(256<<10),
		WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))))
	sum := u.RunOnce(t.Context())
	if sum.Errors != 1 || w.changes.Load() != 1 {
		t.Errorf("%d errors and %d changes written, want 1 and team b's", sum.Errors, w.changes.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"application=team-a/hoard", "registry.example.com/team-a/big", "budget of 256 KiB", "byte budget exceeded"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs without %q:\n%s", want, logs.String())
		}
	}
}
