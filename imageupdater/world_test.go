package imageupdater_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageupdater"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback/argocd"

	"github.com/image-updater/argocd-image-updater/test/poll"
)

// servers are the API server (with the ImageUpdater CRD and an audit log)
// and the registry the tests of this package share; each test works in a
// namespace of its own.
type servers struct {
	k        *testenv.Kube
	reg      *testenv.Registry
	tagLists atomic.Int64
	proxy    string // host of the counting proxy in front of reg
}

func startServers(t *testing.T) *servers {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the test servers")
	}
	s := &servers{
		k:   testenv.StartKube(t, testenv.WithImageUpdaterCRD(api.AddToScheme), testenv.WithAuditLog()),
		reg: testenv.StartRegistry(t),
	}
	target := &url.URL{Scheme: "http", Host: s.reg.Host}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/tags/list") {
			s.tagLists.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.proxy = strings.TrimPrefix(srv.URL, "http://")
	return s
}

// world is the controller as the run command wires it, for one namespace.
type world struct {
	*servers
	ns      string
	dyn     dynamic.Interface
	cs      kubernetes.Interface
	watcher *appwatch.Watcher
	source  *imageupdater.Source
	updater *cycle.Updater
	logs    *testenv.SyncBuffer
}

// world watches ns, where the test works, and more namespaces.
func (s *servers) world(t *testing.T, ns string, more ...string) *world {
	t.Helper()
	return s.worldWith(t, ns, more, nil)
}

// worldWith is world with more options of the update cycle.
func (s *servers) worldWith(t *testing.T, ns string, more []string, opts []cycle.Option) *world {
	t.Helper()
	for _, n := range append([]string{ns}, more...) {
		s.k.CreateNamespace(t, n)
	}
	w := &world{servers: s, ns: ns, logs: &testenv.SyncBuffer{}}
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.dyn = dynamic.NewForConfigOrDie(s.k.Config)
	w.cs = kubernetes.NewForConfigOrDie(s.k.Config)
	conf, err := config.Parse("registries.conf", []byte(fmt.Sprintf(`registries:
- name: test
  prefix: %s
  api_url: http://%s
  credentials: env:REGISTRY_CREDS
`, s.reg.Host, s.proxy)))
	if err != nil {
		t.Fatal(err)
	}
	creds := s.reg.Username + ":" + s.reg.Password
	resolver := credentials.NewResolver(
		credentials.WithSecretGetter(credentials.NewKubeSecretGetter(w.cs)),
		credentials.WithEnv(func(k string) (string, bool) { return creds, k == "REGISTRY_CREDS" }),
	)
	regClient := registry.NewClient(registry.WithConfig(func() *config.Config { return conf }), registry.WithCredentialResolver(resolver))
	w.watcher, err = appwatch.NewWatcher(w.dyn, appwatch.Namespaces(append([]string{ns}, more...)...), appwatch.KeepUnannotated(), appwatch.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	w.source = imageupdater.NewSource(w.dyn, w.watcher, imageupdater.Namespaces(append([]string{ns}, more...)...), imageupdater.WithLogger(logger))
	if err := w.watcher.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := w.source.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster()
	t.Cleanup(broadcaster.Shutdown)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: w.cs.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "argocd-image-updater"})
	w.updater, err = cycle.New(w.source, regClient, argocd.NewWriter(w.dyn), append(opts,
		cycle.WithRegistryConfig(func() *config.Config { return conf }),
		cycle.WithSignatures(signature.NewVerifier(regClient), credentials.NewKubeSecretGetter(w.cs), nil),
		cycle.WithControllerNamespace(testenv.ArgoCDNamespace),
		cycle.WithEvents(cycle.NewEventReporter(recorder)),
		cycle.WithLogger(logger),
		cycle.WithObserver(imageupdater.NewStatus(w.dyn, w.source, imageupdater.WithStatusLogger(logger))),
	)...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// image is the registry's name of a repository of the test's namespace.
func (w *world) image(repo string) string { return w.reg.Repo(w.ns + "/" + repo) }

// push pushes tags of a repository of the test's namespace.
func (w *world) push(t *testing.T, repo string, tags ...string) {
	t.Helper()
	w.reg.PushTags(t, w.ns+"/"+repo, tags)
}

// app builds an Application of the test's namespace with a Kustomize
// source running images.
func (w *world) app(name string, labels, annotations map[string]string, running ...string) *unstructured.Unstructured {
	imgs := make([]any, len(running))
	for i, r := range running {
		imgs[i] = r
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": w.ns},
		"spec": map[string]any{
			"project": "default",
			"source": map[string]any{
				"repoURL": "https://git.example.com/deploy.git", "path": "apps/" + name, "targetRevision": "main",
				"kustomize": map[string]any{},
			},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": w.ns},
		},
		"status": map[string]any{"summary": map[string]any{"images": imgs}},
	}}
	obj.SetLabels(labels)
	a := map[string]string{}
	for k, v := range annotations {
		a[settings.AnnotationPrefix+k] = v
	}
	obj.SetAnnotations(a)
	return obj
}

// helmApp is app with a Helm source.
func (w *world) helmApp(name string, running ...string) *unstructured.Unstructured {
	obj := w.app(name, nil, nil, running...)
	_ = unstructured.SetNestedMap(obj.Object, map[string]any{
		"repoURL": "https://git.example.com/deploy.git", "path": "charts/" + name, "targetRevision": "main",
		"helm": map[string]any{},
	}, "spec", "source")
	return obj
}

// createApps creates Applications and waits until the watcher has them.
func (w *world) createApps(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, obj := range objs {
		if _, err := w.dyn.Resource(application.Resource()).Namespace(w.ns).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll.True(t, 15*time.Second, "the watcher to hold the created Applications", func() bool { return len(w.watcher.InNamespace(w.ns)) >= len(objs) })
}

// createUpdater creates an ImageUpdater and waits until the source has it.
func (w *world) createUpdater(t *testing.T, iu *api.ImageUpdater) {
	t.Helper()
	iu.Namespace = w.ns
	if err := w.k.Client.Create(t.Context(), iu); err != nil {
		t.Fatalf("create ImageUpdater %s: %v", iu.Name, err)
	}
	w.waitForUpdater(t, iu.Name, iu.Generation)
}

// waitForUpdater waits until the source sees at least generation gen of
// the ImageUpdater.
func (w *world) waitForUpdater(t *testing.T, name string, gen int64) {
	t.Helper()
	poll.True(t, 15*time.Second, fmt.Sprintf("the source to hold generation %d of the ImageUpdater %s", gen, name), func() bool {
		iu := w.getUpdater(t, name)
		return iu.Generation >= gen && w.sourceHas(name, iu.ResourceVersion)
	})
}

func (w *world) sourceHas(name, resourceVersion string) bool {
	for _, r := range w.source.Resources() {
		if r.Name == name && r.ResourceVersion == resourceVersion {
			return true
		}
	}
	return false
}

func (w *world) getUpdater(t *testing.T, name string) *api.ImageUpdater {
	t.Helper()
	iu := &api.ImageUpdater{}
	if err := w.k.Client.Get(t.Context(), client.ObjectKey{Namespace: w.ns, Name: name}, iu); err != nil {
		t.Fatal(err)
	}
	return iu
}

// syncUpdater waits until the source holds the ImageUpdater as the API
// server has it now (after a status write, say).
func (w *world) syncUpdater(t *testing.T, name string) {
	t.Helper()
	rv := w.getUpdater(t, name).ResourceVersion
	poll.True(t, 15*time.Second, "the source to hold the ImageUpdater "+name+" at resourceVersion "+rv, func() bool { return w.sourceHas(name, rv) })
}

func (w *world) getApp(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := w.dyn.Resource(application.Resource()).Namespace(w.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// syncApp waits until the watcher holds the Application as the API server
// has it now.
func (w *world) syncApp(t *testing.T, name string) {
	t.Helper()
	rv := w.getApp(t, name).GetResourceVersion()
	poll.True(t, 15*time.Second, "the watcher to hold the Application "+name+" at resourceVersion "+rv, func() bool {
		for _, o := range w.watcher.InNamespace(w.ns) {
			if o.Name() == name {
				return o.GetObjectMeta().GetResourceVersion() == rv
			}
		}
		return false
	})
}

func helmParameters(t *testing.T, obj *unstructured.Unstructured) map[string]string {
	t.Helper()
	params, _, _ := unstructured.NestedSlice(obj.Object, "spec", "source", "helm", "parameters")
	out := map[string]string{}
	for _, p := range params {
		m := p.(map[string]any)
		out[m["name"].(string)] = m["value"].(string)
	}
	return out
}

func (w *world) events(t *testing.T, name string) []corev1.Event {
	t.Helper()
	list, err := w.cs.CoreV1().Events(w.ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// statusPatches counts the status writes of the namespace's ImageUpdaters.
func (w *world) statusPatches(t *testing.T) int {
	t.Helper()
	n := 0
	for _, r := range w.k.AuditLog(t) {
		if r.Resource == "imageupdaters" && r.Subresource == "status" && r.Namespace == w.ns &&
			r.Verb == "patch" && r.Stage == "ResponseComplete" {
			n++
		}
	}
	return n
}

func ptr[T any](v T) *T { return &v }
