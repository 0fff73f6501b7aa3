package main

import (
	"cmp"
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/window"
)

// projectSyncWindows reads the sync windows of Applications' AppProjects,
// in Argo CD's namespace, each time it is asked (once a cycle per
// Application with a change that asks for them).
type projectSyncWindows struct {
	dyn       dynamic.Interface
	namespace string
}

func (p projectSyncWindows) SyncWindows(ctx context.Context, app *application.Application) (window.Set, error) {
	name := cmp.Or(app.Project, "default")
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
	d := app.Destination
	set, err := window.Matching(windows, window.Target{Name: app.Name, Server: d.Server, Cluster: d.Name, DestinationNamespace: d.Namespace})
	if err != nil {
		return nil, fmt.Errorf("AppProject %s: %w", name, err)
	}
	return set, nil
}
