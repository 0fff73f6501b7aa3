package git

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// testApplicationSets: the versions of Applications an ApplicationSet
// generates land where it takes them: two list elements in its document in
// its parent's manifests (one commit for both), a value of its template, and the
// file its git files generator reads; an Application whose owner
// reference names an ApplicationSet of another UID, or whose ApplicationSet
// generates it from clusters, gets nothing written.
func (e *gitEnv) testApplicationSets(t *testing.T) {
	ns := e.argoNamespace(t, "appsets", true)
	listDoc := "# the teams\napiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: teams\nspec:\n  generators:\n  - list:\n      elements:\n" +
		"      - name: web\n        tag: v0.0.1 # web's\n      - name: api\n        tag: \"v0.0.1\"\n" +
		"  template:\n    metadata:\n      name: 'team-{{name}}'\n    spec:\n      project: default\n" +
		"      source:\n        repoURL: https://git.example.com/team.git\n        path: team\n        kustomize:\n          images: ['" + gitAppImage + ":{{tag}}', 'sidecar:1.0.0']\n" +
		"      destination: {server: https://kubernetes.default.svc, namespace: main}\n"
	otherDoc := strings.Replace(listDoc, "name: teams", "name: teams\n  namespace: elsewhere", 1)
	filesSet := map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet", "metadata": map[string]any{"name": "envs", "namespace": ns},
		"spec": map[string]any{"goTemplate": true,
			"generators": []any{map[string]any{"git": map[string]any{"repoURL": "REPO", "revision": "main", "files": []any{map[string]any{"path": "envs/*/config.json"}}}}},
			"template": map[string]any{"metadata": map[string]any{"name": "env-{{ .path.basename }}"},
				"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": "https://git.example.com/env.git", "helm": map[string]any{"parameters": []any{map[string]any{"name": "image.tag", "value": "{{ .image.tag }}"}}}},
					"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"}}}}}
	prodConfig := "{\n  \"image\": {\"tag\": \"v0.0.1\"},\n  \"replicas\": 2\n}\n"
	url := e.repo(t, "appsets", map[string]string{"apps/teams.yaml": listDoc, "apps/other.yaml": otherDoc,
		"envs/prod/config.json": prodConfig, "envs/dev/config.json": "{\"image\": {\"tag\": \"v0.0.1\"}}\n"})
	filesSet["spec"].(map[string]any)["generators"].([]any)[0].(map[string]any)["git"].(map[string]any)["repoURL"] = url

	sets := e.dyn.Resource(applicationSets).Namespace(ns)
	apps := e.dyn.Resource(application.Resource()).Namespace(ns)
	createSet := func(obj map[string]any, resources ...string) *unstructured.Unstructured {
		t.Helper()
		u, err := sets.Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var rs []any
		for _, r := range resources {
			rs = append(rs, map[string]any{"group": "argoproj.io", "version": "v1alpha1", "kind": "Application", "name": r, "namespace": ns})
		}
		u.Object["status"] = map[string]any{"resources": rs}
		if u, err = sets.UpdateStatus(t.Context(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return u
	}
	var teams map[string]any
	if err := yaml.Unmarshal([]byte(listDoc), &teams); err != nil {
		t.Fatal(err)
	}
	teams["metadata"].(map[string]any)["namespace"] = ns
	teams["metadata"].(map[string]any)["annotations"] = map[string]any{trackingAnnotation: "root:argoproj.io/ApplicationSet:" + ns + "/teams"}
	teamSet := createSet(teams, "team-web", "team-api")
	envSet := createSet(filesSet, "env-prod", "env-dev")
	clusterSet := createSet(map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet", "metadata": map[string]any{"name": "clusters", "namespace": ns},
		"spec": map[string]any{"generators": []any{map[string]any{"clusters": map[string]any{}}},
			"template": map[string]any{"metadata": map[string]any{"name": "cl-{{name}}"}, "spec": map[string]any{"project": "default",
				"source": map[string]any{"repoURL": "https://git.example.com/team.git"}, "destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"}}}}}, "cl-in-cluster")
	if _, err := apps.Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "root", "namespace": ns},
		"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": url, "path": "apps", "targetRevision": "main"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns}},
		"status": map[string]any{"resources": []any{map[string]any{"group": "argoproj.io", "version": "v1alpha1", "kind": "ApplicationSet", "namespace": ns, "name": "teams"}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	yes := true
	generated := func(name string, owner *unstructured.Unstructured, uid string) {
		t.Helper()
		ref := metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: owner.GetName(), UID: owner.GetUID(), Controller: &yes}
		if uid != "" {
			ref.UID = "forged"
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"project": "default", "source": map[string]any{"repoURL": "https://git.example.com/team.git"}, "destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"}}}}
		obj.SetOwnerReferences([]metav1.OwnerReference{ref})
		if _, err := apps.Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	generated("team-web", teamSet, "")
	generated("team-api", teamSet, "")
	generated("env-prod", envSet, "")
	generated("team-forged", teamSet, "forged")
	generated("cl-in-cluster", clusterSet, "")

	counted := &countedAppSets{AppSets: NewKubeAppSets(e.dyn, ns)}
	w := e.writer(t, ns, WithApplicationSets(counted))
	change := func(name string, images ...writeback.ImageUpdate) writeback.Change {
		src := application.Source{Index: -1, RepoURL: "https://git.example.com/team.git", Path: "team", TargetRevision: "main", Type: application.SourceKustomize}
		app := &application.Application{Namespace: ns, Name: name, Project: "default", Sources: []application.Source{src}, ApplicationSet: "teams"}
		app.Settings.WriteBack = settings.WriteBack{Method: settings.WriteBackGit, Target: mustTarget("applicationset")}
		return writeback.Change{App: app, Source: src, Images: images}
	}
	img := func(image, from, to string) writeback.ImageUpdate {
		return writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(image)}, New: imageref.ParseVersion(to), Old: imageref.ParseVersion(from)}
	}
	before := len(e.git.Log(t, "appsets", "main"))
	results := w.Write(t.Context(), []writeback.Change{
		change("team-web", img(gitAppImage, "v0.0.1", "v0.0.2"), img("sidecar", "1.0.0", "1.1.0")),
		change("team-api", img(gitAppImage, "v0.0.1", "v0.0.3")),
		change("env-prod", img(gitAppImage, "v0.0.1", "v0.0.4")),
		change("team-forged", img(gitAppImage, "v0.0.1", "v0.0.5")),
		change("cl-in-cluster", img(gitAppImage, "v0.0.1", "v0.0.6")),
	})
	for i, name := range []string{"team-web", "team-api", "env-prod"} {
		if r := results[i]; r.Err != nil || !r.Written {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if r := results[3]; r.Err == nil || !strings.Contains(r.Err.Error(), "another UID") {
		t.Errorf("team-forged: %+v", r)
	}
	// A clusters generator's parameters are in no file.
	if r := results[4]; r.Err == nil || !strings.Contains(r.Err.Error(), "generator of kind clusters") {
		t.Errorf("cl-in-cluster: %+v", r)
	}
	want := strings.NewReplacer("tag: v0.0.1 # web's", "tag: v0.0.2 # web's", "tag: \"v0.0.1\"", "tag: \"v0.0.3\"", "'sidecar:1.0.0'", "'sidecar:1.1.0'").Replace(listDoc)
	if got := e.git.ReadFile(t, "appsets", "main", "apps/teams.yaml"); got != want {
		t.Errorf("apps/teams.yaml:\n%s\nwant\n%s", got, want)
	}
	if got := e.git.ReadFile(t, "appsets", "main", "apps/other.yaml"); got != otherDoc {
		t.Errorf("another namespace's ApplicationSet changed:\n%s", got)
	}
	if got, want := e.git.ReadFile(t, "appsets", "main", "envs/prod/config.json"), strings.Replace(prodConfig, "v0.0.1", "v0.0.4", 1); got != want {
		t.Errorf("envs/prod/config.json:\n%s\nwant\n%s", got, want)
	}
	if got := e.git.ReadFile(t, "appsets", "main", "envs/dev/config.json"); !strings.Contains(got, "v0.0.1") {
		t.Errorf("envs/dev/config.json changed: %s", got)
	}
	// Each ApplicationSet is read once for the Write, however many of its
	// Applications it covers (teams: three).
	if counted.reads != 3 {
		t.Errorf("%d ApplicationSet reads, want one each for teams, envs and clusters", counted.reads)
	}
	// One commit for each ApplicationSet: teams' two Applications share one.
	if n := len(e.git.Log(t, "appsets", "main")) - before; n != 2 {
		t.Errorf("%d commits, want one per ApplicationSet", n)
	}
	if results[0].Commit == "" || results[0].Commit != results[1].Commit || results[2].Commit == results[0].Commit {
		t.Errorf("commits: %s %s %s, want team-web's and team-api's the same", results[0].Commit, results[1].Commit, results[2].Commit)
	}
}

// countedAppSets counts the ApplicationSets read.
type countedAppSets struct {
	AppSets
	reads int
}

func (c *countedAppSets) ApplicationSet(ctx context.Context, namespace, name string) (AppSet, error) {
	c.reads++
	return c.AppSets.ApplicationSet(ctx, namespace, name)
}
