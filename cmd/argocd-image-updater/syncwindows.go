package main

import (
	"cmp"
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/window"
)

// projectSyncWindows reads the sync windows of AppProjects, in Argo CD's
// namespace; the cycle asks each once a pass, for the Applications that
// ask for them.
type projectSyncWindows struct {
	dyn       dynamic.Interface
	namespace string
}

func (p projectSyncWindows) SyncWindows(ctx context.Context, project string) ([]window.ProjectWindow, error) {
	name := cmp.Or(project, "default")
	obj, err := p.dyn.Resource(repoaccess.AppProjectsResource()).Namespace(p.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("AppProject %s: %w", name, err)
	}
	raw, _, _ := unstructured.NestedSlice(obj.Object, "spec", "syncWindows")
	windows := make([]window.ProjectWindow, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		list := func(k string) []string { s, _, _ := unstructured.NestedStringSlice(m, k); return s }
		and, _ := m["andOperator"].(bool)
		windows = append(windows, window.ProjectWindow{
			Kind: str("kind"), Schedule: str("schedule"), Duration: str("duration"), TimeZone: str("timeZone"),
			Applications: list("applications"), Clusters: list("clusters"), Namespaces: list("namespaces"), And: and,
		})
	}
	return windows, nil
}
