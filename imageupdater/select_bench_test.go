package imageupdater

import (
	"fmt"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
)

// objects is a namespace of Applications, none annotated.
type objects []*application.Snapshot

func (objects) Applications(...imageref.Option) []*application.Application { return nil }
func (o objects) InNamespace(string) []*application.Snapshot               { return o }

// BenchmarkSelect is what each cycle spends turning 5 ImageUpdaters with 5
// images each into the settings of the 500 Applications they select:
// reading the resources' settings each time (read), or once per
// generation as a Source does (kept).
func BenchmarkSelect(b *testing.B) {
	var apps objects
	for i := range 500 {
		apps = append(apps, application.SnapshotOf(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": fmt.Sprintf("team-%d-app-%03d", i%5, i), "namespace": "argocd"},
			"spec": map[string]any{"source": map[string]any{
				"repoURL": "https://git.example.com/deploy.git", "path": "apps", "kustomize": map[string]any{},
			}},
		}}))
	}
	var resources []*api.ImageUpdater
	for team := range 5 {
		uid := types.UID(fmt.Sprintf("uid-%d", team))
		var images []api.ImageConfig
		for i := range 5 {
			images = append(images, api.ImageConfig{Alias: fmt.Sprintf("img-%d", i), ImageName: fmt.Sprintf("registry.example.com/img-%d:1.x", i)})
		}
		resources = append(resources, &api.ImageUpdater{
			ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: fmt.Sprintf("team-%d", team), UID: uid, Generation: 1},
			Spec:       api.ImageUpdaterSpec{ApplicationRefs: []api.ApplicationRef{{NamePattern: fmt.Sprintf("team-%d-*", team), Images: images}}},
		})
	}
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			selected, errs := Select(resources, apps)
			if len(selected) != 500 || len(errs) != 0 {
				b.Fatalf("%d Applications selected, errors %v", len(selected), errs)
			}
		}
	})
	// As a Source selects: the settings read once per generation.
	b.Run("kept", func(b *testing.B) {
		parsed := &parsedSettings{byUID: map[types.UID]*resourceSettings{}}
		rs := make([]resource, len(resources))
		for i, iu := range resources {
			rs[i] = resource{obj: iu}
		}
		b.ReportAllocs()
		for b.Loop() {
			if selected := selectApps(rs, apps, parsed, slog.New(slog.DiscardHandler), nil); len(selected) != 500 {
				b.Fatalf("%d Applications selected", len(selected))
			}
		}
	})
}
