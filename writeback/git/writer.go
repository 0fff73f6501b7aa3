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
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
	"github.com/image-updater/argocd-image-updater/writeback/gitsign"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// maxParallelRepositories bounds how many repositories one Write talks to
// at once; each is network-bound, and one repository is always handled by
// one goroutine.
const maxParallelRepositories = 4

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
	reads := appSetReads{}
	for i, c := range changes {
		u, err := w.updateOf(ctx, c, reads)
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
