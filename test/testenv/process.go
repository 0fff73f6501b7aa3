package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// assetsDir is where etcd, kube-apiserver, registry and helm live.
func assetsDir(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the test servers; skipped in -short mode")
	}
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or export KUBEBUILDER_ASSETS=$(hack/testbin.sh)")
	return ""
}

// binary returns the path of a test server binary, failing the test with a
// hint when it has not been built.
func binary(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(assetsDir(t), name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s not found in KUBEBUILDER_ASSETS (%v): run `make testbin`", name, err)
	}
	return path
}

// Helm returns the path of the helm binary that `make testbin` builds next
// to the test servers, for tests of the chart.
func Helm(t testing.TB) string {
	t.Helper()
	return binary(t, "helm")
}

// Kustomize renders the kustomization in dir with the kustomize that
// `make testbin` pins (the version Argo CD ships), whatever kubectl the
// machine may have.
func Kustomize(t testing.TB, dir string) []byte {
	t.Helper()
	out, err := exec.Command(binary(t, "kustomize"), "build", dir).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kustomize build %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return out
}

// FreePort returns a loopback TCP port that was free a moment ago. The
// servers started here take a port number rather than a listener, so a
// rare race with another process is possible; callers retry on failure.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// process is a server started for one test.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error
}

// startProcess starts a server in its own process group, with its output
// in a log file, and registers a cleanup that stops it by PID (the whole
// group, so children die too) and shows the log when the test failed.
func startProcess(t testing.TB, name string, cmd *exec.Cmd) *process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create log of %s: %v", name, err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			p.dumpLog(t)
		}
	})
	return p
}

// stop sends SIGTERM to the process group, then SIGKILL if it lingers.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) dumpLog(t testing.TB) {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return
	}
	const max = 8 << 10
	if len(data) > max {
		data = data[len(data)-max:]
	}
	t.Logf("--- last output of %s (pid %d) ---\n%s", p.name, p.cmd.Process.Pid, data)
}

// waitFor polls ready until it succeeds, the process exits, or the timeout
// passes.
func (p *process) waitFor(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if !p.running() {
			return fmt.Errorf("%s exited before it was ready: %v", p.name, p.err)
		}
		if last = ready(); last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %w", p.name, timeout, errors.Join(last))
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
