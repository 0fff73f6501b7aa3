package cycle

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/chartrepo"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// helmRepo serves an index.yaml with an ETag and counts full and
// conditional answers.
type helmRepo struct {
	url               string
	full, notModified atomic.Int32
}

func startHelmRepo(t *testing.T, index string) *helmRepo {
	r := &helmRepo{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/index.yaml" {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("ETag", `"1"`)
		if req.Header.Get("If-None-Match") == `"1"` {
			r.notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		r.full.Add(1)
		_, _ = w.Write([]byte(index))
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func TestChartCycle(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test servers")
	}
	k := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	// Helm writes a version's '+' as '_' in an OCI tag.
	reg.PushImage(t, "charts/podinfo", []string{"6.4.0", "6.5.0", "6.5.1_build.1", "7.0.0"})
	repo := startHelmRepo(t, `apiVersion: v1
entries:
  podinfo:
  - name: podinfo
    version: 2.0.0-rc.1
  - name: podinfo
    version: 1.1.0
  - name: podinfo
    version: 1.0.0
`)
	k.CreateAppProject(t, testenv.ArgoCDNamespace, "charts", []string{"*"}, nil)
	k.CreateAppProject(t, testenv.ArgoCDNamespace, "charts-narrow", []string{"https://charts.example.com/*"}, nil)

	w := newWorld(t, k, reg, worldOptions{names: "chart-*", updater: []Option{
		WithChartRepositories(chartrepo.NewClient(repoaccess.NewKubeSecretLister(kubernetes.NewForConfigOrDie(k.Config)), repoaccess.NewKubeAppProjectGetter(dynamic.NewForConfigOrDie(k.Config)), testenv.ArgoCDNamespace)),
	}})
	httpSource := func(rev string) map[string]any {
		return map[string]any{"source": map[string]any{"repoURL": repo.url, "chart": "podinfo", "targetRevision": rev}}
	}
	app := func(name, project string, annotations map[string]string, spec map[string]any) *unstructured.Unstructured {
		annotations["write-back-method"] = "argocd"
		obj := appObject(name, annotations, spec)
		obj.Object["spec"].(map[string]any)["project"] = project
		return obj
	}
	w.create(t,
		app("chart-http", "charts", map[string]string{"chart-list": "podinfo"}, httpSource("1.0.0")),
		app("chart-http-2", "charts", map[string]string{"chart-list": "p=podinfo", "p.ignore-tags": "1.1.*"}, httpSource("1.0.0")),
		app("chart-oci", "charts", map[string]string{"chart-list": "p=podinfo:^6"}, map[string]any{"sources": []any{
			map[string]any{"repoURL": "https://git.example.com/values.git", "targetRevision": "main", "ref": "values"},
			map[string]any{"repoURL": "oci://" + reg.Repo("charts"), "chart": "podinfo", "targetRevision": "6.4.0"},
		}}),
		app("chart-range", "charts", map[string]string{"chart-list": "podinfo"}, httpSource("^1.0")),
		app("chart-denied", "charts-narrow", map[string]string{"chart-list": "podinfo"}, httpSource("1.0.0")),
	)

	sum := w.updater.RunOnce(t.Context())
	if sum.Updated != 2 || sum.Errors != 1 || sum.Charts != 5 || sum.ChartListings != 2 {
		t.Errorf("summary %+v", sum)
	}
	want := map[string]string{
		"chart-http":   "1.1.0",         // the pre-release is left out
		"chart-http-2": "1.0.0",         // 1.1.* ignored, nothing newer
		"chart-oci":    "6.5.1+build.1", // within ^6
		"chart-range":  "^1.0",          // Argo CD resolves a range itself
		"chart-denied": "1.0.0",         // the AppProject does not permit the repository
	}
	revision := func(name string) string {
		obj := w.get(t, name)
		if rev, ok, _ := unstructured.NestedString(obj.Object, "spec", "source", "targetRevision"); ok {
			return rev
		}
		sources, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
		rev, _, _ := unstructured.NestedString(sources[1].(map[string]any), "targetRevision")
		return rev
	}
	for name, rev := range want {
		if got := revision(name); got != rev {
			t.Errorf("%s: targetRevision %q, want %q", name, got, rev)
		}
	}
	if repo.full.Load() != 1 {
		t.Errorf("index read %d times in one cycle, want once for its Applications", repo.full.Load())
	}
	logs := w.logs.String()
	for _, msg := range []string{
		"chart-list (chart podinfo): spec.source: repository " + repo.url + " is not permitted by AppProject charts-narrow",
		`targetRevision \"^1.0\" is a range`,
	} {
		if !strings.Contains(logs, msg) {
			t.Errorf("the log does not say %q", msg)
		}
	}

	// The next cycle asks whether the index changed, and writes nothing.
	for _, name := range []string{"chart-http", "chart-oci"} {
		w.syncWatcher(t, name)
	}
	sum = w.updater.RunOnce(t.Context())
	if sum.Updated != 0 || sum.Errors != 1 {
		t.Errorf("second cycle %+v", sum)
	}
	if repo.full.Load() != 1 || repo.notModified.Load() != 1 {
		t.Errorf("%d full reads and %d not modified, want 1 and 1", repo.full.Load(), repo.notModified.Load())
	}

	// A push to the chart's OCI repository checks that chart alone.
	reg.PushImage(t, "charts/podinfo", []string{"6.6.0"})
	ref, err := imageref.Parse(reg.Repo("charts/podinfo") + ":6.6.0")
	if err != nil {
		t.Fatal(err)
	}
	sum = w.updater.CheckRepositories(t.Context(), []imageref.Reference{ref}, "a push notification")
	if sum.Updated != 1 || sum.Errors != 0 || sum.Applications != 1 || sum.ChartListings != 1 {
		t.Errorf("targeted check %+v", sum)
	}
	if got := revision("chart-oci"); got != "6.6.0" {
		t.Errorf("chart-oci: targetRevision %q after the push, want 6.6.0", got)
	}
	if repo.full.Load()+repo.notModified.Load() != 2 {
		t.Error("the targeted check read the HTTP repository")
	}
}

// TestChartAndImagesOfOneRepository: an OCI repository that holds an
// Application's chart and its image is listed once in a cycle.
func TestChartAndImagesOfOneRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test servers")
	}
	k := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	reg.PushImage(t, "shared/web", []string{"1.0.0", "1.1.0"})
	// Counted above the registry client, which would otherwise make one
	// request of two listings that happen to run at the same time.
	listed := &tagCalls{}
	w := newWorld(t, k, reg, worldOptions{names: "shared-*", wrap: func(r Registry) Registry { listed.Registry = r; return listed }})
	repo := reg.Repo("shared/web")
	w.create(t, appObject("shared-web", map[string]string{
		"write-back-method": "argocd",
		"image-list":        "web=" + repo,
		"chart-list":        "web-chart=web",
	}, map[string]any{"sources": []any{
		map[string]any{"repoURL": "oci://" + reg.Repo("shared"), "chart": "web", "targetRevision": "1.0.0",
			"helm": map[string]any{"parameters": []any{}}},
	}}, repo+":1.0.0"))

	sum := w.updater.RunOnce(t.Context())
	if sum.Errors != 0 || sum.Updated != 2 {
		t.Fatalf("summary %+v, want the image and the chart updated", sum)
	}
	if got := listed.n.Load(); got != 1 {
		t.Errorf("%d tag listings of the repository of an image and a chart, want 1", got)
	}
	sources, _, _ := unstructured.NestedSlice(w.get(t, "shared-web").Object, "spec", "sources")
	if rev, _, _ := unstructured.NestedString(sources[0].(map[string]any), "targetRevision"); rev != "1.1.0" {
		t.Errorf("the chart's targetRevision %q, want 1.1.0", rev)
	}
}

// tagCalls counts the tag listings the cycle asks of the registry client.
type tagCalls struct {
	Registry
	n atomic.Int32
}

func (c *tagCalls) Tags(ctx context.Context, ref imageref.Reference, creds credref.Ref) ([]string, error) {
	c.n.Add(1)
	return c.Registry.Tags(ctx, ref, creds)
}
