// Package robustness runs the controller under faults, against the real
// API server, registry and git server: proxies fail a share of the
// requests to each (statuses, resets, answers cut short), replicas run
// side by side with leader election and the leader is killed, stopped and
// paused past its Lease, in the middle of a push or at a random moment,
// and other writers edit the same Applications and push to the same
// repository all along. Some Applications have the health gate on, and
// some versions are bad: the suite, standing in for Argo CD, reports an
// Application Degraded once a bad version is deployed. Some Applications
// follow a Helm chart whose versions are published during the run. At the
// end, with the faults stopped, it must converge, and invariants are
// checked: every Application at the newest version (chart: within its
// constraint), no field or commit of the other writers lost, no
// force-push, no version written twice, no older version written except
// by the health gate's revert of a bad version, exactly the bad versions
// reverted, bounded memory and file descriptors, and no credential in the
// logs.
//
// `make test` runs a short version; `make soak` a long one
// (-robustness.long). A failure prints the seed; -robustness.seed replays
// the same faults.
package robustness

import (
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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

var (
	long     = flag.Bool("robustness.long", false, "the long run: more Applications, rounds and kills")
	seedFlag = flag.Uint64("robustness.seed", 0, "seed of the faults (0: shortSeed for the short run, from the clock for the long one)")
	report   = flag.String("robustness.report", "", "file to append the run's figures to, as a Markdown table row")
)

// shortSeed is the seed of the short run unless one is given.
const shortSeed = 1796193606649067901

func TestMain(m *testing.M) { testenv.Main(m) }

// shape is the size of a run.
type shape struct {
	apps     int // half argocd, half git write-back into one repository; half of each with the health gate
	charts   int // Applications of a Helm chart, argocd write-back
	replicas int // controller processes side by side
	rounds   int // new versions pushed, one after another
	// ends is how many times the leader is ended in a round.
	ends     func(round int) int
	regRate  float64
	gitRate  float64
	kubeRate float64
}

var (
	// Each end of the leader by SIGKILL or SIGSTOP costs a Lease (15s)
	// before another replica leads: the short run has two ends, one of
	// them a SIGTERM, and draws which of the others.
	short = shape{apps: 20, charts: 4, replicas: 2, rounds: 2, ends: func(int) int { return 1 }, regRate: 0.2, gitRate: 0.2, kubeRate: 0.1}
	soak  = shape{apps: 200, charts: 20, replicas: 3, rounds: 5, ends: func(int) int { return 2 }, regRate: 0.2, gitRate: 0.2, kubeRate: 0.1}
)

var faultMix = []testenv.Fault{testenv.Fault500, testenv.Fault502, testenv.Fault503, testenv.Fault429, testenv.FaultReset, testenv.FaultTruncate}

// uncutMix is faultMix without answers cut short: the faults of the
// writes of a bad version (see world.uncut).
var uncutMix = []testenv.Fault{testenv.Fault500, testenv.Fault502, testenv.Fault503, testenv.Fault429, testenv.FaultReset}

// uncut tells whether r is a push while a bad version is written and
// until the gate has written it back: its answer is not cut short then.
// A push that landed without its answer is found landed by the next
// fetch, but the record of its write is not kept (docs/robustness.md),
// and the bad version would stay. A patch of an Application carries its
// record, so its answers are cut short at any time.
func (w *world) uncut(r *http.Request) bool {
	return w.badWindow.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack")
}

// initialVersion is the image's version before the run.
const initialVersion = "v0.0.1"

func version(round int) string { return fmt.Sprintf("v0.%d.0", round) }

// rank orders the versions: initialVersion 0, version(n) n.
func rank(v string) int {
	var n int
	if v == initialVersion {
		return 0
	}
	if _, err := fmt.Sscanf(v, "v0.%d.0", &n); err != nil {
		return -1
	}
	return n
}

func TestRobustness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the controller against real servers")
	}
	sh := short
	if *long {
		sh = soak
	}
	seed := *seedFlag
	switch {
	case seed == 0 && !*long:
		// make test replays one set of faults: some seeds end the leader
		// between a push and the health gate's save of its record, which
		// still loses it (docs/robustness.md); make soak draws new ones.
		seed = shortSeed
	case seed == 0:
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -robustness.seed=%d)", seed, seed)
	defer func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d", seed)
		}
	}()
	rng := rand.New(rand.NewPCG(seed, 1))
	w := newWorld(t, sh, seed, rng)
	t.Cleanup(func() {
		// Before the servers stop: what the controllers said, on a
		// failure (checkInvariants prints them when it fails).
		if t.Failed() && !w.logged {
			w.printLogs(t)
		}
	})
	plan := churnPlan(rng, sh.rounds, sh.ends)
	if !*long {
		// The SIGTERM, and one of the others.
		plan[1][0].kind, plan[2][0].kind = term, []churnKind{kill, pause}[rng.IntN(2)]
	}
	t.Logf("bad versions %v; the leader's ends %v", w.badList(), plan[1:])

	hist := w.recordHistory(t)
	argo := w.startArgoCD(hist)
	defer argo.close()
	others := w.startOtherWriters()
	w.lease = w.watchLease(t)
	for i := range sh.replicas {
		w.replicas = append(w.replicas, w.start(t, fmt.Sprintf("r%d", i)))
	}
	for round := 1; round <= sh.rounds; round++ {
		w.badWindow.Store(w.bad[version(round)])
		w.reg.PushImage(t, "web", []string{version(round)})
		w.helm.publish(chartVersion(round), fmt.Sprintf("2.%d.0", round))
		if v := version(round); w.bad[v] {
			// Before a newer version appears, so that the gate writes
			// the bad one back rather than seeing it replaced; and before
			// the leader ends: a leader stopped between the push of a
			// version and the save of the gate's record of it loses the
			// record (docs/robustness.md), and the next leader does not
			// follow that version.
			poll.Until(t, 3*time.Minute, "the health gate to skip and write back "+v+" everywhere", func() (bool, string) { return w.reverted(hist, v) })
			w.badWindow.Store(false)
			for k := range plan[round] {
				plan[round][k].inPush = false
			}
		}
		for _, c := range plan[round] {
			w.end(t, c)
		}
	}
	final := version(sh.rounds)

	// The faults stop; the controller must converge.
	w.regProxy.Clear()
	w.gitProxy.Clear()
	w.kubeProxy.Clear()
	w.chartProxy.Clear()
	stopped := time.Now()
	others.stop()
	poll.Until(t, 3*time.Minute, "every Application at "+final+" (charts at "+chartVersion(sh.rounds)+")", func() (bool, string) {
		n := w.behind(hist, final)
		return n == 0, fmt.Sprintf("%d behind", n)
	})
	converged := time.Since(stopped)
	// A leader killed last leaves its Lease to expire.
	w.leader(t)
	argo.close()
	w.lease.close()

	reverts := w.checkInvariants(t, others, hist, final)
	faults := w.regProxy.Total() + w.gitProxy.Total() + w.kubeProxy.Total() + w.chartProxy.Total()
	t.Logf("%d Applications (%d with the health gate, %d of a chart), %d replicas, %d rounds, bad versions %v", sh.apps+sh.charts, sh.apps/2, sh.charts, sh.replicas, sh.rounds, w.badList())
	t.Logf("%d faults injected (registry %d, git %d, API server %d, Helm repository %d); by kind: %s",
		faults, w.regProxy.Total(), w.gitProxy.Total(), w.kubeProxy.Total(), w.chartProxy.Total(), w.faultsByKind())
	t.Logf("leader ended %d times (SIGKILL %d, SIGTERM %d, SIGSTOP past the Lease %d; %d of them in the middle of a push), %d restarts on their own; %d leader changes seen, Lease transitions %d",
		w.kills(), w.ends[kill].Load(), w.ends[term].Load(), w.ends[pause].Load(), w.inPush.Load(), w.restarts.Load(), w.lease.changes.Load(), w.transitions)
	t.Logf("%d reverts by the health gate; %d history gaps; converged %s after the faults stopped, peak RSS %d MiB, peak fds %d",
		reverts, hist.gaps, converged.Round(100*time.Millisecond), w.peakRSS.Load()>>20, w.peakFDs.Load())
	if *report != "" {
		row := fmt.Sprintf("| %s | %d | %d | %d | %d / %d / %d | %d | %s | %d MiB | %d |\n", time.Now().UTC().Format("2006-01-02"), seed, sh.apps, sh.rounds,
			w.regProxy.Total(), w.gitProxy.Total(), w.kubeProxy.Total(), w.kills(), converged.Round(100*time.Millisecond), w.peakRSS.Load()>>20, w.peakFDs.Load())
		f, err := os.OpenFile(*report, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.WriteString(row)
			_ = f.Close()
		}
	}
}

type world struct {
	sh         shape
	k          *testenv.Kube
	reg        *testenv.Registry
	git        *testenv.GitServer
	helm       *helmRepo
	admin      dynamic.Interface
	regProxy   *testenv.FaultProxy
	gitProxy   *testenv.FaultProxy
	kubeProxy  *testenv.FaultProxy
	chartProxy *testenv.FaultProxy
	gitHold    *testenv.HoldProxy
	kubeconfig string
	conf       string
	bin        string
	env        []string
	// index is each Application's number, by name; bad, the versions
	// that degrade an Application.
	index map[string]int
	bad   map[string]bool

	replicas    []*replica
	lease       *leaseWatch
	transitions int64

	tmp    string
	mu     sync.Mutex
	logs   []namedLog
	logged bool
	ends   [3]atomic.Int64 // by churnKind
	inPush atomic.Int64
	// badWindow is set while a bad version is written and written back.
	badWindow atomic.Bool
	restarts  atomic.Int64
	peakRSS   atomic.Int64
	peakFDs   atomic.Int64
}

func newWorld(t *testing.T, sh shape, seed uint64, rng *rand.Rand) *world {
	w := &world{sh: sh, k: testenv.StartKube(t), reg: testenv.StartRegistry(t), git: testenv.StartGitServer(t), helm: startHelmRepo(t), bin: testenv.UpdaterBinary(t), tmp: t.TempDir(),
		index: map[string]int{}, bad: map[string]bool{}}
	w.admin = dynamic.NewForConfigOrDie(w.k.Config)
	w.k.CreateFromFile(t, filepath.Join("..", "..", "manifests", "base", "rbac.yaml"), testenv.ArgoCDNamespace)
	w.k.CreateAppProject(t, testenv.ArgoCDNamespace, "default", []string{"*"}, nil)
	// Any version but the last may be bad; one at least is.
	for round := 1; round < sh.rounds; round++ {
		if rng.IntN(2) == 0 {
			w.bad[version(round)] = true
		}
	}
	if len(w.bad) == 0 && sh.rounds > 1 {
		w.bad[version(1+rng.IntN(sh.rounds-1))] = true
	}

	w.regProxy = testenv.StartFaultProxy(t, "http://"+w.reg.Host)
	w.regProxy.InjectRate(func(*http.Request) bool { return true }, seed, sh.regRate, faultMix...)
	w.gitHold = testenv.StartHoldProxy(t, w.git.HTTPURL)
	w.gitProxy = testenv.StartFaultProxy(t, w.gitHold.URL)
	w.gitProxy.InjectRate(func(r *http.Request) bool { return !w.uncut(r) }, seed+1, sh.gitRate, faultMix...)
	w.gitProxy.InjectRate(w.uncut, seed+4, sh.gitRate, uncutMix...)
	w.chartProxy = testenv.StartFaultProxy(t, w.helm.url)
	w.chartProxy.InjectRate(func(*http.Request) bool { return true }, seed+3, sh.regRate, faultMix...)
	var through = w.k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater")
	w.kubeProxy, through = testenv.StartKubeFaultProxy(t, through)
	// Watches are long requests: a fault cuts one, and the informer
	// lists again; every other request is an ordinary one.
	w.kubeProxy.InjectRate(func(r *http.Request) bool { return !w.uncut(r) }, seed+2, sh.kubeRate, faultMix...)
	w.kubeProxy.InjectRate(w.uncut, seed+5, sh.kubeRate, uncutMix...)
	w.kubeconfig = testenv.WriteKubeconfig(t, through, testenv.ArgoCDNamespace)

	w.conf = filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(w.conf, []byte(fmt.Sprintf("registries:\n- name: test\n  prefix: %s\n  api_url: %s\n  credentials: env:REGISTRY_CREDS\n",
		w.reg.Host, w.regProxy.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = append(os.Environ(), "REGISTRY_CREDS="+w.reg.Username+":"+w.reg.Password, "IMAGE_UPDATER_SHUTDOWN_GRACE_PERIOD=20s")
	w.k.Create(t, repoSecret(w.gitProxy.URL+"/deploy.git", w.git.Username, w.git.Password))

	w.reg.PushImage(t, "web", []string{initialVersion})
	files := map[string]string{}
	for i := range sh.apps {
		files[fmt.Sprintf("apps/%s/kustomization.yaml", appName(i))] = "resources: []\n"
	}
	w.git.CreateRepo(t, "deploy", "", files)
	for i := range sh.apps + sh.charts {
		w.index[w.name(i)] = i
		w.createApp(t, i)
	}
	return w
}

// badList is the bad versions, in order.
func (w *world) badList() []string {
	var out []string
	for round := 1; round <= w.sh.rounds; round++ {
		if w.bad[version(round)] {
			out = append(out, version(round))
		}
	}
	return out
}

// kills is how many times the leader was ended.
func (w *world) kills() int64 {
	return w.ends[kill].Load() + w.ends[term].Load() + w.ends[pause].Load()
}

// faultsByKind is the faults injected, all proxies together, by kind.
func (w *world) faultsByKind() string {
	var parts []string
	for _, f := range faultMix {
		n := 0
		for _, p := range []*testenv.FaultProxy{w.regProxy, w.gitProxy, w.kubeProxy, w.chartProxy} {
			n += p.Injected(f)
		}
		parts = append(parts, fmt.Sprintf("%s %d", f, n))
	}
	return strings.Join(parts, ", ")
}

// name is the name of Application i: the image Applications first, then
// the chart ones.
func (w *world) name(i int) string {
	if i >= w.sh.apps {
		return fmt.Sprintf("chart-%03d", i-w.sh.apps)
	}
	return appName(i)
}

// appName is the name of image Application i.
func appName(i int) string {
	if i%2 == 0 {
		return fmt.Sprintf("patched-%03d", i)
	}
	return fmt.Sprintf("committed-%03d", i)
}

func isGit(i int) bool { return i%2 == 1 }

// gated tells whether Application i has the health gate: half of the
// image Applications of each write-back method.
func (w *world) gated(i int) bool { return i < w.sh.apps && (i/2)%2 == 0 }

func (w *world) createApp(t *testing.T, i int) {
	image := w.reg.Repo("web")
	annotations := map[string]any{settings.AnnotationPrefix + "write-back-method": "argocd"}
	var source, status map[string]any
	switch {
	case i >= w.sh.apps:
		annotations[settings.AnnotationPrefix+"chart-list"] = "podinfo:" + chartConstraint
		source = map[string]any{"repoURL": w.chartProxy.URL, "chart": "podinfo", "targetRevision": "1.0.0"}
		status = map[string]any{"sourceType": "Helm"}
	default:
		annotations[settings.AnnotationPrefix+"image-list"] = "app=" + image
		if isGit(i) {
			annotations[settings.AnnotationPrefix+"write-back-method"] = "git"
		}
		source = map[string]any{"repoURL": w.gitProxy.URL + "/deploy.git", "path": "apps/" + appName(i), "targetRevision": "main", "kustomize": map[string]any{}}
		status = map[string]any{"sourceType": "Kustomize", "summary": map[string]any{"images": []any{image + ":" + initialVersion}}}
		if w.gated(i) {
			// A short window: a good version is verified soon.
			annotations[settings.AnnotationPrefix+"app.health-gate"] = "2s"
			status["health"] = map[string]any{"status": "Healthy"}
		}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": w.name(i), "namespace": testenv.ArgoCDNamespace, "annotations": annotations},
		"spec": map[string]any{
			"project":     "default",
			"source":      source,
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"},
		},
		"status": status,
	}}
	if _, err := w.admin.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (w *world) cloneDir(name string) string { return filepath.Join(w.tmp, "clones-"+name) }

func (w *world) printLogs(t *testing.T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.printLogsLocked(t)
}

func (w *world) printLogsLocked(t *testing.T) {
	for _, l := range w.logs {
		t.Logf("controller %s:\n%s", l.name, l.log.String())
	}
}

func (w *world) addLog(name string, run int, log *testenv.SyncBuffer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logs = append(w.logs, namedLog{fmt.Sprintf("%s (run %d)", name, run), log})
}

type namedLog struct {
	name string
	log  *testenv.SyncBuffer
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
	apps := w.admin.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace)
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
			idle(ctx, 50*time.Millisecond)
		}
	})
	o.wg.Go(func() {
		for n := 0; ctx.Err() == nil; n++ {
			if hash, err := w.commitOther(n); err == nil {
				o.mu.Lock()
				o.commits = append(o.commits, hash)
				o.mu.Unlock()
			}
			idle(ctx, 700*time.Millisecond)
		}
	})
	return o
}

func (o *otherWriters) stop() {
	o.cancel()
	o.wg.Wait()
}

func idle(ctx context.Context, d time.Duration) {
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

// behind counts the Applications not yet at version (a chart's, at the
// newest chart version allowed), as h and the tip of main show them.
func (w *world) behind(h *history, version string) int {
	deployed := w.deployed(h)
	n := 0
	for i := range w.sh.apps + w.sh.charts {
		want := version
		if i >= w.sh.apps {
			want = chartVersion(w.sh.rounds)
		}
		if deployed[w.name(i)] != want {
			n++
		}
	}
	return n
}

// written is what the controller wrote for image Application i, read from
// the servers: its spec's Kustomize images, or its .argocd-source file at
// the tip of main.
func (w *world) written(t *testing.T, i int) string {
	if isGit(i) {
		out, err := exec.Command("git", "-C", filepath.Join(w.git.Root, "deploy.git"), "show",
			fmt.Sprintf("main:apps/%s/.argocd-source-%s.yaml", appName(i), appName(i))).Output()
		if err != nil {
			return ""
		}
		return string(out)
	}
	obj, err := w.admin.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), appName(i), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(testenv.KustomizeImages(t, obj), ",")
}

// checkInvariants checks what the run left, and returns the number of
// the health gate's reverts.
func (w *world) checkInvariants(t *testing.T, o *otherWriters, h *history, final string) int {
	// No field another writer set was lost.
	apps := w.admin.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace)
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
	inMain := map[string]bool{}
	for _, c := range w.git.Log(t, "deploy", "main") {
		inMain[c.Hash] = true
	}
	if len(o.commits) == 0 {
		t.Errorf("the other writer pushed no commit")
	}
	for _, c := range o.commits {
		if !inMain[c] {
			t.Errorf("commit %s of another writer is not in main's history", c)
		}
	}
	// The versions written, in turn: none twice, none older but by the
	// health gate's revert of a bad version, exactly the bad ones
	// reverted. git: from the commits of each file; argocd: from the
	// watch of the Applications.
	if h.gaps > 0 {
		t.Logf("the watch of the Applications listed again %d times: a change between may be missed", h.gaps)
	}
	files := w.gitHistory(t)
	reverts := 0
	for i := range w.sh.apps {
		var seq []string
		if isGit(i) {
			seq = files[fmt.Sprintf("apps/%s/.argocd-source-%s.yaml", appName(i), appName(i))]
		} else {
			h.mu.Lock()
			seq = h.images[appName(i)]
			h.mu.Unlock()
		}
		reverts += w.checkSequence(t, i, seq, w.skipped(t, i))
	}
	if len(w.bad) > 0 && reverts == 0 {
		t.Errorf("no bad version was reverted")
	}
	w.checkCharts(t, h)
	// Every end of the leader moved the Lease to another process.
	if w.transitions = w.lease.transitions(t); w.transitions < w.kills() {
		t.Errorf("the Lease changed holder %d times, fewer than the %d ends of its leader", w.transitions, w.kills())
	}
	for _, r := range w.replicas {
		r.mu.Lock()
		for _, err := range r.termErr {
			t.Errorf("controller %s stopped by SIGTERM: %v", r.name, err)
		}
		r.mu.Unlock()
	}
	// No credential in any log, no forced push.
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.logs {
		text := l.log.String()
		for _, secret := range []string{w.reg.Password, w.git.Password} {
			if strings.Contains(text, secret) {
				t.Errorf("a credential appears in the log of controller %s", l.name)
			}
		}
		if strings.Contains(text, "forced update") {
			t.Errorf("controller %s forced a push", l.name)
		}
	}
	if t.Failed() {
		w.logged = true
		w.printLogsLocked(t)
	}
	// Bounded resources.
	if rss := w.peakRSS.Load(); rss > 512<<20 {
		t.Errorf("peak RSS %d MiB, more than 512 MiB", rss>>20)
	}
	if fds := w.peakFDs.Load(); fds > 512 {
		t.Errorf("peak file descriptors %d, more than 512", fds)
	}
	want := w.reg.Repo("web") + ":" + final
	for i := range w.sh.apps {
		if got := w.written(t, i); !strings.Contains(got, want) {
			t.Errorf("Application %s holds %q, want %s", appName(i), got, want)
		}
	}
	return reverts
}

func repoSecret(url, username, password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "deploy-repo", Namespace: testenv.ArgoCDNamespace,
			Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
		StringData: map[string]string{"url": url, "username": username, "password": password},
	}
}
