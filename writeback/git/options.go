package git

import (
	"log/slog"
	"time"

	"github.com/image-updater/argocd-image-updater/forge"
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
	appsets     AppSets
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
