package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// TestSideBySide runs this controller and upstream's (v1.3.0, built by
// hack/upstream.sh) one after the other on the same API server, registry and
// Applications: `run --once`, interleaved, several times each, and compares
// peak resident memory and time. It runs only when -sbs.upstream (or
// BENCH_UPSTREAM) names upstream's binary; `make bench-upstream` builds it
// and runs this.
var (
	flagUpstream  = flag.String("sbs.upstream", "", "upstream's binary (hack/upstream.sh): run the side-by-side benchmark; also BENCH_UPSTREAM")
	flagSBSApps   = flag.String("sbs.apps", "500,5000", "comma-separated numbers of Applications, one API server and registry each")
	flagSBSRuns   = flag.Int("sbs.runs", 2, "runs of each binary per size, interleaved (ours, upstream, ours, upstream, ...)")
	flagSBSBehind = flag.Int("sbs.behind", 10, "percent of the Applications one version behind, which every run writes (the Applications are reset after each run)")
	flagSBSWrite  = flag.String("sbs.write", "", "replace the side-by-side section of this markdown file with the results")
)

// sideBySideHeading is the section of docs/benchmarks.md the run replaces
// (or adds, above the part make bench keeps).
const sideBySideHeading = "## Side by side with upstream v1.3.0"

// Per size: one image repository for every ten Applications, each with 20
// semver tags (1.0.0 to 1.1.9) on one image.
const (
	sbsAppsPerRepo = 10
	sbsTags        = 20
)

var imageUpdaterResource = schema.GroupVersionResource{Group: "argocd-image-updater.argoproj.io", Version: "v1alpha1", Resource: "imageupdaters"}

const imageUpdaterName = "annotated"

// sbsRun is one `run --once` of one binary.
type sbsRun struct {
	Binary   string // "ours", "upstream"
	Apps     int
	Wall     time.Duration // process start to exit
	Cycle    time.Duration // ours: the cycle it logs; upstream: its update pass, after the warm-up
	WarmUp   time.Duration // upstream only: the warm-up pass (dry run over every image) before it
	PeakRSS  int64         // bytes, the process's high-water mark of resident memory (VmHWM)
	CPU      time.Duration // user and system
	Written  int           // Applications whose spec the run changed
	Expected int
	Err      string
}

func TestSideBySide(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	upstream := *flagUpstream
	if upstream == "" {
		upstream = os.Getenv("BENCH_UPSTREAM")
	}
	if upstream == "" {
		t.Skip("runs when -sbs.upstream or BENCH_UPSTREAM names upstream's binary (make bench-upstream)")
	}
	if testing.Short() {
		t.Skip("needs the test servers; skipped in -short mode")
	}
	if !filepath.IsAbs(upstream) {
		upstream = filepath.Join("..", "..", upstream)
	}
	if _, err := os.Stat(upstream); err != nil {
		t.Fatalf("upstream's binary: %v", err)
	}
	ours, err := controllerBinary(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	bins := []struct{ name, path string }{{"ours", ours}, {"upstream", upstream}}
	versions := map[string]string{}
	for _, b := range bins {
		out, _ := exec.Command(b.path, "version").CombinedOutput()
		versions[b.name] = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	started := time.Now()
	load := loadAverage()
	var runs []sbsRun
	for _, f := range strings.Split(*flagSBSApps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < sbsAppsPerRepo {
			t.Fatalf("-sbs.apps: %q is not a number of Applications (at least %d)", f, sbsAppsPerRepo)
		}
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			env := startSideBySide(t, n)
			for i := range *flagSBSRuns {
				for _, b := range bins {
					r := env.run(t, b.name, b.path)
					t.Logf("%d Applications, run %d, %s: wall %s, cycle %s, warm-up %s, peak RSS %.1f MiB, CPU %s, %d of %d written %s",
						n, i+1, b.name, r.Wall.Round(10*time.Millisecond), r.Cycle.Round(10*time.Millisecond), r.WarmUp.Round(10*time.Millisecond),
						toMiB(r.PeakRSS), r.CPU.Round(10*time.Millisecond), r.Written, r.Expected, r.Err)
					runs = append(runs, r)
					if r.Written != r.Expected || r.Err != "" {
						t.Errorf("%s, run %d: %d of %d Applications written %s", b.name, i+1, r.Written, r.Expected, r.Err)
					}
					if err := env.reset(t); err != nil {
						t.Fatalf("reset the Applications: %v", err)
					}
				}
			}
		})
	}
	md := sideBySideMarkdown(runs, started, time.Since(started), load, loadAverage(), versions)
	t.Log("\n" + md)
	if *flagSBSWrite != "" {
		old, err := os.ReadFile(*flagSBSWrite)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*flagSBSWrite, []byte(replaceSection(string(old), md)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("written to %s", *flagSBSWrite)
	}
}

// sbsEnv is one size's servers and Applications.
type sbsEnv struct {
	n          int
	w          *workload
	dyn        dynamic.Interface
	kubeconfig string
	conf       string
	creds      string
	original   map[string]*unstructured.Unstructured
	behind     int
}

func startSideBySide(t *testing.T, n int) *sbsEnv {
	start := time.Now()
	k := testenv.StartKube(t, testenv.WithImageUpdaterCRD(api.AddToScheme))
	reg := testenv.StartRegistry(t)
	e := &sbsEnv{n: n, dyn: dynamic.NewForConfigOrDie(k.Config), original: map[string]*unstructured.Unstructured{},
		creds: reg.Username + ":" + reg.Password}
	w := &workload{size: size{Name: "sbs"}, host: reg.Host}
	w.layer, w.diffID = makeLayer()
	for i := range (n + sbsAppsPerRepo - 1) / sbsAppsPerRepo {
		w.repos = append(w.repos, w.newRepo(fmt.Sprintf("bench/sbs-%04d", i), kindSemver, sbsTags))
	}
	st := newStorage(reg.DataDir())
	t.Cleanup(func() { st.remove(w.repos) })
	if err := st.fill(w, w.repos, nil); err != nil {
		t.Fatalf("fill the registry: %v", err)
	}
	every := 0
	if *flagSBSBehind > 0 {
		every = max(1, 100 / *flagSBSBehind)
	}
	for i := range n {
		r := w.repos[i/sbsAppsPerRepo]
		tag := r.Tags[len(r.Tags)-1]
		if every > 0 && i%every == 0 {
			tag = r.Tags[len(r.Tags)-2]
			e.behind++
		}
		w.apps = append(w.apps, &benchApp{Name: fmt.Sprintf("sbs-%05d", i), Images: []*imageEntry{{
			Alias: "app", Repo: r, Strategy: "semver", Current: imageref.Version{Tag: tag}}}})
	}
	e.w = w
	k.CreateAppProject(t, argocdNS, "default", []string{"*"}, nil)
	if err := createApplications(t.Context(), e.dyn, w); err != nil {
		t.Fatal(err)
	}
	for _, a := range w.apps {
		e.original[a.Name] = w.object(a)
	}
	// One ImageUpdater selects every Application and reads what to update
	// from its annotations, as upstream v1.x serves annotated Applications.
	iu := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argocd-image-updater.argoproj.io/v1alpha1", "kind": "ImageUpdater",
		"metadata": map[string]any{"name": imageUpdaterName, "namespace": argocdNS},
		"spec":     map[string]any{"applicationRefs": []any{map[string]any{"namePattern": "*", "useAnnotations": true}}},
	}}
	if _, err := e.dyn.Resource(imageUpdaterResource).Namespace(argocdNS).Create(t.Context(), iu, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the ImageUpdater: %v", err)
	}
	// Both run as the API server's administrator, with the same
	// registries.conf: the registry's credentials from the environment.
	e.kubeconfig = testenv.WriteKubeconfig(t, k.Config, argocdNS)
	e.conf = filepath.Join(t.TempDir(), "registries.conf")
	conf := fmt.Sprintf("registries:\n- name: bench\n  prefix: %s\n  api_url: http://%s\n  credentials: env:REGISTRY_CREDS\n  default: true\n", reg.Host, reg.Host)
	if err := os.WriteFile(e.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d Applications (%d behind), %d repositories of %d tags: ready after %s", n, e.behind, len(w.repos), sbsTags,
		time.Since(start).Round(100*time.Millisecond))
	return e
}

// run starts one binary with `run --once` and waits for it to exit.
func (e *sbsEnv) run(t *testing.T, name, bin string) sbsRun {
	r := sbsRun{Binary: name, Apps: e.n, Expected: e.behind}
	args := []string{"run", "--once", "--kubeconfig", e.kubeconfig, "--registries-conf-path", e.conf,
		"--argocd-namespace", argocdNS, "--leader-election=false", "--loglevel", "info", "--logformat", "json"}
	env := []string{"REGISTRY_CREDS=" + e.creds, "TMPDIR=" + t.TempDir()}
	if name == "ours" {
		args = append(args, "--metrics-port", "0")
	} else {
		// Upstream watches the namespace it runs in, which outside a pod
		// it takes from POD_NAMESPACE; its manager's client reads
		// KUBECONFIG, not --kubeconfig; its metrics are off by default.
		env = append(env, "POD_NAMESPACE="+argocdNS, "KUBECONFIG="+e.kubeconfig)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	timer := time.AfterFunc(30*time.Minute, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer timer.Stop()
	// The process's own high-water mark (VmHWM), read until it exits: it
	// only grows, so polling misses at most the last interval's growth.
	// ru_maxrss after the wait would not do: the kernel keeps in it the
	// memory of the process that forked the child before its exec, here
	// the harness, which at 5,000 Applications holds more than either.
	hwm := make(chan int64, 1)
	stopHWM := make(chan struct{})
	go func() {
		var peak int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, err := procStatusKB(cmd.Process.Pid, "VmHWM"); err == nil {
				peak = max(peak, v)
			}
			select {
			case <-stopHWM:
				hwm <- peak
				return
			case <-tick.C:
			}
		}
	}()
	var p passTimes
	p.read(io.TeeReader(out, logFile))
	close(stopHWM)
	r.PeakRSS = <-hwm
	waitErr := cmd.Wait()
	r.Wall = time.Since(start)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	r.Cycle, r.WarmUp = p.cycle, p.warmUp
	if name == "upstream" {
		r.Cycle = p.update.took()
		r.WarmUp = p.warm.took()
	}
	if waitErr != nil {
		r.Err = fmt.Sprintf("(exit: %v)", waitErr)
	}
	if p.errors > 0 {
		r.Err += fmt.Sprintf(" (%d error lines, first: %s)", p.errors, p.firstError)
	}
	written, err := e.changed(t)
	if err != nil {
		t.Fatal(err)
	}
	r.Written = len(written)
	if r.Err != "" || r.Written != r.Expected {
		data, _ := os.ReadFile(logPath)
		if len(data) > 8<<10 {
			data = data[len(data)-8<<10:]
		}
		t.Logf("%s: last output:\n%s", name, data)
	}
	return r
}

// span is a pass's start and end as the harness read them.
type passSpan struct{ from, to time.Time }

func (s passSpan) took() time.Duration {
	if s.from.IsZero() || s.to.IsZero() {
		return 0
	}
	return s.to.Sub(s.from)
}

// passTimes reads the log lines that mark each binary's passes.
type passTimes struct {
	cycle, warmUp time.Duration // ours, from its own log
	warm, update  passSpan      // upstream, timed as its lines arrive
	errors        int
	firstError    string
}

func (p *passTimes) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		now := time.Now()
		var rec struct {
			Msg      string  `json:"msg"`
			Level    string  `json:"level"`
			Duration float64 `json:"duration"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if strings.EqualFold(rec.Level, "error") || strings.EqualFold(rec.Level, "fatal") {
			if p.errors == 0 {
				p.firstError = sc.Text()
			}
			p.errors++
		}
		msg := rec.Msg
		switch {
		case msg == "update cycle finished":
			p.cycle = time.Duration(rec.Duration)
		// Upstream's --once: a warm-up pass over every ImageUpdater (a dry
		// run that fills its registry cache), then the reconciler's pass.
		case strings.HasPrefix(msg, "Processing ") && strings.Contains(msg, "(warmUp: true"):
			p.warm.from = now
		case strings.HasPrefix(msg, "Finished cache warm-up."):
			p.warm.to = now
		case msg == "Successfully fetched ImageUpdater resource." && p.update.from.IsZero():
			p.update.from = now
		case strings.HasPrefix(msg, "Finish Reconciliation for CR") || strings.HasPrefix(msg, "Error processing CR"):
			p.update.to = now
		}
	}
}

// changed lists the Applications whose spec or annotations differ from
// what the benchmark created.
func (e *sbsEnv) changed(t *testing.T) ([]*unstructured.Unstructured, error) {
	list, err := e.dyn.Resource(application.Resource()).Namespace(argocdNS).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		obj := &list.Items[i]
		orig := e.original[obj.GetName()]
		if orig == nil {
			continue
		}
		if !reflect.DeepEqual(obj.Object["spec"], orig.Object["spec"]) || !reflect.DeepEqual(obj.GetAnnotations(), orig.GetAnnotations()) {
			out = append(out, obj)
		}
	}
	return out, nil
}

// reset puts every changed Application back as it was created, so that
// each run finds the same work.
func (e *sbsEnv) reset(t *testing.T) error {
	changed, err := e.changed(t)
	if err != nil {
		return err
	}
	apps := e.dyn.Resource(application.Resource()).Namespace(argocdNS)
	var errs []error
	for _, obj := range changed {
		orig := e.original[obj.GetName()].DeepCopy()
		orig.SetResourceVersion(obj.GetResourceVersion())
		if _, err := apps.Update(t.Context(), orig, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", obj.GetName(), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The ImageUpdater's status holds what each binary records of its
	// writes (ours: which versions it wrote, so that a version set back by
	// someone else is held, not written again), and upstream adds its
	// finalizer: both go, so the next run starts from the same state.
	ius := e.dyn.Resource(imageUpdaterResource).Namespace(argocdNS)
	iu, err := ius.Get(t.Context(), imageUpdaterName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if _, ok := iu.Object["status"]; ok {
		delete(iu.Object, "status")
		if iu, err = ius.UpdateStatus(t.Context(), iu, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("clear the ImageUpdater's status: %w", err)
		}
	}
	if len(iu.GetFinalizers()) > 0 {
		iu.SetFinalizers(nil)
		if _, err := ius.Update(t.Context(), iu, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("remove the ImageUpdater's finalizers: %w", err)
		}
	}
	left, err := e.changed(t)
	if err == nil && len(left) > 0 {
		err = fmt.Errorf("%d Applications still differ", len(left))
	}
	return err
}

func toMiB(b int64) float64 { return float64(b) / (1 << 20) }

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// sideBySideMarkdown is the section of docs/benchmarks.md.
func sideBySideMarkdown(runs []sbsRun, started time.Time, took time.Duration, loadBefore, loadAfter string, versions map[string]string) string {
	var b strings.Builder
	m := readMachine()
	commit := "unknown"
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	}
	fmt.Fprintf(&b, "%s\n\n", sideBySideHeading)
	fmt.Fprintf(&b, "Generated by `make bench-upstream` on %s; the run took %s. Machine: %d cores (%s), %.1f GiB memory, load average %s before the run and %s after (1, 5, 15 minutes). Commit %s; ours: `%s`, upstream: `%s`.\n\n",
		started.UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second), m.Cores, m.Model, float64(m.Memory)/(1<<30),
		loadBefore, loadAfter, commit, versions["ours"], versions["upstream"])
	fmt.Fprintf(&b, "Each size has its own API server and Distribution registry (htpasswd auth). One image repository per %d Applications, "+
		"%d semver tags each; every Application is annotated (`image-list`, `update-strategy: semver`, `write-back-method: argocd`, a Kustomize source), "+
		"and %d%% of them run the tag before the newest, so every run patches those. One ImageUpdater selects them all "+
		"(`namePattern: \"*\"`, `useAnnotations: true`). Each binary runs `run --once` as the API server's administrator with the same registries.conf, "+
		"interleaved (ours, upstream, ours, upstream); the Applications are put back as created after each run. "+
		"Peak RSS is the process's high-water mark of resident memory (`VmHWM`, read every 20 ms until it exits); wall is from process start to exit, start-up and the informers' "+
		"first list included. Cycle: ours, the cycle it logs; upstream, its reconciler's pass, which follows a warm-up pass over the same "+
		"images (a dry run that fills its registry cache; `--once` implies `--warmup-cache`).\n\n", sbsAppsPerRepo, sbsTags, *flagSBSBehind)
	b.WriteString("| Applications | binary | run | peak RSS MiB | wall s | cycle s | upstream warm-up s | CPU s | Applications written |\n")
	b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
	count := map[string]int{}
	for _, r := range runs {
		key := fmt.Sprint(r.Apps, r.Binary)
		count[key]++
		warm := "–"
		if r.Binary == "upstream" {
			warm = fmt.Sprintf("%.2f", r.WarmUp.Seconds())
		}
		written := fmt.Sprintf("%d of %d", r.Written, r.Expected)
		if r.Err != "" {
			written += " " + r.Err
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %.0f | %.2f | %.2f | %s | %.2f | %s |\n", r.Apps, r.Binary, count[key], toMiB(r.PeakRSS),
			r.Wall.Seconds(), r.Cycle.Seconds(), warm, r.CPU.Seconds(), written)
	}
	b.WriteString("\n| Applications | ours peak RSS MiB | upstream peak RSS MiB | upstream / ours (lowest to lowest) | ours cycle s | upstream cycle s (warm-up + pass) | ours wall s | upstream wall s |\n")
	b.WriteString("|--:|---|---|--:|---|---|---|---|\n")
	var sizes []int
	seen := map[int]bool{}
	for _, r := range runs {
		if !seen[r.Apps] {
			seen[r.Apps] = true
			sizes = append(sizes, r.Apps)
		}
	}
	for _, n := range sizes {
		var o, u []sbsRun
		for _, r := range runs {
			if r.Apps != n {
				continue
			}
			if r.Binary == "ours" {
				o = append(o, r)
			} else {
				u = append(u, r)
			}
		}
		rng := func(rs []sbsRun, f func(sbsRun) float64, format string) string {
			if len(rs) == 0 {
				return "–"
			}
			lo, hi := f(rs[0]), f(rs[0])
			for _, r := range rs[1:] {
				lo, hi = min(lo, f(r)), max(hi, f(r))
			}
			if fmt.Sprintf(format, lo) == fmt.Sprintf(format, hi) {
				return fmt.Sprintf(format, lo)
			}
			return fmt.Sprintf(format+"–"+format, lo, hi)
		}
		low := func(rs []sbsRun) float64 {
			v := 0.0
			for i, r := range rs {
				if i == 0 || toMiB(r.PeakRSS) < v {
					v = toMiB(r.PeakRSS)
				}
			}
			return v
		}
		ratio := "–"
		if len(o) > 0 && len(u) > 0 && low(o) > 0 {
			ratio = fmt.Sprintf("%.2f×", low(u)/low(o))
		}
		rss := func(r sbsRun) float64 { return toMiB(r.PeakRSS) }
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", n, rng(o, rss, "%.0f"), rng(u, rss, "%.0f"), ratio,
			rng(o, func(r sbsRun) float64 { return r.Cycle.Seconds() }, "%.2f"),
			rng(u, func(r sbsRun) float64 { return (r.WarmUp + r.Cycle).Seconds() }, "%.2f"),
			rng(o, func(r sbsRun) float64 { return r.Wall.Seconds() }, "%.2f"),
			rng(u, func(r sbsRun) float64 { return r.Wall.Seconds() }, "%.2f"))
	}
	b.WriteString("\n")
	return b.String()
}

// replaceSection puts section (starting with sideBySideHeading) in place of
// the page's section of that heading, or, when the page has none, just
// before the part make bench keeps (or at the end).
func replaceSection(page, section string) string {
	if i := strings.Index(page, sideBySideHeading+"\n"); i >= 0 {
		rest := page[i+len(sideBySideHeading)+1:]
		end := len(page)
		if j := strings.Index(rest, "\n## "); j >= 0 {
			end = i + len(sideBySideHeading) + 1 + j + 1
		}
		return page[:i] + section + page[end:]
	}
	if i := strings.Index(page, handWrittenMarker+"\n"); i >= 0 {
		at := i + len(handWrittenMarker) + 1
		return page[:at] + "\n" + section + strings.TrimLeft(page[at:], "\n")
	}
	return strings.TrimRight(page, "\n") + "\n\n" + section
}
