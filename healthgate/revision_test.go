package healthgate

import (
	"slices"
	"testing"
	"time"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// TestGateFailedSyncOfThePush: two Applications written in one push, one
// commit each: a failed sync of a revision that holds an Application's
// commit (its own, the later commit of the push Argo CD syncs as the
// branch's tip, or a revision pushed after it that Argo CD's automated
// sync deployed) breaks its version; the tip the push was made on, an
// earlier commit of the push, and a revision a person chose that the
// push does not know do not.
func TestGateFailedSyncOfThePush(t *testing.T) {
	written := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	push := &writeback.Push{Base: "b0", Commits: []string{"c1", "c2"}}
	tests := []struct {
		name      string
		revision  string
		automated bool
		restarted bool     // the gate no longer knows the push
		broken    []string // the Applications whose versions broke
	}{
		{name: "the tip of the push: both", revision: "c2", broken: []string{"first", "second"}},
		{name: "the tip of the push, automated: both", revision: "c2", automated: true, broken: []string{"first", "second"}},
		{name: "the first commit: the first only", revision: "c1", automated: true, broken: []string{"first"}},
		{name: "the tip before the push: none", revision: "b0", automated: true},
		{name: "a later revision, automated: both", revision: "feed", automated: true, broken: []string{"first", "second"}},
		{name: "a revision a person chose: none", revision: "feed"},
		{name: "after a restart, the tip by automated sync: both", revision: "c2", automated: true, restarted: true, broken: []string{"first", "second"}},
		{name: "after a restart, the tip by a person: its own commit only", revision: "c2", restarted: true, broken: []string{"second"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			for i, name := range []string{"first", "second"} {
				app := r.apps.set(t, name, gated, argo("Healthy", "1.0.0", nil))
				p := push
				if tt.restarted {
					p = nil
				}
				r.gate.Written(t.Context(), app, writeback.Result{Namespace: app.Namespace, Name: app.Name, Written: true,
					Commit: push.Commits[i], Push: p,
					Changed: []writeback.ImageUpdate{{ImageSpec: app.Settings.Images[0], Old: imageref.ParseVersion("1.0.0"), New: imageref.ParseVersion("1.1.0")}}})
			}
			op := map[string]any{"phase": "Failed", "message": "one or more objects failed to apply",
				"startedAt": written.Add(5 * time.Second).Format(time.RFC3339), "syncResult": map[string]any{"revision": tt.revision}}
			if tt.automated {
				op["operation"] = map[string]any{"initiatedBy": map[string]any{"automated": true}}
			}
			r.now = r.now.Add(10 * time.Second)
			for _, name := range []string{"first", "second"} {
				r.apps.set(t, name, gated, argo("Healthy", "1.0.0", op))
			}
			r.gate.Evaluate(t.Context())
			var broken []string
			for _, name := range []string{"first", "second"} {
				switch rec := r.record(t, name); rec.State {
				case api.HealthGateReverted:
					broken = append(broken, name)
				case api.HealthGatePending:
				default:
					t.Errorf("%s: record %+v", name, rec)
				}
			}
			if !slices.Equal(broken, tt.broken) {
				t.Errorf("broken %v, want %v (reverts %v)", broken, tt.broken, r.rev.got)
			}
		})
	}
}
