package healthgate

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// Record is the Record of a writeback.Change to app (see
// writeback.Change): the gate's state of app once the images changed are
// written, as its annotation, so that the patch of the versions carries
// it and Written saves nothing more. None for an Application whose
// ImageUpdater's status keeps its state.
func (g *Gate) Record(app *application.Application) func(writeback.Result) (annotation, value string) {
	if app.ImageUpdater.Name != "" {
		return nil
	}
	key := keyOf(app)
	return func(res writeback.Result) (string, string) {
		now := g.now()
		g.mu.Lock()
		defer g.mu.Unlock()
		next, changedState := g.applyWrite(g.states[key].clone(), app, res.Changed, commitOf(res), res.Push, now)
		if !changedState {
			return "", ""
		}
		next.normalize("")
		value := next.Encode()
		if value == "" {
			return "", ""
		}
		// Kept for Written, which computes the same state at the same
		// time, and for OnUpdate, should the write land without its
		// answer; the sweep drops what neither took (a failed write).
		g.prepared[key] = preparedRecord{value: value, at: now, app: app, res: res}
		return StateAnnotation, value
	}
}

// preparedRecord is a state Record gave a write to carry, when, and the
// write.
type preparedRecord struct {
	value string
	at    time.Time
	app   *application.Application
	res   writeback.Result
	// adopted: OnUpdate saw the value in the Application before Written
	// was told of the write, and took the write as done.
	adopted bool
}

// Written starts following the versions a write persisted for images
// with a health gate; a version written for an image without one is
// recorded (Written) only to tell a rollback (see Skipped). A write that
// carried the state Record gave (in res.Recorded) saved it: nothing more
// is sent.
func (g *Gate) Written(ctx context.Context, app *application.Application, res writeback.Result) {
	key := keyOf(app)
	now := g.now()
	g.mu.Lock()
	p, prepared := g.prepared[key]
	delete(g.prepared, key)
	recorded := res.Recorded[StateAnnotation]
	carried := prepared && recorded != "" && recorded == p.value
	if carried && p.adopted {
		// OnUpdate took it already.
		g.mu.Unlock()
		return
	}
	if carried {
		now = p.at
	}
	st, changed := g.applyWrite(g.states[key], app, res.Changed, commitOf(res), res.Push, now)
	if st != nil {
		g.states[key] = st
	}
	n := g.following()
	owner := types.NamespacedName{}
	follow, saved := false, false
	if st != nil {
		owner = st.owner
		follow = slices.ContainsFunc(st.Records, active)
		if changed && carried && owner.Name == "" {
			// The same state as Record's unless the gate changed it
			// meanwhile (a look judged a record): then it is saved.
			st.normalize("")
			saved = st.Encode() == recorded
			st.dirty = st.dirty && !saved
		}
	}
	if changed && owner.Name != "" {
		g.unsaved[owner] = true
	}
	g.mu.Unlock()
	if !changed {
		return
	}
	g.metrics.following(n)
	if owner.Name == "" && !saved {
		g.save(ctx, key)
	}
	if follow {
		g.poke()
	}
}

// commitOf is the commit of a write the gate follows: none for a pull
// request, whose merge makes another commit.
func commitOf(res writeback.Result) string {
	if res.PullRequest != "" {
		return ""
	}
	return res.Commit
}

// applyWrite records in st (nil for none yet) the versions of changed,
// written at now, and returns st, and whether it changed. The caller
// holds g.mu.
func (g *Gate) applyWrite(st *appState, app *application.Application, changed []writeback.ImageUpdate, commit string, push *writeback.Push, now time.Time) (*appState, bool) {
	modified := false
	for _, c := range changed {
		if st != nil && sameVersion(c.New, c.Old) {
			if r := st.record(c.Key()); r != nil && r.State == api.HealthGateRolledBack {
				// The version held, written where the write-back keeps
				// it: the hold stays.
				continue
			}
		}
		if st == nil {
			st = &appState{}
		}
		st.owner = app.ImageUpdater
		if c.HealthGate == 0 {
			// Not followed; kept to tell a rollback by someone else. A
			// patch of the Application holds the version at once.
			r := api.HealthGateRecord{
				Alias: c.Key(), Image: c.Image.Name(), Version: c.New.String(), PreviousVersion: c.Old.String(),
				State: api.HealthGateWritten, Commit: commit, WrittenAt: metav1.NewTime(now),
				Message: "written; not yet seen in the Application",
			}
			if app.Settings.WriteBack.Method == settings.WriteBackArgoCD {
				t := metav1.NewTime(now)
				r.DeployedAt, r.Message = &t, "written; seen in the Application"
			}
			st.setRecord(r)
			st.setPush(c.Key(), "", nil)
			modified = true
			continue
		}
		st.setRecord(api.HealthGateRecord{
			Alias: c.Key(), Image: c.Image.Name(), Version: c.New.String(), PreviousVersion: c.Old.String(),
			State: api.HealthGatePending, Window: c.HealthGate.String(), Commit: commit,
			HealthBefore: app.Status().Health, WrittenAt: metav1.NewTime(now),
			Message: "written; waiting for Argo CD to deploy it",
		})
		st.setPush(c.Key(), commit, push)
		modified = true
	}
	return st, modified
}
