package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"

	imageupdaterv1alpha1 "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/webhook"
)

// controllerWork is what the replica that holds the Lease runs: the cycles
// (or, with onChangeOnly, the first), and the checks that notifications and
// changed ImageUpdaters ask for.
func controllerWork(o *runOptions, updater *cycle.Updater, d *webhook.Dispatcher, changes imageUpdaterChanges) func(context.Context) {
	return func(ctx context.Context) {
		if d != nil && o.webhookOnly {
			d.Run(ctx)
			return
		}
		// Returning means no write of this replica is in flight, so the
		// checks' writes are waited for as a cycle's are.
		var checks sync.WaitGroup
		defer checks.Wait()
		if d != nil {
			checks.Go(func() { d.Run(ctx) })
		}
		if changes != nil {
			checks.Go(func() { checkChangedImageUpdaters(ctx, updater, changes, o.onChangeOnly) })
		}
		if o.onChangeOnly {
			updater.RunOnce(ctx)
			<-ctx.Done()
			return
		}
		updater.Run(ctx, o.interval)
	}
}

// imageUpdaterChanges tells which ImageUpdaters were created or changed
// (imageupdater.Source).
type imageUpdaterChanges interface {
	Changed() <-chan struct{}
	TakeChanged() []types.NamespacedName
}

// imageUpdaterChecker checks the Applications of some ImageUpdaters
// (cycle.Updater).
type imageUpdaterChecker interface {
	CheckImageUpdaters(ctx context.Context, names []types.NamespacedName, trigger string) cycle.Summary
}

// How long after a check that failed or could not write it is run again,
// doubling up to the most, when no cycle follows to do it.
const (
	firstRecheck = 5 * time.Second
	maxRecheck   = 5 * time.Minute
)

// checkChangedImageUpdaters checks the Applications of each ImageUpdater
// when it is created or its spec changes, as the v1.x line reconciles a
// resource then, rather than at the next cycle. Each ImageUpdater is
// checked on its own, its checks overlapping other ImageUpdaters' (as the
// v1.x line reconciles resources apart), so that one whose registries
// never answer holds no other's check; one changed while its check runs
// is checked again after it. With recheck (no cycles run), a check that
// met an error or could not write (this replica did not hold the Lease at
// that moment), or that found an image its Application does not run yet
// (Argo CD has not deployed it, or this replica has not seen it deployed),
// is run again after a backoff, as the v1.x line requeues a resource whose
// reconcile did not finish: nothing else would. It returns once
// ctx ended and no check is under way.
func checkChangedImageUpdaters(ctx context.Context, updater imageUpdaterChecker, changes imageUpdaterChanges, recheck bool) {
	type checked struct {
		name types.NamespacedName
		sum  cycle.Summary
	}
	type state struct {
		running bool
		// again: changed while its check ran, or its recheck came then.
		again bool
		retry *time.Timer
		// gen tells the current retry from one stopped too late.
		gen  int
		wait time.Duration
	}
	type retry struct {
		name types.NamespacedName
		gen  int
	}
	var checks sync.WaitGroup
	defer checks.Wait()
	results := make(chan checked)
	due := make(chan retry)
	states := map[types.NamespacedName]*state{}
	defer func() {
		for _, st := range states {
			if st.retry != nil {
				st.retry.Stop()
			}
		}
	}()
	start := func(n types.NamespacedName, trigger string) {
		st := states[n]
		if st == nil {
			st = &state{wait: firstRecheck}
			states[n] = st
		}
		if st.running {
			st.again = true
			return
		}
		if st.retry != nil {
			st.retry.Stop()
			st.retry = nil
		}
		st.running = true
		checks.Go(func() {
			sum := updater.CheckImageUpdaters(ctx, []types.NamespacedName{n}, trigger)
			select {
			case results <- checked{n, sum}:
			case <-ctx.Done():
			}
		})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes.Changed():
			for _, n := range changes.TakeChanged() {
				start(n, "an ImageUpdater was created or changed")
			}
		case r := <-due:
			if st := states[r.name]; st != nil && st.retry != nil && st.gen == r.gen {
				st.retry = nil
				start(r.name, "the last check of this ImageUpdater failed, could not write, or found an image its Application does not run yet")
			}
		case c := <-results:
			st := states[c.name]
			st.running = false
			switch {
			case st.again:
				st.again = false
				start(c.name, "an ImageUpdater was created or changed")
			case recheck && (c.sum.Errors > 0 || c.sum.NotWritten > 0 || len(c.sum.NotRunning) > 0):
				st.gen++
				r := retry{c.name, st.gen}
				st.retry = time.AfterFunc(st.wait, func() {
					select {
					case due <- r:
					case <-ctx.Done():
					}
				})
				st.wait = min(2*st.wait, maxRecheck)
			default:
				delete(states, c.name)
			}
		}
	}
}

// imageUpdatersServed tells whether the API server serves the ImageUpdater
// resource, whose CRD a cluster may not have: the annotation users'
// installs have no reason to add it.
func imageUpdatersServed(d discovery.DiscoveryInterface) (bool, error) {
	resources, err := d.ServerResourcesForGroupVersion(imageupdaterv1alpha1.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("asking the API server for the ImageUpdater resource: %w", err)
	}
	for _, r := range resources.APIResources {
		if r.Name == imageupdaterv1alpha1.Resource().Resource {
			return true, nil
		}
	}
	return false, nil
}
