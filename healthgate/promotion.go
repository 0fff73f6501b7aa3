package healthgate

import (
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageref"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
)

// Verified is the version of image (by its settings.ImageSpec Key) that
// the gate last wrote for app and verified, with when Argo CD was first
// seen running it; false when the last version written is not verified
// (yet): pending, reverted, rolled back, or written without the gate.
func (g *Gate) Verified(app *application.Application, image string) (cycle.Verified, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.states[keyOf(app)]
	if st == nil {
		return cycle.Verified{}, false
	}
	r := st.record(image)
	if r == nil || r.State != api.HealthGateVerified || r.DeployedAt == nil {
		return cycle.Verified{}, false
	}
	return cycle.Verified{Version: imageref.ParseVersion(r.Version), DeployedAt: r.DeployedAt.Time}, true
}
