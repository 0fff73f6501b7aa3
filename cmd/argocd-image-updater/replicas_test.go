package main

import (
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// replica is one controller process of a pair.
type replica struct {
	cmd    *exec.Cmd
	exited <-chan error
	out    *testenv.SyncBuffer
}

func (r *replica) logs(s string) func() (bool, string) {
	return func() (bool, string) { return strings.Contains(r.out.String(), s), r.out.String() }
}

// TestReplicas runs two controller processes against one API server, the
// real registry and git server. The first leads and is held in the middle
// of a cycle (its tag listing) or of a push; then it ends as a Pod ends:
// killed, stopped, paused past its Lease, or cut from the API server. The
// other replica takes over and writes the update once; the first writes
// nothing after the other leads, and nothing is pushed twice or by force.
// Each case logs the time from the leader's end to the write.
func TestReplicas(t *testing.T) {
	t.Parallel()
	bin := testenv.UpdaterBinary(t)
	for _, tc := range []struct {
		name   string
		method string
		// inPush holds the leader at its push; otherwise at its tag
		// listing, before any write.
		inPush bool
		// partition runs the leader through a proxy that fails all of
		// its requests to the API server from its end on.
		partition bool
		// end ends the leader; resume, if set, runs once the other
		// replica has written.
		end    func(t *testing.T, leader *replica)
		resume func(t *testing.T, leader *replica)
	}{
		{
			name: "killed in a cycle", method: "argocd",
			end: func(t *testing.T, l *replica) { send(t, l, syscall.SIGKILL) },
		},
		{
			name: "killed in a push", method: "git", inPush: true,
			end: func(t *testing.T, l *replica) { send(t, l, syscall.SIGKILL) },
		},
		{
			name: "stopped cleanly", method: "argocd",
			end: func(t *testing.T, l *replica) { send(t, l, syscall.SIGTERM) },
		},
		{
			name: "paused past its Lease", method: "git",
			end: func(t *testing.T, l *replica) { send(t, l, syscall.SIGSTOP) },
			resume: func(t *testing.T, l *replica) {
				send(t, l, syscall.SIGCONT)
				// Resumed in the middle of its cycle, it finds the Lease
				// held by the other replica and writes nothing.
				testenv.WaitFor(t, 60*time.Second, "the resumed replica to stop writing", l.logs("writing no more"))
			},
		},
		{
			name: "cut from the API server", method: "argocd", partition: true,
			resume: func(t *testing.T, l *replica) {
				testenv.WaitFor(t, 60*time.Second, "the cut replica to give up the Lease", l.logs("lost the leader Lease; stopping"))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWriteWorld(t)
			w.createWriteApp(t, testenv.ArgoCDNamespace, "main", tc.method, nil)
			want := []string{w.reg.Repo("eks-app") + ":v0.1.0"}
			var hold *testenv.Hold
			if tc.inPush {
				hold = w.gitProxy.Hold(isGitPush)
			} else {
				hold = w.regProxy.Hold(isTagListing)
			}

			var args []string
			var cut *testenv.FaultProxy
			if tc.partition {
				var through *rest.Config
				cut, through = testenv.StartKubeFaultProxy(t, w.k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater"))
				args = []string{"--kubeconfig", testenv.WriteKubeconfig(t, through, testenv.ArgoCDNamespace)}
			}
			leader := &replica{out: &testenv.SyncBuffer{}}
			leader.cmd, leader.exited = w.startBinary(t, bin, 5*time.Second, leader.out, args...)
			testenv.WaitFor(t, 60*time.Second, "the first replica to lead", leader.logs("elected leader"))
			other := &replica{out: &testenv.SyncBuffer{}}
			other.cmd, other.exited = w.startBinary(t, bin, 5*time.Second, other.out)
			testenv.WaitFor(t, 60*time.Second, "the second replica to wait", other.logs("another replica leads; waiting"))
			select {
			case <-hold.Arrived():
			case <-time.After(60 * time.Second):
				t.Fatalf("the leader was not held:\n%s", leader.out.String())
			}

			ended := time.Now()
			if tc.partition {
				cut.InjectRate(func(*http.Request) bool { return true }, 1, 1, testenv.FaultReset)
			}
			if tc.end != nil {
				tc.end(t, leader)
			}
			hold.Release()
			if tc.method == "git" {
				testenv.WaitFor(t, 90*time.Second, "the update to be committed", func() (bool, string) {
					return w.commits(t) > 1, "no commit after the first"
				})
			} else {
				testenv.WaitFor(t, 90*time.Second, "the Application to be written", w.written(t, "main", want))
			}
			writtenAfter := time.Since(ended)
			// A push in flight when its replica was killed may land: then
			// the other replica, once it leads, finds nothing to write.
			testenv.WaitFor(t, 90*time.Second, "the other replica to lead and finish a cycle", other.logs("update cycle finished"))
			t.Logf("%s: written %v after the leader's end; the other replica finished a cycle %v after it",
				tc.name, writtenAfter.Round(100*time.Millisecond), time.Since(ended).Round(100*time.Millisecond))
			if tc.resume != nil {
				tc.resume(t, leader)
			}
			if tc.partition {
				cut.Clear()
			}

			if tc.method == "git" {
				if n := w.commits(t); n != 2 {
					t.Errorf("%d commits on main, want the first and one update", n)
				}
			}
			if strings.Contains(leader.out.String(), "forced update") {
				t.Errorf("a push forced the branch:\n%s", leader.out.String())
			}
			if got := w.images(t, "main"); tc.method == "argocd" && !slices.Equal(got, want) {
				t.Errorf("the Application runs %v, want %v", got, want)
			}
		})
	}
}

func send(t *testing.T, r *replica, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %v: %v", sig, err)
	}
}
