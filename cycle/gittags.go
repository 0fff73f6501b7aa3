package cycle

import (
	"context"
	"fmt"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
)

// GitTags lists the tags of git repositories (see git.Writer.Tags).
type GitTags interface {
	// Tags lists the tags of the git repository repoURL as an
	// Application of namespace and project may read it: its AppProject
	// permits the repository, with Argo CD's credentials for reading it.
	Tags(ctx context.Context, namespace, project, repoURL string) ([]string, error)
}

// WithGitTags lists through g the tags of the git sources of git-tag-list;
// without it such sources are reported as errors.
func WithGitTags(g GitTags) Option { return func(u *Updater) { u.gitTags = g } }

// gitTagJobs turns a git-tag-list entry into a job for each git source of
// app from its repository. listed tells whether the controller lists git
// tags at all.
func gitTagJobs(app *application.Application, spec settings.ChartSpec, listed bool) (jobs []*chartJob, problems []error) {
	want, err := repourl.ParseURL(spec.Chart)
	if err != nil {
		return nil, []error{chartProblem(spec, nil, "%v", err)}
	}
	for _, src := range app.Sources {
		if src.Dry || src.Chart != "" {
			continue
		}
		if u, err := repourl.ParseURL(src.RepoURL); err != nil || !u.Same(want) {
			continue
		}
		switch {
		case spec.Paused():
			return nil, nil
		case !listed:
			return nil, []error{chartProblem(spec, &src, "this controller lists no git tags")}
		case app.Settings.WriteBack.Method != settings.WriteBackArgoCD && app.Settings.WriteBack.Target.Kind != settings.TargetAppOfApps:
			return nil, []error{chartProblem(spec, &src, "a git source's tag is written with write-back-method argocd, or with git into the Application's definition (write-back-target %s); with %s and another target it is not updated", settings.TargetAppOfApps, app.Settings.WriteBack.Method)}
		}
		// The credentials for reading depend on the project; the
		// listing is shared by the Applications of one project.
		key := fmt.Sprintf("git\x00%s\x00%s\x00%s", app.Namespace, app.Project, want.Key())
		jobs = append(jobs, &chartJob{app: app, spec: spec, source: src, key: key, git: want.Key()})
	}
	if len(jobs) == 0 {
		return nil, []error{chartProblem(spec, nil, "no git source of the Application is from repository %s", repourl.RedactURL(spec.Chart))}
	}
	return jobs, nil
}

// listGitTags lists the tags of j's repository, within ctx.
func (u *Updater) listGitTags(ctx context.Context, j *chartJob) tagResult {
	var tags []string
	what := repourl.RedactURL(j.source.RepoURL)
	err := u.guard("listing the tags of "+what, func() (err error) {
		tags, err = u.gitTags.Tags(ctx, j.app.Namespace, j.app.Project, j.source.RepoURL)
		return err
	})
	return tagResult{tags: tags, err: u.timedOut(ctx, what, err)}
}
