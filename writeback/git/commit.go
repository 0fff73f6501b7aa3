package git

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// commitApplications computes each Application's edit on top of tip and
// commits it, one commit per Application in the given order, except that
// the Applications of one ApplicationSet share one commit (see
// commitGroups). An Application whose target cannot be edited gets its
// error and no commit; the others go on. In dry-run mode edits are
// computed but not committed.
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
	for _, group := range commitGroups(apps) {
		// What the group's commit writes, each Application's edit made
		// on top of the others'.
		contents := map[string][]byte{}
		before := maps.Clone(tree.changed)
		var members []pendingCommit
		var msgs []string
		for _, a := range group {
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
			if !w.cfg.dryRun {
				msg, err := w.commitMessage(u, edit.changed, edit.charts)
				if err != nil {
					a.fail(err)
					continue
				}
				msgs = append(msgs, msg)
			}
			maps.Copy(contents, edit.contents())
			maps.Copy(tree.changed, edit.contents())
			members = append(members, pendingCommit{app: a, path: edit.path, changed: edit.changed, charts: edit.charts})
		}
		if len(members) == 0 {
			continue
		}
		var h plumbing.Hash
		if !w.cfg.dryRun {
			msg := msgs[0]
			if len(members) > 1 {
				msg = fmt.Sprintf("Update %d Applications of ApplicationSet %s\n\n%s", len(members), members[0].app.update.AppSet.spec, strings.Join(msgs, "\n\n"))
			}
			var err error
			if h, err = clone.Commit(head, contents, msg, w.signature(), w.signer, &created, chain); err != nil {
				for _, m := range members {
					m.app.fail(fmt.Errorf("commit %s: %w", m.path, err))
				}
				tree.changed = before
				continue
			}
			if h.IsZero() {
				tree.changed = before
				continue
			}
			head = h
		}
		for i := range members {
			members[i].commit = h
		}
		pending = append(pending, members...)
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
		if c.GitTag {
			msg += fmt.Sprintf("updates git source %s revision '%s' to '%s'\n", repourl.RedactURL(c.Chart), c.Old, c.New)
			continue
		}
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

// commitGroups are apps in their order, each alone, except that those
// written into one ApplicationSet's document or files go together, at the
// place of the first: one commit covers them.
func commitGroups(apps []*appWrite) [][]*appWrite {
	var groups [][]*appWrite
	at := map[string]int{}
	for _, a := range apps {
		if set := a.update.AppSet; set != nil {
			key := set.spec.String()
			if i, ok := at[key]; ok {
				groups[i] = append(groups[i], a)
				continue
			}
			at[key] = len(groups)
		}
		groups = append(groups, []*appWrite{a})
	}
	return groups
}
