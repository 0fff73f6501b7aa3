package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// chartPackage is a chart archive as `helm package` writes it: one
// Deployment, front, whose image is the chart's version, so that what Argo
// CD deployed tells which chart it rendered.
func chartPackage(t testing.TB, chart, version, image string) []byte {
	t.Helper()
	files := []struct{ name, body string }{
		{chart + "/Chart.yaml", fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\n", chart, version)},
		{chart + "/values.yaml", fmt.Sprintf("image: %s:%s\n", image, version)},
		{chart + "/templates/deployment.yaml", deployment("front", "      - name: app\n        image: \"{{ .Values.image }}\"\n")},
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// chartRepo is an HTTP Helm repository: index.yaml and the archives.
type chartRepo struct {
	URL      string
	mu       sync.Mutex
	archives map[string][]byte // file name to archive
	versions map[string][]string
}

func startChartRepo(t testing.TB) *chartRepo {
	t.Helper()
	r := &chartRepo{archives: map[string][]byte{}, versions: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.URL.Path == "/index.yaml" {
			_, _ = w.Write(r.index())
			return
		}
		a, ok := r.archives[req.URL.Path[1:]]
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(a)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// publish adds a version of a chart.
func (r *chartRepo) publish(t testing.TB, chart, version, image string) {
	a := chartPackage(t, chart, version, image)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.archives[chart+"-"+version+".tgz"] = a
	r.versions[chart] = append(r.versions[chart], version)
}

// index is index.yaml as `helm repo index` writes it.
func (r *chartRepo) index() []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nentries:\n")
	charts := make([]string, 0, len(r.versions))
	for c := range r.versions {
		charts = append(charts, c)
	}
	sort.Strings(charts)
	for _, c := range charts {
		fmt.Fprintf(&b, "  %s:\n", c)
		for _, v := range r.versions[c] {
			sum := sha256.Sum256(r.archives[c+"-"+v+".tgz"])
			fmt.Fprintf(&b, "  - apiVersion: v2\n    created: \"2026-01-01T00:00:00Z\"\n    description: |\n      version: 0.0.0 is not this entry's\n    digest: %s\n    name: %s\n    urls:\n    - %s-%s.tgz\n    version: %s\n",
				hex.EncodeToString(sum[:]), c, c, v, v)
		}
	}
	b.WriteString("generated: \"2026-01-01T00:00:00Z\"\n")
	return b.Bytes()
}

// pushChart pushes a chart archive to an OCI registry as `helm push`
// does: its metadata as the config, the archive as the one layer, the
// version as the tag ('+' written '_').
func pushChart(t testing.TB, reg *testenv.Registry, repo, chart, version, image string) {
	t.Helper()
	ref, err := name.ParseReference(reg.Repo(repo+"/"+chart)+":"+version, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	opts := []remote.Option{remote.WithAuth(reg.Auth()), remote.WithContext(t.Context())}
	config := static.NewLayer([]byte(fmt.Sprintf(`{"apiVersion":"v2","name":%q,"version":%q}`, chart, version)), "application/vnd.cncf.helm.config.v1+json")
	layer := static.NewLayer(chartPackage(t, chart, version, image), "application/vnd.cncf.helm.chart.content.v1.tar+gzip")
	var descs []v1.Descriptor
	for _, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(ref.Context(), l, opts...); err != nil {
			t.Fatal(err)
		}
		d, _ := l.Digest()
		size, _ := l.Size()
		mt, _ := l.MediaType()
		descs = append(descs, v1.Descriptor{MediaType: mt, Digest: d, Size: size})
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: descs[0], Layers: descs[1:]}
	raw, err := jsonMarshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(ref, rawManifest{raw: raw, mediaType: types.OCIManifestSchema1}, opts...); err != nil {
		t.Fatal(err)
	}
}

type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }

// targetRevision is the Application's chart version: of spec.source, or
// of spec.sources[i].
func (w *world) targetRevision(t testing.TB, app string, i int) string {
	t.Helper()
	obj := w.application(t, app).Object
	if i < 0 {
		rev, _, _ := unstructured.NestedString(obj, "spec", "source", "targetRevision")
		return rev
	}
	sources, _, _ := unstructured.NestedSlice(obj, "spec", "sources")
	rev, _, _ := unstructured.NestedString(sources[i].(map[string]any), "targetRevision")
	return rev
}

// TestCharts: charts of an HTTP Helm repository and of an OCI registry
// move to their new versions, within their constraints, and Argo CD
// deploys what the new chart renders.
func TestCharts(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(*testenv.Registry) map[string]string { return map[string]string{"README.md": "charts\n"} })
	image := w.reg.Repo("podinfo-app")

	t.Run("app of apps: the child's chart version committed to the parent's repository", func(t *testing.T) {
		repo := startChartRepo(t)
		repo.publish(t, "guestbook", "1.0.0", image)
		child := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: chart-child\n  namespace: argocd\n  annotations:\n" +
			"    " + settings.AnnotationPrefix + "chart-list: guestbook\n" +
			"    " + settings.AnnotationPrefix + "write-back-method: git\n" +
			"    " + settings.AnnotationPrefix + "write-back-target: app-of-apps\n" +
			"spec:\n  project: default\n  source:\n    repoURL: " + repo.URL + "\n    chart: guestbook\n    targetRevision: 1.0.0 # the chart's version\n" +
			"  destination:\n    server: " + testenv.InCluster + "\n    namespace: chart-child\n" +
			"  syncPolicy:\n    automated:\n      prune: true\n      selfHeal: true\n"
		w.git.CommitFiles(t, "deploy", "main", "add the charts' app of apps", map[string]string{"chart-apps/child.yaml": child})
		w.k.CreateNamespace(t, "chart-root")
		w.k.CreateNamespace(t, "chart-child")
		w.createAppSpec(t, "chart-root", map[string]any{"source": map[string]any{"repoURL": w.git.HTTPRepoURL("deploy"), "path": "chart-apps", "targetRevision": "main"}}, testenv.InCluster, nil)
		w.waitCreated(t, "chart-child", "chart-root")
		w.waitDeployed(t, "chart-child", "front", image+":1.0.0")

		repo.publish(t, "guestbook", "1.1.0", image)
		w.runOnce(t, "chart-child")
		// The parent's sync, which the updater's refresh starts, gives the
		// child its new version.
		w.waitDeployed(t, "chart-child", "front", image+":1.1.0")
		if got, want := w.git.ReadFile(t, "deploy", "main", "chart-apps/child.yaml"), strings.Replace(child, "1.0.0 #", "1.1.0 #", 1); got != want {
			t.Errorf("chart-apps/child.yaml after the write-back:\n%s\nwant\n%s", got, want)
		}
	})

	t.Run("app of apps: a Helm parent; the child's chart version committed to the parent's values file", func(t *testing.T) {
		repo := startChartRepo(t)
		repo.publish(t, "guestbook", "1.0.0", image)
		// The parent chart emits an Application for each entry of its
		// values; its template is no YAML, and names no child.
		template := "{{- range $name, $app := .Values.apps }}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {{ $name }}\n  namespace: argocd\n  annotations:\n" +
			"    " + settings.AnnotationPrefix + "chart-list: {{ $app.alias }}={{ $app.chart }}\n" +
			"    " + settings.AnnotationPrefix + "write-back-method: git\n" +
			"    " + settings.AnnotationPrefix + "write-back-target: app-of-apps\n" +
			"spec:\n  project: default\n  source:\n    repoURL: {{ $app.repoURL }}\n    chart: {{ $app.chart }}\n    targetRevision: {{ $app.version | quote }}\n" +
			"  destination:\n    server: {{ $.Values.server }}\n    namespace: {{ $name }}\n" +
			"  syncPolicy:\n    automated:\n      prune: true\n      selfHeal: true\n{{- end }}\n"
		values := "# the platform's applications\nserver: " + testenv.InCluster + "\napps:\n  helm-child:\n    repoURL: " + repo.URL + "\n    chart: guestbook\n    alias: guestbook\n" +
			"    version: 1.0.0 # {\"$imageupdater\": \"argocd/helm-child/guestbook\"} the chart's version\n"
		w.git.CommitFiles(t, "deploy", "main", "add the platform chart", map[string]string{
			"helm-apps/Chart.yaml":          "apiVersion: v2\nname: platform\nversion: 0.1.0\n",
			"helm-apps/templates/apps.yaml": template,
			"helm-apps/values.yaml":         values,
		})
		w.k.CreateNamespace(t, "helm-root")
		w.k.CreateNamespace(t, "helm-child")
		w.createAppSpec(t, "helm-root", map[string]any{"source": map[string]any{"repoURL": w.git.HTTPRepoURL("deploy"), "path": "helm-apps", "targetRevision": "main"}}, testenv.InCluster, nil)
		w.waitCreated(t, "helm-child", "helm-root")
		w.waitDeployed(t, "helm-child", "front", image+":1.0.0")

		repo.publish(t, "guestbook", "1.1.0", image)
		w.runOnce(t, "helm-child")
		// The parent's sync, which the updater's refresh starts, renders
		// the child with its new version.
		w.waitDeployed(t, "helm-child", "front", image+":1.1.0")
		if got, want := w.git.ReadFile(t, "deploy", "main", "helm-apps/values.yaml"), strings.Replace(values, "1.0.0 #", "1.1.0 #", 1); got != want {
			t.Errorf("helm-apps/values.yaml after the write-back:\n%s\nwant\n%s", got, want)
		}
		if got := w.git.ReadFile(t, "deploy", "main", "helm-apps/templates/apps.yaml"); got != template {
			t.Errorf("the template changed:\n%s", got)
		}
		if got := w.targetRevision(t, "helm-child", -1); got != "1.1.0" {
			t.Errorf("targetRevision %s, want 1.1.0", got)
		}
	})

	t.Run("an HTTP Helm repository; a constraint holds a chart back", func(t *testing.T) {
		repo := startChartRepo(t)
		repo.publish(t, "podinfo", "1.0.0", image)
		source := map[string]any{"source": map[string]any{"repoURL": repo.URL, "chart": "podinfo", "targetRevision": "1.0.0"}}
		for app, list := range map[string]string{"chart-http": "podinfo", "chart-held": "podinfo:~1.0"} {
			w.k.CreateNamespace(t, app)
			w.createAppSpec(t, app, source, testenv.InCluster, map[string]string{"chart-list": list, "write-back-method": "argocd"})
		}
		w.waitDeployed(t, "chart-http", "front", image+":1.0.0")
		w.waitDeployed(t, "chart-held", "front", image+":1.0.0")

		repo.publish(t, "podinfo", "1.0.1", image)
		repo.publish(t, "podinfo", "1.1.0", image)
		repo.publish(t, "podinfo", "2.0.0-rc.1", image) // a pre-release: not without a constraint that asks
		w.runOnce(t, "chart-*")
		w.waitDeployed(t, "chart-http", "front", image+":1.1.0")
		w.waitDeployed(t, "chart-held", "front", image+":1.0.1")
		for app, want := range map[string]string{"chart-http": "1.1.0", "chart-held": "1.0.1"} {
			if got := w.targetRevision(t, app, -1); got != want {
				t.Errorf("%s: targetRevision %s, want %s", app, got, want)
			}
		}
	})

	t.Run("an OCI registry, in a multi-source Application", func(t *testing.T) {
		// Argo CD's helm reads a registry without credentials over plain
		// http; the updater reads it as registries.conf says.
		charts := testenv.StartRegistry(t, testenv.WithoutAuth())
		writeFile(t, w.conf, fmt.Sprintf("registries:\n- name: local\n  prefix: %s\n  api_url: http://%s\n  credentials: env:REGISTRY_CREDS\n- name: charts\n  prefix: %s\n  api_url: http://%s\n",
			w.reg.Host, w.reg.Host, charts.Host, charts.Host))
		pushChart(t, charts, "charts", "podinfo", "6.4.0", image)
		// A repository written as a host and path is OCI to Argo CD by
		// its repository Secret.
		w.k.Create(t, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "repo-oci-charts", Namespace: testenv.ArgoCDNamespace,
				Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
			StringData: map[string]string{"type": "helm", "name": "oci-charts", "url": charts.Repo("charts"), "enableOCI": "true"},
		})
		w.k.CreateNamespace(t, "oci-chart")
		w.createAppSpec(t, "oci-chart", map[string]any{"sources": []any{
			map[string]any{"repoURL": w.git.HTTPRepoURL("deploy"), "targetRevision": "main", "ref": "values"},
			map[string]any{"repoURL": charts.Repo("charts"), "chart": "podinfo", "targetRevision": "6.4.0"},
		}}, testenv.InCluster, map[string]string{"chart-list": "podinfo=podinfo:^6", "write-back-method": "argocd"})
		w.waitDeployed(t, "oci-chart", "front", image+":6.4.0")

		pushChart(t, charts, "charts", "podinfo", "6.5.0", image)
		pushChart(t, charts, "charts", "podinfo", "7.0.0", image)
		w.runOnce(t, "oci-chart")
		w.waitDeployed(t, "oci-chart", "front", image+":6.5.0")
		if got := w.targetRevision(t, "oci-chart", 1); got != "6.5.0" {
			t.Errorf("targetRevision %s, want 6.5.0", got)
		}
	})
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
