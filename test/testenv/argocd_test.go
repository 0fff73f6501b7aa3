package testenv

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// TestApplicationSets: Argo CD's ApplicationSet controller renders an
// Application per element of a list generator, owned by the
// ApplicationSet, and renders it again when its element changes.
func TestApplicationSets(t *testing.T) {
	k := StartKube(t, WithArgoCDCRDs(t), WithApplicationSetCRD())
	argo := StartArgoCD(t, k)
	k.CreateAppProject(t, ArgoCDNamespace, "default", []string{"*"}, nil)
	argo.StartApplicationSets(t)

	dyn := dynamic.NewForConfigOrDie(k.Config)
	appsets := dyn.Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}).Namespace(ArgoCDNamespace)
	apps := dyn.Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}).Namespace(ArgoCDNamespace)
	elements := func(tagB string) []any {
		return []any{
			map[string]any{"name": "a", "tag": "v1"},
			map[string]any{"name": "b", "tag": tagB},
		}
	}
	k.Create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
		"metadata": map[string]any{"name": "gen", "namespace": ArgoCDNamespace},
		"spec": map[string]any{
			"generators": []any{map[string]any{"list": map[string]any{"elements": elements("v2")}}},
			"template": map[string]any{
				"metadata": map[string]any{"name": "gen-{{name}}", "annotations": map[string]any{"tag": "{{tag}}"}},
				"spec": map[string]any{
					"project":     "default",
					"destination": map[string]any{"server": InCluster, "namespace": "gen-{{name}}"},
					"source":      map[string]any{"repoURL": "https://git.example.com/deploy.git", "path": ".", "targetRevision": "HEAD"},
				},
			},
		},
	}})

	// generated waits until Application name exists, owned by the
	// ApplicationSet, with annotation tag.
	generated := func(name, tag string) {
		t.Helper()
		WaitFor(t, time.Minute, fmt.Sprintf("Application %s generated with tag %s", name, tag), func() (bool, string) {
			app, err := apps.Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			owned := slices.ContainsFunc(app.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
				return r.Kind == "ApplicationSet" && r.Name == "gen"
			})
			got := app.GetAnnotations()["tag"]
			return owned && got == tag, fmt.Sprintf("owners %v, tag %q", app.GetOwnerReferences(), got)
		})
	}
	generated("gen-a", "v1")
	generated("gen-b", "v2")

	// A merge patch replaces the generators whole, so it needs no
	// resourceVersion that the controller's status writes would outdate.
	patch := map[string]any{"spec": map[string]any{"generators": []any{map[string]any{"list": map[string]any{"elements": elements("v3")}}}}}
	data, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appsets.Patch(t.Context(), "gen", types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	generated("gen-b", "v3")
	generated("gen-a", "v1")

	// status.resources lists the Applications that existed when a
	// reconcile began, so the ones it created show from the next one on,
	// which the change above caused (creating an owned Application
	// causes none).
	WaitFor(t, time.Minute, "the ApplicationSet's status.resources to list both Applications", func() (bool, string) {
		appset, err := appsets.Get(t.Context(), "gen", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		resources, _, _ := unstructured.NestedSlice(appset.Object, "status", "resources")
		var names []string
		for _, r := range resources {
			if m, ok := r.(map[string]any); ok {
				names = append(names, fmt.Sprint(m["name"]))
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"gen-a", "gen-b"}) {
			return false, fmt.Sprint(resources)
		}
		t.Logf("status.resources: %v", resources)
		return true, ""
	})
}
