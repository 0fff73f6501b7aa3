package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/image-updater/argocd-image-updater/internal/testenv"
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
	ml := first.lock.Interface.(*resourcelock.MultiLock)
	now := metav1.NewTime(time.Now())
	// The first replica has created the first Lease, not yet the second.
	if err := ml.Primary.Create(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: first.lock.Identity(), LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}); err != nil {
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
