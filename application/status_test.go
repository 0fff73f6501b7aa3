package application

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestStatus: what the Snapshot keeps of Argo CD's sync and health, its
// messages bounded.
func TestStatus(t *testing.T) {
	long := strings.Repeat("é", 400)
	tests := []struct {
		name   string
		status string
		want   Status
	}{
		{name: "none", status: `{}`, want: Status{}},
		{
			name: "healthy, synced",
			status: `{"health":{"status":"Healthy"},"sync":{"status":"Synced","revision":"abc"},
				"operationState":{"phase":"Succeeded","message":"successfully synced","startedAt":"2026-01-02T03:04:05Z","finishedAt":"2026-01-02T03:04:07Z","syncResult":{"revision":"abc"}}}`,
			want: Status{Health: "Healthy", Sync: "Synced", Operation: Operation{Phase: "Succeeded",
				StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), FinishedAt: time.Date(2026, 1, 2, 3, 4, 7, 0, time.UTC), Revision: "abc"}},
		},
		{
			name: "a failed sync of several sources keeps its message",
			status: `{"sync":{"status":"OutOfSync"},
				"operationState":{"phase":"Failed","message":"one or more objects failed to apply:\n  quota exceeded","startedAt":"2026-01-02T03:04:05Z","syncResult":{"revisions":["r1","r2"]}}}`,
			want: Status{Sync: "OutOfSync", Operation: Operation{Phase: "Failed", Message: "one or more objects failed to apply: quota exceeded",
				StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Revision: "r1"}},
		},
		{
			name: "an attempt Argo CD retries is a failure, its message without the retry",
			status: `{"operationState":{"phase":"Running","retryCount":2,"startedAt":"2026-01-02T03:04:05Z","finishedAt":"2026-01-02T03:04:06Z",
				"message":"one or more objects failed to apply, reason: Deployment.apps \"front\" is invalid. Retrying attempt #2 at 3:04AM."}}`,
			want: Status{Operation: Operation{Phase: "Running", Retries: 2, Message: `one or more objects failed to apply, reason: Deployment.apps "front" is invalid`,
				StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), FinishedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}},
		},
		{
			name:   "a sync running for the first time is no failure",
			status: `{"operationState":{"phase":"Running","message":"syncing","startedAt":"2026-01-02T03:04:05Z"}}`,
			want:   Status{Operation: Operation{Phase: "Running", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
		},
		{
			name: "degraded resources are named, at most three, each message bounded",
			status: `{"health":{"status":"Degraded"},"resources":[
				{"kind":"Deployment","namespace":"shop","name":"front","health":{"status":"Degraded","message":"` + long + `"}},
				{"kind":"Service","name":"front","health":{"status":"Healthy"}},
				{"kind":"Deployment","name":"b","health":{"status":"Degraded"}},
				{"kind":"Deployment","name":"c","health":{"status":"Degraded"}},
				{"kind":"Deployment","name":"d","health":{"status":"Degraded"}},
				"not an object"]}`,
			want: Status{Health: "Degraded", Degraded: []string{"Deployment shop/front: " + strings.Repeat("é", 115) + "...", "Deployment b", "Deployment c", "..."}},
		},
		{
			name: "when Argo CD last compared, and that it could not compare with the cluster",
			status: `{"health":{"status":"Missing"},"reconciledAt":"2026-01-02T03:04:05Z","conditions":[
				{"type":"SyncError","message":"x"},"not an object",
				{"type":"ComparisonError","message":"failed to sync cluster https://10.0.0.1: connection refused"}]}`,
			want: Status{Health: "Missing", ReconciledAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), CannotCompare: "ComparisonError"},
		},
		{
			name:   "fields of the wrong type are not read",
			status: `{"health":"Degraded","sync":7,"operationState":{"phase":["Failed"],"startedAt":"yesterday"},"resources":{"kind":"x"}}`,
			want:   Status{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"a","namespace":"argocd",
				"annotations":{"argocd-image-updater.argoproj.io/image-list":"nginx"}},"spec":{},"status":` + tt.status + `}`
			s := SnapshotOf(decoded(t, doc))
			if diff := cmp.Diff(tt.want, s.Status()); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			app, err := s.Application()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, app.Status()); diff != "" {
				t.Errorf("the Application's status (-want +got):\n%s", diff)
			}
			for _, m := range app.Status().Degraded {
				if len(m) > maxStatusMessage {
					t.Errorf("message of %d bytes", len(m))
				}
			}
		})
	}
}

// TestSyncedVersion: a person's sync of a source whose overrides differ
// from the spec's (Argo CD's rollback to an earlier history entry) tells
// what runs; a plain sync, Argo CD's automated sync, and a sync of other
// overrides of other images tell nothing.
func TestSyncedVersion(t *testing.T) {
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	kustomize := func(images ...string) string {
		list := `"` + strings.Join(images, `","`) + `"`
		if len(images) == 0 {
			list = ""
		}
		return `{"repoURL":"https://git.example.com/r.git","path":"p","targetRevision":"main","kustomize":{"images":[` + list + `]}}`
	}
	helm := func(tag string) string {
		return `{"repoURL":"https://git.example.com/r.git","path":"c","helm":{"parameters":[{"name":"image.tag","value":"` + tag + `"}]}}`
	}
	op := func(phase, initiatedBy, sync string) string {
		return `"operationState":{"phase":"` + phase + `","startedAt":"2026-01-02T03:04:05Z","operation":{"initiatedBy":` + initiatedBy + `,"sync":` + sync + `}}`
	}
	const person, automated = `{"username":"admin"}`, `{"automated":true}`
	running := func(tag string) string { return `"summary":{"images":["example.com/app:` + tag + `"]}` }
	tests := []struct {
		name, spec, status string
		want               string // "" for none
	}{
		{name: "a rollback to the entry before", spec: `"source":` + kustomize("example.com/app:1.1.0"),
			status: op("Succeeded", person, `{"revision":"abc","source":`+kustomize("example.com/app:1.0.0")+`}`) + "," + running("1.0.0"), want: "1.0.0"},
		{name: "a rollback still running", spec: `"source":` + kustomize("example.com/app:1.1.0"),
			status: op("Running", person, `{"revision":"abc","source":`+kustomize("example.com/app:1.0.0")+`}`) + "," + running("1.1.0"), want: "1.0.0"},
		{name: "a plain sync names the spec's source", spec: `"source":` + kustomize("example.com/app:1.1.0"),
			status: op("Succeeded", person, `{"source":`+kustomize("example.com/app:1.1.0")+`}`) + "," + running("1.1.0")},
		{name: "the automated sync", spec: `"source":` + kustomize("example.com/app:1.1.0"),
			status: op("Succeeded", automated, `{"source":`+kustomize("example.com/app:1.0.0")+`}`) + "," + running("1.0.0")},
		{name: "other images' overrides", spec: `"source":` + kustomize("example.com/app:1.1.0", "example.com/web:2"),
			status: op("Succeeded", person, `{"source":`+kustomize("example.com/app:1.1.0", "example.com/web:1")+`}`) + "," + running("1.1.0")},
		{name: "an entry without the override runs what the manifests hold", spec: `"source":` + kustomize("example.com/app:1.1.0"),
			status: op("Succeeded", person, `{"source":`+kustomize()+`}`) + "," + running("0.9.0"), want: "0.9.0"},
		{name: "an entry without the override, still syncing", spec: `"source":` + kustomize("example.com/app:1.1.0"),
			status: op("Running", person, `{"source":`+kustomize()+`}`) + "," + running("1.1.0")},
		{name: "several sources: the Helm source's parameter", spec: `"sources":[` + kustomize() + "," + helm("1.1.0") + `]`,
			status: op("Succeeded", person, `{"revisions":["a","b"],"sources":[`+kustomize()+","+helm("1.0.0")+`]}`) + "," + running("1.0.0"), want: "1.0.0"},
		{name: "no operation", spec: `"source":` + kustomize("example.com/app:1.1.0"), status: running("1.1.0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"a","namespace":"argocd",
				"annotations":{"argocd-image-updater.argoproj.io/image-list":"app=example.com/app"}},"spec":{` + tt.spec + `},"status":{` + tt.status + `}}`
			app, err := SnapshotOf(decoded(t, doc)).Application()
			if err != nil {
				t.Fatal(err)
			}
			v, at, ok := app.SyncedVersion(app.Settings.Images[0])
			if tt.want == "" {
				if ok {
					t.Fatalf("synced %s, want nothing", v)
				}
				return
			}
			if !ok || v.String() != tt.want || !at.Equal(started) {
				t.Fatalf("synced %s at %s (%v), want %s at %s", v, at, ok, tt.want, started)
			}
		})
	}
}
