package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"

	"github.com/image-updater/argocd-image-updater/test/poll"
)

// installRBAC creates the Role and RoleBinding of the install manifests in
// the Argo CD namespace.
func installRBAC(t *testing.T, k *testenv.Kube) {
	t.Helper()
	k.CreateFromFile(t, filepath.Join("..", "..", "manifests", "base", "rbac.yaml"), testenv.ArgoCDNamespace)
}

type controllerWorld struct {
	k          *testenv.Kube
	reg        *testenv.Registry
	dyn        dynamic.Interface
	kubeconfig string
	conf       string
	env        map[string]string
}

func newControllerWorld(t *testing.T, regOpts ...testenv.RegistryOption) *controllerWorld {
	t.Helper()
	return newControllerWorldOn(t, testenv.StartKube(t), regOpts...)
}

// newControllerWorldOn is newControllerWorld on the API server k.
func newControllerWorldOn(t *testing.T, k *testenv.Kube, regOpts ...testenv.RegistryOption) *controllerWorld {
	t.Helper()
	w := &controllerWorld{k: k, reg: testenv.StartRegistry(t, regOpts...)}
	installRBAC(t, w.k)
	// The controller runs with only the Role's permissions, as in a pod.
	saConfig := w.k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater")
	w.kubeconfig = testenv.WriteKubeconfig(t, saConfig, testenv.ArgoCDNamespace)
	w.dyn = dynamic.NewForConfigOrDie(w.k.Config)
	w.conf = filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(w.conf, []byte(fmt.Sprintf("registries:\n- name: test\n  prefix: %s\n  api_url: http://%s\n  credentials: env:REGISTRY_CREDS\n",
		w.reg.Host, w.reg.Host)), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = map[string]string{"REGISTRY_CREDS": w.reg.Username + ":" + w.reg.Password, "IMAGE_UPDATER_GIT_CLONE_DIR": t.TempDir()}
	w.reg.PushImage(t, "eks-app", []string{"v0.0.1"})
	w.reg.PushImage(t, "eks-app", []string{"v0.1.0"})
	return w
}

func (w *controllerWorld) createApp(t *testing.T, name string) {
	t.Helper()
	w.createAppIn(t, testenv.ArgoCDNamespace, name, nil)
}

// createAppIn creates an Application whose image app runs eks-app:v0.0.1,
// with more annotations.
func (w *controllerWorld) createAppIn(t *testing.T, namespace, name string, annotations map[string]string) {
	t.Helper()
	img := w.reg.Repo("eks-app")
	ann := map[string]any{settings.AnnotationPrefix + "image-list": "app=" + img}
	for k, v := range annotations {
		ann[k] = v
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": namespace, "annotations": ann},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "https://git.example.com/d.git", "path": "p", "kustomize": map[string]any{}},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"},
		},
		"status": map[string]any{"summary": map[string]any{"images": []any{img + ":v0.0.1"}}},
	}}
	if _, err := w.dyn.Resource(application.Resource()).Namespace(namespace).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (w *controllerWorld) images(t *testing.T, name string) []string {
	t.Helper()
	return w.imagesIn(t, testenv.ArgoCDNamespace, name)
}

func (w *controllerWorld) imagesIn(t *testing.T, namespace, name string) []string {
	t.Helper()
	obj, err := w.dyn.Resource(application.Resource()).Namespace(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return testenv.KustomizeImages(t, obj)
}

func (w *controllerWorld) run(ctx context.Context, stderr *testenv.SyncBuffer, extra ...string) int {
	args := append([]string{"run", "--kubeconfig", w.kubeconfig, "--registries-conf-path", w.conf,
		"--health-port", "0", "--metrics-port", "0"}, extra...)
	return execute(ctx, args, &bytes.Buffer{}, stderr, func(k string) (string, bool) { v, ok := w.env[k]; return v, ok })
}

func TestRunOnceWithTheInstallRole(t *testing.T) {
	t.Parallel()
	w := newControllerWorld(t)
	w.createApp(t, "main")
	var stderr testenv.SyncBuffer
	if code := w.run(t.Context(), &stderr, "--once"); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, stderr.String())
	}
	if got := w.images(t, "main"); !slices.Equal(got, []string{w.reg.Repo("eks-app") + ":v0.1.0"}) {
		t.Errorf("images %v\n%s", got, stderr.String())
	}
	if strings.Contains(stderr.String(), "forbidden") {
		t.Errorf("the Role was not enough:\n%s", stderr.String())
	}

	// ... and not broader than needed.
	sa := w.k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater")
	cs := kubernetes.NewForConfigOrDie(sa)
	saDyn := dynamic.NewForConfigOrDie(sa)
	apps := saDyn.Resource(application.Resource())
	for what, err := range map[string]error{
		"delete an Application":       apps.Namespace(testenv.ArgoCDNamespace).Delete(t.Context(), "main", metav1.DeleteOptions{}),
		"list Applications elsewhere": errOf(apps.Namespace("default").List(t.Context(), metav1.ListOptions{})),
		"list Secrets elsewhere":      errOf(cs.CoreV1().Secrets("default").List(t.Context(), metav1.ListOptions{})),
		"list Pods":                   errOf(cs.CoreV1().Pods(testenv.ArgoCDNamespace).List(t.Context(), metav1.ListOptions{})),
		"write a Secret":              errOf(cs.CoreV1().Secrets(testenv.ArgoCDNamespace).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the ServiceAccount can %s (error %v)", what, err)
		}
	}
}

// errOf keeps the error of a call that returns a value and an error.
func errOf[T any](_ T, err error) error { return err }

func TestLeaderElectionOneWriter(t *testing.T) {
	t.Parallel()
	w := newControllerWorld(t)
	w.createApp(t, "main")

	ctx1, stop1 := context.WithCancel(t.Context())
	ctx2, stop2 := context.WithCancel(t.Context())
	defer stop2()
	var out1, out2 testenv.SyncBuffer
	done1, done2 := make(chan int, 1), make(chan int, 1)
	go func() { done1 <- w.run(ctx1, &out1, "--interval", "1s") }()
	go func() { done2 <- w.run(ctx2, &out2, "--interval", "1s") }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica 1:\n%s\nreplica 2:\n%s", out1.String(), out2.String())
		}
	})

	leaders := func() (n int) {
		for _, s := range []string{out1.String(), out2.String()} {
			if strings.Contains(s, "elected leader") {
				n++
			}
		}
		return n
	}
	poll.True(t, 30*time.Second, "one replica to lead and write the Application main", func() bool { return leaders() == 1 && len(w.images(t, "main")) == 1 })
	// Two more cycles of the leader: still one leader.
	cycles := func() int {
		return strings.Count(out1.String(), "update cycle finished") + strings.Count(out2.String(), "update cycle finished")
	}
	seen := cycles()
	poll.True(t, 30*time.Second, "two more update cycles", func() bool { return cycles() >= seen+2 })
	if n := leaders(); n != 1 {
		t.Fatalf("%d replicas lead", n)
	}
	first, firstOut, firstDone, secondOut := stop1, &out1, done1, &out2
	if !strings.Contains(out1.String(), "elected leader") {
		first, firstOut, firstDone, secondOut = stop2, &out2, done2, &out1
	}
	if strings.Count(firstOut.String(), "update cycle finished") < 2 || strings.Contains(secondOut.String(), "update cycle finished") {
		t.Errorf("cycles: leader %d, follower %d",
			strings.Count(firstOut.String(), "update cycle finished"), strings.Count(secondOut.String(), "update cycle finished"))
	}
	// The leader stops and releases the Lease: the other takes over.
	first()
	<-firstDone
	poll.True(t, 30*time.Second, "the second replica to be elected leader", func() bool { return strings.Contains(secondOut.String(), "elected leader") })
	stop1()
	stop2()
}

func TestHealthAndMetricsEndpoints(t *testing.T) {
	t.Parallel()
	w := newControllerWorld(t)
	w.createApp(t, "main")
	ports := []string{loopbackPort(t), loopbackPort(t)}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var out testenv.SyncBuffer
	go func() {
		done <- execute(ctx, []string{"run", "--kubeconfig", w.kubeconfig, "--registries-conf-path", w.conf,
			"--listen-address", "127.0.0.1", "--health-port", ports[0], "--metrics-port", ports[1], "--interval", "1h"},
			&bytes.Buffer{}, &out, func(k string) (string, bool) { v, ok := w.env[k]; return v, ok })
	}()
	get := func(port, path string) (int, string) {
		resp, err := http.Get("http://127.0.0.1:" + port + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	poll.True(t, 30*time.Second, "/readyz to answer 200", func() bool { code, _ := get(ports[0], "/readyz"); return code == http.StatusOK })
	if code, _ := get(ports[0], "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answered %d", code)
	}
	poll.True(t, 30*time.Second, "the first update cycle to finish", func() bool { return strings.Contains(out.String(), "update cycle finished") })
	_, metrics := get(ports[1], "/metrics")
	for _, want := range []string{
		`argocd_image_updater_applications_watched_total{image_updater_cr_name="",image_updater_cr_namespace=""} 1`,
		`argocd_image_updater_images_updated_total{application="argocd/main",image_updater_cr_name="",image_updater_cr_namespace=""} 1`,
		"argocd_image_updater_k8s_api_requests_total",
		"argocd_image_updater_registry_requests_total{registry=",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d after stop:\n%s", code, out.String())
	}
}

// TestRunOnceExitCode: a one-off cycle that ran exits 0 even when some
// images had problems (those go to events, logs and metrics), as cron jobs
// and scripts around the old tool expect.
func TestRunOnceExitCode(t *testing.T) {
	t.Parallel()
	w := newControllerWorld(t)
	w.createApp(t, "main")
	apps := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace)
	obj, err := apps.Get(t.Context(), "main", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A second image with a strategy that does not exist, next to the good one.
	obj.SetAnnotations(map[string]string{
		settings.AnnotationPrefix + "image-list":             "app=" + w.reg.Repo("eks-app") + ",broken=" + w.reg.Repo("eks-app"),
		settings.AnnotationPrefix + "broken.update-strategy": "newest",
	})
	if _, err := apps.Update(t.Context(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := []string{w.reg.Repo("eks-app") + ":v0.1.0"}
	tests := []struct {
		name       string
		args       []string
		wantImages []string
	}{
		{name: "dry run", args: []string{"--once", "--dry-run"}, wantImages: nil},
		{name: "once", args: []string{"--once"}, wantImages: updated},
		{name: "interval 0", args: []string{"--interval", "0"}, wantImages: updated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr testenv.SyncBuffer
			if code := w.run(t.Context(), &stderr, tt.args...); code != 0 {
				t.Fatalf("exit code %d, want 0:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "broken.update-strategy (image broken): invalid update-strategy") {
				t.Errorf("the broken image is not reported:\n%s", stderr.String())
			}
			if got := w.images(t, "main"); !slices.Equal(got, tt.wantImages) {
				t.Errorf("images %v, want %v", got, tt.wantImages)
			}
		})
	}
}
