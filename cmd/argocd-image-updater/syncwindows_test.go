package main

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/window"
)

// TestProjectSyncWindows: the windows of an Application's AppProject that
// match it, read from the real API server as Argo CD's CRD stores them.
func TestProjectSyncWindows(t *testing.T) {
	k := testenv.SharedKube(t)
	windows := []any{
		map[string]any{"kind": "deny", "schedule": "0 12 * * *", "duration": "2h", "applications": []any{"shop-*"}},
		map[string]any{"kind": "deny", "schedule": "0 0 * * *", "duration": "1h", "namespaces": []any{"cart"}},
		map[string]any{"kind": "allow", "schedule": "0 9 * * 1-5", "duration": "8h", "timeZone": "Europe/Berlin",
			"clusters": []any{"https://prod.*"}, "namespaces": []any{"shop"}, "andOperator": true},
	}
	k.Create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"namespace": testenv.ArgoCDNamespace, "name": "shop"},
		"spec":     map[string]any{"sourceRepos": []any{"*"}, "syncWindows": windows},
	}})
	k.Create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"namespace": testenv.ArgoCDNamespace, "name": "broken"},
		"spec": map[string]any{"sourceRepos": []any{"*"}, "syncWindows": []any{
			map[string]any{"kind": "deny", "schedule": "0 25 * * *", "duration": "1h", "applications": []any{"*"}}}},
	}})
	app := func(name, project string) *application.Application {
		a, err := application.FromUnstructured(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"namespace": testenv.ArgoCDNamespace, "name": name,
				"annotations": map[string]any{"argocd-image-updater.argoproj.io/image-list": "nginx"}},
			"spec": map[string]any{"project": project, "destination": map[string]any{"server": "https://prod.example.com", "namespace": "shop"},
				"source": map[string]any{"repoURL": "https://git.example.com/deploy.git", "path": ".", "kustomize": map[string]any{}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	p := projectSyncWindows{dyn: dynamic.NewForConfigOrDie(k.Config), namespace: testenv.ArgoCDNamespace}
	// The windows of a's AppProject that match it, as the cycle matches
	// them.
	windowsOf := func(a *application.Application) (window.Set, error) {
		ws, err := p.SyncWindows(t.Context(), a.Project)
		if err != nil {
			return nil, err
		}
		d := a.Destination
		return window.Matching(ws, window.Target{Name: a.Name, Server: d.Server, Cluster: d.Name, DestinationNamespace: d.Namespace})
	}

	set, err := windowsOf(app("shop-prod", "shop"))
	if err != nil {
		t.Fatal(err)
	}
	if got := set.String(); got != "deny 0 12 * * * 2h0m0s; allow 0 9 * * 1-5 8h0m0s Europe/Berlin" {
		t.Errorf("windows of shop-prod: %s", got)
	}
	// 13:00 UTC on a Wednesday: in the allow window, and in the deny one.
	if set.Open(time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)) || !set.Open(time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)) {
		t.Error("the deny window does not win over the allow window, or the allow window is not open")
	}
	if set, err := windowsOf(app("other", "shop")); err != nil || set.String() != "allow 0 9 * * 1-5 8h0m0s Europe/Berlin" {
		t.Errorf("windows of other: %v, %v", set, err)
	}
	if _, err := windowsOf(app("shop-prod", "broken")); err == nil || !strings.Contains(err.Error(), `sync window 0: schedule "0 25 * * *"`) {
		t.Errorf("a window that does not parse: %v", err)
	}
	if _, err := windowsOf(app("shop-prod", "missing")); err == nil || !strings.Contains(err.Error(), "AppProject missing") {
		t.Errorf("a missing AppProject: %v", err)
	}
}
