package appwatch

import (
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// BenchmarkCachedApplications reports the heap that n Applications like
// the scale benchmark's keep in the informer's cache (kept-B/app), decoded
// from JSON as the informer does, after the transform without and with
// shared strings.
func BenchmarkCachedApplications(b *testing.B) {
	const n = 5000
	docs := make([][]byte, n)
	for i := range docs {
		docs[i] = fmt.Appendf(nil, `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application",
"metadata":{"name":"app-%05d","namespace":"argocd","uid":"6f1c2a4e-%08d","resourceVersion":"%d","generation":1,
"creationTimestamp":"2026-11-23T16:00:00Z","labels":{"bench":"b"},
"annotations":{"argocd-image-updater.argoproj.io/image-list":"app=registry.example.com/team-%03d/svc-%03d",
"argocd-image-updater.argoproj.io/app.update-strategy":"semver","argocd-image-updater.argoproj.io/app.allow-tags":"regexp:^1\\.",
"argocd-image-updater.argoproj.io/write-back-method":"argocd"},
"managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"argoproj.io/v1alpha1","time":"2026-11-23T16:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},
"spec":{"project":"default","source":{"repoURL":"https://git.example.com/platform/apps.git","targetRevision":"main","path":"apps/app-%05d","kustomize":{}},
"destination":{"server":"https://kubernetes.default.svc","namespace":"app-%05d"}},
"status":{"sourceType":"Kustomize","summary":{"images":["registry.example.com/team-%03d/svc-%03d:1.%d.0"]},"reconciledAt":"2026-11-23T16:00:00Z"}}`,
			i, i, i, i%50, i%500, i, i, i%50, i%500, i%20)
	}
	w, err := NewWatcher(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		transform func(any) (any, error)
	}{
		{"trim", trimApplication},
		{"trim+shared-strings", w.transform},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var kept []any
			var perApp float64
			for b.Loop() {
				kept = make([]any, 0, n)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for _, d := range docs {
					u := &unstructured.Unstructured{}
					if err := u.UnmarshalJSON(d); err != nil {
						b.Fatal(err)
					}
					obj, err := tc.transform(u)
					if err != nil {
						b.Fatal(err)
					}
					kept = append(kept, obj)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perApp = float64(after.HeapAlloc-before.HeapAlloc) / n
			}
			runtime.KeepAlive(kept)
			b.ReportMetric(perApp, "kept-B/app")
		})
	}
}
