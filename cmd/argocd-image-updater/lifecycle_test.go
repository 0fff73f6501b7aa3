package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// isGitPush matches the request of a git push that carries the commits.
func isGitPush(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack")
}

// isTagListing matches a registry's tag listing, the first request of a
// cycle to a registry: holding it holds the cycle before any write.
func isTagListing(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/tags/list") }

// writeWorld is a controllerWorld with a git server, and proxies that can
// hold requests to the registry and to the git server.
type writeWorld struct {
	*controllerWorld
	git      *testenv.GitServer
	regProxy *testenv.HoldProxy
	gitProxy *testenv.HoldProxy
}

func newWriteWorld(t *testing.T, regOpts ...testenv.RegistryOption) *writeWorld {
	t.Helper()
	w := &writeWorld{controllerWorld: newControllerWorld(t, regOpts...), git: testenv.StartGitServer(t)}
	w.regProxy = testenv.StartHoldProxy(t, "http://"+w.reg.Host)
	w.gitProxy = testenv.StartHoldProxy(t, w.git.HTTPURL)
	if err := os.WriteFile(w.conf, []byte(fmt.Sprintf("registries:\n- name: test\n  prefix: %s\n  api_url: %s\n  credentials: env:REGISTRY_CREDS\n",
		w.reg.Host, w.regProxy.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	w.git.CreateRepo(t, "deploy", "", map[string]string{"app/kustomization.yaml": "resources: []\n"})
	w.k.CreateAppProject(t, testenv.ArgoCDNamespace, "default", []string{"*"}, nil)
	w.k.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "repo-deploy", Namespace: testenv.ArgoCDNamespace,
			Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
		StringData: map[string]string{"url": w.repoURL(), "username": w.git.Username, "password": w.git.Password},
	})
	return w
}

// repoURL is the repository "deploy" behind the git proxy.
func (w *writeWorld) repoURL() string { return w.gitProxy.URL + "/deploy.git" }

// createWriteApp creates an Application running eks-app:v0.0.1 from the
// folder app of the repository, written back with method (argocd or git).
func (w *writeWorld) createWriteApp(t *testing.T, namespace, name, method string, more map[string]string) {
	t.Helper()
	createKustomizeApp(t, w.dyn, namespace, name, w.reg.Repo("eks-app"), w.repoURL(), method, more)
}

// commits counts the commits of the repository's branch main.
func (w *writeWorld) commits(t *testing.T) int { return len(w.git.Log(t, "deploy", "main")) }

// lease reads the leader Lease.
func (w *writeWorld) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := kubernetes.NewForConfigOrDie(w.k.Config).CoordinationV1().Leases(testenv.ArgoCDNamespace).Get(t.Context(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read the Lease: %v", err)
	}
	return l
}

// startBinary runs the controller binary with its log in out; the grace
// period goes through the environment.
func (w *writeWorld) startBinary(t *testing.T, bin string, grace time.Duration, out *testenv.SyncBuffer, args ...string) (*exec.Cmd, <-chan error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run", "--kubeconfig", w.kubeconfig, "--registries-conf-path", w.conf,
		"--health-port", "0", "--metrics-port", "0", "--interval", "1h"}, args...)...)
	cmd.Env = append(os.Environ(), "REGISTRY_CREDS="+w.env["REGISTRY_CREDS"], "IMAGE_UPDATER_SHUTDOWN_GRACE_PERIOD="+grace.String())
	for k, v := range w.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", out.String())
		}
	})
	return cmd, exited
}

// TestShutdown sends SIGTERM to the controller while a cycle is held at a
// write (a git push held by a proxy) or before its writes (a registry
// listing held): a write in flight finishes within the grace period and
// is abandoned after it, no write starts after the signal, the process
// exits 0 in time, and the Lease is released only after the write.
func TestShutdown(t *testing.T) {
	t.Parallel()
	bin := testenv.UpdaterBinary(t)
	tests := []struct {
		name  string
		hold  func(*http.Request) bool
		grace time.Duration
		// release: the held requests go on once the controller has taken
		// the signal; otherwise never.
		release bool
		// wantCommit: the held push reaches the server.
		wantCommit bool
		// wantPatch: the Application written with the argocd method is
		// patched (it is written before the git push).
		wantPatch bool
	}{
		{name: "push in flight finishes", hold: isGitPush, grace: 20 * time.Second, release: true, wantCommit: true, wantPatch: true},
		{name: "push held past the grace period is abandoned", hold: isGitPush, grace: 3 * time.Second, wantPatch: true},
		{name: "no write starts after the signal", hold: isTagListing, grace: 20 * time.Second, release: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWriteWorld(t)
			w.createWriteApp(t, testenv.ArgoCDNamespace, "patched", "argocd", nil)
			w.createWriteApp(t, testenv.ArgoCDNamespace, "committed", "git", nil)
			proxy := w.gitProxy
			if !tt.wantCommit && !tt.wantPatch {
				proxy = w.regProxy
			}
			hold := proxy.Hold(tt.hold)
			var out testenv.SyncBuffer
			cmd, exited := w.startBinary(t, bin, tt.grace, &out)
			select {
			case <-hold.Arrived():
			case err := <-exited:
				t.Fatalf("the controller exited before the held request: %v", err)
			case <-time.After(90 * time.Second):
				t.Fatal("no request was held")
			}
			signalled := time.Now()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			var released time.Duration
			if tt.release {
				poll.True(t, 10*time.Second, "the controller to stop taking new writes", func() bool {
					return strings.Contains(out.String(), "stopping: no new writes")
				})
				if tt.wantCommit {
					// Reads end at the signal; a write in flight is waited for.
					select {
					case err := <-exited:
						t.Fatalf("the controller exited with its push in flight: %v", err)
					default:
					}
				}
				released = time.Since(signalled)
				hold.Release()
			}
			var err error
			select {
			case err = <-exited:
			case <-time.After(tt.grace + 15*time.Second):
				t.Fatalf("still running %s after SIGTERM", time.Since(signalled).Round(time.Second))
			}
			took := time.Since(signalled)
			if err != nil {
				t.Errorf("exit: %v", err)
			}
			// Released within the grace period, a write ends the wait at
			// once; held past it, it is given the whole period and then
			// abandoned. A few seconds go to releasing the Lease and exiting.
			limit := released + 5*time.Second
			if !tt.release {
				limit = tt.grace + 5*time.Second
				if took < tt.grace {
					t.Errorf("exited %s after SIGTERM, before the grace period of %s was over", took.Round(10*time.Millisecond), tt.grace)
				}
			}
			if took > limit {
				t.Errorf("exited %s after SIGTERM, want within %s", took.Round(10*time.Millisecond), limit)
			}

			wantCommits := 1
			if tt.wantCommit {
				wantCommits = 2
			}
			if got := w.commits(t); got != wantCommits {
				t.Errorf("%d commits on the server, want %d", got, wantCommits)
			}
			var wantImages []string
			if tt.wantPatch {
				wantImages = []string{w.reg.Repo("eks-app") + ":v0.1.0"}
			}
			if got := w.images(t, "patched"); !slices.Equal(got, wantImages) {
				t.Errorf("Application images %v, want %v", got, wantImages)
			}
			lease := w.lease(t)
			if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
				t.Errorf("the Lease is still held by %s", h)
			}
			if tt.wantCommit {
				released, pushed := lease.Spec.RenewTime.Time, hold.AnsweredAt()
				if !released.After(pushed) {
					t.Errorf("the Lease was released at %s, before the push was answered at %s",
						released.Format(time.StampMicro), pushed.Format(time.StampMicro))
				}
			}
		})
	}
}

// TestShutdownWaitsForAWebhookCheck: a check that a push notification
// asked for writes like a cycle, and SIGTERM lets its push in flight
// finish too, though no cycle is running then.
func TestShutdownWaitsForAWebhookCheck(t *testing.T) {
	t.Parallel()
	bin := testenv.UpdaterBinary(t)
	const secret = "distribution-notification-secret"
	webhookPort := loopbackPort(t)
	w := newWriteWorld(t, testenv.WithNotifications("http://127.0.0.1:"+webhookPort+"/webhook?type=distribution",
		map[string]string{"Authorization": "Bearer " + secret}))
	w.env["DISTRIBUTION_WEBHOOK_SECRET"] = secret
	w.createWriteApp(t, testenv.ArgoCDNamespace, "committed", "git", nil)
	var out testenv.SyncBuffer
	cmd, exited := w.startBinary(t, bin, 20*time.Second, &out,
		"--enable-webhook", "--listen-address", "127.0.0.1", "--webhook-port", webhookPort)
	// The first cycle writes v0.1.0; then the controller waits an hour.
	poll.True(t, 90*time.Second, "the first cycle to commit v0.1.0 and finish", func() bool { return w.commits(t) == 2 && strings.Contains(out.String(), "update cycle finished") })

	hold := w.gitProxy.Hold(isGitPush)
	w.reg.PushImage(t, "eks-app", []string{"v0.2.0"})
	select {
	case <-hold.Arrived():
	case err := <-exited:
		t.Fatalf("the controller exited: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("no check pushed after the notification")
	}
	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The controller is stopping, its push still held: it must wait.
	poll.True(t, 10*time.Second, "the controller to stop taking new writes", func() bool { return strings.Contains(out.String(), "stopping: no new writes") })
	select {
	case err := <-exited:
		t.Fatalf("the controller exited with its push in flight: %v", err)
	default:
	}
	hold.Release()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30s after SIGTERM")
	}
	if took := time.Since(signalled); took > 7*time.Second {
		t.Errorf("exited %s after SIGTERM", took.Round(10*time.Millisecond))
	}
	if got := w.commits(t); got != 3 {
		t.Errorf("%d commits on the server, want 3: the check's push did not land", got)
	}
	if h := ptr.Deref(w.lease(t).Spec.HolderIdentity, ""); h != "" {
		t.Errorf("the Lease is still held by %s", h)
	}
}

// TestLostLeaseStopsWrites takes the Lease away from the leader while its
// cycle is held before writing: once it has noticed (a renewal every 2
// seconds), it writes nothing, although client-go's elector ends its
// context only 10 seconds after the failed renewals began.
func TestLostLeaseStopsWrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method string
	}{
		{method: "argocd"},
		{method: "git"},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			t.Parallel()
			w := newWriteWorld(t)
			w.createWriteApp(t, testenv.ArgoCDNamespace, "main", tt.method, nil)
			hold := w.regProxy.Hold(isTagListing)
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			var out testenv.SyncBuffer
			done := make(chan int, 1)
			go func() { done <- w.run(ctx, &out, "--interval", "1h") }()
			select {
			case <-hold.Arrived():
			case <-time.After(60 * time.Second):
				t.Fatalf("no listing was held:\n%s", out.String())
			}

			// Another replica takes the Lease, as if this one had not
			// renewed it in time.
			leases := kubernetes.NewForConfigOrDie(w.k.Config).CoordinationV1().Leases(testenv.ArgoCDNamespace)
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				lease := w.lease(t)
				now := metav1.NewMicroTime(time.Now())
				lease.Spec.HolderIdentity = ptr.To("another-replica")
				lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
				lease.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
				_, err := leases.Update(t.Context(), lease, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			// Once a renewal has found the other holder, before client-go's
			// renewDeadline ends the election: the cycle goes on to write.
			poll.True(t, 8*time.Second, "the controller to see the Lease held by another replica", func() bool {
				return strings.Contains(out.String(), "the leader Lease is held by another replica; writing no more")
			})
			hold.Release()

			select {
			case code := <-done:
				if code != 0 {
					t.Errorf("exit code %d", code)
				}
			case <-time.After(45 * time.Second):
				t.Fatalf("still running after losing the Lease:\n%s", out.String())
			}
			if got := w.images(t, "main"); got != nil {
				t.Errorf("the Application was patched after the Lease was lost: %v", got)
			}
			if got := w.commits(t); got != 1 {
				t.Errorf("%d commits: a push happened after the Lease was lost", got)
			}
			if h := ptr.Deref(w.lease(t).Spec.HolderIdentity, ""); h != "another-replica" {
				t.Errorf("the Lease is held by %q, want another-replica", h)
			}
			if t.Failed() {
				t.Logf("controller log:\n%s", out.String())
			}
		})
	}
}

// TestDeploymentLeavesRoomForShutdown: the pod is killed
// terminationGracePeriodSeconds after SIGTERM; by then the default grace
// period of writes and the Lease's release (bounded by renewDeadline) must
// be over.
func TestDeploymentLeavesRoomForShutdown(t *testing.T) {
	for _, dir := range []string{"base", "cluster-wide"} {
		t.Run(dir, func(t *testing.T) {
			for _, o := range kustomize(t, dir) {
				if o.GetKind() != "Deployment" {
					continue
				}
				var d appsv1.Deployment
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
					t.Fatal(err)
				}
				if d.Spec.Template.Spec.TerminationGracePeriodSeconds == nil {
					t.Fatal("the Deployment sets no terminationGracePeriodSeconds")
				}
				seconds := *d.Spec.Template.Spec.TerminationGracePeriodSeconds
				if need := defaultShutdownGrace + renewDeadline; time.Duration(seconds)*time.Second <= need {
					t.Errorf("terminationGracePeriodSeconds %d leaves no room for --shutdown-grace-period %s and releasing the Lease (up to %s)",
						seconds, defaultShutdownGrace, renewDeadline)
				}
			}
		})
	}
}

// createKustomizeApp creates an Application running image:v0.0.1 from the
// folder app of repoURL at main, written back with method; more adds
// annotations (keys without the prefix) or replaces image-list.
func createKustomizeApp(t *testing.T, dyn dynamic.Interface, namespace, name, image, repoURL, method string, more map[string]string) {
	t.Helper()
	ann := map[string]any{
		settings.AnnotationPrefix + "image-list":        "app=" + image,
		settings.AnnotationPrefix + "write-back-method": method,
	}
	for k, v := range more {
		ann[settings.AnnotationPrefix+k] = v
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": namespace, "annotations": ann},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": repoURL, "path": "app", "targetRevision": "main", "kustomize": map[string]any{}},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"},
		},
		"status": map[string]any{"sourceType": "Kustomize", "summary": map[string]any{"images": []any{image + ":v0.0.1"}}},
	}}
	apps := dyn.Resource(application.Resource()).Namespace(namespace)
	if _, err := apps.Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A controller's informer lists from the API server's watch cache
	// (resourceVersion "0"), which may lag a create on a loaded machine;
	// wait until it has the Application, so that the controller's first
	// cycle, the one these tests watch, sees it.
	poll.True(t, 30*time.Second, "the API server's watch cache to hold the Application "+name, func() bool {
		l, err := apps.List(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && slices.ContainsFunc(l.Items, func(a unstructured.Unstructured) bool { return a.GetName() == name })
	})
}
