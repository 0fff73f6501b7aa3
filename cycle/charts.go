package cycle

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/chartrepo"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/budget"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// ChartRepositories reads the indexes of HTTP(S) Helm repositories (see
// chartrepo.Client): which an Application may read, with which
// credentials, once per cycle; of each index, the versions of the charts
// asked for, held against the cycle's budget until released.
type ChartRepositories interface {
	SessionWithin(b *budget.Budget) *chartrepo.Session
	Index(ctx context.Context, a chartrepo.Access, charts []string) (chartrepo.Index, error)
}

// WithChartRepositories reads the charts of chart-list from HTTP(S) Helm
// repositories through c; without it such charts are reported as errors
// (charts in OCI registries need only the registry client).
func WithChartRepositories(c ChartRepositories) Option { return func(u *Updater) { u.charts = c } }

// chartJob is one chart of one Application, ready to be checked.
type chartJob struct {
	app    *application.Application
	spec   settings.ChartSpec
	source application.Source
	// key identifies the listing: the OCI repository, or the HTTP
	// repository with its credentials.
	key    string
	oci    imageref.Reference
	access chartrepo.Access
	// git is the repository a git source's tags are listed of, by its
	// identity (repourl.URL.Key); "" for a chart.
	git string
}

// chartProblem is a problem of one chart, naming its source.
func chartProblem(spec settings.ChartSpec, src *application.Source, format string, args ...any) settings.Problem {
	msg := fmt.Sprintf(format, args...)
	if src != nil {
		msg = sourceName(*src) + ": " + msg
	}
	return settings.Problem{Image: spec.Key(), Chart: true, GitTag: spec.GitTag, Origin: spec.Origin, Message: msg}
}

// sourceName is how messages name a source: its field path.
func sourceName(s application.Source) string {
	if s.Index < 0 {
		return "spec.source"
	}
	return "spec.sources[" + strconv.Itoa(s.Index) + "]"
}

// charts turns an Application's charts into jobs. session is the cycle's
// reads of Argo CD's credentials and AppProjects, made when first needed.
func (pl *planner) charts(ctx context.Context, app *application.Application, repos ChartRepositories, session func() *chartrepo.Session, gitTags bool) (jobs []*chartJob, problems []error) {
	if len(app.Settings.Charts) == 0 || applicationBroken(app) {
		return nil, nil
	}
	for _, spec := range app.Settings.Charts {
		if spec.GitTag {
			js, ps := gitTagJobs(app, spec, gitTags)
			jobs, problems = append(jobs, js...), append(problems, ps...)
			continue
		}
		src, ok := app.ChartSource(spec)
		switch {
		case !ok:
			problems = append(problems, chartProblem(spec, nil, "no source of the Application deploys chart %s", spec.Chart))
			continue
		case src.ChartRepo.Err != nil:
			problems = append(problems, chartProblem(spec, &src, "%v", src.ChartRepo.Err))
			continue
		case spec.Paused():
			continue
		case src.ChartRepo.Range:
			p := chartProblem(spec, &src, "targetRevision %q is a range, which Argo CD resolves to the highest version in it itself; the updater leaves it (write a version to have the updater choose it)", src.TargetRevision)
			p.Warning = true
			problems = append(problems, p)
			continue
		case app.Settings.WriteBack.Method != settings.WriteBackArgoCD && app.Settings.WriteBack.Target.Kind != settings.TargetAppOfApps:
			problems = append(problems, chartProblem(spec, &src, "a chart's version is written with write-back-method argocd, or with git into the Application's definition (write-back-target %s); with %s and another target it is not updated", settings.TargetAppOfApps, app.Settings.WriteBack.Method))
			continue
		}
		j := &chartJob{app: app, spec: spec, source: src}
		if src.ChartRepo.IsOCI() {
			j.oci = src.ChartRepo.OCI
			// The key of the images' listing of the repository with the
			// registry's credentials: one listing serves both.
			j.key = (&job{ref: j.oci}).repoKey()
		} else {
			if repos == nil {
				problems = append(problems, chartProblem(spec, &src, "this controller reads no HTTP(S) Helm repositories"))
				continue
			}
			a, err := session().Access(ctx, app.Namespace, app.Project, src.ChartRepo.URL)
			if err != nil {
				problems = append(problems, chartProblem(spec, &src, "%v", err))
				continue
			}
			j.access, j.key = a, "http\x00"+a.Key()
		}
		jobs = append(jobs, j)
	}
	return jobs, problems
}

// applicationBroken tells whether an Application-level problem stops its
// write-back (see planner.application).
func applicationBroken(app *application.Application) bool {
	if _, bad := writeBackProblem(app); bad {
		return true
	}
	for _, p := range app.Settings.Problems {
		if p.Image == "" && !p.Warning && !p.Chart {
			return true
		}
	}
	return false
}

// chartListing is the versions of the charts of one listing: an index's,
// or an OCI repository's tags.
type chartListing struct {
	index chartrepo.Index
	tags  []string
	err   error
}

// versions are the chart's versions, with the '_' Helm writes for '+' in
// OCI tags read back.
func (l chartListing) versions(chart string) []string {
	if l.tags == nil {
		return l.index.Versions(chart)
	}
	out := make([]string, len(l.tags))
	for i, t := range l.tags {
		out[i] = strings.ReplaceAll(t, "_", "+")
	}
	return out
}

// listChart reads the versions of j's HTTP repository, within ctx: an
// index request (a conditional one, when it was read before), of it the
// charts named (those all the pass's jobs of the repository ask). An OCI
// repository's are its tags, listed as the images' are (see
// checkApplication).
func (u *Updater) listChart(ctx context.Context, j *chartJob, charts []string) chartListing {
	var l chartListing
	what := j.source.ChartRepo.String()
	l.err = u.guard("listing the versions of "+what, func() (err error) {
		l.index, err = u.charts.Index(ctx, j.access, charts)
		return err
	})
	l.err = u.timedOut(ctx, what, l.err)
	return l
}

// chartAge is the chart's minimum release age: its own, else the
// controller's default. Its versions are aged from when the updater first
// saw them (for an OCI repository, with its images' tags): choosing runs
// where every Application's changes are written, so it asks no registry.
func (u *Updater) chartAge(j *chartJob) Age {
	min := u.minReleaseAge
	if j.spec.MinReleaseAgeOrigin != "" {
		min = j.spec.MinReleaseAge
	}
	var repo string
	switch {
	case j.git != "":
		repo = "git " + j.git
	case !j.oci.IsZero():
		repo = j.oci.Name()
	default:
		repo = j.source.ChartRepo.String() + " " + j.spec.Chart
	}
	return Age{Min: min, Now: u.now, FirstSeen: func(versions []string) map[string]time.Time { return u.firstSeen.Times(repo, versions) }}
}

// chooseCharts chooses each chart's version with its policy, and adds the
// new ones to the updates of their Application's source: an image and a
// chart of one source are one patch.
func (r *run) chooseCharts(ctx context.Context, jobs []*chartJob, listings map[string]chartListing, updates []*appUpdate) []*appUpdate {
	u := r.u
	byKey := map[string]*appUpdate{}
	for _, au := range updates {
		byKey[au.app.Key()+"\x00"+strconv.Itoa(au.source.Index)] = au
	}
	for _, j := range jobs {
		l := listings[j.key]
		if l.err != nil {
			if ctx.Err() != nil {
				continue
			}
			r.sum.Errors++
			u.metrics.imageError(j.app)
			r.report(j.app, []error{chartProblem(j.spec, &j.source, "%v", l.err)})
			continue
		}
		versions, current := l.versions(j.spec.Chart), imageref.Version{Tag: j.source.TargetRevision}
		if j.git != "" {
			versions = l.tags
			// A branch or a commit is followed by Argo CD itself: only a
			// pin to a tag is moved. A repository without tags has
			// nothing to move to.
			if len(versions) > 0 && !slices.Contains(versions, current.Tag) {
				p := chartProblem(j.spec, &j.source, "targetRevision %q is not a tag of %s; only a source pinned to a tag is moved", current.Tag, repourl.RedactURL(j.source.RepoURL))
				p.Warning = true
				r.report(j.app, []error{p})
				continue
			}
		}
		res, err := j.spec.Policy.Choose(ctx, versions, current, nil)
		var waiting *Waiting
		if err == nil {
			res, waiting, err = u.chartAge(j).apply(ctx, j.spec.Policy, versions, current, nil, res)
		}
		if waiting != nil {
			r.sum.Waiting++
			r.waiting(j.app, j.spec.Key(), true, waiting)
		}
		if err != nil {
			if ctx.Err() == nil {
				r.sum.Errors++
				u.metrics.imageError(j.app)
				r.report(j.app, []error{chartProblem(j.spec, &j.source, "%v", err)})
			}
			continue
		}
		if !res.Update {
			u.logger.Debug("no update", "application", j.app.Key(), "chart", j.spec.Key(), "reason", res.Reason)
			continue
		}
		key := j.app.Key() + "\x00" + strconv.Itoa(j.source.Index)
		au, ok := byKey[key]
		if !ok {
			au = &appUpdate{app: j.app, source: j.source}
			byKey[key] = au
			updates = append(updates, au)
		}
		au.charts = append(au.charts, writeback.ChartUpdate{ChartSpec: j.spec, New: res.Tag, Old: j.source.TargetRevision})
	}
	sort.SliceStable(updates, func(a, b int) bool {
		ka := updates[a].app.Key() + "\x00" + strconv.Itoa(updates[a].source.Index)
		kb := updates[b].app.Key() + "\x00" + strconv.Itoa(updates[b].source.Index)
		return ka < kb
	})
	return updates
}
