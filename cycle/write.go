package cycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// write hands the changes to the writer of their write-back method, each
// writer all of its changes of the cycle at once (argocd first, then git,
// as each repository and branch gets one push), and reports each result.
func (r *run) write(ctx context.Context, updates []*appUpdate) {
	u := r.u
	var viaArgoCD, viaGit []*appUpdate
	for _, au := range updates {
		u.logChanges(au)
		if au.app.Settings.WriteBack.Method == settings.WriteBackGit {
			viaGit = append(viaGit, au)
		} else {
			viaArgoCD = append(viaArgoCD, au)
		}
	}
	r.writeWith(ctx, settings.WriteBackArgoCD, u.argocd, viaArgoCD)
	r.writeWith(ctx, settings.WriteBackGit, u.git, viaGit)
}

// writeWith writes the changes of one write-back method with w, reports
// each result, and returns them in the order of updates.
func (r *run) writeWith(ctx context.Context, method settings.WriteBackMethod, w writeback.Writer, updates []*appUpdate) []writeback.Result {
	u := r.u
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
			r.writeFailed(au, err)
		}
		return failed(err)
	}
	if err := u.mayWrite(ctx); err != nil {
		for _, au := range updates {
			r.notWritten(au, err)
		}
		return failed(err)
	}
	changes := make([]writeback.Change, len(updates))
	for i, au := range updates {
		changes[i] = writeback.Change{App: au.app, Source: au.source, Images: au.changes, Charts: au.charts, Record: u.records(au)}
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
			r.writeFailed(au, err)
		}
		return failed(err)
	}
	var pushed []types.NamespacedName
	var carried []carriedRecord
	logged := map[*writeback.BatchError]bool{}
	for i, res := range results {
		au := updates[i]
		if errors.Is(res.Err, writeback.ErrWriteNotStarted) {
			r.notWritten(au, res.Err)
			continue
		}
		// A failure of a whole batch is logged once; each Application
		// still gets its event and its error count.
		if be := (*writeback.BatchError)(nil); errors.As(res.Err, &be) {
			if !logged[be] {
				logged[be] = true
				u.logger.Error("write-back failed for a batch of Applications", "method", method, "applications", be.Applications, "error", be.Err)
			}
			r.countWriteFailure(au)
			u.events.problems(au.app, []error{res.Err})
			r.results.problems(au.app, []error{res.Err})
			continue
		}
		if res.Err != nil {
			r.writeFailed(au, res.Err)
			continue
		}
		r.written(au.app, res.Changed, res.Written)
		r.chartsWritten(au.app, res.ChangedCharts, res.Written)
		// A commit on the branch Argo CD follows, rather than in a pull
		// request: Argo CD reads it at its next poll, or at once when
		// asked to. A change written into the Application's definition
		// reaches it through the parent's sync. The refresh of the
		// Application itself carries the record of the write.
		if res.Commit != "" && res.PullRequest == "" && u.refreshes() {
			if res.ParentName == "" && res.Written && changes[i].Record != nil {
				carried = append(carried, carriedRecord{au: au, res: res, record: changes[i].Record})
				continue
			}
			read := types.NamespacedName{Namespace: au.app.Namespace, Name: au.app.Name}
			if res.ParentName != "" {
				read = types.NamespacedName{Namespace: res.ParentNamespace, Name: res.ParentName}
			}
			if !slices.Contains(pushed, read) {
				pushed = append(pushed, read)
			}
		}
		u.gateWritten(ctx, au, res)
		u.noticeUnless(ctx, au, res)
	}
	// A parent written itself is refreshed once, by its own write's request.
	own := make(map[types.NamespacedName]bool, len(carried))
	for _, c := range carried {
		own[types.NamespacedName{Namespace: c.au.app.Namespace, Name: c.au.app.Name}] = true
	}
	pushed = slices.DeleteFunc(pushed, func(k types.NamespacedName) bool { return own[k] })
	u.refresh(ctx, pushed, carried)
	u.gateFlush(ctx)
	return results
}

// carriedRecord is a git write whose record the refresh of its
// Application carries.
type carriedRecord struct {
	au     *appUpdate
	res    writeback.Result
	record func(writeback.Result) map[string]string
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
// failure of the Application: no error is counted and no event recorded;
// the summary counts them, for whoever runs the check to run it again.
func (r *run) notWritten(au *appUpdate, err error) {
	r.sum.NotWritten++
	r.u.logger.Info("changes not written", "application", au.app.Key(), "images", len(au.changes), "reason", err)
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
func (r *run) chartsWritten(app *application.Application, changed []writeback.ChartUpdate, persisted bool) {
	if len(changed) == 0 {
		return
	}
	r.sum.Updated += len(changed)
	if persisted {
		r.u.metrics.imagesUpdated(app, len(changed))
		r.u.events.chartsUpdated(app, changed, r.sum.Trigger)
	}
}

// writeFailed records a failed write-back of all of an Application's changes.
func (r *run) writeFailed(au *appUpdate, err error) {
	r.countWriteFailure(au)
	r.report(au.app, []error{err})
}

// countWriteFailure counts the images of a write that failed as errors.
func (r *run) countWriteFailure(au *appUpdate) {
	u := r.u
	r.sum.Errors += len(au.changes) + len(au.charts)
	for range len(au.changes) + len(au.charts) {
		u.metrics.imageError(au.app)
	}
}

// written records a successful write-back. persisted is false in dry-run
// mode, where nothing was written and no event is recorded.
func (r *run) written(app *application.Application, changed []writeback.ImageUpdate, persisted bool) {
	u := r.u
	if len(changed) == 0 {
		return
	}
	r.sum.Updated += len(changed)
	if persisted {
		u.metrics.imagesUpdated(app, len(changed))
		u.events.imagesUpdated(app, changed, r.sum.Trigger)
		r.results.updated(app, changed)
	}
}

// refreshes tells whether Argo CD is asked to read the sources of
// Applications whose commits landed.
func (u *Updater) refreshes() bool {
	return u.refreshAfterGit && !u.dryRun && u.argocd != nil
}

// refresh asks Argo CD to read the sources of Applications whose commits
// landed, so that it deploys them now rather than at its next poll: apps,
// and those of carried, whose requests also set the record of their
// write, which the health gate is then told of. It runs only after the
// push: a refresh before would read the old commit. A failure costs only
// that wait, so it is a warning; a record it did not carry is saved on
// its own.
func (u *Updater) refresh(ctx context.Context, apps []types.NamespacedName, carried []carriedRecord) {
	if len(apps) == 0 && len(carried) == 0 {
		return
	}
	send := func(app types.NamespacedName, also map[string]string) error {
		err := u.guard("refreshing Application "+app.String(), func() error {
			return u.argocd.Refresh(u.writeContext(ctx), app.Namespace, app.Name, also)
		})
		if err != nil {
			u.logger.Warn("Argo CD will see the commit at its next poll: the refresh failed", "application", app.String(), "error", err)
		}
		return err
	}
	var g errgroup.Group
	g.SetLimit(u.maxConcurrency)
	for _, app := range apps {
		g.Go(func() error {
			_ = send(app, nil)
			return nil
		})
	}
	for _, c := range carried {
		g.Go(func() error {
			var also map[string]string
			_ = u.guard("recording the versions written", func() error {
				also = c.record(c.res)
				return nil
			})
			maps.DeleteFunc(also, func(_, value string) bool { return value == "" })
			if send(types.NamespacedName{Namespace: c.au.app.Namespace, Name: c.au.app.Name}, also) == nil && len(also) > 0 {
				c.res.Recorded = also
			}
			u.gateWritten(ctx, c.au, c.res)
			return nil
		})
	}
	_ = g.Wait()
}
