package e2e

import (
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

var applicationSets = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}

// appSetScenario: an Application that Argo CD's ApplicationSet controller
// generates from a git files generator gets its new version written into
// the file that generates it; the ApplicationSet controller renders the
// Application anew from the commit, and Argo CD deploys the new image.
func (w *world) appSetScenario(t *testing.T) {
	w.grantApplicationSets(t)
	w.argo.StartApplicationSets(t)
	app := w.push(t, "appset-app", "v0.0.1")
	w.push(t, "appset-app", "v0.0.2")
	w.git.CommitFiles(t, "deploy", "main", "add the ApplicationSet's overlay", overlay("appset", w.reg))
	// The files the generator reads, in a repository of their own, as
	// teams keep their environments' settings.
	w.git.CreateRepo(t, "appset-config", "", map[string]string{"appset/envs/staging/config.json": "{\n  \"image\": {\"tag\": \"v0.0.1\"}\n}\n"})
	w.argo.AddRepository(t, "repo-appset-config", w.git.HTTPRepoURL("appset-config"), w.git.Username, w.git.Password)
	name := "appset-staging"
	w.k.CreateNamespace(t, name)
	set := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
		"metadata": map[string]any{"name": "envs", "namespace": testenv.ArgoCDNamespace},
		"spec": map[string]any{
			"goTemplate":        true,
			"goTemplateOptions": []any{"missingkey=error"},
			"generators": []any{map[string]any{"git": map[string]any{
				"repoURL": w.git.HTTPRepoURL("appset-config"), "revision": "main",
				"files":               []any{map[string]any{"path": "appset/envs/*/config.json"}},
				"requeueAfterSeconds": 2,
			}}},
			"template": map[string]any{
				"metadata": map[string]any{"name": "appset-{{ .path.basename }}", "annotations": prefixed(map[string]string{
					"image-list":          "app=" + app,
					"app.update-strategy": "semver",
					"write-back-method":   "git",
					"write-back-target":   "applicationset",
				})},
				"spec": map[string]any{
					"project": "default",
					"source": map[string]any{"repoURL": w.git.HTTPRepoURL("deploy"), "path": "appset/overlays/production", "targetRevision": "main",
						"kustomize": map[string]any{"images": []any{app + ":{{ .image.tag }}"}}},
					"destination": map[string]any{"server": testenv.InCluster, "namespace": "appset-{{ .path.basename }}"},
					"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}},
				},
			},
		},
	}}
	if _, err := w.dyn.Resource(applicationSets).Namespace(testenv.ArgoCDNamespace).Create(t.Context(), set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The repo-server keeps what a branch points at for minutes: a git
	// webhook to Argo CD asks the ApplicationSet controller to read it
	// anew, as this annotation does, which the controller removes once
	// read. It is set again while the test waits: one set in the middle of
	// a reconcile may be read before the commit it is about arrives.
	const refreshAnnotation = "argocd.argoproj.io/application-set-refresh"
	sets := w.dyn.Resource(applicationSets).Namespace(testenv.ArgoCDNamespace)
	refresh := func() {
		t.Helper()
		obj, err := sets.Get(t.Context(), "envs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, pending := obj.GetAnnotations()[refreshAnnotation]; pending {
			return
		}
		patch := []byte(`{"metadata":{"annotations":{"` + refreshAnnotation + `":"true"}}}`)
		if _, err := sets.Patch(t.Context(), "envs", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, deployTimeout, "the ApplicationSet controller to generate "+name, func() (bool, string) {
		refresh()
		_, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), name, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	w.waitImages(t, w.cs, name, "front", app+":v0.0.1", w.reg.Repo("appset-web")+":v0.0.1")

	w.runOnce(t, name)
	config := w.git.ReadFile(t, "appset-config", "main", "appset/envs/staging/config.json")
	if want := "{\n  \"image\": {\"tag\": \"v0.0.2\"}\n}\n"; config != want {
		t.Fatalf("appset/envs/staging/config.json:\n%s\nwant\n%s", config, want)
	}
	// The ApplicationSet controller renders the Application from the
	// commit: its spec, not only the Deployment, holds the new version.
	testenv.WaitFor(t, deployTimeout, "the ApplicationSet controller to render "+app+":v0.0.2 into "+name, func() (bool, string) {
		refresh()
		images, _, _ := unstructured.NestedStringSlice(w.application(t, name).Object, "spec", "source", "kustomize", "images")
		return strings.Join(images, ",") == app+":v0.0.2", fmt.Sprint(images)
	})
	w.waitImages(t, w.cs, name, "front", app+":v0.0.2", w.reg.Repo("appset-web")+":v0.0.1")
}

// appSetListScenario: an Application generated from a list generator's
// element gets its new version written into that element, in the
// ApplicationSet's manifest in the repository of the Application that
// deploys it; that Application's sync updates the ApplicationSet, whose
// controller renders the Application anew, and Argo CD deploys it.
func (w *world) appSetListScenario(t *testing.T) {
	w.grantApplicationSets(t)
	w.argo.StartApplicationSets(t)
	app := w.push(t, "appset-list-app", "v0.0.1")
	w.push(t, "appset-list-app", "v0.0.2")
	set := fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: teams
  namespace: argocd
spec:
  generators:
  - list:
      elements:
      - env: prod
        tag: v0.0.1 # the version prod runs
  template:
    metadata:
      name: 'appset-list-{{env}}'
      annotations:
        argocd-image-updater.argoproj.io/image-list: app=%s
        argocd-image-updater.argoproj.io/app.update-strategy: semver
        argocd-image-updater.argoproj.io/write-back-method: git
        argocd-image-updater.argoproj.io/write-back-target: applicationset
    spec:
      project: default
      source:
        repoURL: %s
        path: appset-list/overlays/production
        targetRevision: main
        kustomize:
          images: ['%s:{{tag}}']
      destination:
        server: %s
        namespace: 'appset-list-{{env}}'
      syncPolicy:
        automated: {prune: true, selfHeal: true}
`, app, w.git.HTTPRepoURL("deploy"), app, testenv.InCluster)
	files := overlay("appset-list", w.reg)
	files["appset-list/sets/teams.yaml"] = set
	w.git.CommitFiles(t, "deploy", "main", "add the teams ApplicationSet", files)
	name := "appset-list-prod"
	w.k.CreateNamespace(t, name)
	// The parent deploys the ApplicationSet into Argo CD's namespace.
	w.createAppSpec(t, "appset-root", map[string]any{"source": map[string]any{
		"repoURL": w.git.HTTPRepoURL("deploy"), "path": "appset-list/sets", "targetRevision": "main"}}, testenv.InCluster, nil)
	w.waitCreated(t, name, "appset-root")
	w.waitImages(t, w.cs, name, "front", app+":v0.0.1", w.reg.Repo("appset-list-web")+":v0.0.1")

	w.runOnce(t, name)
	if got, want := w.git.ReadFile(t, "deploy", "main", "appset-list/sets/teams.yaml"), strings.Replace(set, "tag: v0.0.1 #", "tag: v0.0.2 #", 1); got != want {
		t.Fatalf("appset-list/sets/teams.yaml:\n%s\nwant\n%s", got, want)
	}
	testenv.WaitFor(t, deployTimeout, "the ApplicationSet controller to render "+app+":v0.0.2 into "+name, func() (bool, string) {
		images, _, _ := unstructured.NestedStringSlice(w.application(t, name).Object, "spec", "source", "kustomize", "images")
		return strings.Join(images, ",") == app+":v0.0.2", fmt.Sprint(images, "; appset-root: ", w.appState(t, "appset-root"))
	})
	w.waitImages(t, w.cs, name, "front", app+":v0.0.2", w.reg.Repo("appset-list-web")+":v0.0.1")
}

// grantApplicationSets gives the updater's ServiceAccount what the
// applicationset target needs beyond the install, as docs/write-back.md
// tells the operator to.
func (w *world) grantApplicationSets(t *testing.T) {
	t.Helper()
	const name = "argocd-image-updater-applicationsets"
	meta := metav1.ObjectMeta{Name: name, Namespace: testenv.ArgoCDNamespace}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"argoproj.io"}, Resources: []string{"applicationsets"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "argocd-image-updater", Namespace: testenv.ArgoCDNamespace}}}
	if _, err := w.cs.RbacV1().Roles(testenv.ArgoCDNamespace).Create(t.Context(), role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := w.cs.RbacV1().RoleBindings(testenv.ArgoCDNamespace).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
