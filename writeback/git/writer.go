// Package git writes new image versions to an Application's git
// repository (write-back method "git"): the folder of cached clones and
// its bound, the edit of the write-back target, commits (signed with
// gitsign), pushes and pull requests, reaching the repository as gitauth
// allows, through gitwire's fetches, commits and pushes.
package git

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
	"github.com/image-updater/argocd-image-updater/writeback/gitsign"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// Defaults of the git write-back.
const (
	DefaultGitAuthorName  = "argocd-image-updater"
	DefaultGitAuthorEmail = "noreply@argoproj.io"
	DefaultPushRetries    = 3
	// DefaultArgoCDNamespace is where Argo CD's repository Secrets and
	// known hosts are read unless WithArgoCDNamespace says otherwise.
	DefaultArgoCDNamespace = "argocd"
)

// maxParallelRepositories bounds how many repositories one Write talks to
// at once; each is network-bound, and one repository is always handled by
// one goroutine.
const maxParallelRepositories = 4

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

// Option configures a Writer.
type Option func(*writerConfig)

type writerConfig struct {
	argoCDNamespace       string
	workDir               string
	authorName            string
	authorEmail           string
	message               *CommitMessageTemplate
	signingKey            string
	signingMethod         string
	gnupgHome             string
	signOff               bool
	pushRetries           int
	transientRetries      int
	transientBackoff      time.Duration
	dryRun                bool
	log                   *slog.Logger
	insecureIgnoreHostKey bool
	now                   func() time.Time
	cloneCacheSize        int64
	networkTimeout        time.Duration
	pushGate              func() error
	// fullHistory fetches whole histories instead of branch tips; tests
	// measure what shallow fetches save with it.
	fullHistory bool
	forges      *forge.Hosts
	pullRequest *PullRequestTemplate
	apiCommits  bool
	parents     Parents
}

// WithParents finds the parents of Applications whose write-back-target
// is app-of-apps; without it such Applications are reported as errors.
func WithParents(p Parents) Option { return func(c *writerConfig) { c.parents = p } }

// WithArgoCDNamespace sets where Argo CD's repository Secrets,
// argocd-ssh-known-hosts-cm and argocd-tls-certs-cm are read (default
// "argocd"); an Application in another namespace writes its overrides to
// .argocd-source-<namespace>_<name>.yaml.
func WithArgoCDNamespace(ns string) Option {
	return func(c *writerConfig) { c.argoCDNamespace = ns }
}

// WithWorkDir sets the folder holding the local clones, one per repository
// URL. They are kept between cycles and, as the folder is named, across
// restarts: a new writer on the folder fetches into the clones it finds
// (default: a temporary folder of this writer's own, removed by Close).
// One process at a time uses a folder; a writer that finds it in use by
// another process falls back to a temporary folder.
func WithWorkDir(dir string) Option {
	return func(c *writerConfig) { c.workDir = dir }
}

// WithCloneCacheSize bounds the disk space of the clones in the work
// folder (default DefaultCloneCacheSize). When they outgrow it, the least
// recently used clones not in use are removed; 0 or less: no bound.
func WithCloneCacheSize(bytes int64) Option {
	return func(c *writerConfig) { c.cloneCacheSize = bytes }
}

// WithNetworkTimeout bounds one listing, fetch or push of a repository,
// the server's answer included (default gitwire.DefaultNetworkTimeout):
// past it the repository's Applications fail with an error naming it,
// and the other repositories and the cycle go on. 0 or less: the default.
func WithNetworkTimeout(d time.Duration) Option {
	return func(c *writerConfig) { c.networkTimeout = d }
}

// WithAuthor sets the commits' author and committer.
func WithAuthor(name, email string) Option {
	return func(c *writerConfig) { c.authorName, c.authorEmail = name, email }
}

// WithCommitMessageTemplate sets the commit message template (default
// DefaultCommitMessageTemplate).
func WithCommitMessageTemplate(t *CommitMessageTemplate) Option {
	return func(c *writerConfig) { c.message = t }
}

// WithSigningKey signs commits with a private key: for
// gitsign.MethodOpenPGP, an armored OpenPGP key file or, when no file has
// that name, a key ID, fingerprint or user ID of the GnuPG keyring (see
// WithGnuPGHome); for gitsign.MethodSSH, an OpenSSH key file. The key must
// not need a passphrase.
func WithSigningKey(key, method string) Option {
	return func(c *writerConfig) { c.signingKey, c.signingMethod = key, method }
}

// WithGnuPGHome sets the GnuPG home whose keyring holds an OpenPGP
// signing key given by name (default ~/.gnupg). Reading it needs gpg.
func WithGnuPGHome(dir string) Option {
	return func(c *writerConfig) { c.gnupgHome = dir }
}

// WithSignOff adds a Signed-off-by trailer naming the author.
func WithSignOff(on bool) Option {
	return func(c *writerConfig) { c.signOff = on }
}

// WithPushRetries sets how often a push rejected because the branch moved
// is re-applied on the new tip and sent again (default DefaultPushRetries).
func WithPushRetries(n int) Option {
	return func(c *writerConfig) { c.pushRetries = max(n, 0) }
}

// WithDryRun makes Write compute and log the edits without committing
// or pushing.
func WithDryRun(dryRun bool) Option {
	return func(c *writerConfig) { c.dryRun = dryRun }
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *writerConfig) {
		if l != nil {
			c.log = l
		}
	}
}

// WithInsecureIgnoreHostKey turns off SSH host key checks for every
// repository (default false: keys are checked against Argo CD's
// argocd-ssh-known-hosts-cm).
func WithInsecureIgnoreHostKey(on bool) Option {
	return func(c *writerConfig) { c.insecureIgnoreHostKey = on }
}

// WithPushGate is asked before each push, retries included: an error
// keeps the push from starting, and the Applications it carried get that
// error wrapped in writeback.ErrWriteNotStarted. The controller refuses pushes once
// it is stopping or no longer holds the leader Lease.
func WithPushGate(gate func() error) Option {
	return func(c *writerConfig) { c.pushGate = gate }
}

// WithClock sets the clock dating commits (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *writerConfig) {
		if now != nil {
			c.now = now
		}
	}
}

// Writer writes new image versions by committing to the Applications'
// git repositories (write-back method "git").
//
// A Write groups its updates by repository and branch. Each group is one
// push carrying one commit per Application, each with its own message.
// The local clone of a repository is kept in the work folder, across
// restarts too, and only fetched between cycles; its first fetch brings
// the branch tip without its history, which a write does not need. Files
// are edited in the git object store on top of the remote branch's tip,
// never in a checkout. When a push is refused
// because someone else pushed first, the edits are computed again on the
// new tip (so the other commits are kept) and pushed again, a bounded
// number of times; nothing is ever force-pushed.
type Writer struct {
	secrets  repoaccess.SecretLister
	projects repoaccess.AppProjectGetter
	cfg      writerConfig
	message  *CommitMessageTemplate
	signer   gitsign.Signer
	github   *gitauth.GitHubTokens
	cache    *cloneCache

	// beforePush runs just before each push; tests use it to race one.
	beforePush func(repoURL, branch string, attempt int)
}

// NewWriter returns a writer reading credentials through secrets and
// the Applications' AppProjects through projects.
func NewWriter(secrets repoaccess.SecretLister, projects repoaccess.AppProjectGetter, opts ...Option) (*Writer, error) {
	cfg := writerConfig{
		argoCDNamespace:  DefaultArgoCDNamespace,
		authorName:       DefaultGitAuthorName,
		authorEmail:      DefaultGitAuthorEmail,
		pushRetries:      DefaultPushRetries,
		transientRetries: DefaultTransientRetries,
		transientBackoff: transientBackoff,
		log:              slog.New(slog.DiscardHandler),
		now:              time.Now,
		cloneCacheSize:   DefaultCloneCacheSize,
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	w := &Writer{secrets: secrets, projects: projects, cfg: cfg, message: cfg.message}
	var errs []error
	if secrets == nil {
		errs = append(errs, errors.New("a repoaccess.SecretLister is required"))
	}
	if projects == nil {
		errs = append(errs, errors.New("a repoaccess.AppProjectGetter is required"))
	}
	if cfg.authorName == "" || cfg.authorEmail == "" {
		errs = append(errs, errors.New("commit author name and email must not be empty"))
	}
	if cfg.argoCDNamespace == "" {
		errs = append(errs, errors.New("the Argo CD namespace must not be empty"))
	}
	if w.message == nil {
		var err error
		if w.message, err = ParseCommitMessageTemplate(""); err != nil {
			errs = append(errs, err)
		}
	}
	if err := w.cfg.pullRequestDefaults(); err != nil {
		errs = append(errs, err)
	}
	w.github = gitauth.NewGitHubTokens(w.cfg.forges)
	switch {
	case cfg.signingKey != "":
		home := cfg.gnupgHome
		if home == "" {
			if dir, err := os.UserHomeDir(); err == nil {
				home = filepath.Join(dir, ".gnupg")
			}
		}
		// Key validity is judged at the real time, the time the signature carries.
		signer, err := gitsign.Load(cfg.signingKey, cfg.signingMethod, home, time.Now())
		if err != nil {
			errs = append(errs, err)
		}
		w.signer = signer
	case cfg.signingMethod != "" && cfg.signingMethod != gitsign.MethodOpenPGP && cfg.signingMethod != gitsign.MethodSSH:
		errs = append(errs, fmt.Errorf("unknown signing method %q: use %s or %s", cfg.signingMethod, gitsign.MethodOpenPGP, gitsign.MethodSSH))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("git write-back: %w", errors.Join(errs...))
	}
	cache, err := openCloneCache(cfg.workDir, cfg.cloneCacheSize, cfg.log)
	if err != nil {
		return nil, fmt.Errorf("git write-back: %w", err)
	}
	w.cache = cache
	return w, nil
}

// WorkDir is the folder holding the local clones.
func (w *Writer) WorkDir() string { return w.cache.root }

// Close lets go of the work folder, for another writer to use, and
// removes it when it was a temporary one. The writer must not be used
// after.
func (w *Writer) Close() error { return w.cache.close() }

// Write writes all changes of one cycle and returns one result per
// change, in order. Repositories are written in parallel; one failing
// repository, branch or Application does not stop the others.
func (w *Writer) Write(ctx context.Context, changes []writeback.Change) []writeback.Result {
	results := make([]writeback.Result, len(changes))
	var updates []update
	var at []int
	for i, c := range changes {
		u, err := w.updateOf(ctx, c)
		if err != nil {
			results[i] = writeback.Result{Namespace: u.Namespace, Name: u.Name, Err: err}
			continue
		}
		updates = append(updates, u)
		at = append(at, i)
	}
	if len(updates) == 0 {
		return results
	}
	for i, res := range w.write(ctx, updates) {
		results[at[i]] = res
	}
	return results
}

// updateOf resolves what c writes: the repository is the git-repository
// annotation's, else the source's. A git-repository that names another
// source of a multi-source Application (the values of a chart from a Helm
// repository, say) is committed to at that source's revision, as Argo CD
// Image Updater does, not at the chart's version.
//
// For an app-of-apps target the repository, revision and path are the
// parent's, and so is the AppProject that must permit the repository.
func (w *Writer) updateOf(ctx context.Context, c writeback.Change) (update, error) {
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

// write writes updates as Write writes changes.
func (w *Writer) write(ctx context.Context, updates []update) []writeback.Result {
	// Applications of different AppProjects may reach one repository
	// with different credentials (project-scoped Secrets): each project
	// writes apart.
	type repoKey struct {
		url     string
		secret  types.NamespacedName
		project string
	}
	writes := make([]*appWrite, len(updates))
	var order []repoKey
	byRepo := map[repoKey][]*appWrite{}
	policy := repoaccess.NewPolicy(w.projects, w.cfg.argoCDNamespace)
	for i, u := range updates {
		a := &appWrite{update: u, result: writeback.Result{Namespace: u.Namespace, Name: u.Name}}
		if u.Parent != nil {
			a.result.ParentNamespace, a.result.ParentName = u.Parent.Namespace, u.Parent.Name
		}
		writes[i] = a
		if err := u.validate(); err != nil {
			a.result.Err = fmt.Errorf("git write-back of Application %s: %w", u.key(), err)
			continue
		}
		if len(u.Images) == 0 && len(u.Charts) == 0 {
			continue
		}
		// Before anything is read or sent for the Application.
		// The parent's repository is reached as the parent: with its
		// AppProject, from its namespace.
		ns := u.Namespace
		if u.Parent != nil {
			ns = u.Parent.Namespace
		}
		if err := policy.Check(ctx, repoaccess.Request{Namespace: ns, Project: u.Project, RepoURL: u.RepoURL, CredentialsSecret: u.CredentialsSecret}); err != nil {
			a.fail(err)
			continue
		}
		project := ""
		if u.CredentialsSecret == (types.NamespacedName{}) {
			project = cmp.Or(u.Project, "default")
		}
		k := repoKey{u.RepoURL, u.CredentialsSecret, project}
		if _, ok := byRepo[k]; !ok {
			order = append(order, k)
		}
		byRepo[k] = append(byRepo[k], a)
	}
	creds := gitauth.NewResolver(w.secrets, w.cfg.argoCDNamespace, w.cache.root, w.github)
	var g errgroup.Group
	g.SetLimit(maxParallelRepositories)
	for _, k := range order {
		g.Go(func() error {
			apps := byRepo[k]
			what := "writing to " + repourl.RedactURL(k.url)
			err := safe.Call(func() error { w.writeRepository(ctx, creds, k.url, k.secret, k.project, apps); return nil })
			if err != nil {
				// A file from a repository or a template from an
				// Application must not be able to stop the controller.
				safe.Log(w.cfg.log, what, err)
				failAll(apps, fmt.Errorf("while %s: %w", what, err))
			}
			return nil
		})
	}
	_ = g.Wait()
	results := make([]writeback.Result, len(writes))
	for i, a := range writes {
		results[i] = a.result
	}
	return results
}

// appWrite is one Application's update and what became of it. Each is
// written by the one goroutine that handles its repository.
type appWrite struct {
	update update
	result writeback.Result
}

func (a *appWrite) fail(err error) { a.result.Err = appError(a.update, err) }

// failAll fails apps with one error, reported once by callers that look
// for a BatchError.
func failAll(apps []*appWrite, err error) {
	err = batchError(err, len(apps))
	for _, a := range apps {
		a.fail(err)
	}
}

// lockRepository serializes work on one clone, across Writes too, and
// keeps it from eviction meanwhile. Spellings of one URL share the lock
// as they share the clone.
func (w *Writer) lockRepository(url string) func() {
	return w.cache.lock(cloneDirName(cloneKey(url)))
}

// writeRepository writes the updates of one repository, branch by branch.
func (w *Writer) writeRepository(ctx context.Context, creds *gitauth.Resolver, url string, secret types.NamespacedName, project string, apps []*appWrite) {
	fail := func(err error) { failAll(apps, err) }
	defer w.lockRepository(url)()
	c, err := creds.Resolve(ctx, url, secret, project)
	if err != nil {
		fail(err)
		return
	}
	acc, err := creds.Access(ctx, url, c, w.cfg.insecureIgnoreHostKey)
	if err != nil {
		fail(err)
		return
	}
	defer acc.Close()
	clone, err := w.cache.open(url)
	if err != nil {
		fail(err)
		return
	}
	clone.FullHistory = w.cfg.fullHistory
	clone.NetworkTimeout = w.cfg.networkTimeout
	defer w.cache.done(clone)
	retry := &transientRetry{max: w.cfg.transientRetries, base: w.cfg.transientBackoff,
		log: w.cfg.log.With("repository", repourl.RedactURL(url))}
	var remote gitwire.Branches
	if err := retry.do(ctx, "list branches", func() (err error) { remote, err = clone.List(ctx, acc); return err }); err != nil {
		fail(err)
		return
	}
	api, closeAPI, err := w.apiCommitter(ctx, creds, url, acc)
	if err != nil {
		fail(err)
		return
	}
	defer closeAPI()
	type branchGroup struct {
		plan branchPlan
		apps []*appWrite
	}
	type groupKey struct {
		target string
		review settings.Forge
	}
	var groups []*branchGroup
	byTarget := map[groupKey]*branchGroup{}
	for _, a := range apps {
		plan, err := planBranches(a.update, remote.Default)
		if err != nil {
			a.fail(invalidTarget{err})
			continue
		}
		a.result.Branch = plan.target
		key := groupKey{plan.target, a.update.PullRequest}
		g, ok := byTarget[key]
		if !ok {
			// When Applications push to one new branch from different
			// bases, the first one's base is used.
			g = &branchGroup{plan: plan}
			byTarget[key] = g
			groups = append(groups, g)
		}
		g.apps = append(g.apps, a)
	}
	for _, g := range groups {
		if kind := g.apps[0].update.PullRequest; kind != "" {
			w.writeForReview(ctx, creds, clone, acc, api, &remote, g.plan, kind, g.apps, retry)
			continue
		}
		w.writeBranch(ctx, clone, acc, api, &remote, g.plan, g.apps, retry)
	}
}

// pendingCommit is one Application's commit waiting for the push.
type pendingCommit struct {
	app     *appWrite
	commit  plumbing.Hash
	path    string
	changed []writeback.ImageUpdate
	charts  []writeback.ChartUpdate
}

// writeBranch commits the Applications of one target branch and pushes
// them at once, re-applying them on the new tip when the push loses a
// race with another writer.
func (w *Writer) writeBranch(ctx context.Context, clone *gitClone, acc gitauth.Remote, api forge.Committer, remote *gitwire.Branches, plan branchPlan, apps []*appWrite, retry *transientRetry) {
	log := w.cfg.log.With("repository", repourl.RedactURL(clone.URL), "branch", plan.target)
	fail := func(err error) { failAll(apps, err) }
	for attempt := 0; ; attempt++ {
		from := plan.target
		listed, exists := remote.Heads[plan.target]
		if !exists {
			from = plan.base
			var ok bool
			if listed, ok = remote.Heads[plan.base]; !ok {
				fail(invalidTarget{fmt.Errorf("branch %s not found in %s", plan.base, repourl.RedactURL(clone.URL))})
				return
			}
		}
		var tip plumbing.Hash
		if err := retry.do(ctx, "fetch branch "+from, func() (err error) { tip, err = clone.tip(ctx, acc, from, listed); return err }); err != nil {
			fail(err)
			return
		}
		var expected plumbing.Hash
		if exists {
			expected = tip
		}
		head, pending, created, err := w.commitApplications(clone, tip, apps)
		if err != nil {
			fail(err)
			return
		}
		if len(pending) == 0 {
			return
		}
		if w.cfg.dryRun {
			for _, p := range pending {
				p.app.result.Changed, p.app.result.ChangedCharts = p.changed, p.charts
				log.Info("dry run: not committing", "application", p.app.update.key(), "file", p.path, "images", writeback.ImageList(p.changed))
			}
			return
		}
		if err := w.mayPush(); err != nil {
			for _, p := range pending {
				p.app.fail(err)
			}
			return
		}
		if w.beforePush != nil {
			w.beforePush(clone.URL, plan.target, attempt)
		}
		var pushErr error
		if api != nil {
			var committed plumbing.Hash
			if committed, pushErr = w.commitViaAPI(ctx, clone, api, plan, exists, tip, head, pending); pushErr == nil {
				head = committed
				for i := range pending {
					pending[i].commit = committed
				}
			}
		} else {
			pushErr = clone.Push(ctx, acc, head, created, plan.target, expected)
		}
		pushed := pushErr == nil
		// After a failed push, the branch tells what happened: it holds
		// our commits (the answer was lost), it moved (someone else
		// pushed), or it did not move (a real failure).
		var fresh gitwire.Branches
		moved := false
		var listErr error
		if !pushed {
			if fresh, listErr = clone.List(ctx, acc); listErr == nil {
				now, stillExists := fresh.Heads[plan.target]
				pushed = stillExists && now == head
				moved = stillExists != exists || (exists && now != expected)
			}
		}
		if pushed {
			remote.Heads[plan.target] = head
			landed(log, pending, tip)
			return
		}
		// Lost on the way (a reset, a 5xx, a 429), or unknown because the
		// listing after it failed too: push again, which finds the branch
		// moved if the lost push landed after all.
		if !moved && (retry.wait(ctx, "push branch "+plan.target, pushErr) || listErr != nil && retry.wait(ctx, "list branches after a push", listErr)) {
			continue
		}
		if !moved && len(pending) > 1 && refusedByServer(pushErr) {
			w.landAround(ctx, clone, acc, remote, plan, tip, expected, pending, created, pushErr, log)
			return
		}
		if !moved || attempt >= w.cfg.pushRetries {
			if moved {
				pushErr = fmt.Errorf("%w (branch still moving after %d retries)", pushErr, w.cfg.pushRetries)
			}
			for _, p := range pending {
				p.app.fail(pushErr)
			}
			return
		}
		log.Info("branch moved while pushing; applying the changes again on its new tip", "attempt", attempt+1)
		*remote = fresh
	}
}

// mayPush asks the push gate whether a push may start.
func (w *Writer) mayPush() error {
	if w.cfg.pushGate == nil {
		return nil
	}
	if err := w.cfg.pushGate(); err != nil {
		return fmt.Errorf("%w: %w", writeback.ErrWriteNotStarted, err)
	}
	return nil
}

// landed records pushed commits, made on base, in their Applications'
// results, each with the push that carried them: the health gate tells
// by it that a sync of a later commit of the push is a sync of an
// earlier one too.
func landed(log *slog.Logger, pending []pendingCommit, base plumbing.Hash) {
	push := &writeback.Push{Base: base.String()}
	for _, p := range pending {
		// Commits through the API are one commit for them all.
		if c := p.commit.String(); len(push.Commits) == 0 || push.Commits[len(push.Commits)-1] != c {
			push.Commits = append(push.Commits, c)
		}
	}
	for _, p := range pending {
		p.app.result.Changed, p.app.result.ChangedCharts = p.changed, p.charts
		p.app.result.Commit = p.commit.String()
		p.app.result.Push = push
		p.app.result.Written = true
		log.Info("pushed new image versions", "application", p.app.update.key(), "commit", p.commit.String(), "file", p.path, "images", writeback.ImageList(p.changed))
	}
}

// refusedByServer reports whether a push was refused by the server for
// its content (a pre-receive hook, a protected path or branch) rather than
// lost on the way: only then can another set of commits fare better.
// go-git reports such refusals as "command error on <ref>: <reason>" from
// the server's report-status.
func refusedByServer(err error) bool {
	return err != nil && strings.Contains(err.Error(), "command error on")
}

// landAround pushes what the server accepts of a chain of commits it
// refused as a whole, one Application's commit being what it refuses: the
// longest prefix of the chain that the server takes is pushed (found by
// halving), the commit after it is reported as refused, and the rest is
// committed again on the new tip and pushed the same way. Each refused
// Application costs about log2(n) extra pushes.
func (w *Writer) landAround(ctx context.Context, clone *gitClone, acc gitauth.Remote, remote *gitwire.Branches, plan branchPlan, onto, expected plumbing.Hash, pending []pendingCommit, created []plumbing.Hash, pushErr error, log *slog.Logger) {
	// onto is the commit the chain pending was made on.
	for len(pending) > 0 {
		// The first lo commits are pushed; the first hi are refused.
		lo, hi, refusal := 0, len(pending), pushErr
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			err := w.mayPush()
			if err == nil {
				err = clone.Push(ctx, acc, pending[mid-1].commit, created, plan.target, expected)
			}
			switch {
			case err == nil:
				base := onto
				if lo > 0 {
					base = pending[lo-1].commit
				}
				landed(log, pending[lo:mid], base)
				expected = pending[mid-1].commit
				remote.Heads[plan.target] = expected
				lo = mid
			case refusedByServer(err):
				hi, refusal = mid, err
			default:
				for _, p := range pending[lo:] {
					p.app.fail(err)
				}
				return
			}
		}
		bad := pending[hi-1]
		log.Warn("the server refused one Application's commit; pushing the others without it", "application", bad.app.update.key(), "error", refusal)
		bad.app.fail(refusal)
		var rest []*appWrite
		for _, p := range pending[hi:] {
			rest = append(rest, p.app)
		}
		if len(rest) == 0 {
			return
		}
		onto = expected
		head, again, more, err := w.commitApplications(clone, onto, rest)
		if err != nil {
			failAll(rest, err)
			return
		}
		if len(again) == 0 {
			return
		}
		created = append(created, more...)
		err = w.mayPush()
		if err == nil {
			err = clone.Push(ctx, acc, head, created, plan.target, expected)
		}
		switch {
		case err == nil:
			remote.Heads[plan.target] = head
			landed(log, again, onto)
			return
		case len(again) == 1 || !refusedByServer(err):
			for _, p := range again {
				p.app.fail(err)
			}
			return
		}
		pending, pushErr = again, err
	}
}

// commitApplications computes each Application's edit on top of tip and
// commits it, one commit per Application in the given order. An
// Application whose target cannot be edited gets its error and no commit;
// the others go on. In dry-run mode edits are computed but not committed.
func (w *Writer) commitApplications(clone *gitClone, tip plumbing.Hash, apps []*appWrite) (head plumbing.Hash, pending []pendingCommit, created []plumbing.Hash, _ error) {
	commit, err := object.GetCommit(clone.Repo.Storer, tip)
	if err != nil {
		return plumbing.ZeroHash, nil, nil, fmt.Errorf("read commit %s: %w", tip, err)
	}
	root, err := commit.Tree()
	if err != nil {
		return plumbing.ZeroHash, nil, nil, fmt.Errorf("read tree of commit %s: %w", tip, err)
	}
	// One walk of the tip's trees for the whole batch, and one chain of
	// trees for its commits: no tree is decoded once per Application.
	tree := newRepoTree(clone.Repo.Storer, root)
	chain := gitwire.NewChainTrees(clone.Repo.Storer)
	head = tip
	for _, a := range apps {
		u := a.update
		a.result.Err, a.result.Changed, a.result.ChangedCharts, a.result.Commit, a.result.Written = nil, nil, nil, "", false
		edit, err := w.planGuarded(tree, a)
		if err != nil {
			a.fail(invalidTarget{err})
			continue
		}
		if len(edit.changed) == 0 && len(edit.charts) == 0 {
			continue
		}
		var h plumbing.Hash
		if !w.cfg.dryRun {
			msg, err := w.commitMessage(u, edit.changed, edit.charts)
			if err != nil {
				a.fail(err)
				continue
			}
			if h, err = clone.Commit(head, edit.contents(), msg, w.signature(), w.signer, &created, chain); err != nil {
				a.fail(fmt.Errorf("commit %s: %w", edit.path, err))
				continue
			}
			if h.IsZero() {
				continue
			}
			head = h
		}
		maps.Copy(tree.changed, edit.contents())
		pending = append(pending, pendingCommit{app: a, commit: h, path: edit.path, changed: edit.changed, charts: edit.charts})
	}
	return head, pending, created, nil
}

// planGuarded is planTarget for one Application, whose panic (on a file
// from the repository) fails that Application alone.
func (w *Writer) planGuarded(tree *repoTree, a *appWrite) (targetEdit, error) {
	edit, err := safe.Value(func() (targetEdit, error) { return planTarget(tree, a.update) })
	safe.Log(w.cfg.log, "editing the write-back target of "+a.update.key(), err)
	return edit, err
}

func (w *Writer) signature() object.Signature {
	return object.Signature{Name: w.cfg.authorName, Email: w.cfg.authorEmail, When: w.cfg.now()}
}

// commitMessage renders the template for one Application's changes.
func (w *Writer) commitMessage(u update, changed []writeback.ImageUpdate, charts []writeback.ChartUpdate) (string, error) {
	msg := ""
	if len(changed) > 0 || len(charts) == 0 {
		var err error
		if msg, err = w.message.Render(commitMessageData(u, changed)); err != nil {
			return "", err
		}
	} else {
		msg = fmt.Sprintf("build: automatic update of %s\n\n", u.Name)
	}
	// The template's data has images only: charts are told after it.
	for _, c := range charts {
		msg += fmt.Sprintf("updates chart %s version '%s' to '%s'\n", c.Chart, c.Old, c.New)
	}
	if w.cfg.signOff {
		msg += fmt.Sprintf("\nSigned-off-by: %s <%s>\n", w.cfg.authorName, w.cfg.authorEmail)
	}
	return msg, nil
}

// commitMessageData is what templates see of one Application's changes.
func commitMessageData(u update, changed []writeback.ImageUpdate) CommitMessageData {
	data := CommitMessageData{AppName: u.Name}
	for _, img := range changed {
		data.AppChanges = append(data.AppChanges, ImageChange{Image: img.Reported().Name, Alias: img.Alias, OldTag: img.Old.String(), NewTag: img.New.String(), Labels: img.Labels})
	}
	return data
}

// invalidTarget marks an error as writeback.ErrInvalidTarget without changing its
// message.
type invalidTarget struct{ err error }

func (e invalidTarget) Error() string   { return e.err.Error() }
func (e invalidTarget) Unwrap() []error { return []error{writeback.ErrInvalidTarget, e.err} }

func appError(u update, err error) error {
	if errors.Is(err, repoaccess.ErrNotPermitted) {
		// What the AppProject refuses it refuses until the Application
		// or the AppProject changes.
		err = invalidTarget{err}
	}
	return repourl.RedactErrorURLs(fmt.Errorf("git write-back of Application %s to %s: %w", u.key(), repourl.RedactURL(u.RepoURL), err))
}
