package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// v1Elector stands in for Argo CD Image Updater v1.x's leader election:
// controller-runtime's, through client-go, on the Lease
// c21b75f2.argoproj.io with its default timing. leading tells whether it
// leads now; stop ends its campaign, releasing the Lease.
type v1Elector struct {
	leading atomic.Bool
	seen    atomic.Value // the last holder it observed
	stop    context.CancelFunc
	done    chan struct{}
}

func startV1Elector(t *testing.T, cs kubernetes.Interface) *v1Elector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &v1Elector{stop: cancel, done: make(chan struct{})}
	e.seen.Store("")
	const id = "argocd-image-updater-controller-7d9f8c6b5-x2x4z_4f0c7c9e-5d1e-4b59-9b84-0d5b2f3e1a77"
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: testenv.ArgoCDNamespace, Name: v1LeaseName},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		ReleaseOnCancel: true,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { e.leading.Store(true); <-ctx.Done() },
			OnStoppedLeading: func() { e.leading.Store(false) },
			OnNewLeader:      func(leader string) { e.seen.Store(leader) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { defer close(e.done); elector.Run(ctx) }()
	t.Cleanup(func() { e.stop(); <-e.done })
	return e
}

// TestOneWriterWithV1 switches between Argo CD Image Updater v1.x and this
// controller in both directions, as a rolling replacement runs both for a
// while: whichever holds v1.x's Lease first keeps the other from writing
// until it stops.
func TestOneWriterWithV1(t *testing.T) {
	t.Parallel()
	w := newControllerWorld(t)
	cs := kubernetes.NewForConfigOrDie(w.k.Config)
	want := []string{w.reg.Repo("eks-app") + ":v0.1.0"}

	t.Run("v1.x leads: this controller waits", func(t *testing.T) {
		w.createApp(t, "from-v1")
		v1 := startV1Elector(t, cs)
		testenv.WaitFor(t, 30*time.Second, "v1.x to lead", v1.leads)

		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		var out testenv.SyncBuffer
		done := make(chan int, 1)
		go func() { done <- w.run(ctx, &out, "--interval", "1h", "--match-application-name", "from-v1") }()
		testenv.WaitFor(t, 30*time.Second, "this controller to wait for the Lease", func() (bool, string) {
			return strings.Contains(out.String(), "another controller holds a leader Lease; waiting"), out.String()
		})
		if got := w.images(t, "from-v1"); got != nil {
			t.Fatalf("written while v1.x leads: %v\n%s", got, out.String())
		}

		// v1.x's Pod ends (controller-runtime releases the Lease):
		// this one takes over and writes.
		v1.stop()
		<-v1.done
		testenv.WaitFor(t, 60*time.Second, "the Application to be written", w.written(t, "from-v1", want))
		stop()
		if code := <-done; code != 0 {
			t.Errorf("exit code %d:\n%s", code, out.String())
		}
	})

	t.Run("this controller leads: v1.x waits", func(t *testing.T) {
		w.createApp(t, "to-v1")
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		var out testenv.SyncBuffer
		done := make(chan int, 1)
		go func() { done <- w.run(ctx, &out, "--interval", "1h", "--match-application-name", "to-v1") }()
		testenv.WaitFor(t, 60*time.Second, "this controller to write", w.written(t, "to-v1", want))

		v1 := startV1Elector(t, cs)
		testenv.WaitFor(t, 30*time.Second, "v1.x to see this controller lead", func() (bool, string) {
			seen, _ := v1.seen.Load().(string)
			return seen != "" && !strings.HasPrefix(seen, "argocd-image-updater-controller-"), seen
		})
		if v1.leading.Load() {
			t.Fatal("v1.x leads while this controller does")
		}
		// This controller stops (SIGTERM): it releases both Leases, and
		// v1.x leads at once.
		stop()
		if code := <-done; code != 0 {
			t.Errorf("exit code %d:\n%s", code, out.String())
		}
		testenv.WaitFor(t, 30*time.Second, "v1.x to lead", v1.leads)
	})
}

func (e *v1Elector) leads() (bool, string) { return e.leading.Load(), "not leading" }

// written is a WaitFor condition: the Application runs want.
func (w *controllerWorld) written(t *testing.T, name string, want []string) func() (bool, string) {
	return func() (bool, string) {
		got := w.images(t, name)
		return slices.Equal(got, want), strings.Join(got, ",")
	}
}

// TestLeaseCreateIsAllOrNothing: a replica that finds the first Lease
// created by another, which is about to create the second, creates
// neither; each replica holding one of the two would keep both from
// leading until the Leases expire.
func TestLeaseCreateIsAllOrNothing(t *testing.T) {
	t.Parallel()
	k := testenv.StartKube(t)
	cs := kubernetes.NewForConfigOrDie(k.Config)
	first, err := newLeadership(cs, testenv.ArgoCDNamespace, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	second, err := newLeadership(cs, testenv.ArgoCDNamespace, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pair := first.lock.Interface.(*leasePair)
	now := metav1.NewTime(time.Now())
	// The first replica has created the first Lease, not yet the second.
	if err := pair.primary.Create(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: first.lock.Identity(), LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	err = second.lock.Create(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: second.lock.Identity(), LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now})
	if !apierrors.IsAlreadyExists(err) {
		t.Errorf("the second replica's create: %v, want AlreadyExists", err)
	}
	if _, err := cs.CoordinationV1().Leases(testenv.ArgoCDNamespace).Get(t.Context(), v1LeaseName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the second Lease after the second replica's create: %v, want none", err)
	}
	if second.lock.held() {
		t.Error("the second replica holds the Lease")
	}
}

func TestPairRecord(t *testing.T) {
	t.Parallel()
	rec := func(holder string) *resourcelock.LeaderElectionRecord {
		return &resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15}
	}
	for _, tc := range []struct {
		name      string
		prim, sec *resourcelock.LeaderElectionRecord
		want      string
	}{
		{"both held by one replica", rec("a"), rec("a"), "a"},
		{"v1.x's Lease deleted", rec("a"), nil, "a"},
		{"v1.x's Lease released", rec("a"), rec(""), "a"},
		{"only v1.x's Lease exists, released", nil, rec(""), ""},
		{"both released", rec(""), rec(""), ""},
		{"v1.x holds its Lease, ours missing", nil, rec("v1"), splitLeader},
		{"v1.x holds its Lease, ours released", rec(""), rec("v1"), splitLeader},
		{"two holders", rec("a"), rec("v1"), splitLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pairRecord(tc.prim, tc.sec).HolderIdentity; got != tc.want {
				t.Errorf("holder %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTakeoverFromV1Lease: v1.x's Lease is held while this controller
// starts, then v1.x leaves in each of the ways it can. This controller
// leads within one Lease duration of v1.x's end, and at once (within a
// renewal deadline, which bounds a few retry periods) when the Lease was
// deleted or released. Only the Lease stands for v1.x here: what matters is
// what it holds; TestOneWriterWithV1 runs client-go's elector as v1.x does.
func TestTakeoverFromV1Lease(t *testing.T) {
	t.Parallel()
	k := testenv.StartKube(t)
	cs := kubernetes.NewForConfigOrDie(k.Config)
	for i, tc := range []struct {
		name string
		end  func(t *testing.T, leases coordinationv1client.LeaseInterface)
		// within bounds the time from v1.x's end to this controller's
		// leading.
		within time.Duration
	}{
		{"deleted", func(t *testing.T, leases coordinationv1client.LeaseInterface) {
			if err := leases.Delete(t.Context(), v1LeaseName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, renewDeadline},
		{"released", func(t *testing.T, leases coordinationv1client.LeaseInterface) {
			// As client-go releases it on a clean stop.
			l, err := leases.Get(t.Context(), v1LeaseName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			l.Spec.HolderIdentity = ptr.To("")
			l.Spec.LeaseDurationSeconds = ptr.To(int32(1))
			if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, renewDeadline},
		{"expired", func(t *testing.T, leases coordinationv1client.LeaseInterface) {
			// v1.x was killed: its Lease is no longer renewed.
		}, 2 * leaseDuration},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := fmt.Sprintf("takeover-%d", i)
			k.CreateNamespace(t, ns)
			leases := cs.CoordinationV1().Leases(ns)
			now := metav1.NewMicroTime(time.Now())
			if _, err := leases.Create(t.Context(), &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: v1LeaseName, Namespace: ns},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To("argocd-image-updater-controller-7d9f8c6b5-x2x4z_4f0c7c9e"),
					LeaseDurationSeconds: ptr.To(int32(15)),
					AcquireTime:          &now,
					RenewTime:            &now,
				},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}

			var logs testenv.SyncBuffer
			l, err := newLeadership(cs, ns, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			leading := make(chan time.Time, 1)
			done := make(chan error, 1)
			go func() {
				done <- l.run(ctx, func() {}, func(ctx context.Context) {
					leading <- time.Now()
					<-ctx.Done()
				})
			}()
			t.Cleanup(func() { stop(); <-done })
			testenv.WaitFor(t, 30*time.Second, "this controller to wait for v1.x", func() (bool, string) {
				return strings.Contains(logs.String(), "another controller holds a leader Lease; waiting"), logs.String()
			})
			if l.check() == nil {
				t.Fatal("leads while v1.x holds its Lease")
			}

			ended := time.Now()
			tc.end(t, leases)
			select {
			case at := <-leading:
				t.Logf("led %v after v1.x's end", at.Sub(ended).Round(100*time.Millisecond))
			case <-time.After(tc.within):
				t.Fatalf("not leading %v after v1.x's end:\n%s", tc.within, logs.String())
			}
			testenv.WaitFor(t, 10*time.Second, "the write gate to open", func() (bool, string) {
				return l.check() == nil, "closed"
			})
			for _, name := range []string{leaseName, v1LeaseName} {
				got, err := leases.Get(t.Context(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("Lease %s: %v", name, err)
				}
				if h := got.Spec.HolderIdentity; h == nil || *h != l.lock.Identity() {
					t.Errorf("Lease %s held by %v, want this replica", name, h)
				}
			}
		})
	}
}
