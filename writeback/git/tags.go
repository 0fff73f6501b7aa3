package git

import (
	"cmp"
	"context"

	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// Tags lists the tags of the git repository repoURL for an Application of
// namespace and project (git-tag-list): only when its AppProject permits
// the repository, with the credentials Argo CD reads it with (repository,
// repo-creds; never the write ones nor a Secret the Application names),
// its TLS certificates and known hosts, within the bounds of every
// reference advertisement the writer reads. Nothing is fetched or kept.
func (w *Writer) Tags(ctx context.Context, namespace, project, repoURL string) ([]string, error) {
	policy := repoaccess.NewPolicy(w.projects, w.cfg.argoCDNamespace)
	if err := policy.Check(ctx, repoaccess.Request{Namespace: namespace, Project: project, RepoURL: repoURL}); err != nil {
		return nil, err
	}
	creds := gitauth.NewResolver(w.secrets, w.cfg.argoCDNamespace, w.cache.root, w.github)
	c, err := creds.ResolveRead(ctx, repoURL, cmp.Or(project, "default"))
	if err != nil {
		return nil, err
	}
	acc, err := creds.Access(ctx, repoURL, c, w.cfg.insecureIgnoreHostKey)
	if err != nil {
		return nil, err
	}
	defer acc.Close()
	clone := &gitwire.Clone{URL: repoURL, NetworkTimeout: w.cfg.networkTimeout}
	retry := &transientRetry{max: w.cfg.transientRetries, base: w.cfg.transientBackoff,
		log: w.cfg.log.With("repository", repourl.RedactURL(repoURL))}
	var tags []string
	err = retry.do(ctx, "list tags", func() (err error) { tags, err = clone.Tags(ctx, acc); return err })
	return tags, err
}
