package healthgate

import (
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// TestVerified: a version is promotable once the gate verified it, with
// when Argo CD was first seen running it; not while pending, nor once a
// newer write replaced it.
func TestVerified(t *testing.T) {
	r := newRig(t)
	app := r.apps.set(t, "staging", gated, argo("Healthy", "1.0.0", nil))
	if _, ok := r.gate.Verified(app, "app"); ok {
		t.Fatal("verified before anything was written")
	}
	r.written(t, app, "1.0.0", "1.1.0", "")
	r.now = r.now.Add(10 * time.Second)
	app = r.apps.set(t, "staging", gated, argo("Healthy", "1.1.0", nil))
	r.gate.Evaluate(t.Context())
	deployed := r.now
	if _, ok := r.gate.Verified(app, "app"); ok {
		t.Fatal("verified while its window runs")
	}
	r.now = r.now.Add(time.Minute)
	r.gate.Evaluate(t.Context())
	v, ok := r.gate.Verified(app, "app")
	if !ok || v.Version != (imageref.Version{Tag: "1.1.0"}) || !v.DeployedAt.Equal(deployed) {
		t.Fatalf("verified %+v %v, want 1.1.0 deployed at %v", v, ok, deployed)
	}
	if _, ok := r.gate.Verified(app, "other"); ok {
		t.Error("another image of the Application verified")
	}
	r.written(t, app, "1.1.0", "1.2.0", "")
	if _, ok := r.gate.Verified(app, "app"); ok {
		t.Error("still verified once a newer version was written")
	}
}
