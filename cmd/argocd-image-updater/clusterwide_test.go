package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// kustomize renders a kustomization of manifests/.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out := testenv.Kustomize(t, filepath.Join("..", "..", "manifests", dir))
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(out), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// TestRunWithTheClusterWideInstall runs the controller as the ServiceAccount,
// under the RBAC of manifests/cluster-wide and with the environment its
// Deployment sets: an Application in another namespace than Argo CD's is
// updated, with its pull Secret and its events in that namespace, and the
// ServiceAccount may do nothing more there.
func TestRunWithTheClusterWideInstall(t *testing.T) {
	t.Parallel()
	w := newClusterWideWorld(t)

	// Credentials only from pull Secrets beside the Applications, so that
	// reading them is part of what is tested.
	if err := os.WriteFile(w.conf, []byte(fmt.Sprintf("registries:\n- name: test\n  prefix: %s\n  api_url: http://%s\n", w.reg.Host, w.reg.Host)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{testenv.ArgoCDNamespace, "team-a"} {
		w.k.CreateNamespace(t, ns)
		w.createPullSecret(t, ns, "regcred")
		w.createAppIn(t, ns, "shop", map[string]string{settings.AnnotationPrefix + "app.pull-secret": "pullsecret:" + ns + "/regcred"})
	}

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var stderr testenv.SyncBuffer
	go func() { done <- w.run(ctx, &stderr, "--interval", "1h") }()
	cs := kubernetes.NewForConfigOrDie(w.k.Config)
	want := []string{w.reg.Repo("eks-app") + ":v0.1.0"}
	poll.True(t, 60*time.Second, "the Applications shop in team-a and argocd to be updated, with an ImagesUpdated event in team-a", func() bool {
		events, err := cs.CoreV1().Events("team-a").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=ImagesUpdated"})
		return err == nil && len(events.Items) > 0 &&
			slices.Equal(w.imagesIn(t, "team-a", "shop"), want) && slices.Equal(w.imagesIn(t, testenv.ArgoCDNamespace, "shop"), want)
	})
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d:\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "forbidden") {
		t.Errorf("the cluster-wide RBAC was not enough:\n%s", stderr.String())
	}

	// ... and not broader than the Role.
	sa := w.k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater")
	saCS := kubernetes.NewForConfigOrDie(sa)
	apps := dynamic.NewForConfigOrDie(sa).Resource(application.Resource()).Namespace("team-a")
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName}}
	for what, err := range map[string]error{
		"delete an Application": apps.Delete(t.Context(), "shop", metav1.DeleteOptions{}),
		"create an Application": errOf(apps.Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": map[string]any{"name": "x"}}}, metav1.CreateOptions{})),
		"read ConfigMaps":       errOf(saCS.CoreV1().ConfigMaps("team-a").List(t.Context(), metav1.ListOptions{})),
		"take a Lease":          errOf(saCS.CoordinationV1().Leases("team-a").Create(t.Context(), lease, metav1.CreateOptions{})),
		"write a Secret":        errOf(saCS.CoreV1().Secrets("team-a").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})),
		"list Pods":             errOf(saCS.CoreV1().Pods("team-a").List(t.Context(), metav1.ListOptions{})),
		"delete an Event":       saCS.CoreV1().Events("team-a").DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{}),
		"list Namespaces":       errOf(saCS.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the ServiceAccount can %s in team-a (error %v)", what, err)
		}
	}
}

// newClusterWideWorld is a controllerWorld with the RBAC of
// manifests/cluster-wide and the environment its Deployment sets.
func newClusterWideWorld(t *testing.T) *controllerWorld {
	t.Helper()
	w := newControllerWorld(t) // the base's Role and RoleBinding
	w.env = map[string]string{}
	for _, o := range kustomize(t, "cluster-wide") {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding":
			w.k.Create(t, o)
		case "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.ValueFrom == nil {
					w.env[e.Name] = e.Value
				}
			}
		}
	}
	if w.env["IMAGE_UPDATER_APPLICATION_NAMESPACES"] == "" {
		t.Fatalf("the Deployment sets no application namespaces: %v", w.env)
	}
	return w
}

// createPullSecret creates an image pull Secret for the test registry.
func (w *controllerWorld) createPullSecret(t *testing.T, namespace, name string) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(w.reg.Username + ":" + w.reg.Password))
	w.k.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, w.reg.Host, auth))},
	})
}
