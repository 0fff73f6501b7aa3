package cycle

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/git"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
)

// GitWriter commits new versions to the Applications' repositories: all
// updates of a cycle at once, so that each repository and branch gets one
// push.
type GitWriter interface {
	Write(ctx context.Context, updates []git.Update) []git.Result
}

// gitUpdate describes the git write-back of one Application.
func gitUpdate(au *appUpdate, controllerNamespace string) (git.Update, error) {
	app, wb := au.app, au.app.Settings.WriteBack
	if au.source.RepoURL == "" && wb.GitRepository == "" {
		return git.Update{}, fmt.Errorf("git write-back: the Application has no source repository and no git-repository annotation")
	}
	repo, revision := wb.GitRepository, au.source.TargetRevision
	if repo == "" {
		repo = au.source.RepoURL
	} else if s, ok := sourceOf(app, repo); ok {
		// git-repository names another source of the Application (the
		// values of a chart from a Helm repository, say): commit to that
		// source's revision, as Argo CD Image Updater does, not to the
		// chart's version.
		revision = s.TargetRevision
	}
	return git.Update{
		Namespace:           app.Namespace,
		Name:                app.Name,
		ControllerNamespace: controllerNamespace,
		RepoURL:             repo,
		TargetRevision:      revision,
		Branch:              wb.GitBranch,
		SourcePath:          au.source.Path,
		SourceType:          au.source.Type,
		Target:              wb.Target,
		CredentialsSecret:   app.GitSecret(),
		Project:             app.Project,
		PullRequest:         wb.PullRequest,
		PullRequestLabels:   wb.PullRequestLabels,
		Images:              au.changes,
	}, nil
}

// sourceOf is the first of spec.sources whose repository is repoURL;
// false for a single-source Application.
func sourceOf(app *application.Application, repoURL string) (application.Source, bool) {
	for _, s := range app.Sources {
		if s.Index >= 0 && gitauth.SameRepository(s.RepoURL, repoURL) {
			return s, true
		}
	}
	return application.Source{}, false
}

// writeGit sends the git updates of a cycle and reports each result.
func (u *Updater) writeGit(ctx context.Context, updates []*appUpdate, sum *Summary) {
	if len(updates) == 0 {
		return
	}
	var batch []git.Update
	var batched []*appUpdate
	for _, au := range updates {
		if u.git == nil {
			u.writeFailed(au, fmt.Errorf("write-back-method git is not configured in this controller"), sum)
			continue
		}
		gu, err := gitUpdate(au, u.controllerNamespace)
		if err != nil {
			u.writeFailed(au, err, sum)
			continue
		}
		batch = append(batch, gu)
		batched = append(batched, au)
	}
	if len(batch) == 0 {
		return
	}
	if err := u.mayWrite(ctx); err != nil {
		for _, au := range batched {
			u.notWritten(au, err)
		}
		return
	}
	// Write answers in the order of the batch.
	var results []git.Result
	if err := u.guard("writing to git", func() error { results = u.git.Write(u.writeContext(ctx), batch); return nil }); err != nil {
		for _, au := range batched {
			u.writeFailed(au, err, sum)
		}
		return
	}
	var pushed []*appUpdate
	logged := map[*git.BatchError]bool{}
	for i, res := range results {
		au := batched[i]
		if errors.Is(res.Err, writeback.ErrWriteNotStarted) {
			u.notWritten(au, res.Err)
			continue
		}
		// A repository that failed a whole batch is logged once; each
		// Application still gets its event and its error count.
		if be := (*git.BatchError)(nil); errors.As(res.Err, &be) {
			if !logged[be] {
				logged[be] = true
				u.logger.Error("git write-back failed for a batch of Applications", "applications", be.Applications, "error", be.Err)
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
		u.written(au.app, res.Changed, res.Commit != "", sum)
		if res.Commit != "" && res.PullRequest == "" {
			pushed = append(pushed, au)
		}
	}
	u.refresh(ctx, pushed)
}

// refresh asks Argo CD to read the sources of Applications whose commits
// landed, so that it deploys them now rather than at its next poll. It
// runs only after the push: a refresh before would read the old commit. A
// failure costs only that wait, so it is a warning.
func (u *Updater) refresh(ctx context.Context, apps []*appUpdate) {
	if !u.refreshAfterGit || u.dryRun || len(apps) == 0 {
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
