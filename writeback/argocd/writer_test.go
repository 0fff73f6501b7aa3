package argocd

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback"
)

const (
	ecrApp  = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app"
	ecrWeb  = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web"
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func param(name, value string) map[string]any {
	return map[string]any{"name": name, "value": value, "forceString": true}
}

func aliases(images []writeback.ImageUpdate) []string {
	var out []string
	for _, img := range images {
		out = append(out, img.Alias)
	}
	return out
}

// requestCounter counts the API requests a client sends, by HTTP method.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCounter) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.counts[r.Method]++
		c.mu.Unlock()
		return next.RoundTrip(r)
	})
}

func (c *requestCounter) get(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[method]
}

func (c *requestCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingClient is a dynamic client whose requests are counted.
func countingClient(t *testing.T, cfg *rest.Config) (dynamic.Interface, *requestCounter) {
	t.Helper()
	c := &requestCounter{counts: map[string]int{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(c.RoundTrip)
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc, c
}

// cluster is the API server the tests share, with an uncounted client
// standing for the other writers of Applications.
type cluster struct {
	kube  *testenv.Kube
	other dynamic.Interface
}

func startCluster(t *testing.T, opts ...testenv.KubeOption) *cluster {
	t.Helper()
	k := testenv.StartKube(t, opts...)
	dc, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{kube: k, other: dc}
}

func (c *cluster) apps() dynamic.ResourceInterface {
	return c.other.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace)
}

func (c *cluster) create(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	obj := appFromYAML(t, text)
	obj.SetAPIVersion("argoproj.io/v1alpha1")
	obj.SetKind("Application")
	obj.SetNamespace(testenv.ArgoCDNamespace)
	created, err := c.apps().Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Application %s: %v", obj.GetName(), err)
	}
	return created
}

func (c *cluster) get(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := c.apps().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Application %s: %v", name, err)
	}
	return obj
}

func (c *cluster) mergePatch(t *testing.T, name, patch string) *unstructured.Unstructured {
	t.Helper()
	obj, err := c.apps().Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch Application %s: %v", name, err)
	}
	return obj
}

func nested(t *testing.T, obj *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldCopy(obj.Object, path...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(path, "."), err)
	}
	return v
}

func sourceAt(t *testing.T, obj *unstructured.Unstructured, i int) map[string]any {
	t.Helper()
	sources, _ := nested(t, obj, "spec", "sources").([]any)
	if i >= len(sources) {
		t.Fatalf("no source %d in %v", i, sources)
	}
	return sources[i].(map[string]any)
}

// withoutServerFields drops what the API server changes on every write, so
// the rest of two versions of an object can be compared.
func withoutServerFields(obj *unstructured.Unstructured) map[string]any {
	c := obj.DeepCopy()
	c.SetResourceVersion("")
	c.SetManagedFields(nil)
	c.SetGeneration(0)
	return c.Object
}

// assertOnlyChanged checks that after differs from before at most in the
// field at path (and server-maintained metadata).
func assertOnlyChanged(t *testing.T, before, after *unstructured.Unstructured, path ...string) {
	t.Helper()
	b, a := withoutServerFields(before), withoutServerFields(after)
	unstructured.RemoveNestedField(b, path...)
	unstructured.RemoveNestedField(a, path...)
	if d := cmp.Diff(b, a); d != "" {
		t.Errorf("fields other than %s changed (-before +after):\n%s", strings.Join(path, "."), d)
	}
}

const seed003 = `
metadata:
  name: %s
  finalizers: [resources-finalizer.argocd.argoproj.io]
  annotations:
    argocd-image-updater.argoproj.io/write-back-method: argocd
    argocd-image-updater.argoproj.io/image-list: app=123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app,web=123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web
    argocd-image-updater.argoproj.io/app.update-strategy: semver
    argocd-image-updater.argoproj.io/web.update-strategy: semver
spec:
  project: default
  source:
    repoURL: https://github.com/example/manifests
    path: ./main/overlays/production/
    targetRevision: main
  destination:
    server: https://kubernetes.default.svc
    namespace: main
  syncPolicy:
    automated: {prune: true, selfHeal: true}
    syncOptions: [CreateNamespace=true]
`

func seedApp(name string) string { return strings.Replace(seed003, "%s", name, 1) }

func TestArgoCDWriter(t *testing.T) {
	c := startCluster(t)

	t.Run("seed 003 kustomize, then nothing to write", func(t *testing.T) {
		before := c.create(t, seedApp("main"))
		dc, count := countingClient(t, c.kube.Config)
		w := NewWriter(dc)
		u := update{Namespace: "argocd", Name: "main", SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}, Old: imageref.ParseVersion("v0.0.1")},
			{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb)}, New: imageref.Version{Tag: "v0.0.2"}, Old: imageref.ParseVersion("v0.0.1")},
		}}
		snapshot := before.DeepCopy()
		res, err := w.writeOne(t.Context(), before, u)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(snapshot.Object, before.Object); d != "" {
			t.Errorf("the cached object was modified (-before +after):\n%s", d)
		}
		if !res.Written || len(res.Changed) != 2 {
			t.Fatalf("result = %+v, want both images patched", res)
		}
		if count.get(http.MethodPatch) != 1 || count.total() != 1 {
			t.Errorf("requests = %v, want one PATCH", count.counts)
		}
		after := c.get(t, "main")
		want := []any{ecrApp + ":v0.0.2", ecrWeb + ":v0.0.2"}
		if d := cmp.Diff(want, nested(t, after, "spec", "source", "kustomize", "images")); d != "" {
			t.Errorf("images (-want +got):\n%s", d)
		}
		assertOnlyChanged(t, before, after, "spec", "source", "kustomize")

		// Argo CD may not have synced yet, so the running image is still
		// the old one; the override alone says the version is written.
		for _, cached := range []*unstructured.Unstructured{after, nil} {
			res, err = w.writeOne(t.Context(), cached, u)
			if err != nil {
				t.Fatal(err)
			}
			if res.Written || len(res.Changed) != 0 || res.Patch != nil {
				t.Errorf("second write = %+v, want nothing", res)
			}
		}
		if count.get(http.MethodPatch) != 1 || count.get(http.MethodGet) != 1 {
			t.Errorf("requests = %v, want no PATCH after the first and one GET for the nil cache", count.counts)
		}
		if rv := c.get(t, "main").GetResourceVersion(); rv != after.GetResourceVersion() {
			t.Errorf("resourceVersion changed from %s to %s", after.GetResourceVersion(), rv)
		}
	})

	t.Run("a batch: a patch per change, results in order, the gate asked before each", func(t *testing.T) {
		var changes []writeback.Change
		for _, name := range []string{"batch-a", "batch-absent", "batch-b"} {
			obj := appFromYAML(t, seedApp(name))
			obj.SetNamespace(testenv.ArgoCDNamespace)
			if name != "batch-absent" {
				obj = c.create(t, seedApp(name))
			}
			app, err := application.SnapshotOf(obj).Application()
			if err != nil {
				t.Fatal(err)
			}
			// The seed's status does not say; Argo CD would.
			src := app.Sources[0]
			src.Type = application.SourceKustomize
			changes = append(changes, writeback.Change{App: app, Source: src, Images: []writeback.ImageUpdate{
				{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.3"}},
			}})
		}
		dc, count := countingClient(t, c.kube.Config)
		refused := errors.New("not leading")
		var gate atomic.Int32
		w := NewWriter(dc, WithMaxConcurrency(2), WithWriteGate(func() error {
			if gate.Add(1) > 3 {
				return refused
			}
			return nil
		}))
		results := w.Write(t.Context(), changes)
		if len(results) != 3 {
			t.Fatalf("%d results for 3 changes", len(results))
		}
		for i, want := range []string{"batch-a", "batch-absent", "batch-b"} {
			r := results[i]
			if r.Namespace != "argocd" || r.Name != want {
				t.Errorf("result %d is %s/%s, want argocd/%s", i, r.Namespace, r.Name, want)
			}
			switch {
			case want == "batch-absent":
				if r.Err == nil || !strings.Contains(r.Err.Error(), "Application argocd/batch-absent") || r.Written {
					t.Errorf("%s: %+v, want an error naming it", want, r)
				}
			case r.Err != nil || !r.Written || len(r.Changed) != 1:
				t.Errorf("%s: %+v, want patched", want, r)
			}
		}
		if count.get(http.MethodPatch) != 2 {
			t.Errorf("requests = %v, want two PATCHes", count.counts)
		}

		// The gate refuses from now on: nothing starts.
		before := count.total()
		for i, r := range w.Write(t.Context(), changes) {
			if !errors.Is(r.Err, writeback.ErrWriteNotStarted) || !errors.Is(r.Err, refused) || r.Written {
				t.Errorf("change %d: %+v, want writeback.ErrWriteNotStarted", i, r)
			}
		}
		if count.total() != before {
			t.Errorf("%d requests after the gate refused", count.total()-before)
		}

		// Nor once the writes' context has ended.
		ended, cancel := context.WithCancel(t.Context())
		cancel()
		for i, r := range NewWriter(dc).Write(ended, changes) {
			if !errors.Is(r.Err, writeback.ErrWriteNotStarted) || !errors.Is(r.Err, context.Canceled) {
				t.Errorf("change %d: %+v, want writeback.ErrWriteNotStarted", i, r)
			}
		}
		if count.total() != before {
			t.Errorf("%d requests after the context ended", count.total()-before)
		}
	})

	t.Run("kustomize with existing entries", func(t *testing.T) {
		before := c.create(t, `
metadata: {name: kustomize-existing}
spec:
  project: default
  destination: {server: "https://kubernetes.default.svc", namespace: demo}
  source:
    repoURL: https://github.com/example/manifests
    path: overlays/prod
    kustomize:
      namePrefix: prod-
      images:
      - busybox:1.36
      - nginx=registry.example.com/mirror/nginx:1.25.0
      - localhost:5000/app:1.0
      - ghcr.io/org/api:v1@`+digestA+`
      - quay.io/org/untouched:3
`)
		w := NewWriter(c.other)
		res, err := w.writeOne(t.Context(), nil, update{Namespace: "argocd", Name: "kustomize-existing", SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "nginx", Image: mustRef("registry.example.com/mirror/nginx"), KustomizeImageName: mustRef("nginx")}, New: imageref.Version{Tag: "1.26.0"}},
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("localhost:5000/app")}, New: imageref.Version{Tag: "1.1"}},
			{ImageSpec: settings.ImageSpec{Alias: "api", Image: mustRef("ghcr.io/org/api")}, New: imageref.Version{Tag: "v1", Digest: digestB}},
			{ImageSpec: settings.ImageSpec{Alias: "new", Image: mustRef("ghcr.io/org/new")}, New: imageref.Version{Tag: "0.1.0"}},
			{ImageSpec: settings.ImageSpec{Alias: "same", Image: mustRef("quay.io/org/untouched")}, New: imageref.Version{Tag: "3"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"nginx", "app", "api", "new"}, aliases(res.Changed)); d != "" {
			t.Errorf("changed (-want +got):\n%s", d)
		}
		after := c.get(t, "kustomize-existing")
		want := []any{
			"busybox:1.36",
			"nginx=registry.example.com/mirror/nginx:1.26.0",
			"localhost:5000/app:1.1",
			"ghcr.io/org/api:v1@" + digestB,
			"quay.io/org/untouched:3",
			"ghcr.io/org/new:0.1.0",
		}
		if d := cmp.Diff(want, nested(t, after, "spec", "source", "kustomize", "images")); d != "" {
			t.Errorf("images (-want +got):\n%s", d)
		}
		assertOnlyChanged(t, before, after, "spec", "source", "kustomize", "images")
	})

	t.Run("helm", func(t *testing.T) {
		tests := []struct {
			name   string
			helm   string // the source's helm block, "" for none
			images []writeback.ImageUpdate
			want   []any
		}{
			{
				name:   "default names, no helm block yet",
				images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}}},
				want:   []any{param("image.name", ecrApp), param("image.tag", "v0.0.2")},
			},
			{
				name:   "custom names, other parameters kept",
				helm:   `{releaseName: web, parameters: [{name: replicaCount, value: "2"}, {name: app.image.tag, value: v0.0.1}, {name: debug, value: "true", forceString: true}]}`,
				images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp), HelmImageName: "app.image.repository", HelmImageTag: "app.image.tag"}, New: imageref.Version{Tag: "v0.0.2"}}},
				want: []any{
					map[string]any{"name": "replicaCount", "value": "2"},
					param("app.image.tag", "v0.0.2"),
					param("debug", "true"),
					param("app.image.repository", ecrApp),
				},
			},
			{
				// Each name defaults on its own, as in the old tool: a custom
				// tag parameter still gets the image in image.name.
				name:   "only helm.image-tag set",
				helm:   `{parameters: [{name: app.version, value: v0.0.1}]}`,
				images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp), HelmImageTag: "app.version"}, New: imageref.Version{Tag: "v0.0.2"}}},
				want:   []any{param("app.version", "v0.0.2"), param("image.name", ecrApp)},
			},
			{
				name:   "only helm.image-name set",
				images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp), HelmImageName: "app.repository"}, New: imageref.Version{Tag: "v0.0.2"}}},
				want:   []any{param("app.repository", ecrApp), param("image.tag", "v0.0.2")},
			},
			{
				name:   "image spec with a list index",
				helm:   `{valueFiles: [values-prod.yaml], parameters: [{name: "images[0].image", value: "nginx:1.25"}, {name: "images[1].image", value: "nginx:1.25"}]}`,
				images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb), HelmImageSpec: "images[1].image"}, New: imageref.Version{Tag: "v0.0.3"}}},
				want: []any{
					map[string]any{"name": "images[0].image", "value": "nginx:1.25"},
					param("images[1].image", ecrWeb+":v0.0.3"),
				},
			},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				name := "helm-" + string(rune('a'+i))
				helm := ""
				if tt.helm != "" {
					helm = "\n    helm: " + tt.helm
				}
				before := c.create(t, `
metadata: {name: `+name+`}
spec:
  project: default
  destination: {server: "https://kubernetes.default.svc", namespace: demo}
  source:
    repoURL: https://charts.example.com
    chart: web
    targetRevision: 1.2.3`+helm+`
`)
				res, err := NewWriter(c.other).writeOne(t.Context(), before, update{
					Namespace: "argocd", Name: name, SourceIndex: -1, SourceType: application.SourceHelm, Images: tt.images,
				})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Written {
					t.Fatalf("result = %+v, want a patch", res)
				}
				after := c.get(t, name)
				if d := cmp.Diff(tt.want, nested(t, after, "spec", "source", "helm", "parameters")); d != "" {
					t.Errorf("parameters (-want +got):\n%s", d)
				}
				if tt.helm == "" {
					assertOnlyChanged(t, before, after, "spec", "source", "helm")
				} else {
					assertOnlyChanged(t, before, after, "spec", "source", "helm", "parameters")
				}
			})
		}
	})

	t.Run("multi-source", func(t *testing.T) {
		before := c.create(t, `
metadata: {name: multi}
spec:
  project: default
  destination: {server: "https://kubernetes.default.svc", namespace: demo}
  sources:
  - {repoURL: "https://github.com/example/values", targetRevision: main, ref: values}
  - repoURL: https://charts.example.com
    chart: web
    targetRevision: 1.2.3
    helm:
      valueFiles: [$values/web/values.yaml]
      parameters: [{name: replicaCount, value: "3"}]
  - repoURL: https://github.com/example/manifests
    path: overlays/prod
    targetRevision: main
    kustomize: {images: [busybox:1.36]}
`)
		w := NewWriter(c.other)
		img := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb)}, New: imageref.Version{Tag: "v0.0.3"}}
		if _, err := w.writeOne(t.Context(), before, update{Namespace: "argocd", Name: "multi", SourceIndex: 1, SourceType: application.SourceHelm, Images: []writeback.ImageUpdate{img}}); err != nil {
			t.Fatal(err)
		}
		mid := c.get(t, "multi")
		wantHelm := []any{map[string]any{"name": "replicaCount", "value": "3"}, param("image.name", ecrWeb), param("image.tag", "v0.0.3")}
		if d := cmp.Diff(wantHelm, sourceAt(t, mid, 1)["helm"].(map[string]any)["parameters"]); d != "" {
			t.Errorf("helm parameters (-want +got):\n%s", d)
		}
		for _, i := range []int{0, 2} {
			if d := cmp.Diff(sourceAt(t, before, i), sourceAt(t, mid, i)); d != "" {
				t.Errorf("source %d changed (-before +after):\n%s", i, d)
			}
		}
		if _, err := w.writeOne(t.Context(), mid, update{Namespace: "argocd", Name: "multi", SourceIndex: 2, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{img}}); err != nil {
			t.Fatal(err)
		}
		after := c.get(t, "multi")
		if d := cmp.Diff([]any{"busybox:1.36", ecrWeb + ":v0.0.3"}, sourceAt(t, after, 2)["kustomize"].(map[string]any)["images"]); d != "" {
			t.Errorf("kustomize images (-want +got):\n%s", d)
		}
		for _, i := range []int{0, 1} {
			if d := cmp.Diff(sourceAt(t, mid, i), sourceAt(t, after, i)); d != "" {
				t.Errorf("source %d changed (-before +after):\n%s", i, d)
			}
		}
		// The other top-level fields are untouched too.
		b, a := withoutServerFields(before), withoutServerFields(after)
		unstructured.RemoveNestedField(b, "spec", "sources")
		unstructured.RemoveNestedField(a, "spec", "sources")
		if d := cmp.Diff(b, a); d != "" {
			t.Errorf("Application changed outside spec.sources (-before +after):\n%s", d)
		}
	})

	t.Run("an image paused during a conflict is not written", func(t *testing.T) {
		stale := c.create(t, seedApp("paused"))
		c.mergePatch(t, "paused", `{"metadata":{"annotations":{"argocd-image-updater.argoproj.io/app.ignore-tags":"*"}}}`)
		res, err := NewWriter(c.other).writeOne(t.Context(), stale, update{Namespace: "argocd", Name: "paused", SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
			{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb)}, New: imageref.Version{Tag: "v0.0.2"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Changed) != 1 || res.Changed[0].Alias != "web" {
			t.Fatalf("changed %+v, want only web", res.Changed)
		}
		images := nested(t, c.get(t, "paused"), "spec", "source", "kustomize", "images")
		for _, e := range images.([]any) {
			if strings.HasPrefix(e.(string), ecrApp+":v0.0.2") {
				t.Errorf("the paused image was written: %v", images)
			}
		}
	})

	t.Run("conflicting update by another client", func(t *testing.T) {
		stale := c.create(t, seedApp("conflict"))
		// Another writer changes the same Application, and even the same
		// list, after our cached copy was taken.
		c.mergePatch(t, "conflict", `{"metadata":{"labels":{"team":"web"}},"spec":{"source":{"kustomize":{"images":["busybox:1.36"]}}}}`)
		dc, count := countingClient(t, c.kube.Config)
		res, err := NewWriter(dc).writeOne(t.Context(), stale, update{Namespace: "argocd", Name: "conflict", SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Written {
			t.Fatalf("result = %+v, want a patch", res)
		}
		if count.get(http.MethodPatch) != 2 || count.get(http.MethodGet) != 1 {
			t.Errorf("requests = %v, want a rejected PATCH, a GET and an accepted PATCH", count.counts)
		}
		after := c.get(t, "conflict")
		if d := cmp.Diff([]any{"busybox:1.36", ecrApp + ":v0.0.2"}, nested(t, after, "spec", "source", "kustomize", "images")); d != "" {
			t.Errorf("images (-want +got):\n%s", d)
		}
		if got := after.GetLabels()["team"]; got != "web" {
			t.Errorf("the other client's label is %q, want web", got)
		}
	})

	t.Run("the record of the write in the same patch, asked again after a conflict", func(t *testing.T) {
		stale := c.create(t, seedApp("recorded"))
		// A person pauses web after the copy was taken: the retry writes app
		// alone, and its record says so.
		c.mergePatch(t, "recorded", `{"metadata":{"annotations":{"argocd-image-updater.argoproj.io/web.ignore-tags":"*","team.example.com/owner":"a/b~c"}}}`)
		dc, count := countingClient(t, c.kube.Config)
		var asked [][]string
		record := func(res writeback.Result) map[string]string {
			asked = append(asked, aliases(res.Changed))
			return map[string]string{
				"argocd-image-updater.argoproj.io/health-gate-state": strings.Join(aliases(res.Changed), ","),
				"argocd-image-updater.argoproj.io/last-update":       "to " + strings.Join(aliases(res.Changed), ","),
				"argocd-image-updater.argoproj.io/unset":             "",
			}
		}
		res, err := NewWriter(dc).writeOne(t.Context(), stale, update{Namespace: "argocd", Name: "recorded", SourceIndex: -1, SourceType: application.SourceKustomize, Record: record, Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
			{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb)}, New: imageref.Version{Tag: "v0.0.2"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([][]string{{"app", "web"}, {"app"}}, asked); d != "" {
			t.Errorf("Record asked with (-want +got):\n%s", d)
		}
		want := map[string]string{"argocd-image-updater.argoproj.io/health-gate-state": "app", "argocd-image-updater.argoproj.io/last-update": "to app"}
		if !res.Written || !maps.Equal(res.Recorded, want) {
			t.Fatalf("result = %+v, want app written and recorded as %v", res, want)
		}
		if count.get(http.MethodPatch) != 2 || count.get(http.MethodGet) != 1 {
			t.Errorf("requests = %v, want a rejected PATCH, a GET and one accepted PATCH carrying the record", count.counts)
		}
		after := c.get(t, "recorded")
		for key, value := range want {
			if got := after.GetAnnotations()[key]; got != value {
				t.Errorf("annotation %s is %q, want %q", key, got, value)
			}
		}
		if _, set := after.GetAnnotations()["argocd-image-updater.argoproj.io/unset"]; set {
			t.Error("an empty value of the record was set")
		}
		if got := after.GetAnnotations()["team.example.com/owner"]; got != "a/b~c" {
			t.Errorf("another annotation is %q, want it kept", got)
		}
	})

	t.Run("no record without annotations: the copy may lack others'", func(t *testing.T) {
		c.create(t, seedApp("unannotated"))
		before := c.mergePatch(t, "unannotated", `{"metadata":{"annotations":null}}`)
		if before.GetAnnotations() != nil {
			t.Fatalf("annotations %v left", before.GetAnnotations())
		}
		dc, _ := countingClient(t, c.kube.Config)
		res, err := NewWriter(dc).writeOne(t.Context(), before, update{Namespace: "argocd", Name: "unannotated", SourceIndex: -1, SourceType: application.SourceKustomize,
			Record: func(writeback.Result) map[string]string {
				return map[string]string{"argocd-image-updater.argoproj.io/health-gate-state": "x"}
			},
			Images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Written || res.Recorded != nil {
			t.Errorf("result = %+v, want written, nothing recorded", res)
		}
	})

	t.Run("conflict beyond the retry limit", func(t *testing.T) {
		stale := c.create(t, seedApp("conflict-limit"))
		c.mergePatch(t, "conflict-limit", `{"metadata":{"labels":{"team":"web"}}}`)
		_, err := NewWriter(c.other, WithConflictRetries(0)).writeOne(t.Context(), stale, update{Namespace: "argocd", Name: "conflict-limit", SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
		}})
		if err == nil || !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "argocd/conflict-limit") {
			t.Fatalf("error = %v, want a conflict naming argocd/conflict-limit", err)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(c.get(t, "conflict-limit").Object, "spec", "source", "kustomize"); found {
			t.Error("kustomize images were written despite the error")
		}
	})

	t.Run("sources reordered while writing", func(t *testing.T) {
		stale := c.create(t, `
metadata: {name: reordered}
spec:
  project: default
  destination: {server: "https://kubernetes.default.svc", namespace: demo}
  sources:
  - {repoURL: "https://charts.example.com", chart: web, targetRevision: 1.2.3}
  - {repoURL: "https://github.com/example/manifests", path: overlays/prod, targetRevision: main}
`)
		c.mergePatch(t, "reordered", `{"spec":{"sources":[
			{"repoURL":"https://github.com/example/manifests","path":"overlays/prod","targetRevision":"main"},
			{"repoURL":"https://charts.example.com","chart":"web","targetRevision":"1.2.3"}]}}`)
		current := c.get(t, "reordered")
		_, err := NewWriter(c.other).writeOne(t.Context(), stale, update{Namespace: "argocd", Name: "reordered", SourceIndex: 1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
		}})
		if err == nil || !strings.Contains(err.Error(), "source 1 changed while writing") || !strings.Contains(err.Error(), "argocd/reordered") {
			t.Fatalf("error = %v, want one saying source 1 of argocd/reordered changed", err)
		}
		if rv := c.get(t, "reordered").GetResourceVersion(); rv != current.GetResourceVersion() {
			t.Error("the Application was written despite the error")
		}
	})

	t.Run("source removed while writing", func(t *testing.T) {
		stale := c.create(t, `
metadata: {name: removed}
spec:
  project: default
  destination: {server: "https://kubernetes.default.svc", namespace: demo}
  sources:
  - {repoURL: "https://charts.example.com", chart: web, targetRevision: 1.2.3}
  - {repoURL: "https://github.com/example/manifests", path: overlays/prod, targetRevision: main}
`)
		c.mergePatch(t, "removed", `{"spec":{"sources":[{"repoURL":"https://charts.example.com","chart":"web","targetRevision":"1.2.3"}]}}`)
		// The stale patch now names a path that does not exist, which the
		// API server rejects with 422 before it compares versions; the
		// writer must still see the conflict and re-read.
		dc, count := countingClient(t, c.kube.Config)
		_, err := NewWriter(dc).writeOne(t.Context(), stale, update{Namespace: "argocd", Name: "removed", SourceIndex: 1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
		}})
		if err == nil || !strings.Contains(err.Error(), "spec.sources has 1 entries, no index 1") || !strings.Contains(err.Error(), "argocd/removed") {
			t.Fatalf("error = %v, want one saying argocd/removed has no source 1", err)
		}
		if count.get(http.MethodPatch) != 1 || count.get(http.MethodGet) != 1 {
			t.Errorf("requests = %v, want one PATCH and one GET", count.counts)
		}
	})

	t.Run("dry run sends nothing", func(t *testing.T) {
		before := c.create(t, seedApp("dry-run"))
		dc, count := countingClient(t, c.kube.Config)
		res, err := NewWriter(dc, WithDryRun(true)).writeOne(t.Context(), before, update{Namespace: "argocd", Name: "dry-run", SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Written || len(res.Changed) != 1 {
			t.Errorf("result = %+v, want one change, not patched", res)
		}
		var ops []jsonPatchOp
		if err := json.Unmarshal(res.Patch, &ops); err != nil || len(ops) != 2 || ops[1].Path != "/spec/source/kustomize" {
			t.Errorf("patch = %s (%v), want the resourceVersion and kustomize operations", res.Patch, err)
		}
		if n := count.total(); n != 0 {
			t.Errorf("sent %d requests: %v", n, count.counts)
		}
		if rv := c.get(t, "dry-run").GetResourceVersion(); rv != before.GetResourceVersion() {
			t.Errorf("resourceVersion changed from %s to %s", before.GetResourceVersion(), rv)
		}
	})

	t.Run("missing Application", func(t *testing.T) {
		_, err := NewWriter(c.other).writeOne(t.Context(), nil, update{Namespace: "argocd", Name: "absent", SourceIndex: -1, SourceType: application.SourceHelm, Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
		}})
		if err == nil || !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "argocd/absent") {
			t.Fatalf("error = %v, want not found naming argocd/absent", err)
		}
	})

	t.Run("invalid update is refused before any request", func(t *testing.T) {
		dc, count := countingClient(t, c.kube.Config)
		_, err := NewWriter(dc).writeOne(context.Background(), nil, update{Namespace: "argocd", Name: "main", SourceIndex: -1, SourceType: "Plugin", Images: []writeback.ImageUpdate{
			{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
		}})
		if err == nil || !strings.Contains(err.Error(), "argocd/main") {
			t.Fatalf("error = %v, want one naming argocd/main", err)
		}
		if count.total() != 0 {
			t.Errorf("sent requests: %v", count.counts)
		}
	})
}

// TestArgoCDWriterKeepsUnknownFields runs against Argo CD 3's Application
// CRD: fields it added, which an Argo CD 2.14 client's Go types do not
// have, must survive a write-back.
func TestArgoCDWriterKeepsUnknownFields(t *testing.T) {
	c := startCluster(t, testenv.WithCRDs(testenv.ArgoCDCRD(t, "github.com/argoproj/argo-cd/v3", "v3.3.19")))

	before := c.create(t, `
metadata: {name: v3-fields}
spec:
  project: default
  destination: {server: "https://kubernetes.default.svc", namespace: demo}
  syncPolicy:
    automated: {enabled: true, prune: true}
    retry: {limit: 3, refresh: true}
  sources:
  - repoURL: https://charts.example.com
    chart: web
    targetRevision: 1.2.3
    helm:
      parameters: [{name: replicaCount, value: "3"}]
      valuesObject:
        ingress: {enabled: true, hosts: [{host: web.example.com, paths: [/]}]}
        anything: {nested: [1, "two", {three: 3}]}
  - repoURL: https://github.com/example/manifests
    path: overlays/prod
    targetRevision: main
    kustomize:
      ignoreMissingComponents: true
      labelIncludeTemplates: true
      components: [../components/extra]
`)
	// Guard against a vacuous test: these fields must really be unknown to
	// Argo CD 2.14, whose schema (as its Go types) lacks them.
	old := crdSchema(t, testenv.ArgoCDCRD(t, "github.com/argoproj/argo-cd/v2", "v2.14.21"))
	for _, path := range [][]string{
		{"spec", "syncPolicy", "automated", "enabled"},
		{"spec", "syncPolicy", "retry", "refresh"},
		{"spec", "sources", "kustomize", "ignoreMissingComponents"},
		{"spec", "sources", "kustomize", "labelIncludeTemplates"},
	} {
		if schemaHas(old, path) {
			t.Fatalf("%s is known to Argo CD 2.14; pick a newer field", strings.Join(path, "."))
		}
	}
	for _, path := range [][]string{{"spec", "syncPolicy", "automated", "enabled"}, {"spec", "syncPolicy", "retry", "refresh"}} {
		if _, found, _ := unstructured.NestedFieldNoCopy(before.Object, path...); !found {
			t.Fatalf("%s was not stored by the API server", strings.Join(path, "."))
		}
	}

	w := NewWriter(c.other)
	img := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb)}, New: imageref.Version{Tag: "v0.0.3"}}
	if _, err := w.writeOne(t.Context(), before, update{Namespace: "argocd", Name: "v3-fields", SourceIndex: 0, SourceType: application.SourceHelm, Images: []writeback.ImageUpdate{img}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.writeOne(t.Context(), nil, update{Namespace: "argocd", Name: "v3-fields", SourceIndex: 1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{img}}); err != nil {
		t.Fatal(err)
	}
	after := c.get(t, "v3-fields")

	wantHelm := []any{map[string]any{"name": "replicaCount", "value": "3"}, param("image.name", ecrWeb), param("image.tag", "v0.0.3")}
	if d := cmp.Diff(wantHelm, sourceAt(t, after, 0)["helm"].(map[string]any)["parameters"]); d != "" {
		t.Errorf("helm parameters (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]any{ecrWeb + ":v0.0.3"}, sourceAt(t, after, 1)["kustomize"].(map[string]any)["images"]); d != "" {
		t.Errorf("kustomize images (-want +got):\n%s", d)
	}
	// Everything but the two lists written is as it was, the v3-only
	// fields and the free-form valuesObject included.
	b, a := withoutServerFields(before), withoutServerFields(after)
	for _, obj := range []map[string]any{b, a} {
		sources := obj["spec"].(map[string]any)["sources"].([]any)
		delete(sources[0].(map[string]any)["helm"].(map[string]any), "parameters")
		delete(sources[1].(map[string]any)["kustomize"].(map[string]any), "images")
	}
	if d := cmp.Diff(b, a); d != "" {
		t.Errorf("fields other than the written lists changed (-before +after):\n%s", d)
	}
	for _, path := range [][]string{
		{"spec", "syncPolicy", "automated", "enabled"},
		{"spec", "syncPolicy", "retry", "refresh"},
	} {
		if v := nested(t, after, path...); v != true {
			t.Errorf("%s = %v after the write, want true", strings.Join(path, "."), v)
		}
	}
	kustomize := sourceAt(t, after, 1)["kustomize"].(map[string]any)
	if kustomize["ignoreMissingComponents"] != true || kustomize["labelIncludeTemplates"] != true {
		t.Errorf("v3 kustomize fields lost: %v", kustomize)
	}
}

// crdSchema is the OpenAPI schema of a CRD file's first version.
func crdSchema(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	if len(versions) == 0 {
		t.Fatalf("%s has no versions", path)
	}
	schema, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema")
	return schema
}

// schemaHas tells whether a schema declares a field path, list items
// stepped into.
func schemaHas(schema map[string]any, path []string) bool {
	node := schema
	for _, key := range path {
		if items, ok := node["items"].(map[string]any); ok && node["type"] == "array" {
			node = items
		}
		props, _ := node["properties"].(map[string]any)
		next, ok := props[key].(map[string]any)
		if !ok {
			return false
		}
		node = next
	}
	return true
}
