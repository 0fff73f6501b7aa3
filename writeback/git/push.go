package git

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

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
