package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseName is the Lease that elects the one replica that writes.
const leaseName = "argocd-image-updater-leader"

// v1LeaseName is the Lease Argo CD Image Updater v1.x elects its leader
// with (controller-runtime's, in the same namespace by default). The
// leader holds it too, so that during a switch from v1.x, whatever the
// names of the two Deployments, the old and the new controller never
// write at the same time: each waits while the other holds it.
const v1LeaseName = "c21b75f2.argoproj.io"

// Timing of the Lease. Another replica may take the Lease once it has not
// been renewed for leaseDuration; the leader stops writing renewDeadline
// after its last renewal, before that can happen.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// errNotLeader is why a replica that does not hold the Lease writes nothing.
var errNotLeader = errors.New("this replica does not hold the leader Lease")

// leadership elects, through the Lease, the one replica that runs update
// cycles, and tells before each write whether this replica still holds it.
type leadership struct {
	lock   *trackedLease
	logger *slog.Logger
	// observer advertises this replica's webhook address on the Lease
	// while it leads, and tells the others where the leader is.
	observer *leaseObserver
}

func newLeadership(cs kubernetes.Interface, namespace string, logger *slog.Logger) (*leadership, error) {
	id, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	id += "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	observer := &leaseObserver{id: id, now: time.Now}
	lease := func(name string, client coordinationv1client.LeasesGetter) *resourcelock.LeaseLock {
		return &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
			Client:     client,
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}
	}
	lock := &trackedLease{
		Interface: &leasePair{
			primary:   lease(leaseName, observedLeases{LeasesGetter: cs.CoordinationV1(), o: observer}),
			secondary: lease(v1LeaseName, cs.CoordinationV1()),
		},
		logger: logger,
		now:    time.Now,
	}
	return &leadership{lock: lock, logger: logger, observer: observer}, nil
}

// check answers nil while this replica holds the Lease, errNotLeader
// otherwise. client-go's elector notices a lost Lease only when its
// renewals have failed for renewDeadline; check knows as soon as a renewal
// finds another holder, and also when renewals have stopped succeeding.
func (l *leadership) check() error {
	if !l.lock.held() {
		return errNotLeader
	}
	return nil
}

// run campaigns for the Lease until ctx ends and runs work while this
// replica holds it. work's context ends when ctx ends or the Lease is lost;
// lost is called in the second case. run returns only after work has
// returned and then the Lease has been released, so that the Lease is held
// for as long as a write of this replica may be in flight.
func (l *leadership) run(ctx context.Context, lost func(), work func(context.Context)) error {
	// The elector gets a context of its own: ending ctx must not release
	// the Lease while work still writes.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	var (
		mu      sync.Mutex
		stopped bool
		working chan struct{} // closed when work returns; nil if it never started
	)
	id := l.lock.Identity()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            l.lock,
		ReleaseOnCancel: true,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				mu.Lock()
				if stopped {
					mu.Unlock()
					return
				}
				done := make(chan struct{})
				working = done
				mu.Unlock()
				defer close(done)
				l.logger.Info("elected leader; starting update cycles", "lease", l.lock.Describe(), "identity", id)
				workCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				defer context.AfterFunc(leading, cancel)()
				work(workCtx)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(leader string) {
				switch leader {
				case id:
				case splitLeader:
					// Another controller, Argo CD Image Updater v1.x
					// perhaps, holds one of the two Leases.
					l.logger.Info("another controller holds a leader Lease; waiting", "leases", leaseName+", "+v1LeaseName)
				default:
					l.logger.Info("another replica leads; waiting", "leader", leader)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electCtx)
	}()
	select {
	case <-ctx.Done():
	case <-electorDone:
		// The elector returns on its own only when the Lease was lost.
		l.logger.Warn("lost the leader Lease; stopping", "identity", id)
		lost()
	}
	mu.Lock()
	stopped = true
	done := working
	mu.Unlock()
	if done != nil {
		<-done
	}
	stopElecting()
	<-electorDone
	return nil
}

// trackedLease is the Lease lock, watched: it records when this replica
// last renewed the Lease and whether a renewal found another holder.
type trackedLease struct {
	resourcelock.Interface
	logger *slog.Logger
	now    func() time.Time

	mu sync.Mutex
	// renewed is when the last successful write naming this replica as
	// holder was sent; zero when another holds the Lease or it was
	// released.
	renewed time.Time
}

func (l *trackedLease) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec.HolderIdentity != l.Identity() {
		l.mu.Lock()
		if !l.renewed.IsZero() {
			l.logger.Warn("the leader Lease is held by another replica; writing no more", "holder", rec.HolderIdentity)
		}
		l.renewed = time.Time{}
		l.mu.Unlock()
	}
	return rec, raw, err
}

func (l *trackedLease) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	ctx, cancel := detach(ctx)
	defer cancel()
	sent := l.now()
	err := l.Interface.Create(ctx, rec)
	l.wrote(rec, sent, err)
	return err
}

func (l *trackedLease) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	ctx, cancel := detach(ctx)
	defer cancel()
	sent := l.now()
	err := l.Interface.Update(ctx, rec)
	l.wrote(rec, sent, err)
	return err
}

// detach keeps ctx's deadline but not its cancellation. The elector
// cancels a renewal in flight when the election ends; the request may
// still reach the API server, and the release that follows would then
// carry a stale resourceVersion, fail, and leave the Lease held until it
// expires. Waiting for the answer keeps the release's version current.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), deadline)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), renewDeadline)
}

func (l *trackedLease) wrote(rec resourcelock.LeaderElectionRecord, sent time.Time, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if rec.HolderIdentity == l.Identity() {
		l.renewed = sent
		return
	}
	if !l.renewed.IsZero() && rec.HolderIdentity == "" {
		l.logger.Info("released the leader Lease", "lease", l.Describe())
	}
	l.renewed = time.Time{}
}

// held reports whether this replica holds the Lease: its last renewal
// succeeded less than renewDeadline ago, as it was sent, and no later read
// found another holder.
func (l *trackedLease) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.renewed.IsZero() && l.now().Sub(l.renewed) < renewDeadline
}
