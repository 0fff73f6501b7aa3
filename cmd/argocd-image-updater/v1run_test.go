package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	imageupdaterv1alpha1 "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// Run as the v1.x line's CI and argocd-operator run it (/manager run,
// IMAGE_UPDATER_INTERVAL=0), the controller keeps running with no periodic
// cycle, and handles each ImageUpdater when it is created and when its spec
// changes.
func TestV1RunIntervalZero(t *testing.T) {
	t.Parallel()
	w := newControllerWorldOn(t, testenv.StartKube(t, testenv.WithImageUpdaterCRD(imageupdaterv1alpha1.AddToScheme)))
	w.env["IMAGE_UPDATER_INTERVAL"] = "0"
	repo := w.reg.Repo("eks-app")

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var stderr testenv.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- executeAs(ctx, "manager", []string{"run", "--kubeconfig", w.kubeconfig, "--registries-conf-path", w.conf,
			"--health-port", "0"}, &bytes.Buffer{}, &stderr, func(k string) (string, bool) { v, ok := w.env[k]; return v, ok })
	}()
	running := func() {
		t.Helper()
		select {
		case code := <-done:
			t.Fatalf("the controller exited (%d) with no --once:\n%s", code, stderr.String())
		default:
		}
	}
	poll.True(t, 60*time.Second, "the first cycle", func() bool {
		running()
		return strings.Contains(stderr.String(), "update cycle finished")
	})

	// Created after the first cycle: only its creation can get it checked.
	w.createWebApp(t, repo)
	iu := &imageupdaterv1alpha1.ImageUpdater{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ArgoCDNamespace, Name: "web"},
		Spec: imageupdaterv1alpha1.ImageUpdaterSpec{ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{
			NamePattern: "web",
			Images:      []imageupdaterv1alpha1.ImageConfig{{Alias: "app", ImageName: repo}},
		}}},
	}
	w.k.Create(t, iu)
	wantImage := func(tag string) func() bool {
		return func() bool {
			running()
			return slices.Equal(w.images(t, "web"), []string{repo + ":" + tag})
		}
	}
	poll.True(t, 60*time.Second, "the created ImageUpdater's update to v0.1.0", wantImage("v0.1.0"))
	key := types.NamespacedName{Namespace: iu.Namespace, Name: iu.Name}
	poll.True(t, 30*time.Second, "the ImageUpdater's status", func() bool {
		if err := w.k.Client.Get(t.Context(), key, iu); err != nil {
			t.Fatal(err)
		}
		return iu.Status.ApplicationsMatched == 1 && len(iu.Status.RecentUpdates) == 1
	})

	// A new version, then a change of the resource's spec: checked again.
	w.reg.PushImage(t, "eks-app", []string{"v0.2.0"})
	iu.Spec.ApplicationRefs[0].Images[0].CommonUpdateSettings = &imageupdaterv1alpha1.CommonUpdateSettings{AllowTags: ptr.To(`regexp:^v0\.[0-2]\.`)}
	if err := w.k.Client.Update(t.Context(), iu); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 60*time.Second, "the changed ImageUpdater's update to v0.2.0", wantImage("v0.2.0"))

	stop()
	if code := <-done; code != 0 {
		t.Fatalf("exit code %d:\n%s", code, stderr.String())
	}
}

// createWebApp creates the Application web, a Kustomize source running
// repo:v0.0.1, with no annotations: an ImageUpdater selects it.
func (w *controllerWorld) createWebApp(t *testing.T, repo string) {
	t.Helper()
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "web", "namespace": testenv.ArgoCDNamespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "https://git.example.com/d.git", "path": "p", "kustomize": map[string]any{}},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"},
		},
		"status": map[string]any{"summary": map[string]any{"images": []any{repo + ":v0.0.1"}}},
	}}
	if _, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Create(t.Context(), app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
