// Package robustness runs the controller under faults, against the real
// API server, registry and git server: proxies fail a share of the
// requests to each (statuses, resets, answers cut short), the controller
// is killed and stopped in the middle of a push, a second replica runs
// beside it, and other writers edit the same Applications and push to the
// same repository all along. At the end, with the faults stopped, it must
// converge, and invariants are checked: every Application at the newest
// version, no field or commit of the other writers lost, no force-push, no
// version written twice, bounded memory and file descriptors, and no
// credential in the logs.
//
// `make test` runs a short version; `make soak` a long one
// (-robustness.long). A failure prints the seed; -robustness.seed replays
// the same faults.
package robustness

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/internal/poll"
	"github.com/image-updater/argocd-image-updater/internal/testenv"
	"github.com/image-updater/argocd-image-updater/settings"
)

var (
	long     = flag.Bool("robustness.long", false, "the long run: more Applications, rounds and kills")
	seedFlag = flag.Uint64("robustness.seed", 0, "seed of the faults (0: from the clock)")
	report   = flag.String("robustness.report", "", "file to append the run's figures to, as a Markdown table row")
)

func TestMain(m *testing.M) { testenv.Main(m) }

// shape is the size of a run.
type shape struct {
	apps     int // half argocd, half git write-back into one repository
	rounds   int // new versions pushed, one after another
	regRate  float64
	gitRate  float64
	kubeRate float64
}

var (
	short = shape{apps: 20, rounds: 2, regRate: 0.2, gitRate: 0.2, kubeRate: 0.1}
	soak  = shape{apps: 200, rounds: 5, regRate: 0.2, gitRate: 0.2, kubeRate: 0.1}
)

var faultMix = []testenv.Fault{testenv.Fault500, testenv.Fault502, testenv.Fault503, testenv.Fault429, testenv.FaultReset, testenv.FaultTruncate}

func TestRobustness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the controller against real servers")
	}
	sh := short
	if *long {
		sh = soak
	}
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -robustness.seed=%d)", seed, seed)
	defer func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d", seed)
		}
	}()
	w := newWorld(t, sh, seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	others := w.startOtherWriters()
	a := w.start(t, "a")
	for round := 1; round <= sh.rounds; round++ {
		w.reg.PushImage(t, "web", []string{version(round)})
		switch round % 3 {
		case 1:
			// SIGKILL in the middle of a push, then a new process.
			w.midPush(t, a, syscall.SIGKILL)
			a = w.start(t, fmt.Sprintf("a%d", round))
		case 2:
			// Two replicas; the first one stopped by SIGTERM in the
			// middle of a push: the writes in flight finish, the other
			// takes the Lease.
			b := w.start(t, fmt.Sprintf("b%d", round))
			w.midPush(t, a, syscall.SIGTERM)
			a = b
		default:
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond) // a random moment of the run, not a synchronisation
		}
	}
	final := version(sh.rounds)

	// The faults stop; the controller must converge.
	w.regProxy.Clear()
	w.gitProxy.Clear()
	w.kubeProxy.Clear()
	stopped := time.Now()
	others.stop()
	poll.True(t, 3*time.Minute, "every Application at "+final, func() bool { return w.behind(t, final) == 0 })
	converged := time.Since(stopped)

	w.checkInvariants(t, others, final)
	faults := w.regProxy.Total() + w.gitProxy.Total() + w.kubeProxy.Total()
	t.Logf("%d Applications, %d rounds, %d faults injected (registry %d, git %d, API server %d), %d kills and stops, %d restarts on their own, converged %s after the faults stopped, peak RSS %d MiB, peak fds %d",
		sh.apps, sh.rounds, faults, w.regProxy.Total(), w.gitProxy.Total(), w.kubeProxy.Total(), w.kills.Load(), w.restarts.Load(),
		converged.Round(100*time.Millisecond), w.peakRSS.Load()>>20, w.peakFDs.Load())
	if *report != "" {
		row := fmt.Sprintf("| %s | %d | %d | %d | %d / %d / %d | %d | %s | %d MiB | %d |\n", time.Now().UTC().Format("2006-01-02"), seed, sh.apps, sh.rounds,
			w.regProxy.Total(), w.gitProxy.Total(), w.kubeProxy.Total(), w.kills.Load(), converged.Round(100*time.Millisecond), w.peakRSS.Load()>>20, w.peakFDs.Load())
		f, err := os.OpenFile(*report, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.WriteString(row)
			_ = f.Close()
		}
	}
}

func version(round int) string { return fmt.Sprintf("v0.%d.0", round) }

type world struct {
	sh         shape
	k          *testenv.Kube
	reg        *testenv.Registry
	git        *testenv.GitServer
	dyn        dynamic.Interface
	regProxy   *testenv.FaultProxy
	gitProxy   *testenv.FaultProxy
	kubeProxy  *testenv.FaultProxy
	gitHold    *testenv.HoldProxy
	kubeconfig string
	conf       string
	bin        string
	env        []string

	tmp      string
	mu       sync.Mutex
	logs     []namedLog
	kills    atomic.Int64
	restarts atomic.Int64
	peakRSS  atomic.Int64
	peakFDs  atomic.Int64
}

func newWorld(t *testing.T, sh shape, seed uint64) *world {
	w := &world{sh: sh, k: testenv.StartKube(t), reg: testenv.StartRegistry(t), git: testenv.StartGitServer(t), bin: testenv.UpdaterBinary(t), tmp: t.TempDir()}
	w.dyn = dynamic.NewForConfigOrDie(w.k.Config)
	w.k.CreateFromFile(t, filepath.Join("..", "manifests", "base", "rbac.yaml"), testenv.ArgoCDNamespace)
	w.k.CreateAppProject(t, testenv.ArgoCDNamespace, "default", []string{"*"}, nil)

	w.regProxy = testenv.StartFaultProxy(t, "http://"+w.reg.Host)
	w.regProxy.InjectRate(func(*http.Request) bool { return true }, seed, sh.regRate, faultMix...)
	w.gitHold = testenv.StartHoldProxy(t, w.git.HTTPURL)
	w.gitProxy = testenv.StartFaultProxy(t, w.gitHold.URL)
	w.gitProxy.InjectRate(func(*http.Request) bool { return true }, seed+1, sh.gitRate, faultMix...)
	var through = w.k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater")
	w.kubeProxy, through = testenv.StartKubeFaultProxy(t, through)
	// Watches are long requests: a fault cuts one, and the informer
	// lists again; every other request is an ordinary one.
	w.kubeProxy.InjectRate(func(*http.Request) bool { return true }, seed+2, sh.kubeRate, faultMix...)
	w.kubeconfig = testenv.WriteKubeconfig(t, through, testenv.ArgoCDNamespace)

	w.conf = filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(w.conf, []byte(fmt.Sprintf("registries:\n- name: test\n  prefix: %s\n  api_url: %s\n  credentials: env:REGISTRY_CREDS\n",
		w.reg.Host, w.regProxy.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = append(os.Environ(), "REGISTRY_CREDS="+w.reg.Username+":"+w.reg.Password, "IMAGE_UPDATER_SHUTDOWN_GRACE_PERIOD=20s")
	w.k.Create(t, repoSecret(w.gitProxy.URL+"/deploy.git", w.git.Username, w.git.Password))

	w.reg.PushImage(t, "web", []string{"v0.0.1"})
	files := map[string]string{}
	for i := range sh.apps {
		files[fmt.Sprintf("apps/%s/kustomization.yaml", appName(i))] = "resources: []\n"
	}
	w.git.CreateRepo(t, "deploy", "", files)
	for i := range sh.apps {
		w.createApp(t, i)
	}
	return w
}

func appName(i int) string {
	if i%2 == 0 {
		return fmt.Sprintf("patched-%03d", i)
	}
	return fmt.Sprintf("committed-%03d", i)
}

func isGit(i int) bool { return i%2 == 1 }

func (w *world) createApp(t *testing.T, i int) {
	method := "argocd"
	if isGit(i) {
		method = "git"
	}
	image := w.reg.Repo("web")
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": appName(i), "namespace": testenv.ArgoCDNamespace, "annotations": map[string]any{
			settings.AnnotationPrefix + "image-list":        "app=" + image,
			settings.AnnotationPrefix + "write-back-method": method,
		}},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": w.gitProxy.URL + "/deploy.git", "path": "apps/" + appName(i), "targetRevision": "main", "kustomize": map[string]any{}},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"},
		},
		"status": map[string]any{"sourceType": "Kustomize", "summary": map[string]any{"images": []any{image + ":v0.0.1"}}},
	}}
	if _, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// replica is one controller, restarted when its process exits by itself
// (a lost Lease, a failed server), as the kubelet restarts a pod's
// container, until the test stops it.
type replica struct {
	name     string
	stopping atomic.Bool
	mu       sync.Mutex
	cmd      *exec.Cmd
	exitErr  error
	done     chan struct{}
	restarts atomic.Int64
}

func (r *replica) process() *os.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd.Process
}

// start runs a controller with leader election and a short interval, and
// samples its memory and file descriptors while it runs.
func (w *world) start(t *testing.T, name string) *replica {
	r := &replica{name: name, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(r.done)
		for run := 0; ; run++ {
			log := &testenv.SyncBuffer{}
			cmd := exec.Command(w.bin, "run", "--kubeconfig", w.kubeconfig, "--registries-conf-path", w.conf,
				"--health-port", "0", "--metrics-port", "0", "--interval", "3s", "--git-clone-dir", w.cloneDir(name))
			cmd.Env = w.env
			cmd.Stdout, cmd.Stderr = log, log
			if err := cmd.Start(); err != nil {
				if run == 0 {
					started <- err
				}
				return
			}
			w.addLog(name, run, log)
			r.mu.Lock()
			r.cmd = cmd
			r.mu.Unlock()
			if run == 0 {
				started <- nil
			}
			exited := make(chan struct{})
			go w.sample(cmd.Process.Pid, exited)
			err := cmd.Wait()
			close(exited)
			if r.stopping.Load() {
				r.exitErr = err
				return
			}
			r.restarts.Add(1)
			w.restarts.Add(1)
		}
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.stopping.Store(true)
		_ = r.process().Kill()
		<-r.done
	})
	return r
}

func (w *world) cloneDir(name string) string { return filepath.Join(w.tmp, "clones-"+name) }

func (w *world) addLog(name string, run int, log *testenv.SyncBuffer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logs = append(w.logs, namedLog{fmt.Sprintf("%s (run %d)", name, run), log})
}

type namedLog struct {
	name string
	log  *testenv.SyncBuffer
}

// sample records a process's peak RSS and open files until it exits.
func (w *world) sample(pid int, exited <-chan struct{}) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			return
		case <-tick.C:
		}
		if rss := peakRSS(pid); rss > w.peakRSS.Load() {
			w.peakRSS.Store(rss)
		}
		if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil && int64(len(fds)) > w.peakFDs.Load() {
			w.peakFDs.Store(int64(len(fds)))
		}
	}
}

// peakRSS is VmHWM of /proc/<pid>/status, in bytes.
func peakRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// midPush holds the next push to the repository, sends sig to r while the
// push waits, then lets the push go on. SIGKILL: the process dies with the
// push in flight; SIGTERM: it finishes the push within its grace period
// and exits 0. Either way r is not restarted.
func (w *world) midPush(t *testing.T, r *replica, sig syscall.Signal) {
	hold := w.gitHold.Hold(func(req *http.Request) bool {
		return req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack")
	})
	select {
	case <-hold.Arrived():
	case <-time.After(90 * time.Second):
		hold.Release()
		t.Fatalf("no push reached the git server within 90s")
	}
	r.stopping.Store(true)
	if err := r.process().Signal(sig); err != nil {
		t.Fatal(err)
	}
	w.kills.Add(1)
	if sig == syscall.SIGKILL {
		<-r.done
	}
	hold.Release()
	if sig == syscall.SIGTERM {
		select {
		case <-r.done:
			if r.exitErr != nil {
				t.Errorf("controller %s stopped by SIGTERM: %v", r.name, r.exitErr)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("controller %s did not exit within 60s of SIGTERM", r.name)
		}
	}
}

// otherWriters edit the Applications (a label of their own) and push
// commits to the repository (files of their own) while the controller
// runs, as people and other tools do.
type otherWriters struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	labels  map[string]string // Application → last value written
	commits []string          // hashes pushed
}

func (w *world) startOtherWriters() *otherWriters {
	ctx, cancel := context.WithCancel(context.Background())
	o := &otherWriters{cancel: cancel, labels: map[string]string{}}
	apps := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace)
	o.wg.Go(func() {
		for n := 0; ctx.Err() == nil; n++ {
			name := appName(n % w.sh.apps)
			patch := fmt.Sprintf(`{"metadata":{"labels":{"robustness.test/touched":"%d"}}}`, n)
			// Not cut by the stop: a patch the server applied is recorded.
			if _, err := apps.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
				o.mu.Lock()
				o.labels[name] = strconv.Itoa(n)
				o.mu.Unlock()
			}
			pause(ctx, 50*time.Millisecond)
		}
	})
	o.wg.Go(func() {
		for n := 0; ctx.Err() == nil; n++ {
			if hash, err := w.commitOther(n); err == nil {
				o.mu.Lock()
				o.commits = append(o.commits, hash)
				o.mu.Unlock()
			}
			pause(ctx, 700*time.Millisecond)
		}
	})
	return o
}

func (o *otherWriters) stop() {
	o.cancel()
	o.wg.Wait()
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// commitOther pushes a commit of a file of its own straight to the bare
// repository, fetching and rebasing when the controller pushed first.
func (w *world) commitOther(n int) (string, error) {
	dir, err := os.MkdirTemp(w.tmp, "other")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=someone", "-c", "user.email=someone@example.com"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if _, err := git("clone", "--quiet", filepath.Join(w.git.Root, "deploy.git"), "."); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		return "", err
	}
	if _, err := git("commit", "--quiet", "--all", "--message", fmt.Sprintf("notes %d", n)); err != nil {
		if _, err := git("add", "notes.txt"); err != nil {
			return "", err
		}
		if _, err := git("commit", "--quiet", "--message", fmt.Sprintf("notes %d", n)); err != nil {
			return "", err
		}
	}
	for range 5 {
		if _, err := git("push", "--quiet", "origin", "main"); err == nil {
			return git("rev-parse", "HEAD")
		}
		if _, err := git("pull", "--quiet", "--rebase", "origin", "main"); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("push kept losing")
}

// behind counts the Applications not yet at version.
func (w *world) behind(t *testing.T, version string) int {
	want := w.reg.Repo("web") + ":" + version
	n := 0
	for i := range w.sh.apps {
		if !strings.Contains(w.written(t, i), want) {
			n++
		}
	}
	return n
}

// written is what the controller wrote for Application i: its spec's
// Kustomize images, or its .argocd-source file at the tip of main.
func (w *world) written(t *testing.T, i int) string {
	if isGit(i) {
		out, err := exec.Command("git", "-C", filepath.Join(w.git.Root, "deploy.git"), "show",
			fmt.Sprintf("main:apps/%s/.argocd-source-%s.yaml", appName(i), appName(i))).Output()
		if err != nil {
			return ""
		}
		return string(out)
	}
	obj, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), appName(i), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(testenv.KustomizeImages(t, obj), ",")
}

func (w *world) checkInvariants(t *testing.T, o *otherWriters, final string) {
	// No field another writer set was lost.
	apps := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace)
	for name, want := range o.labels {
		obj, err := apps.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := obj.GetLabels()["robustness.test/touched"]; got != want {
			t.Errorf("Application %s: label %q, want %q (another writer's edit lost)", name, got, want)
		}
	}
	// No commit lost, no force-push: every commit another writer pushed
	// is in main's history.
	history := map[string]bool{}
	for _, c := range w.git.Log(t, "deploy", "main") {
		history[c.Hash] = true
	}
	if len(o.commits) == 0 {
		t.Errorf("the other writer pushed no commit")
	}
	for _, c := range o.commits {
		if !history[c] {
			t.Errorf("commit %s of another writer is not in main's history", c)
		}
	}
	// No version written twice: each version of each file is set by one
	// commit only.
	out, err := exec.Command("git", "-C", filepath.Join(w.git.Root, "deploy.git"), "log", "--format=%H", "-p", "main", "--", "apps").Output()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	file := ""
	for line := range strings.SplitSeq(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "+++ b/"); ok {
			file = rest
		}
		if strings.HasPrefix(line, "+") && strings.Contains(line, w.reg.Repo("web")+":") {
			seen[file+" "+strings.TrimSpace(line)]++
		}
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("%s written by %d commits", k, n)
		}
	}
	// No credential in any log.
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.logs {
		text := l.log.String()
		for _, secret := range []string{w.reg.Password, w.git.Password} {
			if strings.Contains(text, secret) {
				t.Errorf("a credential appears in the log of controller %s", l.name)
			}
		}
		if t.Failed() {
			t.Logf("controller %s:\n%s", l.name, text)
		}
	}
	// Bounded resources.
	if rss := w.peakRSS.Load(); rss > 512<<20 {
		t.Errorf("peak RSS %d MiB, more than 512 MiB", rss>>20)
	}
	if fds := w.peakFDs.Load(); fds > 512 {
		t.Errorf("peak file descriptors %d, more than 512", fds)
	}
	if w.behind(t, final) != 0 {
		t.Errorf("%d Applications not at %s", w.behind(t, final), final)
	}
}

func repoSecret(url, username, password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "deploy-repo", Namespace: testenv.ArgoCDNamespace,
			Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
		StringData: map[string]string{"url": url, "username": username, "password": password},
	}
}
