package cycle

import (
	"fmt"
	"runtime"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
)

// BenchmarkPlan is what planning one cycle of 20,000 Applications costs,
// three images each, whose settings repeat 20 distinct ones (teams copy
// them): the time and allocations of the plan, and the heap its jobs keep
// for the rest of the cycle (cycle-B/app). The settings are read before,
// as the watcher reads them once per Application version.
func BenchmarkPlan(b *testing.B) {
	const n, distinct = 20_000, 20
	apps := make([]*application.Application, n)
	for i := range apps {
		team := i % distinct
		ann := map[string]any{}
		set := func(k, v string) { ann[settings.AnnotationPrefix+k] = v }
		set("image-list", fmt.Sprintf("api=registry.example.com/team-%d/api:~1.%d, web=registry.example.com/team-%d/web:~2.%d, worker=registry.example.com/team-%d/worker", team, team, team, team, team))
		set("allow-tags", fmt.Sprintf(`regexp:^v?[0-9]+\.%d\.[0-9]+$`, team))
		set("ignore-tags", "*-rc*, latest")
		set("worker.update-strategy", "newest-build")
		set("pull-secret", fmt.Sprintf("pullsecret:argocd/team-%d", team))
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": fmt.Sprintf("app-%05d", i), "namespace": "argocd", "annotations": ann},
			"spec": map[string]any{"source": map[string]any{
				"repoURL": "https://git.example.com/deploy.git", "path": fmt.Sprintf("apps/%d", i), "kustomize": map[string]any{},
			}},
			"status": map[string]any{"summary": map[string]any{"images": []any{
				fmt.Sprintf("registry.example.com/team-%d/api:1.%d.0", team, team),
				fmt.Sprintf("registry.example.com/team-%d/web:2.%d.0", team, team),
				fmt.Sprintf("registry.example.com/team-%d/worker:build-1", team),
			}}},
		}}
		app, err := application.FromUnstructured(obj)
		if err != nil {
			b.Fatal(err)
		}
		apps[i] = app
	}
	defaults := []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	b.ReportAllocs()
	var kept [][]*job
	var perApp float64
	for b.Loop() {
		kept = make([][]*job, 0, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		plan := newPlanner("argocd", defaults)
		for _, app := range apps {
			jobs, _, problems := plan.application(app)
			if len(jobs) != 3 || len(problems) != 0 {
				b.Fatalf("%d jobs, problems %v", len(jobs), problems)
			}
			kept = append(kept, jobs)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perApp = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	}
	runtime.KeepAlive(kept)
	b.ReportMetric(perApp, "cycle-B/app")
}
