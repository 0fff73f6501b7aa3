package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/writeback/git"
)

// newGitWriter builds the git write-back from the git flags. A missing
// commit-message or pull request template file means the default template, as the install
// manifest mounts the file only when the ConfigMap has the key. A signing
// key given by name is read from the keyring in GNUPGHOME, as gpg would.
// AppProjects are read from Argo CD's namespace.
func newGitWriter(o *runOptions, cs kubernetes.Interface, dyn dynamic.Interface, namespace string, logger *slog.Logger, lookupEnv func(string) (string, bool), more ...git.Option) (*git.Writer, error) {
	text, err := os.ReadFile(o.gitCommitMessagePath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("commit message template: %w", err)
	}
	tmpl, err := git.ParseCommitMessageTemplate(string(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.gitCommitMessagePath, err)
	}
	prText, err := os.ReadFile(o.gitPullRequestPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("pull request template: %w", err)
	}
	prTmpl, err := git.ParsePullRequestTemplate(string(prText))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.gitPullRequestPath, err)
	}
	opts := []git.Option{
		git.WithArgoCDNamespace(namespace),
		git.WithPullRequestTemplate(prTmpl),
		git.WithForgeHosts(o.forgeHosts),
		git.WithAPICommits(o.gitAPICommits),
		git.WithAuthor(o.gitCommitUser, o.gitCommitEmail),
		git.WithCommitMessageTemplate(tmpl),
		git.WithSignOff(o.gitCommitSignOff),
		git.WithDryRun(o.dryRun),
		git.WithLogger(logger),
		git.WithWorkDir(o.gitCloneDir),
		git.WithCloneCacheSize(o.gitCloneMaxBytes),
		git.WithParents(git.NewKubeParents(dyn, namespace)),
		git.WithApplicationSets(git.NewKubeAppSets(dyn, namespace)),
	}
	if o.gitCommitSigningKey != "" {
		opts = append(opts, git.WithSigningKey(o.gitCommitSigningKey, o.gitCommitSigningMethod))
	}
	if home, ok := lookupEnv("GNUPGHOME"); ok && home != "" {
		opts = append(opts, git.WithGnuPGHome(home))
	}
	return git.NewWriter(repoaccess.NewCachedSecretLister(repoaccess.NewKubeSecretLister(cs), 0), repoaccess.NewKubeAppProjectGetter(dyn), append(opts, more...)...)
}
