package cycle

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/chartrepo"
	"github.com/image-updater/argocd-image-updater/internal/budget"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/settings/credref"
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
	// results is what the observer is told at the end, and what the
	// notices of failures and waits are made of; nil for a targeted check
	// of repositories and a revert, which see only some of an
	// Application's images (their messages would tell a part of it as if
	// it had changed), and when neither is wanted.
	results *results
	// held counts in bytes the tag lists and chart versions the pass
	// holds, from hosts tenants choose, until the pass ends.
	held *budget.Budget
	// projects are the AppProjects' sync windows read in the pass.
	projects projectWindows
	// all are the Applications the updater manages, by key, however
	// few the pass covers: the stages of promoted images.
	all map[string]*application.Application
}

// firstSeenSaveTimeout bounds the save of the first-seen times after a
// pass.
const firstSeenSaveTimeout = 30 * time.Second

func (u *Updater) newRun(sc scope) *run {
	return &run{u: u, scope: sc, start: u.now(), sum: Summary{Trigger: sc.why}, held: budget.New(u.passBudget)}
}

// run runs a cycle, or with a scope a targeted check of the scope's
// repositories or ImageUpdaters only (see CheckRepositories).
func (u *Updater) run(ctx context.Context, sc scope) Summary {
	if u.pending.Add(1) == 1 {
		u.progressed()
	}
	defer u.pending.Add(-1)
	if len(sc.updaters) > 0 {
		u.running.RLock()
		defer u.running.RUnlock()
	} else {
		u.running.Lock()
		defer u.running.Unlock()
	}
	// Image-level credentials that are not cached (ext: scripts) are
	// resolved once for the whole pass, not on every registry request.
	ctx = credentials.WithCycle(ctx)
	r := u.newRun(sc)
	apps := r.applications()
	jobs, chartJobs := r.plan(ctx, apps)
	r.check(ctx, jobs, chartJobs)
	return r.finish(ctx)
}

// applications are the Applications the pass covers, reduced to the images
// in its scope; with an observer to tell, what they do is collected.
func (r *run) applications() []*application.Application {
	u := r.u
	apps := u.apps.Applications(u.config().ReferenceOptions()...)
	r.all = make(map[string]*application.Application, len(apps))
	for _, a := range apps {
		r.all[a.Key()] = a
	}
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
	if (u.observer != nil || u.notices != nil) && r.scope.observed() {
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
		for _, j := range appJobs {
			if !j.spec.PromoteFrom.IsZero() {
				j.stage, j.stageErr = stageOf(j, r.all)
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
			session = u.charts.SessionWithin(r.held)
		}
		return session
	}
	for _, app := range apps {
		r.sum.Charts += len(app.Settings.Charts)
		js, problems := plan.charts(ctx, app, u.charts, sessionOf, u.gitTags != nil)
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

// appWork is what one Application has to check in a pass, and what its
// checks gave.
type appWork struct {
	app    *application.Application
	jobs   []*job
	charts []*chartJob
	// What checkApplication found: the outcomes of the images checked,
	// the listings of the charts checked, and how many of each the
	// Application's time ran out before.
	outcomes        []outcome
	checkedCharts   []*chartJob
	chartListings   map[string]chartListing
	unchecked       int
	uncheckedCharts int
	// window is whether the Application's changes may be written now.
	window windowState
}

// check checks the jobs, each Application on its own: its images' and
// charts' listings and choices take the Updater's slots in turn with the
// other Applications' (see slots), within one time for all of them (see
// WithApplicationTimeout). A listing several Applications need is made
// once. An Application's changes are written with those of the
// Applications checked by the time the last one is, or once they waited
// half of that time: a slow Application delays its own writes only.
func (r *run) check(ctx context.Context, jobs []*job, chartJobs []*chartJob) {
	u := r.u
	var order []*appWork
	byApp := map[string]*appWork{}
	work := func(app *application.Application) *appWork {
		w, ok := byApp[app.Key()]
		if !ok {
			w = &appWork{app: app}
			byApp[app.Key()] = w
			order = append(order, w)
		}
		return w
	}
	byRepo := map[string][]*job{}
	for _, j := range jobs {
		byRepo[j.repoKey()] = append(byRepo[j.repoKey()], j)
		w := work(j.app)
		w.jobs = append(w.jobs, j)
	}
	// The charts asked of each repository: of an index only these are
	// kept, counted against the pass's byte budget.
	chartsOf := map[string][]string{}
	for _, j := range chartJobs {
		if !slices.Contains(chartsOf[j.key], j.spec.Chart) {
			chartsOf[j.key] = append(chartsOf[j.key], j.spec.Chart)
		}
		w := work(j.app)
		w.charts = append(w.charts, j)
	}
	r.sum.TagListings = len(byRepo)
	r.sum.ChartListings = len(chartsOf)

	tags := newListings[tagResult](ctx, u.imageTimeout, u.progressed)
	charts := newListings[chartListing](ctx, u.imageTimeout, u.progressed)
	memo := newPassMemo()
	keys := u.loadKeys(ctx, jobs)
	done := make(chan *appWork, len(order))
	// Every Application has its share before any takes a slot: one that
	// started first would otherwise hold them all.
	shares := make([]*appSlots, len(order))
	cancels := make([]context.CancelFunc, len(order))
	ctxs := make([]context.Context, len(order))
	for i, w := range order {
		actx, start, cancel := appContext(ctx, u.applicationTimeout)
		ctxs[i], cancels[i] = actx, cancel
		shares[i] = u.slots.join(actx, w.app.Namespace, start)
	}
	for i, w := range order {
		r.checkApplication(ctxs[i], shares[i], w, tags, charts, chartsOf, memo, keys, func() {
			shares[i].leave()
			cancels[i]()
			done <- w
		})
	}
	r.writeAsDone(ctx, done, len(order))
	tags.wait()
	charts.wait()
	// What the gate learnt while choosing (a version seen, a hold) is
	// saved before the pass ends, written or not.
	u.gateFlush(ctx)
	r.sum.Unlisted = r.scope.unlisted(byRepo, tags.results())
	// Every image and chart was chosen: what the listings hold goes back
	// to the budget.
	for _, l := range charts.results() {
		l.index.Release()
	}
	for _, tr := range tags.results() {
		r.held.Release(tr.bytes)
	}
}

// hold counts a tag list against the pass's budget until the pass ends;
// one that would pass it fails its images, and the other listings go on.
func (r *run) hold(tr tagResult, repo string) tagResult {
	if tr.err != nil {
		return tr
	}
	n := int64(budget.SliceHeader)
	for _, t := range tr.tags {
		n += budget.String(t)
	}
	if err := r.held.Take(n); err != nil {
		return tagResult{err: fmt.Errorf("the %d tags of %s (%s) would pass the budget of %s for what one cycle holds of tag lists and chart indexes: %w",
			len(tr.tags), repo, budget.Format(n), budget.Format(r.held.Limit()), err)}
	}
	tr.bytes = n
	return tr
}

// checkApplication lists and chooses the versions of one Application's
// images and charts, in its share of the slots and within its time, and
// calls checked when all are done. It does not wait: each listing and
// choice is a task that waits for its turn as data (see slots), and
// checked runs on a goroutine of its own.
func (r *run) checkApplication(actx context.Context, share *appSlots, w *appWork, tags *listings[tagResult], charts *listings[chartListing], chartsOf map[string][]string, memo *passMemo, keys map[keyID]loadedKey, checked func()) {
	u := r.u
	// cut tells whether a check that failed was cut off by the end of
	// the Application's time, rather than failing of its own.
	cut := func(err error) bool { return err != nil && actx.Err() != nil && outOfTime(actx) }

	outcomes := make([]outcome, len(w.jobs))
	cutJobs := make([]bool, len(w.jobs))
	chartLs := make([]chartListing, len(w.charts))
	cutCharts := make([]bool, len(w.charts))
	// one counts a check done; the last one ends the Application's.
	// (Every Application checked has an image or a chart.)
	var left atomic.Int64
	left.Store(int64(len(w.jobs) + len(w.charts)))
	one := func() {
		if left.Add(-1) == 0 {
			go func() {
				r.applicationChecked(actx, w, outcomes, cutJobs, chartLs, cutCharts)
				checked()
			}()
		}
	}
	for i, j := range w.jobs {
		choose := func(tr tagResult) {
			outcomes[i] = u.chooseGated(actx, j, tr, memo, keys)
			cutJobs[i] = cut(outcomes[i].err)
			u.progressed()
			one()
		}
		fail := func(err error) {
			outcomes[i], cutJobs[i] = outcome{job: j, err: err}, cut(err)
			one()
		}
		tags.request(actx, share, j.repoKey(), func(lctx context.Context) tagResult { return r.hold(u.listTags(lctx, j.ref, j.creds), j.ref.Name()) },
			func(tr tagResult, err error) {
				switch {
				case err != nil:
					fail(err)
				case tr.err != nil:
					// A failed listing fails its image without a request.
					choose(tr)
				default:
					share.submit(&task{run: func() { choose(tr) }, gone: fail})
				}
			})
	}
	for i, j := range w.charts {
		listed := func(l chartListing, err error) {
			if l.err == nil && !j.oci.IsZero() && l.tags == nil {
				l.tags = []string{}
			}
			if err != nil {
				l.err = err
			}
			chartLs[i], cutCharts[i] = l, cut(l.err)
			one()
		}
		fromTags := func(tr tagResult, err error) { listed(chartListing{tags: tr.tags, err: tr.err}, err) }
		switch {
		case j.git != "":
			// A git repository's tags count against the pass's budget
			// as an image repository's do.
			tags.request(actx, share, j.key, func(lctx context.Context) tagResult {
				return r.hold(u.listGitTags(lctx, j), repourl.RedactURL(j.source.RepoURL))
			}, fromTags)
		case !j.oci.IsZero():
			// An OCI repository's tags are listed once a pass, for the
			// images and the charts that name it alike.
			tags.request(actx, share, j.key, func(lctx context.Context) tagResult {
				return r.hold(u.listTags(lctx, j.oci, credref.Ref{}), j.oci.Name())
			}, fromTags)
		default:
			charts.request(actx, share, j.key, func(lctx context.Context) chartListing { return u.listChart(lctx, j, chartsOf[j.key]) }, listed)
		}
	}
}

// applicationChecked keeps what checking an Application gave: the
// outcomes and listings of what was checked, and how many its time ran
// out before.
func (r *run) applicationChecked(actx context.Context, w *appWork, outcomes []outcome, cutJobs []bool, chartLs []chartListing, cutCharts []bool) {
	for i, o := range outcomes {
		if cutJobs[i] {
			w.unchecked++
			continue
		}
		w.outcomes = append(w.outcomes, o)
	}
	w.chartListings = map[string]chartListing{}
	for i, j := range w.charts {
		if cutCharts[i] {
			w.uncheckedCharts++
			continue
		}
		w.checkedCharts = append(w.checkedCharts, j)
		w.chartListings[j.key] = chartLs[i]
	}
	w.window = windowState{open: true}
	if s := w.app.Settings; len(s.Windows) > 0 || s.UseSyncWindows || s.WindowsInvalid {
		w.window = r.windowState(actx, w.app)
	}
}

// writeAsDone writes the changes of the n Applications done sends, in
// batches: those checked by the time the last one is, or by the time the
// first of them waited half of the Application timeout. The writes of a
// cycle thus go together (one push per git repository and branch) unless
// an Application is slow, which then delays its own only.
func (r *run) writeAsDone(ctx context.Context, done <-chan *appWork, n int) {
	u := r.u
	var batch []*appUpdate
	var timer *time.Timer
	var wait <-chan time.Time
	flush := func() {
		if timer != nil {
			timer.Stop()
			timer, wait = nil, nil
		}
		if len(batch) == 0 {
			return
		}
		sort.SliceStable(batch, func(a, b int) bool { return updateKey(batch[a]) < updateKey(batch[b]) })
		u.writing.Lock()
		r.write(ctx, batch)
		u.writing.Unlock()
		u.progressed()
		batch = nil
	}
	for n > 0 {
		select {
		case w := <-done:
			n--
			batch = append(batch, r.applicationDone(ctx, w)...)
			if timer == nil && len(batch) > 0 && n > 0 {
				timer = time.NewTimer(u.applicationTimeout / 2)
				wait = timer.C
			}
		case <-wait:
			flush()
		}
	}
	flush()
}

// updateKey orders the updates of a batch: by Application, then source.
func updateKey(au *appUpdate) string {
	return au.app.Key() + "\x00" + strconv.Itoa(au.source.Index)
}

// applicationDone reports what checking one Application gave and returns
// its updates; the images and charts its time ran out before are one
// error, naming how many.
func (r *run) applicationDone(ctx context.Context, w *appWork) []*appUpdate {
	u := r.u
	updates := r.collect(ctx, w.outcomes)
	updates = r.chooseCharts(ctx, w.checkedCharts, w.chartListings, updates)
	updates = r.heldByWindow(w, updates)
	if n := w.unchecked + w.uncheckedCharts; n > 0 {
		r.sum.Errors += n
		for range n {
			u.metrics.imageError(w.app)
		}
		r.report(w.app, []error{fmt.Errorf("Application %s: gave up after %s, the time allowed for the registry and chart repository requests of one Application: %d of its %d images and %d of its %d charts not checked",
			w.app.Key(), u.applicationTimeout, w.unchecked, len(w.jobs), w.uncheckedCharts, len(w.charts))})
	}
	return updates
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
		if o.waiting != nil {
			if o.waiting.reason() == waitingPromotion {
				r.sum.WaitingPromotion++
			} else {
				r.sum.Waiting++
			}
			r.waiting(app, o.job.spec.Key(), false, o.waiting)
		}
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
			ImageSpec: *o.job.spec,
			New:       o.job.newVersion(o.result),
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

// waiting reports a version of an image or chart that w holds back: an
// event when first seen waiting, and the pass's result.
func (r *run) waiting(app *application.Application, key string, chart bool, w *Waiting) {
	kind := "image"
	if chart {
		kind = "chart"
	}
	msg := fmt.Sprintf("%s %s: %s", kind, key, w)
	r.u.events.waiting(app, msg)
	r.results.waiting(app, WaitingVersion{Key: key, Chart: chart, Version: w.Version.String(), Reason: w.reason(), Until: w.Until, Message: msg})
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
		u.progressed()
		u.metrics.cycleDone(sum)
	}
	if r.results != nil {
		results := r.results.list()
		if u.observer != nil {
			u.observer.CycleDone(ctx, r.start, results, r.scope.updaters)
		}
		u.sendNotices(ctx, results)
	}
	attrs := []any{"applications", sum.Applications, "images", sum.Images, "skipped", sum.Skipped,
		"updated", sum.Updated, "errors", sum.Errors, "tagListings", sum.TagListings,
		"duration", sum.Duration.Round(time.Millisecond)}
	if !r.scope.full() {
		attrs = append([]any{"trigger", sum.Trigger}, attrs...)
	}
	u.logger.Info(msg, attrs...)
	// Saved even when the pass was stopped, within a bound of its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), firstSeenSaveTimeout)
	defer cancel()
	if err := u.firstSeen.Save(sctx); err != nil {
		// Kept in memory, and saved with the next pass's.
		u.logger.Warn("the first-seen times of versions could not be saved", "error", err)
	}
	return sum
}
