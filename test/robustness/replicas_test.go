package robustness

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// leaseName is the controller's leader Lease (cmd/argocd-image-updater).
const leaseName = "argocd-image-updater-leader"

// replica is one controller, restarted whenever its process exits (killed,
// stopped, a lost Lease, a failed server), as the kubelet restarts a pod's
// container, until the test ends.
type replica struct {
	name     string
	stopping atomic.Bool
	done     chan struct{}

	mu     sync.Mutex
	cmd    *exec.Cmd
	log    *testenv.SyncBuffer
	exited chan struct{} // closed when the current process has exited
	// expect is the exits the test caused and not yet seen; term, that
	// the next one is a SIGTERM's, whose exit must be clean.
	expect  int
	term    bool
	termErr []error
}

// current is the running process, its log and the channel closed when it
// exits.
func (r *replica) current() (*os.Process, *testenv.SyncBuffer, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd.Process, r.log, r.exited
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
			exited := make(chan struct{})
			r.mu.Lock()
			r.cmd, r.log, r.exited = cmd, log, exited
			r.mu.Unlock()
			if run == 0 {
				started <- nil
			}
			go w.sample(cmd.Process.Pid, exited)
			err := cmd.Wait()
			close(exited)
			if r.stopping.Load() {
				return
			}
			r.mu.Lock()
			switch {
			case r.expect > 0:
				r.expect--
				if r.term && err != nil {
					r.termErr = append(r.termErr, err)
				}
				r.term = false
			default:
				w.restarts.Add(1)
			}
			r.mu.Unlock()
		}
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.stopping.Store(true)
		p, _, _ := r.current()
		_ = p.Kill()
		<-r.done
	})
	return r
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

// leaseWatch follows the leader Lease, counting the changes of its holder
// it sees (a holder cleared by a release is no change by itself).
type leaseWatch struct {
	cs      kubernetes.Interface
	changes atomic.Int64
	stop    chan struct{}
	done    chan struct{}
}

func (w *world) watchLease(t *testing.T) *leaseWatch {
	l := &leaseWatch{cs: kubernetes.NewForConfigOrDie(w.k.Config), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		last := ""
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			if h := l.holder(); h != "" && h != last {
				if last != "" {
					l.changes.Add(1)
				}
				last = h
			}
		}
	}()
	t.Cleanup(l.close)
	return l
}

func (l *leaseWatch) close() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// holder is the Lease's holder now, "" when it has none.
func (l *leaseWatch) holder() string {
	lease, err := l.cs.CoordinationV1().Leases(testenv.ArgoCDNamespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// transitions is the Lease's own count of its holder's changes.
func (l *leaseWatch) transitions(t *testing.T) int64 {
	lease, err := l.cs.CoordinationV1().Leases(testenv.ArgoCDNamespace).Get(t.Context(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.LeaseTransitions == nil {
		return 0
	}
	return int64(*lease.Spec.LeaseTransitions)
}

// leader is the replica whose running process holds the Lease, with that
// process and its identity: the one that logged "identity=<holder>" as it
// was elected.
func (w *world) leader(t *testing.T) (*replica, *os.Process, chan struct{}, string) {
	t.Helper()
	var (
		found  *replica
		proc   *os.Process
		exited chan struct{}
		holder string
	)
	poll.Until(t, 2*time.Minute, "a running replica to hold the leader Lease", func() (bool, string) {
		holder = w.lease.holder()
		if holder == "" {
			return false, "no holder"
		}
		for _, r := range w.replicas {
			p, log, ex := r.current()
			if strings.Contains(log.String(), "identity="+holder) {
				found, proc, exited = r, p, ex
				return true, ""
			}
		}
		return false, "held by " + holder + ", no running replica"
	})
	return found, proc, exited, holder
}

// churnKind is how the leader ends.
type churnKind int

const (
	kill  churnKind = iota // SIGKILL: the Lease expires
	term                   // SIGTERM: the Lease is released
	pause                  // SIGSTOP past the Lease, then SIGCONT
)

func (k churnKind) String() string { return [...]string{"SIGKILL", "SIGTERM", "SIGSTOP"}[k] }

// churn is one end of the leader: in the middle of its push, or at a
// random moment.
type churn struct {
	kind   churnKind
	inPush bool
	after  time.Duration // the random moment, when not in a push
}

// churnPlan draws the ends of the leader of each round: every kind at
// least once in the first rounds, then any; the first of a round in the
// middle of the push of its version (later ones may find no push to
// hold), the others at a random moment.
func churnPlan(rng *rand.Rand, rounds int, perRound func(round int) int) [][]churn {
	kinds := []churnKind{kill, term, pause}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	plan := make([][]churn, rounds+1)
	n := 0
	for round := 1; round <= rounds; round++ {
		for e := range perRound(round) {
			k := churnKind(rng.IntN(3))
			if n < len(kinds) {
				k = kinds[n]
			}
			n++
			plan[round] = append(plan[round], churn{kind: k, inPush: e == 0 && rng.IntN(4) > 0, after: time.Duration(rng.IntN(3000)) * time.Millisecond})
		}
	}
	return plan
}

// end ends the leader as c says. A process killed or stopped is started
// again by its replica; one paused is resumed once another holds the
// Lease, and then finds it lost.
func (w *world) end(t *testing.T, c churn) {
	var hold *testenv.Hold
	if c.inPush {
		hold = w.gitHold.Hold(func(req *http.Request) bool {
			return req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack")
		})
		defer hold.Release()
		select {
		case <-hold.Arrived():
		case <-time.After(90 * time.Second):
			t.Fatalf("no push reached the git server within 90s")
		}
	} else {
		time.Sleep(c.after) // a random moment of the run, not a synchronisation
	}
	r, p, exited, holder := w.leader(t)
	r.mu.Lock()
	if c.kind != pause {
		r.expect++
		r.term = c.kind == term
	}
	r.mu.Unlock()
	sig := map[churnKind]syscall.Signal{kill: syscall.SIGKILL, term: syscall.SIGTERM, pause: syscall.SIGSTOP}[c.kind]
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
	w.ends[c.kind].Add(1)
	if c.inPush {
		w.inPush.Add(1)
	}
	switch c.kind {
	case kill:
		// The push in flight dies with the process.
		<-exited
		release(hold)
	case term:
		// The push finishes within the grace period, then the process
		// exits and releases the Lease.
		release(hold)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			t.Fatalf("controller %s did not exit within 60s of SIGTERM", r.name)
		}
	case pause:
		// The push goes on while its process is stopped; another
		// replica takes the Lease once it expires.
		release(hold)
		poll.Until(t, 2*time.Minute, "another replica to take the Lease of the paused one", func() (bool, string) {
			h := w.lease.holder()
			return h != "" && h != holder, "held by " + h
		})
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
}

func release(h *testenv.Hold) {
	if h != nil {
		h.Release()
	}
}
