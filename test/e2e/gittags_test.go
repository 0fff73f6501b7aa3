package e2e

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// gitTagScenario: an Application pinned to a tag of its repository moves
// to the newest tag within its constraint, listed with the repository
// credentials Argo CD has; Argo CD deploys what the new tag holds.
func (w *world) gitTagScenario(t *testing.T) {
	app := w.push(t, "tagged-app", "v0.0.1")
	w.git.Tag(t, "deploy", "v1.0.0", "main")
	w.git.CommitFiles(t, "deploy", "main", "release 1.1.0", map[string]string{
		"tagged/front.yaml": deployment("front", fmt.Sprintf("      - name: app\n        image: %s:v0.0.2\n", app)),
	})
	w.git.Tag(t, "deploy", "v1.1.0", "main")
	w.git.CommitFiles(t, "deploy", "main", "release 2.0.0", map[string]string{
		"tagged/front.yaml": deployment("front", fmt.Sprintf("      - name: app\n        image: %s:v0.0.3\n", app)),
	})
	w.git.Tag(t, "deploy", "v2.0.0", "main")

	w.createApp(t, "tagged", "tagged", map[string]any{"targetRevision": "v1.0.0"}, map[string]string{
		"git-tag-list":      "config=" + w.git.HTTPRepoURL("deploy") + ":^1",
		"write-back-method": "argocd",
	})
	w.waitImages(t, w.cs, "tagged", "front", app+":v0.0.1")
	w.runOnce(t, "tagged")
	if rev, _, _ := unstructured.NestedString(w.application(t, "tagged").Object, "spec", "source", "targetRevision"); rev != "v1.1.0" {
		t.Fatalf("targetRevision %q, want v1.1.0 (v2.0.0 is outside ^1)", rev)
	}
	w.waitImages(t, w.cs, "tagged", "front", app+":v0.0.2")
}
