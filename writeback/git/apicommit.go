package git

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/merkletrie"

	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
)

// apiCommitter is the GitHub API client that commits to a repository when
// WithAPICommits asks for it and the repository allows it (a GitHub App's
// credentials, a known GitHub host); nil, with a warning, to push with git.
func (w *Writer) apiCommitter(ctx context.Context, creds *gitauth.Resolver, url string, acc gitauth.Remote) (forge.Committer, func(), error) {
	nothing := func() {}
	if !w.cfg.apiCommits || w.cfg.dryRun {
		return nil, nothing, nil
	}
	log := w.cfg.log.With("repository", repourl.RedactURL(url))
	if !acc.GitHubApp() {
		log.Warn("--git-commit-method api commits through the GitHub API with a GitHub App's credentials only; these are not, so the commits are pushed with git")
		return nil, nothing, nil
	}
	repo, err := w.cfg.forges.Lookup(settings.ForgeGitHub, url)
	if err != nil {
		log.Warn("--git-commit-method api: the repository is not on a GitHub host the controller knows, so the commits are pushed with git", "error", err)
		return nil, nothing, nil
	}
	client, closeClient, err := creds.ForgeClient(ctx, repo, acc)
	if err != nil {
		return nil, nil, fmt.Errorf("commit through the GitHub API: %w", err)
	}
	committer, ok := client.(forge.Committer)
	if !ok {
		closeClient()
		return nil, nothing, nil
	}
	return committer, closeClient, nil
}

// commitViaAPI sends what the commits from tip to head change as one
// commit through the API, on top of tip (creating the branch at tip
// first when it does not exist), and returns the API's commit.
func (w *Writer) commitViaAPI(ctx context.Context, clone *gitClone, api forge.Committer, plan branchPlan, exists bool, tip, head plumbing.Hash, pending []pendingCommit) (plumbing.Hash, error) {
	files, err := clone.changedFiles(tip, head)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	var messages []string
	for _, p := range pending {
		c, err := object.GetCommit(clone.Repo.Storer, p.commit)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", p.commit, err)
		}
		messages = append(messages, strings.TrimSpace(c.Message))
	}
	message := messages[0]
	if len(messages) > 1 {
		message = fmt.Sprintf("Update images of %d Applications\n\n%s", len(messages), strings.Join(messages, "\n\n"))
	}
	if !exists {
		if err := api.CreateBranch(ctx, plan.target, tip.String()); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("create branch %s through the GitHub API: %w", plan.target, err)
		}
	}
	oid, err := api.Commit(ctx, plan.target, tip.String(), message, files)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("commit to %s through the GitHub API: %w", plan.target, err)
	}
	if !plumbing.IsHash(oid) {
		return plumbing.ZeroHash, fmt.Errorf("commit to %s through the GitHub API: the answer names commit %q", plan.target, oid)
	}
	return plumbing.NewHash(oid), nil
}

// changedFiles is what the commits from one commit to another write: each
// file added or changed, with its content. The write-back never deletes.
func (c *gitClone) changedFiles(from, to plumbing.Hash) (map[string][]byte, error) {
	tree := func(h plumbing.Hash) (*object.Tree, error) {
		commit, err := object.GetCommit(c.Repo.Storer, h)
		if err != nil {
			return nil, fmt.Errorf("read commit %s: %w", h, err)
		}
		return commit.Tree()
	}
	a, err := tree(from)
	if err != nil {
		return nil, err
	}
	b, err := tree(to)
	if err != nil {
		return nil, err
	}
	changes, err := object.DiffTree(a, b)
	if err != nil {
		return nil, fmt.Errorf("compare %s and %s: %w", from, to, err)
	}
	files := map[string][]byte{}
	for _, ch := range changes {
		action, err := ch.Action()
		if err != nil {
			return nil, err
		}
		if action == merkletrie.Delete {
			return nil, fmt.Errorf("%s is deleted, which the write-back never does", ch.From.Name)
		}
		blob, err := object.GetBlob(c.Repo.Storer, ch.To.TreeEntry.Hash)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", ch.To.Name, err)
		}
		r, err := blob.Reader()
		if err != nil {
			return nil, err
		}
		content, err := io.ReadAll(io.LimitReader(r, maxTargetFileSize+1))
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", ch.To.Name, err)
		}
		if len(content) > maxTargetFileSize {
			return nil, fmt.Errorf("%s is over %d MiB, the most a write-back writes", ch.To.Name, maxTargetFileSize>>20)
		}
		files[ch.To.Name] = content
	}
	return files, nil
}
