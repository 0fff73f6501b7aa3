package bench

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/internal/memlimit"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

var (
	flagScale    = flag.Bool("scale", false, "run the large scenarios (default: only the smoke size); also BENCH_SCALE=1")
	flagWrite    = flag.String("scale.write", "", "write the markdown report to this file")
	flagOnly     = flag.String("scale.only", "", "comma-separated scenarios to run (a, b); default all but those run on request (d)")
	flagInterval = flag.Duration("scale.interval", 0, "the controller's --interval (default: per scenario)")
	flagLimit    = flag.Float64("scale.registry-limit", 0, "the registries.conf limit, in requests per second, of the benchmark registry; 0: none, the default for a private registry")
	flagProfile  = flag.String("scale.profile", "", "save CPU profiles of each cycle and a heap profile into this folder and summarize them in the report")
	flagGoBench  = flag.String("scale.gobench", "", "a file with `go test -bench` output to include in the report")
	flagArgs     = flag.String("scale.controller-args", "", "more flags for the controller, space-separated (they override the harness's)")
	flagEnv      = flag.String("scale.controller-env", "", "more environment variables for the controller, space-separated NAME=value")
)

// The scenarios of the large run. Scenario b's change cycles are those
// where 500 Applications of one git repository change at once.
//
// The interval is longer than the minute for which the controller keeps
// an image's own credentials, as the default of two minutes is, so that
// each cycle reads pull secrets as it would in a default install; it also
// leaves room for the longest cycle.
var scenarios = []size{
	{Name: "a", Title: "1,000 Applications, 100 images", Apps: 1000, Images: 100, Tags: 200, GitApps: 100, Webhook: 20,
		Interval: 75 * time.Second},
	{Name: "b", Title: "5,000 Applications, 500 images (5 with 5,000 tags)", Apps: 5000, Images: 500, Tags: 200,
		BigRepos: 5, BigTags: 5000, GitApps: 500, Change: true, Webhook: 20, Interval: 75 * time.Second},
	{Name: "c", Title: "20,000 Applications, 2,000 images", Apps: 20000, Images: 2000, Tags: 100,
		GitApps: 500, Change: true, ChangeOnce: true, Interval: 75 * time.Second},
	// d takes about 20 minutes more: `make bench BENCH_SCENARIOS=a,b,c,d`.
	{Name: "d", Title: "50,000 Applications, 5,000 images", Apps: 50000, Images: 5000, Tags: 50,
		GitApps: 500, Change: true, ChangeOnce: true, Interval: 2 * time.Minute, OnRequest: true},
}

// smoke runs in every `go test ./...`, so that the harness cannot rot.
// One repository has more than a thousand tags, so tag lists are paged.
var smoke = size{Name: "smoke", Title: "50 Applications, 10 images (1 with 1,200 tags)", Apps: 50, Images: 10, Tags: 20,
	BigRepos: 1, BigTags: 1200, GitApps: 10, Change: true, Webhook: 2, Interval: 1500 * time.Millisecond}

func TestScale(t *testing.T) {
	// envtest logs through controller-runtime, which complains once per
	// process when no logger was set.
	ctrllog.SetLogger(logr.Discard())
	if testing.Short() {
		t.Skip("needs the test servers; skipped in -short mode")
	}
	large := *flagScale || os.Getenv("BENCH_SCALE") == "1"
	run := []size{smoke}
	if large {
		run = nil
		for _, s := range scenarios {
			if *flagOnly == "" && !s.OnRequest || strings.Contains(","+*flagOnly+",", ","+s.Name+",") {
				run = append(run, s)
			}
		}
	} else {
		t.Log("smoke size only; the large scenarios run with -scale (make bench)")
	}
	if *flagProfile != "" {
		if err := os.MkdirAll(*flagProfile, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rep := &report{Large: large, Started: time.Now(), Limit: *flagLimit, Machine: readMachine(), Args: *flagArgs, Env: *flagEnv,
		MemoryLimit: installMemoryLimit(t)}
	// The controller is built while the first servers start.
	type built struct {
		path string
		err  error
	}
	buildDone := make(chan built, 1)
	buildStart := time.Now()
	binDir := t.TempDir()
	go func() {
		path, err := controllerBinary(binDir, *flagProfile != "")
		buildDone <- built{path, err}
	}()
	var bin *built
	defer func() {
		if bin == nil {
			<-buildDone // no go build outlives the test
		}
	}()
	binary := func(t *testing.T) string {
		if bin == nil {
			b := <-buildDone
			bin = &b
			t.Logf("controller binary ready after %s", time.Since(buildStart).Round(100*time.Millisecond))
		}
		if bin.err != nil {
			t.Fatal(bin.err)
		}
		return bin.path
	}
	for _, s := range run {
		if *flagInterval > 0 {
			s.Interval = *flagInterval
		}
		var res *scenarioResult
		ok := t.Run(s.Name, func(t *testing.T) {
			res = runScenario(t, s, binary)
		})
		if res != nil {
			rep.Scenarios = append(rep.Scenarios, res)
		}
		if !ok && large {
			break
		}
	}
	rep.Finished = time.Now()
	if *flagGoBench != "" {
		data, err := os.ReadFile(*flagGoBench)
		if err != nil {
			t.Errorf("Go benchmark output: %v", err)
		}
		rep.GoBench = string(data)
	}
	md := rep.markdown()
	if *flagWrite != "" {
		old, err := os.ReadFile(*flagWrite)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		md = withHandWritten(md, string(old))
	}
	if err := checkFences(md); err != nil {
		t.Error(err)
	}
	if *flagWrite != "" {
		if err := os.WriteFile(*flagWrite, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("report written to %s", *flagWrite)
	}
	if *flagWrite == "" {
		t.Log("\n" + md)
	}
}

// phaseResult is one measured cycle.
type phaseResult struct {
	Name       string
	Log        cycleLog
	Wall       time.Duration // from the cycle duration histogram
	Cycles     float64       // cycles the histogram counted: 1 unless overlapped
	Reg        map[string]int64
	Kube       map[string]int64
	KubeTotal  int64
	PromKube   float64 // argocd_image_updater_k8s_api_requests_total
	PromReg    float64 // argocd_image_updater_registry_requests_total
	GitFetches int64
	GitPushes  int64
	CPU        float64 // process_cpu_seconds_total of the controller
	PeakRSS    int64   // highest resident memory sampled since the previous cycle ended
	RSS        float64 // process_resident_memory_bytes when the counters were read
	HeapInuse  float64 // go_memstats_heap_inuse_bytes, likewise
	Overlapped bool    // the next cycle began before the counters were read

	// CPU used from just before the cycle began (for the cold cycle: from
	// before the controller started) until it ended, a window of Window.
	Window, MachineCPU, ControllerCPU, RegistryCPU time.Duration

	// Spans are when registry requests of each kind were sent, from the
	// cycle's start.
	Spans map[string][2]time.Duration

	Expect  expectation
	Profile string // CPU profile file
}

type expectation struct {
	Listings   int
	Updated    int // images written
	Patched    int // argocd Applications patched
	GitChanged int // git Applications with a new version
}

type check struct {
	What string
	OK   bool
	Got  string
}

type scenarioResult struct {
	Size      size
	Stats     stats
	Setup     []setupStep
	Phases    []*phaseResult
	Startup   time.Duration // process start until the first cycle began
	PeakRSS   int64
	TotalCPU  float64
	GitNotRun string
	Checks    []check
	Heap      string // heap profile path
	Binary    string
	Version   string // of the controller binary
	Webhook   *webhookResult
}

type setupStep struct {
	What string
	Took time.Duration
}

type snapshot struct {
	prom            map[string]float64
	reg, kube       map[string]int64
	fetches, pushes int64
	spans           map[string]span
}

func runScenario(t *testing.T, s size, binary func(*testing.T) string) *scenarioResult {
	res := &scenarioResult{Size: s}
	step := func(what string, start time.Time) {
		res.Setup = append(res.Setup, setupStep{what, time.Since(start)})
		t.Logf("%s: %s", what, time.Since(start).Round(10*time.Millisecond))
	}

	start := time.Now()
	// With the ImageUpdater CRD, as install.yaml installs it.
	k := testenv.StartKube(t, testenv.WithImageUpdaterCRD(api.AddToScheme))
	regUser, regPass := "bench", fmt.Sprintf("pw-%d", time.Now().UnixNano())
	reg := testenv.StartRegistry(t, testenv.WithTokenAuth(regUser, regPass))
	gitServer := testenv.StartGitServer(t)
	rp := startRegistryProxy(t, reg.Host, reg.Tokens.Realm())
	kp := startKubeProxy(t, k.Config)
	step("start the API server, registry (token auth), git server and the counting proxies", start)

	w, err := newWorkload(s, reg.Host, gitServer.HTTPRepoURL(gitRepoName))
	if err != nil {
		t.Fatal(err)
	}
	res.Stats = w.stats()

	start = time.Now()
	st := newStorage(reg.DataDir())
	// Hundreds of thousands of small files: removing them a repository at a
	// time in parallel beats the single RemoveAll of the temporary folder.
	t.Cleanup(func() { st.remove(w.repos) })
	if err := st.fill(w, w.repos, nil); err != nil {
		t.Fatalf("fill the registry: %v", err)
	}
	step(fmt.Sprintf("write %d repositories, %d tags into the registry's storage", len(w.repos), res.Stats.TotalTags), start)
	start = time.Now()
	if err := verify(w, reg.Host, reg.Auth()); err != nil {
		t.Fatalf("the registry does not serve what was written: %v", err)
	}
	step("check the registry's tag lists and images against the model", start)

	if s.GitApps > 0 {
		start = time.Now()
		gitServer.CreateRepo(t, gitRepoName, "", w.gitFiles())
		step(fmt.Sprintf("create the git repository with %d overlays", s.GitApps), start)
	}

	start = time.Now()
	installRBAC(t, k)
	// Argo CD's default project, which allows every repository.
	k.CreateAppProject(t, argocdNS, "default", []string{"*"}, nil)
	createSecrets(t, k, reg, gitServer)
	dyn := dynamic.NewForConfigOrDie(k.Config)
	if err := createApplications(t.Context(), dyn, w); err != nil {
		t.Fatal(err)
	}
	step(fmt.Sprintf("create %d Applications", len(w.apps)), start)

	saConfig := k.ServiceAccountConfig(t, argocdNS, "argocd-image-updater")
	saConfig.Host, saConfig.CAData = kp.URL, kp.CA
	kubeconfig := testenv.WriteKubeconfig(t, saConfig, argocdNS)
	conf := filepath.Join(t.TempDir(), "registries.conf")
	entry := fmt.Sprintf("registries:\n- name: bench\n  prefix: %s\n  api_url: %s\n  credentials: env:REGISTRY_CREDS\n  internal_hosts: [%s]\n", reg.Host, rp.URL, rp.RealmHost)
	if *flagLimit > 0 {
		entry += fmt.Sprintf("  limit: %g\n", *flagLimit)
	}
	if err := os.WriteFile(conf, []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}

	phases := []string{"cold", "steady"}
	switch {
	case s.ChangeOnce:
		phases = append(phases, "change")
	case s.Change:
		phases = append(phases, "change", "after", "change2")
	}
	snap := func(ctl *controller) snapshot {
		prom, err := scrape(ctl.metricsURL)
		if err != nil {
			t.Errorf("scrape the controller's metrics: %v", err)
		}
		return snapshot{prom: prom, reg: rp.count.snapshot(), kube: kp.count.snapshot(),
			fetches: gitServer.Fetches.Load(), pushes: gitServer.Pushes.Load(), spans: rp.takeSpans()}
	}
	prev := snapshot{prom: map[string]float64{}, reg: rp.count.snapshot(), kube: kp.count.snapshot(),
		fetches: gitServer.Fetches.Load(), pushes: gitServer.Pushes.Load(), spans: rp.takeSpans()}

	profiling := *flagProfile != ""
	tmp := t.TempDir()
	res.Binary = binary(t)
	if out, err := exec.Command(res.Binary, "version", "--short").Output(); err == nil {
		res.Version = strings.TrimSpace(string(out))
	}
	memLimit := installMemoryLimit(t)
	ctlOpts := controllerOptions{
		binary: res.Binary, kubeconfig: kubeconfig, registriesConf: conf, interval: s.Interval, profiling: profiling, tmp: tmp,
		// The soft memory limit the controller sets itself in the
		// install's container; -scale.controller-env may override it.
		env: append([]string{"REGISTRY_CREDS=" + regUser + ":" + regPass,
			"GOMEMLIMIT=" + strconv.FormatInt(memlimit.ForContainer(uint64(memLimit.Value())), 10)},
			strings.Fields(*flagEnv)...),
		args: strings.Fields(*flagArgs),
	}
	ctl := startController(t, ctlOpts)
	registryPID := findPID(filepath.Join(filepath.Dir(reg.DataDir()), "config.yml"))
	if registryPID == 0 {
		t.Log("the registry's process was not found; its CPU time is not reported")
	}
	mark := markCPU(ctl.pid(), registryPID)
	rss := sampleRSS(ctl.pid())
	defer rss.close()
	if err := ctl.waitMetrics(time.Minute); err != nil {
		t.Fatalf("the controller's metrics: %v", err)
	}
	margin := min(time.Second, s.Interval/4)
	profileSeconds := int((s.Interval - 2*margin - 500*time.Millisecond).Seconds())
	var profiles sync.WaitGroup
	startProfile := func(phase string) string {
		if !profiling || profileSeconds < 1 {
			return ""
		}
		path := filepath.Join(*flagProfile, fmt.Sprintf("%s-%s.cpu.pprof", s.Name, phase))
		profiles.Add(1)
		go func() {
			defer profiles.Done()
			if err := ctl.profile(path, profileSeconds); err != nil {
				t.Logf("CPU profile of %s: %v", phase, err)
			}
		}()
		return path
	}
	nextProfile := startProfile(phases[0])

	expect := expectation{Listings: res.Stats.Listings}
	var changes []*changeSet
	for i, name := range phases {
		timeout := 20 * time.Minute
		if s.Name == smoke.Name {
			timeout = 2 * time.Minute
		}
		cl, err := ctl.nextCycle(timeout)
		if err != nil {
			t.Fatalf("cycle %s: %v", name, err)
		}
		if i == 0 {
			res.Startup = cl.At.Add(-cl.Duration).Sub(ctl.started)
		}
		end := markCPU(ctl.pid(), registryPID)
		ph := &phaseResult{Name: name, Log: cl, Expect: expect, Profile: nextProfile,
			Window: end.at.Sub(mark.at), MachineCPU: end.machine - mark.machine,
			ControllerCPU: end.controller - mark.controller, RegistryCPU: end.registry - mark.registry}
		t.Logf("cycle %s: %s, %d updated, %d errors, %d tag listings", name, cl.Duration, cl.Updated, cl.Errors, cl.Tag)

		// What the next cycle should find is set up now, between cycles.
		last := i == len(phases)-1
		expect = expectation{Listings: res.Stats.Listings}
		if !last {
			switch phases[i+1] {
			case "change", "change2":
				if err := w.settle(); err != nil {
					t.Fatal(err)
				}
				cs := w.planChange()
				if _, err := w.apply(cs); err != nil {
					t.Fatal(err)
				}
				if err := st.fill(w, cs.Repos, cs.Tags); err != nil {
					t.Fatalf("push the new tags: %v", err)
				}
				changes = append(changes, cs)
				expect.Updated, expect.Patched, expect.GitChanged = cs.Images, cs.Patched, cs.GitChanged
			case "after":
				if err := w.settle(); err != nil {
					t.Fatal(err)
				}
			}
		}

		// Counters are read just before the next cycle starts, so that what
		// a cycle sets off after it ends (events) is counted with it.
		nextStart := cl.At.Add(-cl.Duration).Add(s.Interval)
		at := nextStart.Add(-margin)
		switch {
		case last:
			// Nothing follows: wait only until the events sent after the
			// cycle (rate-limited) are through.
			quietFor(kp, at, 1500*time.Millisecond)
		case time.Now().After(at):
			ph.Overlapped = true
		default:
			time.Sleep(time.Until(at))
		}
		cur := snap(ctl)
		ph.PeakRSS = rss.take()
		mark = markCPU(ctl.pid(), registryPID)
		fillPhase(ph, prev, cur)
		cycleStart := cl.At.Add(-cl.Duration)
		ph.Spans = map[string][2]time.Duration{}
		for kind, sp := range cur.spans {
			ph.Spans[kind] = [2]time.Duration{sp.first.Sub(cycleStart), sp.last.Sub(cycleStart)}
		}
		prev = cur
		res.Phases = append(res.Phases, ph)
		if !last {
			nextProfile = startProfile(phases[i+1])
		}
	}
	if rss, err := ctl.peakRSS(); err == nil {
		res.PeakRSS = rss
	} else {
		t.Errorf("peak RSS: %v", err)
	}
	res.TotalCPU = prev.prom["process_cpu_seconds_total"]
	profiles.Wait()
	if profiling {
		res.Heap = filepath.Join(*flagProfile, s.Name+"-heap.pprof")
		if err := ctl.profile(res.Heap, 0); err != nil {
			t.Logf("heap profile: %v", err)
			res.Heap = ""
		}
	}
	errCount, errLines := ctl.errorLines()
	ctl.stop()
	if s.Webhook > 0 {
		ctlOpts.profiling = false
		res.Webhook = measureWebhook(t, s.Webhook, w, st, rp, kp, ctlOpts)
	}

	if err := w.settle(); err != nil {
		t.Fatal(err)
	}
	res.check(t, w, changes, dyn, gitServer, errCount, errLines)
	return res
}

// quietFor waits until the Kubernetes requests stop for quiet, or until
// deadline.
func quietFor(kp *kubeProxy, deadline time.Time, quiet time.Duration) {
	total := func() (n int64) {
		for _, v := range kp.count.snapshot() {
			n += v
		}
		return n
	}
	last, since := total(), time.Now()
	for time.Now().Before(deadline) && time.Since(since) < quiet {
		time.Sleep(100 * time.Millisecond)
		if n := total(); n != last {
			last, since = n, time.Now()
		}
	}
}

func fillPhase(ph *phaseResult, prev, cur snapshot) {
	ph.Cycles = cur.prom["argocd_image_updater_cycle_duration_seconds_count"] - prev.prom["argocd_image_updater_cycle_duration_seconds_count"]
	ph.Wall = time.Duration((cur.prom["argocd_image_updater_cycle_duration_seconds_sum"] -
		prev.prom["argocd_image_updater_cycle_duration_seconds_sum"]) * float64(time.Second))
	ph.Reg = deltaCounts(prev.reg, cur.reg)
	ph.Kube = deltaCounts(prev.kube, cur.kube)
	for _, v := range ph.Kube {
		ph.KubeTotal += v
	}
	d := func(name string) float64 { return cur.prom[name] - prev.prom[name] }
	ph.PromKube = d("argocd_image_updater_k8s_api_requests_total")
	ph.PromReg = d("argocd_image_updater_registry_requests_total")
	ph.CPU = d("process_cpu_seconds_total")
	ph.RSS = cur.prom["process_resident_memory_bytes"]
	ph.HeapInuse = cur.prom["go_memstats_heap_inuse_bytes"]
	ph.GitFetches = cur.fetches - prev.fetches
	ph.GitPushes = cur.pushes - prev.pushes
}

func deltaCounts(prev, cur map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range cur {
		if d := v - prev[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// check compares what the controller did with what the workload says it
// should have: these are correctness checks, not the targets. A
// check that depends on which cycle a request was counted in is left out
// when the next cycle began before the counters were read.
func (res *scenarioResult) check(t *testing.T, w *workload, changes []*changeSet, dyn dynamic.Interface, g *testenv.GitServer, errCount int, errLines []string) {
	add := func(what string, ok bool, format string, args ...any) {
		res.Checks = append(res.Checks, check{What: what, OK: ok, Got: fmt.Sprintf(format, args...)})
		if !ok {
			t.Errorf("%s: %s", what, fmt.Sprintf(format, args...))
		}
	}
	gitImages := 0
	for _, a := range w.apps {
		if a.Git {
			gitImages += len(a.Images)
		}
	}
	if ph := res.phase("change"); len(changes) > 0 && ph.GitPushes == 0 && ph.Log.Errors > 0 {
		res.GitNotRun = "the git write-back failed"
		for _, l := range errLines {
			if strings.Contains(l, "git") {
				var rec struct {
					Error string `json:"error"`
				}
				_ = json.Unmarshal([]byte(l), &rec)
				res.GitNotRun = rec.Error
				if rec.Error == "" {
					res.GitNotRun = l
				}
				break
			}
		}
		t.Logf("git scenario not run: %s", res.GitNotRun)
	}
	for _, ph := range res.Phases {
		add(ph.Name+": one listing per repository and credentials", ph.Log.Tag == ph.Expect.Listings,
			"%d listings planned by the controller, %d distinct pairs", ph.Log.Tag, ph.Expect.Listings)
		attributable := true
		if prev := res.previous(ph); prev != nil && prev.Overlapped {
			attributable = false
		}
		if !ph.Overlapped {
			add(ph.Name+": one cycle counted", ph.Cycles == 1, "%.0f cycles", ph.Cycles)
		}
		switch ph.Name {
		case "cold", "steady", "after":
			if ph.Name == "after" && res.GitNotRun != "" {
				break
			}
			add(ph.Name+": nothing written, no error", ph.Log.Updated == 0 && ph.Log.Errors == 0,
				"%d updated, %d errors", ph.Log.Updated, ph.Log.Errors)
			if attributable && !ph.Overlapped {
				add(ph.Name+": no patch, no push", ph.Kube["patch applications"] == 0 && ph.GitPushes == 0,
					"%d patches, %d pushes", ph.Kube["patch applications"], ph.GitPushes)
			}
		case "change", "change2":
			if res.GitNotRun != "" {
				add(ph.Name+": the argocd Applications are written", ph.Log.Updated == ph.Expect.Updated-ph.Expect.GitChanged,
					"%d images updated, %d expected", ph.Log.Updated, ph.Expect.Updated-ph.Expect.GitChanged)
			} else {
				add(ph.Name+": every new version written, no error", ph.Log.Updated == ph.Expect.Updated && ph.Log.Errors == 0,
					"%d images updated (%d expected), %d errors", ph.Log.Updated, ph.Expect.Updated, ph.Log.Errors)
			}
			if attributable && !ph.Overlapped {
				add(ph.Name+": one patch per changed argocd Application", ph.Kube["patch applications"] == int64(ph.Expect.Patched),
					"%d patches, %d Applications changed", ph.Kube["patch applications"], ph.Expect.Patched)
				// The record of an argocd write is in its patch, a git
				// write's in the refresh of its Application: one request
				// per Application written.
				add(ph.Name+": the record of each write in its one request", ph.Kube["save write records"] == 0,
					"%d saves of write records on their own", ph.Kube["save write records"])
				if res.GitNotRun == "" {
					add(ph.Name+": one refresh per git Application", ph.Kube["refresh applications"] == int64(ph.Expect.GitChanged),
						"%d refreshes, %d git Applications changed", ph.Kube["refresh applications"], ph.Expect.GitChanged)
				}
				if res.GitNotRun == "" {
					add(ph.Name+": one push", ph.GitPushes == 1, "%d pushes", ph.GitPushes)
				}
			}
		}
	}
	if len(changes) > 0 && res.GitNotRun == "" {
		last := changes[len(changes)-1]
		if err := checkGitContent(t, w, last, g); err != nil {
			add("the kustomizations hold the new tags", false, "%v", err)
		} else {
			add("the kustomizations hold the new tags", true, "%d overlays", last.GitChanged)
		}
	}
	if err := checkApplications(t.Context(), dyn, w); err != nil {
		add("the Applications hold the chosen versions", false, "%v", err)
	} else {
		add("the Applications hold the chosen versions", true, "all %d argocd Applications", len(w.apps)-res.Stats.GitApps)
	}
	if res.GitNotRun == "" && errCount > 0 {
		add("no error logged", false, "%d error lines, first: %s", errCount, errLines[0])
	}
}

// previous is the cycle before ph.
func (res *scenarioResult) previous(ph *phaseResult) *phaseResult {
	for i, p := range res.Phases {
		if p == ph && i > 0 {
			return res.Phases[i-1]
		}
	}
	return nil
}

func (res *scenarioResult) phase(name string) *phaseResult {
	for _, ph := range res.Phases {
		if ph.Name == name {
			return ph
		}
	}
	return &phaseResult{Name: name, Kube: map[string]int64{}, Reg: map[string]int64{}}
}

// checkApplications reads every argocd Application back and compares its
// override (or running image) with the model.
func checkApplications(ctx context.Context, dyn dynamic.Interface, w *workload) error {
	list, err := dyn.Resource(application.Resource()).Namespace(argocdNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	byName := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		byName[list.Items[i].GetName()] = &list.Items[i]
	}
	var errs []error
	for _, a := range w.apps {
		if a.Git {
			continue
		}
		obj := byName[a.Name]
		if obj == nil {
			errs = append(errs, fmt.Errorf("%s is missing", a.Name))
			continue
		}
		app, err := application.FromUnstructured(obj)
		if err != nil {
			return err
		}
		for i, e := range a.Images {
			spec := app.Settings.Images[i]
			got, ok := app.Sources[0].CurrentVersion(spec)
			if !ok {
				got, _, _ = app.RunningVersion(spec)
			}
			if want := e.Current.String(); got.String() != want {
				errs = append(errs, fmt.Errorf("%s image %s is %q, want %q", a.Name, e.Alias, got, want))
			}
		}
		if len(errs) > 5 {
			break
		}
	}
	return errors.Join(errs...)
}

// checkGitContent reads the overlays of the git Applications whose image
// got a new tag.
func checkGitContent(t *testing.T, w *workload, cs *changeSet, g *testenv.GitServer) error {
	var errs []error
	for _, a := range w.apps {
		if !a.Git {
			continue
		}
		tag, ok := cs.Tags[a.Images[0].Repo]
		if !ok {
			continue
		}
		content := g.ReadFile(t, gitRepoName, "main", "apps/"+a.Name+"/kustomization.yaml")
		var k struct {
			Images []struct {
				Name, NewTag string
			} `json:"images"`
		}
		if err := yaml.Unmarshal([]byte(content), &k); err != nil {
			return err
		}
		if len(k.Images) != 1 || k.Images[0].NewTag != tag {
			errs = append(errs, fmt.Errorf("%s: images %+v, want tag %s", a.Name, k.Images, tag))
		}
		if len(errs) > 5 {
			break
		}
	}
	return errors.Join(errs...)
}

// installMemoryLimit is the memory limit of the controller's container in
// the install manifests.
func installMemoryLimit(t *testing.T) resource.Quantity {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "base", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			return q
		}
	}
	t.Fatal("manifests/base/deployment.yaml: no container with a memory limit")
	return resource.Quantity{}
}

// installRBAC creates the Role and RoleBinding of the install manifests.
func installRBAC(t *testing.T, k *testenv.Kube) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "base", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		obj.SetNamespace(argocdNS)
		k.Create(t, &obj)
	}
}

// createSecrets creates the pull secret and the credentials Secret some
// images use, and Argo CD's repository Secret for the git repository.
func createSecrets(t *testing.T, k *testenv.Kube, reg *testenv.Registry, g *testenv.GitServer) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + reg.Password))
	dockerConfig, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
	k.Create(t,
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: pullSecretName, Namespace: argocdNS},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: credsSecretName, Namespace: argocdNS},
			StringData: map[string]string{"creds": reg.Username + ":" + reg.Password},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "repo-" + gitRepoName, Namespace: argocdNS,
				Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
			StringData: map[string]string{"url": g.HTTPRepoURL(gitRepoName), "username": g.Username, "password": g.Password},
		},
	)
}

// createApplications creates the Applications, several at a time.
func createApplications(ctx context.Context, dyn dynamic.Interface, w *workload) error {
	apps := dyn.Resource(application.Resource()).Namespace(argocdNS)
	work := make(chan *benchApp)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				if _, err := apps.Create(ctx, w.object(a), metav1.CreateOptions{}); err != nil {
					select {
					case errs <- fmt.Errorf("create Application %s: %w", a.Name, err):
					default:
					}
				}
			}
		}()
	}
	for _, a := range w.apps {
		work <- a
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
