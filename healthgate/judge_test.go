package healthgate

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
)

// TestJudgeOutage: while Argo CD's application-controller restarts or
// cannot reach the Application's cluster, its status says Unknown,
// Missing, or what it last wrote before the write: none of it reverts a
// version, nor verifies it; the version stays followed past its window.
// A health Argo CD reports since the write, having compared the
// Application with its cluster, judges as ever.
func TestJudgeOutage(t *testing.T) {
	written := time.Date(2026, 3, 1, 10, 0, 0, 500e6, time.UTC)
	deployed := metav1.NewTime(written.Add(5 * time.Second).Truncate(time.Second))
	inWindow, atEnd := written.Add(30*time.Second), written.Add(2*time.Minute)
	fresh, before := written.Truncate(time.Second), written.Add(-time.Minute)
	tests := []struct {
		name          string
		health        string
		reconciledAt  time.Time
		cannotCompare string
		now           time.Time
		want          verdict
		message       string // a part of the message
	}{
		{name: "Unknown", health: "Unknown", reconciledAt: fresh, now: atEnd, want: follow, message: "window is over with health Unknown"},
		{name: "Missing", health: "Missing", reconciledAt: fresh, now: atEnd, want: follow, message: "window is over with health Missing"},
		{name: "Missing, the cluster unreachable", health: "Missing", reconciledAt: atEnd, cannotCompare: "ComparisonError", now: atEnd, want: follow, message: "cannot compare the Application with its cluster (condition ComparisonError)"},
		{name: "Degraded, not reconciled since the write", health: "Degraded", reconciledAt: before, now: inWindow, want: follow, message: "deployed; followed until"},
		{name: "Degraded, never reconciled", health: "Degraded", now: inWindow, want: follow, message: "deployed; followed until"},
		{name: "Healthy at the window's end, not reconciled since the write", health: "Healthy", reconciledAt: before, now: atEnd, want: follow,
			message: "Argo CD has not reconciled the Application since the write (last at 2026-03-01T09:59:00Z): judged once Argo CD reports again"},
		{name: "Degraded, with ComparisonError", health: "Degraded", reconciledAt: inWindow, cannotCompare: "ComparisonError", now: inWindow, want: follow, message: "deployed; followed until"},
		{name: "Degraded, with UnknownError", health: "Degraded", reconciledAt: inWindow, cannotCompare: "UnknownError", now: atEnd, want: follow, message: "condition UnknownError"},
		{name: "Healthy at the window's end, with ComparisonError", health: "Healthy", reconciledAt: atEnd, cannotCompare: "ComparisonError", now: atEnd, want: follow, message: "judged once Argo CD reports again"},
		{name: "Degraded, reconciled in the second of the write", health: "Degraded", reconciledAt: fresh, now: inWindow, want: broken, message: "became Degraded once 1.1.0 was deployed"},
		{name: "Degraded, reconciled since", health: "Degraded", reconciledAt: inWindow, now: inWindow, want: broken, message: "became Degraded once 1.1.0 was deployed"},
		{name: "Healthy at the window's end, reconciled since the write", health: "Healthy", reconciledAt: fresh, now: atEnd, want: verified, message: "Healthy at the end of its 1m0s window"},
		{name: "Healthy at the window's end, Argo CD back", health: "Healthy", reconciledAt: atEnd, now: atEnd, want: verified, message: "Healthy at the end of its 1m0s window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &api.HealthGateRecord{Alias: "app", Image: image, Version: "1.1.0", PreviousVersion: "1.0.0", State: api.HealthGatePending,
				Window: "1m0s", HealthBefore: "Healthy", WrittenAt: metav1.NewTime(written), DeployedAt: deployed.DeepCopy()}
			st := application.Status{Health: tt.health, Sync: "Synced", ReconciledAt: tt.reconciledAt, CannotCompare: tt.cannotCompare}
			got := judge(r, st, []string{image + ":1.1.0"}, nil, tt.now)
			if got.verdict != tt.want || !strings.Contains(got.message, tt.message) {
				t.Errorf("judged %v %q, want %v with %q", got.verdict, got.message, tt.want, tt.message)
			}
		})
	}
}

// TestJudgeSyncRefusedByArgoCD: a sync Argo CD refused on its own view of
// the project (right after its controller restarted, before it loaded the
// AppProjects) or of an unreachable cluster reverts nothing; a sync that
// failed applying the version still does.
func TestJudgeSyncRefusedByArgoCD(t *testing.T) {
	written := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name, phase, message, cannotCompare string
		retries                             int64
		want                                verdict
	}{
		{"refused: a project not loaded", "Error", "InvalidSpecError: Application referencing project default which does not exist", "", 0, follow},
		{"refused: the cluster unreachable, retried", "Running", "ComparisonError: Failed to load live state: failed to get cluster info for \"https://10.0.0.1\";ComparisonError: Failed to load target state. Retrying attempt #1 at 7:37AM.", "ComparisonError", 1, follow},
		{"failed while the cluster cannot be compared", "Failed", "one or more objects failed to apply, reason: Get \"https://10.0.0.1\": EOF", "UnknownError", 0, follow},
		{"failed applying", "Error", "one or more objects failed to apply, reason: Deployment.apps \"front\" is invalid", "", 0, broken},
		{"failed applying, retried", "Running", "one or more objects failed to apply. Retrying attempt #2 at 7:37AM.", "", 2, broken},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &api.HealthGateRecord{Alias: "app", Image: image, Version: "1.1.0", PreviousVersion: "1.0.0", State: api.HealthGatePending,
				Window: "1m0s", HealthBefore: "Healthy", WrittenAt: metav1.NewTime(written)}
			st := application.Status{Health: "Healthy", Sync: "OutOfSync", ReconciledAt: written.Add(time.Second), CannotCompare: tt.cannotCompare,
				Operation: application.Operation{Phase: tt.phase, Message: tt.message, Retries: tt.retries, StartedAt: written.Add(time.Second), FinishedAt: written.Add(2 * time.Second), Automated: true}}
			if got := judge(r, st, nil, nil, written.Add(3*time.Second)); got.verdict != tt.want {
				t.Errorf("judged %v %q, want %v", got.verdict, got.message, tt.want)
			}
		})
	}
}
