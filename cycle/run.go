package cycle

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/chartrepo"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// run is one pass over the Applications: a cycle, a targeted check, or the
// health gate's reverts. It holds what the pass covers, found and did, so
// that the Updater keeps nothing of one pass for the next.
type run struct {
	u *Updater
	// scope is what the pass covers; the zero scope is a full cycle.
	scope scope
	start time.Time
	sum   Summary
	// results is what the observer is told at the end; nil when it is
	// told nothing (a targeted check of repositories, a revert).
	results *results
}

func (u *Updater) newRun(sc scope) *run {
	return &run{u: u, scope: sc, start: u.now(), sum: Summary{Trigger: sc.why}}
}

// run runs a cycle, or with a scope a targeted check of the scope's
// repositories or ImageUpdaters only (see CheckRepositories).
func (u *Updater) run(ctx context.Context, sc scope) Summary {
	u.running.Lock()
	defer u.running.Unlock()
	// Image-level credentials that are not cached (ext: scripts) are
	// resolved once for the whole pass, not on every registry request.
	ctx = credentials.WithCycle(ctx)
	r := u.newRun(sc)
	apps := r.applications()
	jobs, chartJobs := r.plan(ctx, apps)
	tags, charts := r.list(ctx, jobs, chartJobs)
	updates := r.choose(ctx, jobs, tags)
	updates = r.chooseCharts(ctx, chartJobs, charts, updates)
	r.write(ctx, updates)
	return r.finish(ctx)
}

// applications are the Applications the pass covers, reduced to the images
// in its scope; with an observer to tell, what they do is collected.
func (r *run) applications() []*application.Application {
	u := r.u
	apps := u.apps.Applications(u.config().ReferenceOptions()...)
	if r.scope.full() {
		u.events.beginCycle()
	} else {
		apps = r.scope.applications(apps)
		// A push may move a tag without changing the tag list: what the
		// registry client knew of these repositories' tags no longer
		// holds. (Without an Application using them, nobody asks.)
		if len(apps) > 0 {
			for _, repo := range r.scope.repos {
				u.registry.ForgetTags(repo)
			}
		}
	}
	if u.observer != nil && r.scope.observed() {
		r.results = newResults(apps)
	}
	r.sum.Applications = len(apps)
	return apps
}

// plan turns the Applications' settings into jobs, one per image and one
// per chart, reporting their problems and the images skipped.
func (r *run) plan(ctx context.Context, apps []*application.Application) ([]*job, []*chartJob) {
	u := r.u
	if r.scope.full() {
		// What is watched is only known from a full cycle; the
		// Applications with series of their own are chosen before their
		// errors are counted.
		u.metrics.applicationsWatched(apps)
	}
	var jobs []*job
	plan := newPlanner(u.controllerNamespace, u.defaultPlatforms)
	for _, app := range apps {
		appJobs, skips, problems := plan.application(app)
		r.sum.Images += len(app.Settings.Images)
		r.report(app, problems)
		for _, p := range problems {
			if !isWarning(p) {
				r.sum.Errors++
				u.metrics.imageError(app)
			}
		}
		for _, s := range skips {
			r.sum.Skipped++
			u.logger.Debug("image skipped", "application", app.Key(), "image", s.image, "reason", s.reason)
			if s.reason == skipNotRunning && !slices.ContainsFunc(r.sum.NotRunning, s.repo.SameName) {
				r.sum.NotRunning = append(r.sum.NotRunning, s.repo)
			}
		}
		jobs = append(jobs, appJobs...)
	}
	// The charts of the Applications in scope: all of them for a cycle;
	// for a push notification, those in the OCI repositories it names.
	var chartJobs []*chartJob
	var session *chartrepo.Session
	sessionOf := func() *chartrepo.Session {
		if session == nil {
			session = u.charts.Session()
		}
		return session
	}
	for _, app := range apps {
		r.sum.Charts += len(app.Settings.Charts)
		js, problems := plan.charts(ctx, app, u.charts, sessionOf)
		r.report(app, problems)
		for _, p := range problems {
			if !isWarning(p) {
				r.sum.Errors++
				u.metrics.imageError(app)
			}
		}
		chartJobs = append(chartJobs, js...)
	}
	return jobs, chartJobs
}

// list lists the tags of the jobs' repositories and the versions of the
// charts' repositories: one listing per repository and credentials,
// whatever the number of jobs.
func (r *run) list(ctx context.Context, jobs []*job, chartJobs []*chartJob) (map[string]tagResult, []chartChoice) {
	byRepo := map[string][]*job{}
	for _, j := range jobs {
		byRepo[j.repoKey()] = append(byRepo[j.repoKey()], j)
	}
	r.sum.TagListings = len(byRepo)
	tags := r.u.listTags(ctx, byRepo)
	r.sum.Unlisted = r.scope.unlisted(byRepo, tags)
	charts, listings := r.u.listCharts(ctx, chartJobs)
	r.sum.ChartListings = listings
	return tags, charts
}

// choose chooses each job's new version, with metadata asked for once per
// pass and signature keys loaded once.
func (r *run) choose(ctx context.Context, jobs []*job, tags map[string]tagResult) []*appUpdate {
	u := r.u
	outcomes := make([]outcome, len(jobs))
	memo := newMetadataMemo()
	keys := u.loadKeys(ctx, jobs)
	g := errgroup.Group{}
	g.SetLimit(u.maxConcurrency)
	for i, j := range jobs {
		g.Go(func() error {
			outcomes[i] = u.chooseGated(ctx, j, tags[j.repoKey()], memo, keys)
			return nil
		})
	}
	_ = g.Wait()
	return r.collect(ctx, outcomes)
}

// collect reports the outcomes' errors and skipped versions, and groups
// the updates by what one write carries: an Application (git), or one
// source of an Application (argocd), in a stable order.
func (r *run) collect(ctx context.Context, outcomes []outcome) []*appUpdate {
	u := r.u
	byApp := map[string]*appUpdate{}
	var order []string
	for _, o := range outcomes {
		app := o.job.app
		if o.err != nil && ctx.Err() != nil {
			// Cut off by the end of the pass: not the image's problem.
			u.logger.Debug("image not checked: the update cycle was stopped", "application", app.Key(), "image", o.job.spec.Key(), "error", o.err)
			continue
		}
		if o.err != nil {
			r.sum.Errors++
			u.metrics.imageError(app)
			r.report(app, []error{fmt.Errorf("image %s: %w", o.job.spec.Key(), o.err)})
			continue
		}
		u.reportSkipped(o.job, o.skipped)
		if !o.result.Update && !(o.job.askTarget && o.result.Tag != "") {
			u.logger.Debug("no update", "application", app.Key(), "image", o.job.spec.Key(), "reason", o.result.Reason)
			continue
		}
		key := app.Key()
		if app.Settings.WriteBack.Method == settings.WriteBackArgoCD {
			// Each source is its own patch: images of one Application
			// may go to a plugin's environment and to a Helm source.
			key += "\x00" + strconv.Itoa(o.job.source.Index)
		}
		au, ok := byApp[key]
		if !ok {
			au = &appUpdate{app: app, source: o.job.source}
			byApp[key] = au
			order = append(order, key)
		}
		au.changes = append(au.changes, writeback.ImageUpdate{
			ImageSpec: o.job.spec,
			New:       newVersion(o.job.policy, o.result),
			Old:       o.job.current,
			Labels:    o.labels,
		})
	}
	sort.Strings(order)
	updates := make([]*appUpdate, 0, len(order))
	for _, k := range order {
		updates = append(updates, byApp[k])
	}
	return updates
}

// report tells of an Application's problems: in the log, as events, and
// to the observer.
func (r *run) report(app *application.Application, problems []error) {
	u := r.u
	for _, p := range problems {
		level := slog.LevelError
		if isWarning(p) {
			level = slog.LevelWarn
		}
		u.logger.Log(context.Background(), level, "problem", "application", app.Key(), "error", p)
	}
	u.events.problems(app, problems)
	r.results.problems(app, problems)
}

// finish ends the pass: it tells the observer, and for a full cycle the
// metrics and Stalled, and logs the summary.
func (r *run) finish(ctx context.Context) Summary {
	u := r.u
	sum := r.sum
	sum.Duration = u.now().Sub(r.start)
	msg := "targeted check finished"
	if r.scope.full() {
		msg = "update cycle finished"
		if u.progress.Load() != 0 {
			u.progress.Store(u.now().UnixNano())
		}
		u.metrics.cycleDone(sum)
	}
	if r.results != nil {
		u.observer.CycleDone(ctx, r.start, r.results.list(), r.scope.updaters)
	}
	attrs := []any{"applications", sum.Applications, "images", sum.Images, "skipped", sum.Skipped,
		"updated", sum.Updated, "errors", sum.Errors, "tagListings", sum.TagListings,
		"duration", sum.Duration.Round(time.Millisecond)}
	if !r.scope.full() {
		attrs = append([]any{"trigger", sum.Trigger}, attrs...)
	}
	u.logger.Info(msg, attrs...)
	return sum
}
