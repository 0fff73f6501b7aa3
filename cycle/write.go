package cycle

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// write hands the changes to the writer of their write-back method, each
// writer all of its changes of the cycle at once (argocd first, then git,
// as each repository and branch gets one push), and reports each result.
func (u *Updater) write(ctx context.Context, updates []*appUpdate, sum *Summary) {
	var viaArgoCD, viaGit []*appUpdate
	for _, au := range updates {
		u.logChanges(au)
		if au.app.Settings.WriteBack.Method == settings.WriteBackGit {
			viaGit = append(viaGit, au)
		} else {
			viaArgoCD = append(viaArgoCD, au)
		}
	}
	u.writeWith(ctx, settings.WriteBackArgoCD, u.argocd, viaArgoCD, sum)
	u.writeWith(ctx, settings.WriteBackGit, u.git, viaGit, sum)
}

// writeWith writes the changes of one write-back method with w, reports
// each result, and returns them in the order of updates.
func (u *Updater) writeWith(ctx context.Context, method settings.WriteBackMethod, w writeback.Writer, updates []*appUpdate, sum *Summary) []writeback.Result {
	if len(updates) == 0 {
		return nil
	}
	failed := func(err error) []writeback.Result {
		out := make([]writeback.Result, len(updates))
		for i, au := range updates {
			out[i] = writeback.Result{Namespace: au.app.Namespace, Name: au.app.Name, Err: err}
		}
		return out
	}
	if w == nil {
		err := fmt.Errorf("write-back-method %s is not configured in this controller", method)
		for _, au := range updates {
			u.writeFailed(au, err, sum)
		}
		return failed(err)
	}
	if err := u.mayWrite(ctx); err != nil {
		for _, au := range updates {
			u.notWritten(au, err)
		}
		return failed(err)
	}
	changes := make([]writeback.Change, len(updates))
	for i, au := range updates {
		changes[i] = writeback.Change{App: au.app, Source: au.source, Images: au.changes, Charts: au.charts}
	}
	var results []writeback.Result
	err := u.guard("writing back with method "+string(method), func() error {
		results = w.Write(u.writeContext(ctx), changes)
		if len(results) != len(changes) {
			return fmt.Errorf("write-back method %s answered %d results for %d changes", method, len(results), len(changes))
		}
		return nil
	})
	if err != nil {
		for _, au := range updates {
			u.writeFailed(au, err, sum)
		}
		return failed(err)
	}
	var pushed []*appUpdate
	logged := map[*writeback.BatchError]bool{}
	for i, res := range results {
		au := updates[i]
		if errors.Is(res.Err, writeback.ErrWriteNotStarted) {
			u.notWritten(au, res.Err)
			continue
		}
		// A failure of a whole batch is logged once; each Application
		// still gets its event and its error count.
		if be := (*writeback.BatchError)(nil); errors.As(res.Err, &be) {
			if !logged[be] {
				logged[be] = true
				u.logger.Error("write-back failed for a batch of Applications", "method", method, "applications", be.Applications, "error", be.Err)
			}
			u.countWriteFailure(au, sum)
			u.events.problems(au.app, []error{res.Err})
			u.results.problems(au.app, []error{res.Err})
			continue
		}
		if res.Err != nil {
			u.writeFailed(au, res.Err, sum)
			continue
		}
		u.written(au.app, res.Changed, res.Written, sum)
		u.chartsWritten(au.app, res.ChangedCharts, res.Written, sum)
		u.gateWritten(ctx, au, res)
		// A commit on the branch Argo CD follows, rather than in a pull
		// request: Argo CD reads it at its next poll, or at once when
		// asked to.
		if res.Commit != "" && res.PullRequest == "" {
			pushed = append(pushed, au)
		}
	}
	u.refresh(ctx, pushed)
	return results
}

// mayWrite tells whether a write may start now: not once ctx, the cycle's,
// has ended, nor when the write gate refuses.
func (u *Updater) mayWrite(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: the update cycle was stopped", writeback.ErrWriteNotStarted)
	}
	if u.writeGate == nil {
		return nil
	}
	if err := u.writeGate(); err != nil {
		return fmt.Errorf("%w: %w", writeback.ErrWriteNotStarted, err)
	}
	return nil
}

// writeContext is the context writes run under.
func (u *Updater) writeContext(ctx context.Context) context.Context {
	if u.writeCtx != nil {
		return u.writeCtx
	}
	return ctx
}

// notWritten records changes whose write was not started. That is no
// failure of the Application: no error is counted and no event recorded.
func (u *Updater) notWritten(au *appUpdate, err error) {
	u.logger.Info("changes not written", "application", au.app.Key(), "images", len(au.changes), "reason", err)
}

func (u *Updater) logChanges(au *appUpdate) {
	for _, c := range au.changes {
		u.logger.Info("new version", "application", au.app.Key(), "image", c.Image.OriginalName(), "alias", c.Alias,
			"from", c.Old.String(), "to", c.New.String(),
			"writeBack", au.app.Settings.WriteBack.Method, "dryRun", u.dryRun)
	}
	for _, c := range au.charts {
		u.logger.Info("new chart version", "application", au.app.Key(), "chart", c.Chart, "alias", c.Alias,
			"source", sourceName(au.source), "from", c.Old, "to", c.New, "writeBack", au.app.Settings.WriteBack.Method, "dryRun", u.dryRun)
	}
}

// chartsWritten records the charts of a successful write-back, as written
// does the images.
func (u *Updater) chartsWritten(app *application.Application, changed []writeback.ChartUpdate, persisted bool, sum *Summary) {
	if len(changed) == 0 {
		return
	}
	sum.Updated += len(changed)
	if persisted {
		u.metrics.imagesUpdated(app, len(changed))
		u.events.chartsUpdated(app, changed, sum.Trigger)
	}
}

// writeFailed records a failed write-back of all of an Application's changes.
func (u *Updater) writeFailed(au *appUpdate, err error, sum *Summary) {
	u.countWriteFailure(au, sum)
	u.reportProblems(au.app, []error{err})
}

// countWriteFailure counts the images of a write that failed as errors.
func (u *Updater) countWriteFailure(au *appUpdate, sum *Summary) {
	sum.Errors += len(au.changes) + len(au.charts)
	for range len(au.changes) + len(au.charts) {
		u.metrics.imageError(au.app)
	}
}

// written records a successful write-back. persisted is false in dry-run
// mode, where nothing was written and no event is recorded.
func (u *Updater) written(app *application.Application, changed []writeback.ImageUpdate, persisted bool, sum *Summary) {
	if len(changed) == 0 {
		return
	}
	sum.Updated += len(changed)
	if persisted {
		u.metrics.imagesUpdated(app, len(changed))
		u.events.imagesUpdated(app, changed, sum.Trigger)
		u.results.updated(app, changed)
	}
}

// refresh asks Argo CD to read the sources of Applications whose commits
// landed, so that it deploys them now rather than at its next poll. It
// runs only after the push: a refresh before would read the old commit. A
// failure costs only that wait, so it is a warning.
func (u *Updater) refresh(ctx context.Context, apps []*appUpdate) {
	if !u.refreshAfterGit || u.dryRun || len(apps) == 0 || u.argocd == nil {
		return
	}
	var g errgroup.Group
	g.SetLimit(u.maxConcurrency)
	for _, au := range apps {
		g.Go(func() error {
			err := u.guard("refreshing Application "+au.app.Key(), func() error {
				return u.argocd.Refresh(u.writeContext(ctx), au.app.Namespace, au.app.Name)
			})
			if err != nil {
				u.logger.Warn("Argo CD will see the commit at its next poll: the refresh failed", "application", au.app.Key(), "error", err)
			}
			return nil
		})
	}
	_ = g.Wait()
}
