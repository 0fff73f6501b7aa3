package appwatch

import (
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
			if _, err := s.(*Snapshot).Application(); err != nil {
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
