package testenv

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

var quietControllerRuntime sync.Once

// ArgoCDNamespace is where the tests put Argo CD's objects, as an install does.
const ArgoCDNamespace = "argocd"

// Kube is a running kube-apiserver and etcd with Argo CD's Application and
// AppProject CRDs.
type Kube struct {
	// Config authenticates as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client for Config that knows the
	// Kubernetes and Argo CD types.
	Client client.Client
	Scheme *runtime.Scheme
	env    *envtest.Environment
	// auditLog is the API server's audit log, when WithAuditLog asked for one.
	auditLog string
}

type kubeOptions struct {
	crdPaths        []string
	imageUpdater    bool
	applicationSets bool
	types           []func(*runtime.Scheme) error
	audit           bool
}

// KubeOption changes how StartKube sets up the API server.
type KubeOption func(*kubeOptions)

// WithCRDs installs CRDs from these files or folders instead of Argo CD 2's
// Application and AppProject CRDs (for example Argo CD 3's, from
// ArgoCDCRD).
func WithCRDs(paths ...string) KubeOption {
	return func(o *kubeOptions) { o.crdPaths = paths }
}

// WithImageUpdaterCRD installs this module's ImageUpdater CRD
// (manifests/base/crd) beside the others, and has Client know its Go
// types through addToScheme: the test servers import no package of the
// controller, so the test that wants the types hands them over.
func WithImageUpdaterCRD(addToScheme func(*runtime.Scheme) error) KubeOption {
	return func(o *kubeOptions) { o.imageUpdater = true; o.types = append(o.types, addToScheme) }
}

// WithApplicationSetCRD installs Argo CD's ApplicationSet CRD beside the
// others. Only the tests that need it ask: at 1 MB it is three times the
// Application CRD, and adds seconds to a start on a busy machine.
func WithApplicationSetCRD() KubeOption {
	return func(o *kubeOptions) { o.applicationSets = true }
}

// WithAuditLog makes the API server record every request in an audit log
// that AuditLog reads: who did what to which resource, and the answer.
func WithAuditLog() KubeOption {
	return func(o *kubeOptions) { o.audit = true }
}

// StartKube starts etcd and kube-apiserver through envtest, installs the
// Application and AppProject CRDs and creates the argocd namespace. The API server enforces
// RBAC: Config is an admin, ServiceAccountConfig gives a client with only a
// ServiceAccount's permissions.
func StartKube(t testing.TB, opts ...KubeOption) *Kube {
	t.Helper()
	o := kubeOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.crdPaths == nil {
		o.crdPaths = []string{
			ArgoCDCRD(t, ArgoCDModule, ArgoCDVersion(t)),
			ArgoCDProjectCRD(t, ArgoCDModule, ArgoCDVersion(t)),
		}
	}
	if o.applicationSets {
		o.crdPaths = append(slices.Clip(o.crdPaths), ArgoCDApplicationSetCRD(t, ArgoCDModule, ArgoCDVersion(t)))
	}
	if o.imageUpdater {
		o.crdPaths = append(slices.Clip(o.crdPaths), ImageUpdaterCRD(t))
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assetsDir(t),
		CRDDirectoryPaths:        o.crdPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
		// envtest waits 10 s for the CRDs to be served, which a start
		// beside other test servers on 2 cores can take.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: time.Minute},
	}
	// etcd's fsync dominates start-up and write latency; tests need no durability.
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Set("unsafe-no-fsync", "true")
	var auditLog string
	if o.audit {
		auditLog = configureAudit(t, env)
	}
	// envtest logs through controller-runtime's logger, which tells with
	// a stack trace that nobody set it; the tests read the servers' own
	// output instead.
	quietControllerRuntime.Do(func() { ctrllog.SetLogger(logr.Discard()) })
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop kube-apiserver and etcd: %v", err)
		}
	})
	cfg.QPS, cfg.Burst = 1000, 2000

	scheme := NewScheme(t)
	for _, add := range o.types {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("create client: %v", err)
	}
	k := &Kube{Config: cfg, Client: c, Scheme: scheme, env: env, auditLog: auditLog}
	k.CreateNamespace(t, ArgoCDNamespace)
	return k
}

// NewScheme knows the Kubernetes built-in types; Argo CD's objects are
// unstructured, read through their CRDs.
func NewScheme(t testing.TB) *runtime.Scheme {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// CreateNamespace creates a namespace unless it exists.
func (k *Kube) CreateNamespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// Create creates objects, failing the test on error.
func (k *Kube) Create(t testing.TB, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := k.Client.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// ServiceAccountConfig creates the ServiceAccount (if missing) and returns a
// client configuration that authenticates with a token of it, as a pod
// running under that ServiceAccount would.
func (k *Kube) ServiceAccountConfig(t testing.TB, namespace, name string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := k.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ServiceAccount %s/%s: %v", namespace, name, err)
	}
	cs, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(k.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

var (
	moduleDirMu sync.Mutex
	moduleDirs  = map[string]string{}
)

// ArgoCDCRD returns the path of the Application CRD shipped in an Argo CD
// module: the version this module requires when version is empty, or the
// given version, downloaded into the module cache (for Argo CD 3's CRD,
// which adds fields our Go types do not know).
func ArgoCDCRD(t testing.TB, module, version string) string {
	t.Helper()
	return argoCDCRD(t, module, version, "application-crd.yaml")
}

// ArgoCDProjectCRD returns the path of the AppProject CRD shipped in an
// Argo CD module, found as ArgoCDCRD finds the Application CRD.
func ArgoCDProjectCRD(t testing.TB, module, version string) string {
	t.Helper()
	return argoCDCRD(t, module, version, "appproject-crd.yaml")
}

// ArgoCDApplicationSetCRD returns the path of the ApplicationSet CRD
// shipped in an Argo CD module, found as ArgoCDCRD finds the Application
// CRD.
func ArgoCDApplicationSetCRD(t testing.TB, module, version string) string {
	t.Helper()
	return argoCDCRD(t, module, version, "applicationset-crd.yaml")
}

func argoCDCRD(t testing.TB, module, version, file string) string {
	t.Helper()
	key := module + "@" + version
	moduleDirMu.Lock()
	defer moduleDirMu.Unlock()
	dir, ok := moduleDirs[key]
	if !ok {
		var out []byte
		var err error
		if version == "" {
			out, err = exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
		} else {
			out, err = exec.Command("go", "mod", "download", "-json", key).Output()
			if err == nil {
				var info struct{ Dir string }
				err = json.Unmarshal(out, &info)
				out = []byte(info.Dir)
			}
		}
		if err != nil {
			t.Fatalf("locate module %s: %v", key, err)
		}
		dir = strings.TrimSpace(string(out))
		moduleDirs[key] = dir
	}
	path := filepath.Join(dir, "manifests", "crds", file)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s of %s: %v", file, key, err)
	}
	return path
}

// ImageUpdaterCRD is the path of this module's generated ImageUpdater CRD.
func ImageUpdaterCRD(t testing.TB) string {
	t.Helper()
	_, file, _, ok := goruntime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the testenv package's source")
	}
	path := filepath.Join(filepath.Dir(file), "..", "..", "manifests", "base", "crd", "argocd-image-updater.argoproj.io_imageupdaters.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("ImageUpdater CRD: %v", err)
	}
	return path
}

// WriteKubeconfig writes a kubeconfig file for cfg (bearer token or client
// certificate) whose context's namespace is namespace, for commands that
// take --kubeconfig.
func WriteKubeconfig(t testing.TB, cfg *rest.Config, namespace string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test", Namespace: namespace}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// CreateFromFile creates the objects of a multi-document YAML file in a
// namespace, as `kubectl create -n <namespace> -f <path>` would.
func (k *Kube) CreateFromFile(t testing.TB, path, namespace string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		obj.SetNamespace(namespace)
		k.Create(t, obj)
	}
}

// CreateAppProject creates an Argo CD AppProject allowing Applications the
// repositories sourceRepos matches, and (for Applications outside the
// Argo CD namespace) the namespaces sourceNamespaces matches. Argo CD's
// own default project is CreateAppProject(t, ArgoCDNamespace, "default",
// []string{"*"}, nil).
func (k *Kube) CreateAppProject(t testing.TB, namespace, name string, sourceRepos, sourceNamespaces []string) {
	t.Helper()
	spec := map[string]any{"destinations": []any{map[string]any{"server": "*", "namespace": "*"}}}
	if sourceRepos != nil {
		spec["sourceRepos"] = toAny(sourceRepos)
	}
	if sourceNamespaces != nil {
		spec["sourceNamespaces"] = toAny(sourceNamespaces)
	}
	k.Create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec":     spec,
	}})
}

// KustomizeImages is the Kustomize images list of an Application's source,
// as tests read what the updater wrote.
func KustomizeImages(t testing.TB, app *unstructured.Unstructured) []string {
	t.Helper()
	images, _, err := unstructured.NestedStringSlice(app.Object, "spec", "source", "kustomize", "images")
	if err != nil {
		t.Fatalf("Application %s/%s: %v", app.GetNamespace(), app.GetName(), err)
	}
	return images
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
