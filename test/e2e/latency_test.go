package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// pushes is how many pushes BenchmarkPushToDeployment times.
const pushes = 20

// BenchmarkPushToDeployment times what a user waits for: from a push to
// the registry, through the registry's notification, the updater's
// webhook check and write-back, to the Deployment Argo CD deploys running
// the new image. One image, two Applications that use it: one written back
// to the Application (argocd), one to git (a kustomization, then Argo CD's
// refresh). It reports the median and the 99th percentile of each over
// the pushes of an iteration (with 20 pushes the 99th is the slowest).
func BenchmarkPushToDeployment(b *testing.B) {
	webhookPort := testenv.FreePort(b)
	const secret = "bench-webhook-secret"
	w := newWorld(b, func(reg *testenv.Registry) map[string]string {
		files := overlay("latency-argocd", reg)
		for path, content := range overlay("latency-git", reg) {
			files[path] = strings.ReplaceAll(content, "latency-git-app", "latency-argocd-app")
		}
		return files
	}, testenv.WithNotifications(fmt.Sprintf("http://127.0.0.1:%d/webhook?type=distribution", webhookPort),
		map[string]string{"Authorization": "Bearer " + secret}))
	app := w.push(b, "latency-argocd-app", "1.0.0")
	w.push(b, "latency-argocd-web", "v0.0.1")
	w.push(b, "latency-git-web", "v0.0.1")
	base := map[string]string{"image-list": "app=" + app, "app.update-strategy": "semver"}
	with := func(extra ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	w.createApp(b, "latency-argocd", "latency-argocd/overlays/production", nil, with("write-back-method", "argocd"))
	w.createApp(b, "latency-git", "latency-git/overlays/production", nil, with("write-back-method", "git", "write-back-target", "kustomization"))
	// The overlays' base images are v0.0.1: once Argo CD runs them, the
	// first write sets 1.0.0.
	w.waitDeployed(b, "latency-argocd", "front", app+":v0.0.1", w.reg.Repo("latency-argocd-web")+":v0.0.1")
	w.waitDeployed(b, "latency-git", "front", app+":v0.0.1", w.reg.Repo("latency-git-web")+":v0.0.1")
	w.runOnce(b, "latency-*")
	w.waitDeployed(b, "latency-argocd", "front", app+":1.0.0", w.reg.Repo("latency-argocd-web")+":v0.0.1")
	w.waitDeployed(b, "latency-git", "front", app+":1.0.0", w.reg.Repo("latency-git-web")+":v0.0.1")

	var logs testenv.SyncBuffer
	controller := exec.CommandContext(b.Context(), w.bin, "run", "--enable-webhook", "--webhook-port", strconv.Itoa(webhookPort),
		"--interval", "1h", "--kubeconfig", w.kubeconfig, "--registries-conf-path", w.conf,
		"--health-port", "0", "--metrics-port", "0", "--match-application-name", "latency-*")
	controller.Env = append(os.Environ(), "REGISTRY_CREDS="+w.reg.Username+":"+w.reg.Password,
		"IMAGE_UPDATER_GIT_CLONE_DIR="+b.TempDir(), "DISTRIBUTION_WEBHOOK_SECRET="+secret)
	controller.Stdout, controller.Stderr = &logs, &logs
	controller.Cancel = func() error { return controller.Process.Signal(syscall.SIGTERM) }
	controller.WaitDelay = 30 * time.Second
	if err := controller.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = controller.Cancel()
		_ = controller.Wait()
		if b.Failed() {
			b.Log("the controller's output:\n" + logs.String())
		}
	})
	testenv.WaitFor(b, time.Minute, "the controller's first cycle", func() (bool, string) {
		return strings.Contains(logs.String(), "cycle finished"), logs.String()
	})

	var argocd, git []time.Duration
	minor := 0
	b.ResetTimer()
	for range b.N {
		for range pushes {
			minor++
			tag := fmt.Sprintf("1.%d.0", minor)
			start := time.Now()
			w.push(b, "latency-argocd-app", tag)
			done := map[string]time.Duration{}
			// Argo CD's status sometimes lists no image of the git
			// Application while it rolls out the version before: the
			// notification's check skips it as not running, and checks it
			// again 1, then 4 and 16 seconds later (no cycle runs within
			// the hour).
			testenv.WaitFor(b, 2*time.Minute, "both Deployments running "+tag, func() (bool, string) {
				for name, into := range map[string]*[]time.Duration{"latency-argocd": &argocd, "latency-git": &git} {
					if _, ok := done[name]; ok {
						continue
					}
					if got := testenv.DeploymentImages(b.Context(), w.cs, name, "front"); len(got) > 0 && got[0] == app+":"+tag {
						done[name] = time.Since(start)
						*into = append(*into, done[name])
					}
				}
				return len(done) == 2, fmt.Sprint(done)
			})
		}
	}
	b.StopTimer()
	for name, ds := range map[string][]time.Duration{"argocd": argocd, "git": git} {
		b.ReportMetric(percentile(ds, 50).Seconds(), name+"-p50-s")
		b.ReportMetric(percentile(ds, 99).Seconds(), name+"-p99-s")
	}
}

// percentile is the p-th percentile of ds by the nearest-rank method.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100
	return s[max(rank, 1)-1]
}
