package healthgate

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// Argo CD's health statuses the gate reads.
const (
	healthHealthy  = "Healthy"
	healthDegraded = "Degraded"
)

// verdict is what the gate makes of a version it follows.
type verdict int

const (
	// follow: not judged yet.
	follow verdict = iota
	verified
	unverified
	// broken: the version broke the Application; it is written back.
	broken
)

// Causes of a broken version, as the revert metric labels them.
const (
	causeSyncFailed = "sync_failed"
	causeDegraded   = "degraded"
)

// judgement is a verdict with what it rests on.
type judgement struct {
	verdict verdict
	// cause is causeSyncFailed or causeDegraded for a broken version.
	cause string
	// message says what Argo CD said (broken), or where the version
	// stands.
	message string
}

// judge decides on a Pending record from what Argo CD says of the
// Application now, and sets the record's DeployedAt when it is first
// seen running; push is the git push that carried the write, when known.
// The rules:
//   - a sync that started after the write, of a revision that holds the
//     write (see syncOfWrite), and failed: broken, whatever the health
//     was before;
//   - health Degraded while the version runs, where the Application was
//     not Degraded before the write: broken;
//   - the window, counted from when the version was first seen running,
//     over and health Healthy: verified; over and Degraded, where it was
//     Degraded before: unverified (kept, not judged by health); over with
//     another health (Progressing, Missing, Unknown...): followed until
//     one of these.
//
// A health judges only when it is fresh (see stale): Argo CD compared
// the Application since the write and could compare it with its cluster.
// While the application-controller restarts or cannot reach the cluster,
// a Degraded health reverts nothing and a Healthy one verifies nothing:
// the version stays followed, past its window, until Argo CD reports
// again. Unknown and Missing never revert.
func judge(r *api.HealthGateRecord, st application.Status, running []string, push *writeback.Push, now time.Time) judgement {
	op := st.Operation
	written := r.WrittenAt.Time.Truncate(time.Second)
	if op.Failed() && !op.StartedAt.Before(written) && syncOfWrite(r, op, push) && refusedByArgoCD(op, st) {
		// Refused before anything was applied, on Argo CD's own view of the
		// project, the spec or the cluster (as right after its controller
		// restarts, or while it cannot reach the cluster): the version is
		// followed until a sync of it runs.
		return judgement{message: fmt.Sprintf("Argo CD refused the sync of %s before applying anything (%s): judged once a sync of it runs", r.Version, op.Message)}
	}
	if op.Failed() && !op.StartedAt.Before(written) && syncOfWrite(r, op, push) {
		msg := fmt.Sprintf("the sync of %s failed", r.Version)
		if op.Message != "" {
			msg += ": " + op.Message
		}
		return judgement{verdict: broken, cause: causeSyncFailed, message: msg}
	}
	deployed := runs(r.Image, r.Version, running)
	if deployed && r.DeployedAt == nil {
		t := metav1.NewTime(now.Truncate(time.Second))
		r.DeployedAt = &t
	}
	wasDegraded := r.HealthBefore == healthDegraded
	staleBy := stale(st, written)
	if deployed && st.Health == healthDegraded && !wasDegraded && staleBy == "" {
		msg := fmt.Sprintf("the Application became Degraded once %s was deployed", r.Version)
		if len(st.Degraded) > 0 {
			msg += ": " + strings.Join(st.Degraded, "; ")
		}
		return judgement{verdict: broken, cause: causeDegraded, message: msg}
	}
	if r.DeployedAt == nil {
		return judgement{message: "written; waiting for Argo CD to deploy it" + degradedNote(wasDegraded)}
	}
	window := windowOf(*r)
	end := r.DeployedAt.Add(window)
	switch {
	case now.Before(end):
		return judgement{message: fmt.Sprintf("deployed; followed until %s", end.UTC().Format(time.RFC3339)) + degradedNote(wasDegraded)}
	case staleBy != "":
		return judgement{message: fmt.Sprintf("its %s window is over, but %s: judged once Argo CD reports again", window, staleBy) + degradedNote(wasDegraded)}
	case st.Health == healthHealthy:
		return judgement{verdict: verified, message: fmt.Sprintf("Healthy at the end of its %s window", window)}
	case wasDegraded && st.Health == healthDegraded:
		return judgement{verdict: unverified, message: "kept, not verified: the Application was Degraded before the write and still is, so its health does not judge the version; its sync did not fail"}
	}
	health := st.Health
	if health == "" {
		health = "unknown"
	}
	return judgement{message: fmt.Sprintf("its %s window is over with health %s: verified once Healthy", window, health) + degradedNote(wasDegraded)}
}

// stale says why st does not tell the Application's health since written
// (the write, to the second), "" when it does: Argo CD has not compared
// the Application since (its application-controller is down or
// restarting: its status is what it last wrote), or it could not compare
// it with its cluster (unreachable: the health is not the live one).
func stale(st application.Status, written time.Time) string {
	switch {
	case st.CannotCompare != "":
		return fmt.Sprintf("Argo CD cannot compare the Application with its cluster (condition %s)", st.CannotCompare)
	case st.ReconciledAt.IsZero():
		return "Argo CD has not reconciled the Application since the write"
	case st.ReconciledAt.Before(written):
		return fmt.Sprintf("Argo CD has not reconciled the Application since the write (last at %s)", st.ReconciledAt.UTC().Format(time.RFC3339))
	}
	return ""
}

// refusedByArgoCD tells a sync Argo CD refused on its own checks from one
// that applied the version and failed. Argo CD refuses a sync while the
// Application carries a ComparisonError or InvalidSpecError condition,
// with those conditions as its message ("Type: message;Type: message"):
// a project it has not loaded yet, a cluster it cannot reach. An image or
// chart version causes neither. While the Application cannot be compared
// with its cluster, a failed sync is not told apart from the outage
// either: it is judged once a sync runs with the cluster reachable.
func refusedByArgoCD(op application.Operation, st application.Status) bool {
	return strings.HasPrefix(op.Message, "InvalidSpecError:") ||
		strings.HasPrefix(op.Message, "ComparisonError:") ||
		st.CannotCompare != ""
}

func degradedNote(wasDegraded bool) string {
	if !wasDegraded {
		return ""
	}
	return " (the Application was Degraded before the write: only a failed sync writes the version back)"
}

// windowOf is the record's window, within its bounds.
func windowOf(r api.HealthGateRecord) time.Duration {
	d, err := time.ParseDuration(r.Window)
	if err != nil {
		return settings.DefaultHealthGateWindow
	}
	return min(max(d, settings.MinHealthGateWindow), settings.MaxHealthGateWindow)
}

// runs tells whether running, the Application's status.summary.images,
// holds image at version.
func runs(image, version string, running []string) bool {
	ref, err := imageref.Parse(image)
	if err != nil {
		return false
	}
	want := imageref.ParseVersion(version)
	for _, img := range running {
		if !ref.MatchesName(img) {
			continue
		}
		_, v := imageref.Split(img)
		switch {
		case v == want,
			want.Digest != "" && v.Digest == want.Digest,
			want.Digest == "" && v.Tag == want.Tag:
			return true
		}
	}
	return false
}
