package healthgate

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// TestKubeStore: the state annotation and the ImageUpdater's status lists
// are written and removed without touching anything else, and
// health-gate-clear is removed only while it holds the value read.
func TestKubeStore(t *testing.T) {
	k := testenv.StartKube(t, testenv.WithImageUpdaterCRD(api.AddToScheme))
	dyn := dynamic.NewForConfigOrDie(k.Config)
	ctx := t.Context()
	apps := dyn.Resource(application.Resource()).Namespace("argocd")
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "shop", "namespace": "argocd", "annotations": map[string]any{"keep": "me", ClearAnnotation: "all"}},
		"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": "https://git.example.com/r.git", "path": "p"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "shop"}},
	}}
	if _, err := apps.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.Create(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "iu", Namespace: "argocd"},
		Spec: api.ImageUpdaterSpec{ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", Images: []api.ImageConfig{{Alias: "app", ImageName: "nginx"}}}}}})
	s := kubeStore{client: dyn}
	app := types.NamespacedName{Namespace: "argocd", Name: "shop"}
	annotations := func() map[string]string {
		t.Helper()
		got, err := apps.Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetAnnotations()
	}

	if err := s.saveAnnotation(ctx, app, `{"records":[]}`); err != nil {
		t.Fatal(err)
	}
	if a := annotations(); a[StateAnnotation] != `{"records":[]}` || a["keep"] != "me" {
		t.Errorf("annotations %v", a)
	}
	if err := s.saveAnnotation(ctx, app, ""); err != nil {
		t.Fatal(err)
	}
	if a := annotations(); a[StateAnnotation] != "" || a["keep"] != "me" {
		t.Errorf("annotations %v", a)
	}
	if err := s.removeClear(ctx, app, "1.0.0"); err != nil {
		t.Fatal(err)
	}
	if a := annotations(); a[ClearAnnotation] != "all" {
		t.Errorf("health-gate-clear removed though it holds another value: %v", a)
	}
	if err := s.removeClear(ctx, app, "all"); err != nil {
		t.Fatal(err)
	}
	if a := annotations(); a[ClearAnnotation] != "" || a["keep"] != "me" {
		t.Errorf("annotations %v", a)
	}
	if err := s.saveAnnotation(ctx, types.NamespacedName{Namespace: "argocd", Name: "gone"}, "{}"); err != nil {
		t.Errorf("an Application that is gone: %v", err)
	}

	iu := types.NamespacedName{Namespace: "argocd", Name: "iu"}
	ius := dyn.Resource(api.Resource()).Namespace("argocd")
	if _, err := ius.Patch(ctx, "iu", types.MergePatchType, []byte(`{"status":{"applicationsMatched":3}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	at := metav1.NewTime(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	records := []api.HealthGateRecord{{Application: "shop", Alias: "app", Version: "1.1.0", State: api.HealthGateReverted, WrittenAt: at}}
	skipped := []api.SkippedVersion{{Application: "shop", Alias: "app", Version: "1.1.0", SkippedAt: at}}
	if err := s.saveStatus(ctx, iu, records, skipped); err != nil {
		t.Fatal(err)
	}
	status := func() map[string]any {
		t.Helper()
		got, err := ius.Get(ctx, "iu", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, _, _ := unstructured.NestedMap(got.Object, "status")
		return st
	}
	st := status()
	if st["applicationsMatched"] != int64(3) || len(st["healthGate"].([]any)) != 1 || len(st["skippedVersions"].([]any)) != 1 {
		t.Errorf("status %v", st)
	}
	if err := s.saveStatus(ctx, iu, nil, skipped); err != nil {
		t.Fatal(err)
	}
	if st := status(); st["healthGate"] != nil || st["skippedVersions"] == nil || st["applicationsMatched"] != int64(3) {
		t.Errorf("status %v", st)
	}
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.saveStatus(ctx, iu, nil, nil); err == nil {
		t.Error("a failed write reported no error")
	}
}
