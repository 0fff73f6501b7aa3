package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// badVersions is how many broken versions BenchmarkBadWriteToRevert
// writes.
const badVersions = 10

// BenchmarkBadWriteToRevert times the health gate's answer to a version
// that breaks its Application: from the write of the bad version (the
// Application's patch, or the commit in git) to the write of the version
// before it, through Argo CD v3.2.11 deploying it, its health assessment
// (healthLua makes the version Degraded) and the gate's write-back. One
// image, two Applications using it: one written back to the Application,
// one to a kustomization in git (then refreshed). It reports the median
// and the 99th percentile of each over the bad versions of an iteration
// (with 10 the 99th is the slowest).
func BenchmarkBadWriteToRevert(b *testing.B) {
	w := newGateWorld(b, func(reg *testenv.Registry) map[string]string {
		files := overlay("revert-argocd", reg)
		for path, content := range overlay("revert-git", reg) {
			files[path] = strings.ReplaceAll(content, "revert-git-app", "revert-argocd-app")
		}
		return files
	})
	app := w.push(b, "revert-argocd-app", "1.0.0")
	w.push(b, "revert-argocd-web", "v0.0.1")
	w.push(b, "revert-git-web", "v0.0.1")
	annotations := func(extra ...string) map[string]string {
		m := map[string]string{"image-list": "app=" + app, "app.update-strategy": "semver", "app.health-gate": "1m"}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	w.createApp(b, "revert-argocd", "revert-argocd/overlays/production", nil, annotations("write-back-method", "argocd"))
	w.createApp(b, "revert-git", "revert-git/overlays/production", nil, annotations("write-back-method", "git", "write-back-target", "kustomization"))
	deployed := func(tag string) {
		w.waitDeployed(b, "revert-argocd", "front", app+":"+tag, w.reg.Repo("revert-argocd-web")+":v0.0.1")
		w.waitDeployed(b, "revert-git", "front", app+":"+tag, w.reg.Repo("revert-git-web")+":v0.0.1")
	}
	deployed("v0.0.1")
	w.runOnce(b, "revert-*")
	deployed("1.0.0")
	// A cycle every 2 s writes each bad version soon after its push; the
	// time measured starts at the write.
	w.startController(b, "revert-*", "--interval", "2s")

	newTag := regexp.MustCompile(`newTag: (\S+)`)
	written := map[string]func() string{
		"argocd": func() string {
			for _, img := range testenv.KustomizeImages(b, w.application(b, "revert-argocd")) {
				if tag, ok := strings.CutPrefix(img, app+":"); ok {
					return tag
				}
			}
			return ""
		},
		"git": func() string {
			m := newTag.FindStringSubmatch(w.git.ReadFile(b, "deploy", "main", "revert-git/overlays/production/kustomization.yaml"))
			if m == nil {
				return ""
			}
			return m[1]
		},
	}
	apps := map[string]string{"argocd": "revert-argocd", "git": "revert-git"}
	// degraded tells whether Argo CD says the Application is Degraded
	// while it runs bad.
	degraded := func(method, bad string) bool {
		obj := w.application(b, apps[method]).Object
		health, _, _ := unstructured.NestedString(obj, "status", "health", "status")
		images, _, _ := unstructured.NestedStringSlice(obj, "status", "summary", "images")
		return health == "Degraded" && slices.Contains(images, app+":"+bad)
	}
	took, gate := map[string][]time.Duration{}, map[string][]time.Duration{}
	minor := 1
	b.ResetTimer()
	for range b.N {
		for range badVersions {
			bad := fmt.Sprintf("1.%d.0", minor)
			minor += 2
			w.push(b, "revert-argocd-app", bad)
			at, seen := map[string]time.Time{}, map[string]time.Time{}
			done := map[string]bool{}
			testenv.WaitFor(b, 2*time.Minute, bad+" written and written back", func() (bool, string) {
				for method, version := range written {
					switch v := version(); {
					case done[method]:
					case at[method].IsZero():
						if v == bad {
							at[method] = time.Now()
						}
					case v == "1.0.0":
						took[method] = append(took[method], time.Since(at[method]))
						if !seen[method].IsZero() {
							gate[method] = append(gate[method], time.Since(seen[method]))
						}
						done[method] = true
					case seen[method].IsZero() && degraded(method, bad):
						seen[method] = time.Now()
					}
				}
				return len(done) == len(written), fmt.Sprint(at)
			})
			b.StopTimer()
			deployed("1.0.0")
			b.StartTimer()
		}
	}
	b.StopTimer()
	for method, ds := range took {
		b.ReportMetric(percentile(ds, 50).Seconds(), method+"-p50-s")
		b.ReportMetric(percentile(ds, 99).Seconds(), method+"-p99-s")
		// The gate's own part: from Argo CD reporting Degraded (as polled
		// here) to the write-back; a revert faster than the poll is not
		// counted.
		b.ReportMetric(percentile(gate[method], 50).Seconds(), method+"-gate-p50-s")
		b.ReportMetric(float64(len(gate[method])), method+"-gate-n")
	}
}
