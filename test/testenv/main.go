package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// The servers and builds a package's tests share, from Main to its end.
var pkg struct {
	mu       sync.Mutex
	active   bool // Main runs the tests
	cleanups []func()
	kubes    map[string]*sharedKube
	binary   *sharedBinary
}

type sharedKube struct {
	once sync.Once
	kube *Kube
	err  string
}

type sharedBinary struct {
	once sync.Once
	path string
	err  string
}

// Main runs a package's tests, then stops what they shared (SharedKube,
// UpdaterBinary): call it from TestMain. Without it each test starts its
// own.
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	pkg.mu.Lock()
	pkg.active = true
	pkg.mu.Unlock()
	code := m.Run()
	pkg.mu.Lock()
	cleanups := pkg.cleanups
	pkg.cleanups = nil
	pkg.mu.Unlock()
	for _, f := range slices.Backward(cleanups) {
		f()
	}
	os.Exit(code)
}

func sharing() bool {
	pkg.mu.Lock()
	defer pkg.mu.Unlock()
	return pkg.active
}

// packageScope is the TB of the test that first needs a shared server, whose
// cleanups and folders last until Main ends rather than that test.
type packageScope struct{ testing.TB }

func (packageScope) Cleanup(f func()) {
	pkg.mu.Lock()
	defer pkg.mu.Unlock()
	pkg.cleanups = append(pkg.cleanups, f)
}

func (s packageScope) TempDir() string {
	dir, err := os.MkdirTemp("", "testenv-")
	if err != nil {
		s.Fatal(err)
	}
	s.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// SharedKube is a kube-apiserver and etcd shared by the tests of a package
// that run under Main, one per set of options (StartKube's); without Main
// it is StartKube. Starting one takes seconds; a test's objects are
// deleted when it ends (ApplicationSets, Applications, AppProjects,
// ImageUpdaters, Secrets, ConfigMaps, ServiceAccounts, Roles and
// RoleBindings in every namespace), so each test starts from empty
// namespaces. Namespaces stay: envtest runs no controller that would
// finish deleting them. Tests sharing one must not run in parallel, and
// must not need the audit log (WithAuditLog), which would hold every
// test's requests.
func SharedKube(t testing.TB, opts ...KubeOption) *Kube {
	t.Helper()
	if !sharing() {
		return StartKube(t, opts...)
	}
	assetsDir(t) // skips in -short mode, here rather than in the shared start
	var o kubeOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.audit {
		t.Fatal("SharedKube: a shared API server keeps no audit log of one test; use StartKube")
	}
	key := fmt.Sprintf("%q %v", o.crdPaths, o.imageUpdater)
	pkg.mu.Lock()
	if pkg.kubes == nil {
		pkg.kubes = map[string]*sharedKube{}
	}
	s, ok := pkg.kubes[key]
	if !ok {
		s = &sharedKube{}
		pkg.kubes[key] = s
	}
	pkg.mu.Unlock()
	s.once.Do(func() {
		scope := &failRecorder{TB: packageScope{t}}
		func() {
			defer func() {
				// t.Fatal ends the goroutine through runtime.Goexit.
				if s.kube == nil && s.err == "" {
					s.err = scope.msg
				}
			}()
			s.kube = StartKube(scope, opts...)
		}()
	})
	if s.kube == nil {
		t.Fatalf("shared kube-apiserver did not start: %s", s.err)
	}
	t.Cleanup(func() { s.kube.reset(t) })
	return s.kube
}

// failRecorder keeps the message of the failure that stopped a shared
// server's start, for the tests that come after.
type failRecorder struct {
	testing.TB
	msg string
}

func (f *failRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	f.TB.Fatalf(format, args...)
}

func (f *failRecorder) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	f.TB.Fatal(args...)
}

// resetResources are what tests create; reset deletes them between tests.
var resetResources = []schema.GroupVersionResource{
	{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"},
	{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"},
	{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"},
	{Group: "argocd-image-updater.argoproj.io", Version: "v1alpha1", Resource: "imageupdaters"},
	{Version: "v1", Resource: "secrets"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
}

// reset deletes the objects of resetResources in every namespace but the
// API server's own; finalizers are removed first, since nothing here would
// act on them.
func (k *Kube) reset(t testing.TB) {
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Errorf("reset the shared API server: %v", err)
		return
	}
	for _, gvr := range resetResources {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue // e.g. the ImageUpdater CRD is not installed
		}
		for _, obj := range list.Items {
			switch obj.GetNamespace() {
			case "kube-system", "kube-public", "kube-node-lease":
				continue
			}
			if (gvr.Resource == "configmaps" && obj.GetName() == "kube-root-ca.crt") || (gvr.Resource == "serviceaccounts" && obj.GetName() == "default") {
				continue
			}
			r := dyn.Resource(gvr).Namespace(obj.GetNamespace())
			if len(obj.GetFinalizers()) > 0 {
				obj.SetFinalizers(nil)
				if _, err := r.Update(ctx, &obj, metav1.UpdateOptions{}); err != nil {
					t.Errorf("reset: remove finalizers of %s %s/%s: %v", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
				}
			}
			if err := r.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("reset: delete %s %s/%s: %v", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
			}
		}
	}
}

// UpdaterBinary is the updater's binary: the one DEMO_BINARY names (what
// `make build` made, as `make demo` passes it, or the one hack/test.sh
// links for the whole of `make test`), or one built from this
// module, once for the tests of a package that run under Main, else into
// the test's folder.
func UpdaterBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("DEMO_BINARY"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	if !sharing() {
		return buildUpdater(t, t.TempDir())
	}
	pkg.mu.Lock()
	if pkg.binary == nil {
		pkg.binary = &sharedBinary{}
	}
	b := pkg.binary
	pkg.mu.Unlock()
	b.once.Do(func() {
		scope := &failRecorder{TB: packageScope{t}}
		defer func() {
			if b.path == "" && b.err == "" {
				b.err = scope.msg
			}
		}()
		b.path = buildUpdater(scope, scope.TempDir())
	})
	if b.path == "" {
		t.Fatalf("the updater did not build: %s", b.err)
	}
	return b.path
}

func buildUpdater(t testing.TB, dir string) string {
	t.Helper()
	_, file, _, ok := goruntime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the testenv package's source")
	}
	bin := filepath.Join(dir, "argocd-image-updater")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/argocd-image-updater")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the updater: %v\n%s", err, out)
	}
	return bin
}
