package main

import (
	"context"
	"sync"

	imageupdaterv1alpha1 "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/healthgate"
	"github.com/image-updater/argocd-image-updater/imageref"
)

// healthGateOptions makes the health gate, which follows the versions
// written for images that ask for it; a dry run writes nothing to follow.
func (c *controller) healthGateOptions() []cycle.Option {
	if c.o.dryRun {
		return nil
	}
	revert := healthgate.RevertFunc(func(ctx context.Context, r []cycle.Revert) []cycle.RevertResult { return c.updater.Revert(ctx, r) })
	c.gate = healthgate.New(c.watcher, revert, c.dyn,
		healthgate.WithEvents(c.recorder), healthgate.WithMetrics(c.gateMetrics),
		healthgate.WithLogger(c.logger), healthgate.WithWriteGate(c.leading),
		healthgate.WithReferenceOptions(func() []imageref.Option { return c.conf.Current().ReferenceOptions() }))
	c.watcher.OnUpdate(c.gate.OnUpdate)
	return []cycle.Option{cycle.WithHealthGate(c.gate)}
}

// resumeHealthGate reads what the gate followed before this process (the
// Applications' annotations, the ImageUpdaters' status), and judges it
// once from what Argo CD says now.
func (c *controller) resumeHealthGate(ctx context.Context) {
	if c.gate == nil {
		return
	}
	var updaters []*imageupdaterv1alpha1.ImageUpdater
	if c.source != nil {
		updaters = c.source.Resources()
	}
	c.gate.Load(c.apps.Applications(c.conf.Current().ReferenceOptions()...), updaters)
	c.gate.Evaluate(ctx)
}

// withHealthGate runs the health gate beside work, as the replica that
// writes: it resumes before the first cycle, and returns with work.
func (c *controller) withHealthGate(work func(context.Context)) func(context.Context) {
	if c.gate == nil {
		return work
	}
	return func(ctx context.Context) {
		c.resumeHealthGate(ctx)
		gateCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { c.gate.Run(gateCtx) })
		work(ctx)
		stop()
		wg.Wait()
	}
}
