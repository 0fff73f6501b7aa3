package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// controllerBinary is BENCH_BINARY, or the controller built from this
// module into dir. With profiling, a file that serves net/http/pprof when
// BENCH_PPROF_ADDR is set is added to the main package through a build
// overlay, so the sources stay as they are.
func controllerBinary(dir string, profiling bool) (string, error) {
	if bin := os.Getenv("BENCH_BINARY"); bin != "" && !profiling {
		// A relative path is taken from the module's root, where make runs.
		if !filepath.IsAbs(bin) {
			bin = filepath.Join("..", "..", bin)
		}
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("BENCH_BINARY: %w", err)
		}
		return filepath.Abs(bin)
	}
	pkg, err := filepath.Abs(filepath.Join("..", "..", "cmd", "argocd-image-updater"))
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "argocd-image-updater")
	args := []string{"build", "-o", bin}
	if profiling {
		bin += "-pprof"
		overlaySrc, err := filepath.Abs(filepath.Join("testdata", "pprof_overlay.go"))
		if err != nil {
			return "", err
		}
		overlay := map[string]map[string]string{"Replace": {filepath.Join(pkg, "zz_bench_pprof.go"): overlaySrc}}
		data, _ := json.Marshal(overlay)
		overlayFile := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(overlayFile, data, 0o600); err != nil {
			return "", err
		}
		args = []string{"build", "-overlay", overlayFile, "-o", bin}
	}
	out, err := exec.Command("go", append(args, pkg)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build the controller: %v\n%s", err, out)
	}
	return bin, nil
}

// cycleLog is the controller's "update cycle finished" log line.
type cycleLog struct {
	At                                                  time.Time // when the harness read it
	Duration                                            time.Duration
	Applications, Images, Skipped, Updated, Errors, Tag int
}

// controller is the controller process under measurement.
type controller struct {
	cmd        *exec.Cmd
	started    time.Time
	metricsURL string
	pprofAddr  string
	logPath    string
	cycles     chan cycleLog
	exited     chan struct{}

	mu       sync.Mutex
	problems []string // error-level log lines, the first ones
	errCount int
}

type controllerOptions struct {
	binary, kubeconfig, registriesConf string
	interval                           time.Duration
	env, args                          []string
	profiling                          bool
	tmp                                string
}

// Flags the controller runs with besides the per-run ones; the report
// prints them.
var controllerFlags = []string{"--max-concurrency", "10", "--kube-api-qps", "50", "--kube-api-burst", "100",
	"--leader-election=false", "--loglevel", "info", "--logformat", "json"}

func startController(t testing.TB, o controllerOptions) *controller {
	t.Helper()
	metricsPort, healthPort := freePort(t), freePort(t)
	c := &controller{
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
		logPath:    filepath.Join(o.tmp, "controller.log"),
		cycles:     make(chan cycleLog, 16),
		exited:     make(chan struct{}),
	}
	args := append([]string{"run", "--interval", o.interval.String(), "--kubeconfig", o.kubeconfig,
		"--registries-conf-path", o.registriesConf, "--argocd-namespace", argocdNS,
		"--listen-address", "127.0.0.1", "--metrics-port", strconv.Itoa(metricsPort), "--health-port", strconv.Itoa(healthPort)}, controllerFlags...)
	args = append(args, o.args...)
	c.cmd = exec.Command(o.binary, args...)
	// The git write-back keeps its clones under TMPDIR.
	gitTmp := filepath.Join(o.tmp, "controller-tmp")
	if err := os.MkdirAll(gitTmp, 0o700); err != nil {
		t.Fatal(err)
	}
	c.cmd.Env = append(append(os.Environ(), "TMPDIR="+gitTmp), o.env...)
	if o.profiling {
		c.pprofAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		c.cmd.Env = append(c.cmd.Env, "BENCH_PPROF_ADDR="+c.pprofAddr)
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout = c.cmd.Stderr
	logFile, err := os.Create(c.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start the controller: %v", err)
	}
	c.started = time.Now()
	go func() {
		c.readLog(io.TeeReader(stderr, logFile))
		_ = c.cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			c.dumpLog(t)
		}
	})
	return c
}

func (c *controller) pid() int { return c.cmd.Process.Pid }

// stop ends the controller by its process ID: SIGTERM, then SIGKILL.
func (c *controller) stop() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = syscall.Kill(-c.pid(), syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
		<-c.exited
	}
}

func (c *controller) readLog(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var rec struct {
			Msg          string  `json:"msg"`
			Level        string  `json:"level"`
			Duration     float64 `json:"duration"`
			Applications int     `json:"applications"`
			Images       int     `json:"images"`
			Skipped      int     `json:"skipped"`
			Updated      int     `json:"updated"`
			Errors       int     `json:"errors"`
			TagListings  int     `json:"tagListings"`
		}
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		if rec.Level == "ERROR" {
			c.mu.Lock()
			c.errCount++
			if len(c.problems) < 20 {
				c.problems = append(c.problems, string(line))
			}
			c.mu.Unlock()
		}
		if rec.Msg == "update cycle finished" {
			c.cycles <- cycleLog{At: time.Now(), Duration: time.Duration(rec.Duration),
				Applications: rec.Applications, Images: rec.Images, Skipped: rec.Skipped,
				Updated: rec.Updated, Errors: rec.Errors, Tag: rec.TagListings}
		}
	}
}

// nextCycle waits for the next finished cycle.
func (c *controller) nextCycle(timeout time.Duration) (cycleLog, error) {
	select {
	case cl := <-c.cycles:
		return cl, nil
	case <-c.exited:
		return cycleLog{}, fmt.Errorf("the controller exited: %v", c.cmd.ProcessState)
	case <-time.After(timeout):
		return cycleLog{}, fmt.Errorf("no cycle finished within %s", timeout)
	}
}

func (c *controller) errorLines() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errCount, append([]string(nil), c.problems...)
}

func (c *controller) dumpLog(t testing.TB) {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return
	}
	const max = 16 << 10
	if len(data) > max {
		data = data[len(data)-max:]
	}
	t.Logf("--- last output of the controller (pid %d) ---\n%s", c.pid(), data)
}

// waitMetrics waits until the metrics endpoint answers.
func (c *controller) waitMetrics(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := scrape(c.metricsURL)
		if err == nil {
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("the controller exited: %v", c.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// peakRSS is the process's high-water mark of resident memory (VmHWM).
func (c *controller) peakRSS() (int64, error) {
	return procStatusKB(c.pid(), "VmHWM")
}

func procStatusKB(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// profile saves a CPU profile of the next seconds, or the heap profile
// when seconds is 0.
func (c *controller) profile(path string, seconds int) error {
	u := fmt.Sprintf("http://%s/debug/pprof/heap", c.pprofAddr)
	if seconds > 0 {
		u = fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", c.pprofAddr, seconds)
	}
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s: %s", u, resp.Status, body)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// scrape reads a Prometheus text exposition and sums each metric over its
// label sets.
func scrape(u string) (map[string]float64, error) {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", u, resp.Status)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		rest := line[len(name):]
		if strings.HasPrefix(rest, "{") {
			// Label values may hold spaces; the value follows the last '}'.
			rest = rest[strings.LastIndex(rest, "}")+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		out[name] += v
	}
	return out, sc.Err()
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
