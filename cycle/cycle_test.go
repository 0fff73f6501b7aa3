package cycle

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback/argocd"
	"github.com/image-updater/argocd-image-updater/writeback/git"

	"github.com/image-updater/argocd-image-updater/test/poll"
)

const prefix = settings.AnnotationPrefix

// world is an API server and a registry with the updater wired to them
// the way the run command wires it.
type world struct {
	k        *testenv.Kube
	reg      *testenv.Registry
	dyn      dynamic.Interface
	cs       kubernetes.Interface
	watcher  *appwatch.Watcher
	updater  *Updater
	metrics  *Metrics
	promReg  *prometheus.Registry
	requests *requestCounter
	// logs holds what the updater and its git writer logged, as text.
	logs *testenv.SyncBuffer
}

// requestCounter is a proxy in front of the test registry that counts the
// tag-list and manifest HEAD requests reaching it.
type requestCounter struct {
	host     string // of the proxy, for api_url
	tagLists atomic.Int64
	heads    atomic.Int64
}

func startRequestCounter(t *testing.T, registryHost string) *requestCounter {
	t.Helper()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: registryHost})
	c := &requestCounter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/tags/list") {
			c.tagLists.Add(1)
		}
		if r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/") {
			c.heads.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.host = strings.TrimPrefix(srv.URL, "http://")
	return c
}

type worldOptions struct {
	dryRun bool
	// names limits the world to Applications matching this glob, so
	// subtests sharing an API server do not see each other's.
	names string
	// wrap, if set, stands between the updater and the registry client.
	wrap func(Registry) Registry
	// git wires the git write-back, with Argo CD's repository Secrets and
	// AppProjects read from the argocd namespace.
	git bool
	// gitOptions are more options of the git write-back.
	gitOptions []git.Option
	// registries are more registries.conf entries, YAML list items.
	registries string
	// updater are more options of the updater.
	updater []Option
	// signatures checks cosign signatures, with keys from the API server,
	// and keyless ones against trustedRoot when set.
	signatures  bool
	trustedRoot *signature.TrustedRoot
}

// panicEnv is a variable whose lookup panics, as a bug on hostile input
// inside the registry client would.
const panicEnv = "PANIC_CREDS"

func newWorld(t *testing.T, k *testenv.Kube, reg *testenv.Registry, o worldOptions) *world {
	t.Helper()
	w := &world{k: k, reg: reg, promReg: prometheus.NewRegistry(), logs: &testenv.SyncBuffer{}}
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := rest.CopyConfig(k.Config)
	var err error
	w.metrics, err = NewMetrics(w.promReg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Wrap(w.metrics.WrapKubeTransport)
	w.dyn = dynamic.NewForConfigOrDie(cfg)
	w.cs = kubernetes.NewForConfigOrDie(cfg)

	w.requests = startRequestCounter(t, reg.Host)
	conf, err := config.Parse("registries.conf", []byte(fmt.Sprintf(`registries:
- name: test
  prefix: %s
  api_url: http://%s
  credentials: env:REGISTRY_CREDS
%s`, reg.Host, w.requests.host, o.registries)))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"REGISTRY_CREDS": reg.Username + ":" + reg.Password}
	resolver := credentials.NewResolver(
		credentials.WithSecretGetter(credentials.NewKubeSecretGetter(w.cs)),
		credentials.WithEnv(func(k string) (string, bool) {
			if k == panicEnv {
				panic("injected: lookup of " + k)
			}
			v, ok := env[k]
			return v, ok
		}),
	)
	client := registry.NewClient(
		registry.WithConfig(func() *config.Config { return conf }),
		registry.WithCredentialResolver(resolver),
	)
	w.watcher, err = appwatch.NewWatcher(w.dyn, appwatch.Namespaces(testenv.ArgoCDNamespace), appwatch.MatchNames(o.names))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.watcher.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster()
	t.Cleanup(broadcaster.Shutdown)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: w.cs.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "argocd-image-updater"})
	var regClient Registry = client
	if o.wrap != nil {
		regClient = o.wrap(client)
	}
	opts := []Option{
		WithRegistryConfig(func() *config.Config { return conf }),
		WithControllerNamespace(testenv.ArgoCDNamespace),
		WithDryRun(o.dryRun),
		WithMetrics(w.metrics),
		WithEvents(NewEventReporter(recorder)),
		WithLogger(logger),
		WithControllerNamespace(testenv.ArgoCDNamespace),
	}
	if o.git {
		gw, err := git.NewWriter(repoaccess.NewKubeSecretLister(w.cs), repoaccess.NewKubeAppProjectGetter(w.dyn),
			append([]git.Option{git.WithArgoCDNamespace(testenv.ArgoCDNamespace), git.WithWorkDir(t.TempDir()),
				git.WithDryRun(o.dryRun), git.WithLogger(logger)}, o.gitOptions...)...)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, WithGitWriter(gw), WithGitTags(gw))
	}
	if o.signatures {
		opts = append(opts, WithSignatures(signature.NewVerifier(client), credentials.NewKubeSecretGetter(w.cs), o.trustedRoot))
	}
	opts = append(opts, o.updater...)
	w.updater = mustNew(t, w.watcher, regClient, argocd.NewWriter(w.dyn, argocd.WithDryRun(o.dryRun)), opts...)
	return w
}

// application builds an Application with a kustomize source unless spec
// says otherwise.
func appObject(name string, annotations map[string]string, spec map[string]any, running ...string) *unstructured.Unstructured {
	if spec == nil {
		spec = map[string]any{"source": map[string]any{
			"repoURL": "https://git.example.com/deploy.git", "path": "main/overlays/production", "targetRevision": "main",
			"kustomize": map[string]any{},
		}}
	}
	spec["project"] = "default"
	spec["destination"] = map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": testenv.ArgoCDNamespace},
		"spec":     spec,
	}}
	a := map[string]string{}
	for k, v := range annotations {
		a[prefix+k] = v
	}
	obj.SetAnnotations(a)
	if len(running) > 0 {
		imgs := make([]any, len(running))
		for i, r := range running {
			imgs[i] = r
		}
		obj.Object["status"] = map[string]any{"summary": map[string]any{"images": imgs}}
	}
	return obj
}

func (w *world) create(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, obj := range objs {
		if _, err := w.dyn.Resource(application.Resource()).Namespace(obj.GetNamespace()).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The informer sees the new objects shortly after they are written.
	poll.True(t, 15*time.Second, "the watcher to hold the created Applications", func() bool {
		n := 0
		for _, a := range w.watcher.Applications() {
			for _, obj := range objs {
				if a.Name == obj.GetName() {
					n++
				}
			}
		}
		return n == len(objs)
	})
}

func (w *world) get(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// syncWatcher waits until the informer holds the Application's latest
// resourceVersion, so the next cycle sees what the last one wrote.
func (w *world) syncWatcher(t *testing.T, name string) {
	t.Helper()
	want := w.get(t, name).GetResourceVersion()
	poll.True(t, 15*time.Second, "the watcher to hold the Application "+name+" at resourceVersion "+want, func() bool {
		for _, a := range w.watcher.Applications() {
			if a.Name == name {
				return a.Object().GetResourceVersion() == want
			}
		}
		return false
	})
}

func (w *world) events(t *testing.T, name string) []corev1.Event {
	t.Helper()
	list, err := w.cs.CoreV1().Events(testenv.ArgoCDNamespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// startStallingRegistry is a registry API server that stops halfway
// through one answer and sends nothing more until the client gives up:
// the tag list of app when stallOn is "tags", else the manifest its tag
// latest points to. It returns the server's host.
func startStallingRegistry(t *testing.T, stallOn string) string {
	t.Helper()
	const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	gone := make(chan struct{})
	stall := func(w http.ResponseWriter, r *http.Request, part string) {
		_, _ = io.WriteString(w, part)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-gone:
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/":
		case "/v2/app/tags/list":
			w.Header().Set("Content-Type", "application/json")
			if stallOn == "tags" {
				stall(w, r, `{"name":"app","tags":["latest",`)
				return
			}
			_, _ = io.WriteString(w, `{"name":"app","tags":["latest"]}`)
		case "/v2/app/manifests/latest", "/v2/app/manifests/" + digest:
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", digest)
			w.Header().Set("Content-Length", "400")
			if r.Method == http.MethodGet {
				stall(w, r, `{"schemaVersion":2,`)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(gone) })
	return strings.TrimPrefix(srv.URL, "http://")
}

// silentListener accepts connections and never answers, counting those
// open, as a registry that holds its clients would.
type silentListener struct {
	host string
	open atomic.Int32
}

func startSilentListener(t *testing.T) *silentListener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentListener{host: l.Addr().String()}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.open.Add(1)
			go func() {
				defer s.open.Add(-1)
				// Read until the client hangs up; answer nothing.
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return s
}
