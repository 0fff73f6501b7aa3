package git

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// update is what the git method writes for one Application: its Change
// with the repository, revision and credentials resolved.
type update struct {
	// Namespace and Name are the Application's.
	Namespace, Name string
	// ControllerNamespace is Argo CD's namespace: an Application in
	// another namespace writes .argocd-source-<namespace>_<app>.yaml.
	ControllerNamespace string
	// RepoURL is the git-repository annotation, else the source's repoURL.
	RepoURL string
	// TargetRevision is the source's targetRevision; "" and "HEAD" mean
	// the remote's default branch.
	TargetRevision string
	// Branch is the git-branch annotation as written: "branch",
	// "base:target" or ":target", where target is a text/template with
	// .Images (.Name .Alias .OldTag .NewTag) and .SHA256, cut at 255
	// characters.
	Branch string
	// SourcePath is the source's path in the repository.
	SourcePath string
	// SourceType is Kustomize, Helm or Plugin; it chooses the content of
	// the .argocd-source file (see manifest.SetSourceOverrides).
	SourceType application.SourceType
	// Target is the file to edit (write-back-target).
	Target settings.WriteBackTarget
	// CredentialsSecret is the Secret of git:secret:<namespace>/<name>;
	// the zero value uses Argo CD's repository credentials. It must be in
	// the Application's namespace.
	CredentialsSecret types.NamespacedName
	// Project is the Application's AppProject ("" means "default"), whose
	// spec.sourceRepos must permit RepoURL.
	Project string
	// PullRequest, when set, pushes to the target branch of Branch, which
	// must differ from its base, and opens or updates a pull request (or
	// merge request) from it into the base (see WithForgeHosts).
	PullRequest settings.Forge
	// PullRequestLabels are put on the request when it is opened; those
	// of every Application in it.
	PullRequestLabels []string
	Images            []writeback.ImageUpdate
	// Charts are new versions of the source's chart, written into its
	// targetRevision: only through an app-of-apps target.
	Charts []writeback.ChartUpdate
	// SourceIndex is the index in spec.sources of the source written, -1
	// for spec.source: the one an app-of-apps target edits.
	SourceIndex int
	// Parent is the Application whose manifests define this one, for an
	// app-of-apps target: RepoURL, TargetRevision, SourcePath and Project
	// are then the parent's.
	Parent *Parent
	// AppSet is where an applicationset target writes; RepoURL,
	// TargetRevision and SourcePath are then those of the repository it
	// writes (its parent's, or its git files generator's).
	AppSet *appSetWrite
}

func (u update) key() string { return u.Namespace + "/" + u.Name }

func (u update) validate() error {
	var errs []error
	if u.Namespace == "" || u.Name == "" {
		errs = append(errs, errors.New("namespace and name are required"))
	}
	if u.RepoURL == "" {
		errs = append(errs, errors.New("no repository URL"))
	}
	if u.Target.Kind == settings.TargetOverrideFile && !u.SourceType.Writable() && u.SourceType != application.SourcePlugin ||
		u.Target.Kind == settings.TargetSourceOverrides && !u.SourceType.Writable() && u.SourceType != application.SourcePlugin && u.SourceType != application.SourceDirectory {
		errs = append(errs, fmt.Errorf("source type %q cannot be written to an override file like .argocd-source (want %s, %s or %s)", u.SourceType, application.SourceKustomize, application.SourceHelm, application.SourcePlugin))
	}
	if u.Target.Kind == settings.TargetAppOfApps && !u.SourceType.Writable() && u.SourceType != application.SourcePlugin {
		errs = append(errs, fmt.Errorf("source type %q has no overrides to write into its definition (want %s, %s or %s)", u.SourceType, application.SourceKustomize, application.SourceHelm, application.SourcePlugin))
	}
	if u.PullRequest != "" {
		if _, err := settings.ParseForge(string(u.PullRequest)); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, writeback.ValidateImages(u.Images)...)
	errs = append(errs, writeback.ValidateCharts(u.Charts)...)
	if len(u.Charts) > 0 && u.Target.Kind != settings.TargetAppOfApps {
		errs = append(errs, fmt.Errorf("a chart's version is written by git only into the Application's definition (write-back-target %s)", settings.TargetAppOfApps))
	}
	return errors.Join(errs...)
}

// updateOf resolves what c writes: the repository is the git-repository
// annotation's, else the source's. A git-repository that names another
// source of a multi-source Application (the values of a chart from a Helm
// repository, say) is committed to at that source's revision, as Argo CD
// Image Updater does, not at the chart's version.
//
// For an app-of-apps target the repository, revision and path are the
// parent's, and so is the AppProject that must permit the repository.
// ApplicationSets are read through reads.
func (w *Writer) updateOf(ctx context.Context, c writeback.Change, reads appSetReads) (update, error) {
	app, wb := c.App, c.App.Settings.WriteBack
	u := update{
		Namespace:           app.Namespace,
		Name:                app.Name,
		ControllerNamespace: w.cfg.argoCDNamespace,
		RepoURL:             wb.GitRepository,
		TargetRevision:      c.Source.TargetRevision,
		Branch:              wb.GitBranch,
		SourcePath:          c.Source.Path,
		SourceType:          c.Source.Type,
		Target:              wb.Target,
		CredentialsSecret:   app.GitSecret(),
		Project:             app.Project,
		PullRequest:         wb.PullRequest,
		PullRequestLabels:   wb.PullRequestLabels,
		Images:              c.Images,
		Charts:              c.Charts,
		SourceIndex:         c.Source.Index,
	}
	if wb.Target.Kind == settings.TargetApplicationSet {
		return w.appSetUpdate(ctx, u, reads)
	}
	if wb.Target.Kind == settings.TargetAppOfApps {
		return w.parentUpdate(ctx, u)
	}
	if u.RepoURL == "" {
		u.RepoURL = c.Source.RepoURL
	} else if s, ok := sourceOf(app, u.RepoURL); ok {
		u.TargetRevision = s.TargetRevision
	}
	if u.RepoURL == "" {
		return u, errors.New("git write-back: the Application has no source repository and no git-repository annotation")
	}
	return u, nil
}

// parentUpdate points an app-of-apps update at the parent's repository.
func (w *Writer) parentUpdate(ctx context.Context, u update) (update, error) {
	if w.cfg.parents == nil {
		return u, fmt.Errorf("git write-back of Application %s: write-back-target %s is not available in this controller", u.key(), settings.TargetAppOfApps)
	}
	if u.CredentialsSecret != (types.NamespacedName{}) {
		// The repository is the parent's: its credentials are Argo CD's.
		return u, fmt.Errorf("git write-back of Application %s: write-back-target %s writes to the parent's repository with Argo CD's credentials for it, and takes no git:secret", u.key(), settings.TargetAppOfApps)
	}
	p, err := w.cfg.parents.Parent(ctx, u.Namespace, u.Name)
	if err != nil {
		return u, fmt.Errorf("git write-back of Application %s: write-back-target %s: %w", u.key(), settings.TargetAppOfApps, err)
	}
	u.Parent = &p
	u.RepoURL, u.TargetRevision, u.SourcePath, u.Project = p.RepoURL, p.TargetRevision, p.Path, p.Project
	if u.RepoURL == "" {
		return u, fmt.Errorf("git write-back of Application %s: its parent %s has no source repository", u.key(), p.key())
	}
	return u, nil
}

// sourceOf is the first of spec.sources whose repository is repoURL;
// false for a single-source Application.
func sourceOf(app *application.Application, repoURL string) (application.Source, bool) {
	for _, s := range app.Sources {
		if s.Index >= 0 && repourl.SameRepository(s.RepoURL, repoURL) {
			return s, true
		}
	}
	return application.Source{}, false
}
