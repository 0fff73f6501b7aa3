package appwatch

import (
	"encoding/json"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/application"
)

// BenchmarkCachedApplications reports the heap that n Applications like
// the scale benchmark's keep between cycles (kept-B/app), decoded from
// JSON as the informer decodes them: the decoded object, what the
// informer keeps of it (a Snapshot), and the Snapshot with its settings
// read, as after a cycle.
func BenchmarkCachedApplications(b *testing.B) {
	const n = 5000
	docs := make([][]byte, n)
	for i := range docs {
		docs[i] = benchApplication(i)
	}
	for _, tc := range []struct {
		name string
		keep func(*Watcher, *unstructured.Unstructured) any
	}{
		{"object", func(_ *Watcher, u *unstructured.Unstructured) any { return u }},
		{"snapshot", func(w *Watcher, u *unstructured.Unstructured) any {
			s, _ := w.transform(u)
			return s
		}},
		{"snapshot+settings", func(w *Watcher, u *unstructured.Unstructured) any {
			s, _ := w.transform(u)
			if _, err := s.(*application.Snapshot).Application(); err != nil {
				b.Fatal(err)
			}
			return s
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var kept []any
			var perApp float64
			for b.Loop() {
				w, err := NewWatcher(nil)
				if err != nil {
					b.Fatal(err)
				}
				kept = make([]any, 0, n)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for _, d := range docs {
					u := &unstructured.Unstructured{}
					if err := u.UnmarshalJSON(d); err != nil {
						b.Fatal(err)
					}
					kept = append(kept, tc.keep(w, u))
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perApp = float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(w)
			}
			runtime.KeepAlive(kept)
			b.ReportMetric(perApp, "kept-B/app")
		})
	}
}

// A typical annotated Application, as the scale benchmark creates them.
func benchApplication(i int) []byte {
	doc := map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application"}
	_ = json.Unmarshal([]byte(`{"metadata":{"namespace":"argocd","generation":1,"creationTimestamp":"2026-11-23T16:00:00Z","labels":{"bench":"b"},
"managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"argoproj.io/v1alpha1","time":"2026-11-23T16:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},
"spec":{"project":"default","source":{"repoURL":"https://git.example.com/platform/apps.git","targetRevision":"main","kustomize":{}},
"destination":{"server":"https://kubernetes.default.svc"}},"status":{"sourceType":"Kustomize","reconciledAt":"2026-11-23T16:00:00Z"}}`), &doc)
	meta := doc["metadata"].(map[string]any)
	meta["name"] = "app-" + itoa(i)
	meta["uid"] = "6f1c2a4e-" + itoa(i)
	meta["resourceVersion"] = itoa(1000 + i)
	image := "registry.example.com/team-" + itoa(i%50) + "/svc-" + itoa(i%500)
	meta["annotations"] = map[string]any{
		"argocd-image-updater.argoproj.io/image-list":          "app=" + image,
		"argocd-image-updater.argoproj.io/app.update-strategy": "semver",
		"argocd-image-updater.argoproj.io/app.allow-tags":      `regexp:^1\.`,
		"argocd-image-updater.argoproj.io/write-back-method":   "argocd",
	}
	spec := doc["spec"].(map[string]any)
	spec["source"].(map[string]any)["path"] = "apps/app-" + itoa(i)
	spec["destination"].(map[string]any)["namespace"] = "app-" + itoa(i)
	doc["status"].(map[string]any)["summary"] = map[string]any{"images": []any{image + ":1." + itoa(i%20) + ".0"}}
	out, _ := json.Marshal(doc)
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
