package healthgate

import (
	"slices"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// syncOfWrite tells whether op, a sync that started after r's write,
// synced a revision that holds the write: a sync of such a revision is a
// sync of the write. Argo CD syncs the branch's tip, which for
// Applications written in one push is the last one's commit. It holds:
//   - with no commit known (the argocd write-back, a pull request, whose
//     merge makes another commit), or no revision reported: any sync;
//   - the write's commit, or a later commit of the same push (push, kept
//     in memory from the write): those hold the write; the tip the push
//     was made on, and an earlier commit of it, do not;
//   - another revision (pushed after it by someone else, or a write
//     whose push the gate no longer knows, after a restart): only a sync
//     Argo CD's automated sync started, which syncs the branch's tip,
//     holding every commit pushed before it began; a person's sync may
//     name any revision, an older one too, and is not taken for the
//     write's.
func syncOfWrite(r *api.HealthGateRecord, op application.Operation, push *writeback.Push) bool {
	if r.Commit == "" || op.Revision == "" || op.Revision == r.Commit {
		return true
	}
	if contains, known := push.Contains(op.Revision, r.Commit); known {
		return contains
	}
	return op.Automated
}

// setPush keeps the push that carried commit, the write of image; none
// for a write without a commit of its own.
func (st *appState) setPush(image, commit string, push *writeback.Push) {
	if commit == "" || push == nil || !slices.Contains(push.Commits, commit) {
		delete(st.pushes, image)
		return
	}
	if st.pushes == nil {
		st.pushes = map[string]*writeback.Push{}
	}
	st.pushes[image] = push
}
