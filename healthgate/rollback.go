package healthgate

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// Skipped are the versions of image skipped for app, which holds current
// of it now. A version the updater wrote, once seen in the Application,
// then replaced by an older one by someone else (see rolledBack) was
// rolled back: unless the hold is turned off (see holdOff), it is skipped
// from then on, which holds the image at what that person chose until a
// newer version appears or health-gate-clear lifts the hold; HeldFrom is
// that version while the hold lasts. Someone else replaced it when:
//   - the Application holds an older version (the override set back, the
//     commit reverted and deployed);
//   - or it still holds the version written, but a person's sync started
//     since the write deployed an older one from another source: Argo
//     CD's rollback to an earlier history entry, which leaves the spec as
//     it is. The image is then held at the version deployed, which HoldAt
//     asks the cycle to write where the spec holds the version rolled back
//     from, until it does.
//
// A zero current tells nothing.
func (g *Gate) Skipped(ctx context.Context, app *application.Application, image string, current imageref.Version) cycle.Skips {
	key := keyOf(app)
	now := g.now()
	g.mu.Lock()
	st := g.states[key]
	if st == nil {
		g.mu.Unlock()
		return cycle.Skips{}
	}
	var out cycle.Skips
	save, held := false, ""
	if r := st.record(image); r != nil && !current.IsZero() {
		synced, syncedAt, bySync := syncedVersion(app, image)
		written := r.WrittenAt.Time.Truncate(time.Second)
		switch {
		case sameVersion(current, imageref.ParseVersion(r.Version)) && bySync && !syncedAt.Before(written) && seen(*r) && rolledBack(synced, *r) && !holdOff(app):
			// Argo CD's rollback: the spec still holds the version written.
			held = g.hold(st, r, image, synced, "Argo CD's rollback (a sync of an earlier source)", now)
			out.HoldAt = synced
			save = true
		case sameVersion(current, imageref.ParseVersion(r.Version)):
			if r.State == api.HealthGateWritten && r.DeployedAt == nil {
				t := metav1.NewTime(now)
				r.DeployedAt, r.Message = &t, "written; seen in the Application"
				save = true
			}
		case seen(*r) && rolledBack(current, *r) && !holdOff(app):
			held = g.hold(st, r, image, current, "someone else", now)
			if held != "" {
				// Once: the write-back's target (a git file) may still
				// hold the version rolled back from.
				out.HoldAt = current
			}
			save = true
		}
		if r.State == api.HealthGateRolledBack && bySync && !syncedAt.Before(written) && sameVersion(current, imageref.ParseVersion(r.Version)) {
			// Not yet written where the spec holds the version rolled
			// back from (the write failed, or the controller restarted).
			out.HoldAt = synced
		}
	}
	out.Versions = st.skippedVersions(image)
	if r := st.record(image); r != nil && r.State == api.HealthGateRolledBack && slices.Contains(out.Versions, imageref.ParseVersion(r.Version)) {
		out.HeldFrom = imageref.ParseVersion(r.Version)
	} else {
		// The hold was lifted: nothing is written for it.
		out.HoldAt = imageref.Version{}
	}
	g.mu.Unlock()
	if held != "" {
		g.event(app, corev1.EventTypeWarning, ReasonHeld, held)
		g.logger.Warn("a version the updater wrote was rolled back by someone else; the image is held", "application", key, "image", image, "current", current.String())
	}
	if save {
		g.saveSoon(ctx, key)
	}
	return out
}

// hold records that r's version of image was rolled back to current by
// who, and skips it unless it is skipped already; it returns the event's
// message for a new hold, "" otherwise. The caller holds g.mu.
func (g *Gate) hold(st *appState, r *api.HealthGateRecord, image string, current imageref.Version, who string, now time.Time) string {
	already := slices.Contains(st.skippedVersions(image), imageref.ParseVersion(r.Version))
	t := metav1.NewTime(now)
	reason := fmt.Sprintf("rolled back to %s by %s: held; not written again", current, who)
	r.State, r.RevertedAt = api.HealthGateRolledBack, &t
	r.Message = fmt.Sprintf("rolled back to %s by %s; %s is skipped until %s lifts the hold", current, who, r.Version, ClearAnnotation)
	if already {
		return ""
	}
	st.skip(image, r.Version, reason, now)
	return fmt.Sprintf("image %s: version %s, which the updater wrote, was rolled back to %s by %s; the image is held: neither %s nor an older version is written again, a newer one is when it appears; set %s to %q to lift the hold", image, r.Version, current, who, r.Version, ClearAnnotation, image+":"+r.Version)
}

// syncedVersion is the version of image (by its settings.ImageSpec Key)
// a person's sync of another source than the spec's deployed, with when
// it started (application.Application.SyncedVersion).
func syncedVersion(app *application.Application, image string) (imageref.Version, time.Time, bool) {
	at := slices.IndexFunc(app.Settings.Images, func(s settings.ImageSpec) bool { return s.Key() == image })
	if at < 0 {
		return imageref.Version{}, time.Time{}, false
	}
	return app.SyncedVersion(app.Settings.Images[at])
}

// holdOff tells whether the Application turned holds off: its
// rollback-hold annotation "false", or the rollbackHold field of the
// ImageUpdater that configures it false.
func holdOff(app *application.Application) bool {
	return app.Settings.RollbackHoldOff || app.Annotation(RollbackHoldAnnotation) == "false"
}

// seen tells whether the version of a record was seen in its Application
// (Argo CD ran it, or the updater's patch put it there): only then does
// an older version in its place tell a rollback, not a write Argo CD has
// not yet seen.
func seen(r api.HealthGateRecord) bool {
	switch r.State {
	case api.HealthGateVerified, api.HealthGateUnverified:
		return true
	case api.HealthGateWritten, api.HealthGatePending, api.HealthGateSuperseded:
		return r.DeployedAt != nil
	}
	// The gate's own reverts, and holds already taken.
	return false
}

// rolledBack tells whether current, found where the updater wrote r's
// version, is older: the version it replaced, or a lower semantic
// version. Any other version (newer, or not comparable) was moved
// forward or elsewhere by someone, and is left to the strategy.
func rolledBack(current imageref.Version, r api.HealthGateRecord) bool {
	if r.PreviousVersion != "" && sameVersion(current, imageref.ParseVersion(r.PreviousVersion)) {
		return true
	}
	written := imageref.ParseVersion(r.Version)
	if current.Tag == "" || written.Tag == "" {
		return false
	}
	c, ok := strategy.CompareTags(current.Tag, written.Tag)
	return ok && c < 0
}

// sameVersion: equal, or the same tag where one side knows no digest.
func sameVersion(a, b imageref.Version) bool {
	return a == b || a.Tag != "" && a.Tag == b.Tag && (a.Digest == "" || b.Digest == "")
}
