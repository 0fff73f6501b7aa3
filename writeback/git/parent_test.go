package git

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// testAppOfApps: an Application created by a parent's manifests gets its
// images written into its document there; one whose tracking names a
// parent that does not manage it gets nothing written.
func (e *gitEnv) testAppOfApps(t *testing.T) {
	ns := e.argoNamespace(t, "app-of-apps", true)
	childDoc := "# the platform's applications\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: child\n" +
		"spec:\n  project: default\n  source:\n    repoURL: https://git.example.com/child.git\n    path: child # its overlay\n    targetRevision: main\n" +
		"  destination:\n    server: https://kubernetes.default.svc\n    namespace: main\n"
	other := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: other\nspec:\n  source:\n    path: other\n"
	webDoc := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\n" +
		"spec:\n  source:\n    repoURL: https://charts.example.com\n    chart: web\n    targetRevision: 1.0.0 # the chart's version\n"
	url := e.repo(t, "app-of-apps", map[string]string{"apps/child.yaml": childDoc, "apps/more/other.yaml": other, "apps/web.yaml": webDoc})

	apps := e.dyn.Resource(application.Resource()).Namespace(ns)
	create := func(obj map[string]any) {
		t.Helper()
		if _, err := apps.Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	meta := func(name string, annotations map[string]any) map[string]any {
		return map[string]any{"name": name, "namespace": ns, "annotations": annotations}
	}
	create(map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": meta("root", nil),
		"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": url, "path": "apps", "targetRevision": "main"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns}},
		"status": map[string]any{"resources": []any{
			map[string]any{"group": "argoproj.io", "version": "v1alpha1", "kind": "Application", "namespace": ns, "name": "child"},
			map[string]any{"group": "argoproj.io", "version": "v1alpha1", "kind": "Application", "namespace": ns, "name": "web"},
		}}})
	for _, name := range []string{"child", "intruder", "web"} {
		create(map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": meta(name, map[string]any{trackingAnnotation: "root:argoproj.io/Application:" + ns + "/" + name}),
			"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": "https://git.example.com/child.git", "path": "child"},
				"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"}}})
	}

	w := e.writer(t, ns, WithParents(NewKubeParents(e.dyn, ns)))
	change := func(name string) writeback.Change {
		src := application.Source{Index: -1, RepoURL: "https://git.example.com/child.git", Path: "child", TargetRevision: "main", Type: application.SourceKustomize}
		app := &application.Application{Namespace: ns, Name: name, Project: "default", Sources: []application.Source{src}}
		app.Settings.WriteBack = settings.WriteBack{Method: settings.WriteBackGit, Target: mustTarget("app-of-apps")}
		return writeback.Change{App: app, Source: src, Images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2"}, Old: imageref.ParseVersion("v0.0.1")}}}
	}
	// The chart of web, a Helm Application, moves to 1.1.0.
	web := change("web")
	web.Source.Type, web.Source.Chart, web.Images = application.SourceHelm, "web", nil
	web.App.Sources = []application.Source{web.Source}
	web.Charts = []writeback.ChartUpdate{{ChartSpec: settings.ChartSpec{Chart: "web"}, Old: "1.0.0", New: "1.1.0"}}
	results := w.Write(t.Context(), []writeback.Change{change("child"), change("intruder"), web})
	if r := results[0]; r.Err != nil || !r.Written || r.ParentNamespace != ns || r.ParentName != "root" {
		t.Fatalf("child: %+v", r)
	}
	want := strings.Replace(childDoc, "    targetRevision: main\n", "    targetRevision: main\n    kustomize:\n      images:\n      - "+gitAppImage+":v0.0.2\n", 1)
	if got := e.git.ReadFile(t, "app-of-apps", "main", "apps/child.yaml"); got != want {
		t.Errorf("apps/child.yaml:\n%s\nwant\n%s", got, want)
	}
	if got := e.git.ReadFile(t, "app-of-apps", "main", "apps/more/other.yaml"); got != other {
		t.Errorf("apps/more/other.yaml changed:\n%s", got)
	}
	if r := results[2]; r.Err != nil || !r.Written || len(r.ChangedCharts) != 1 || len(r.Changed) != 0 {
		t.Errorf("web: %+v", r)
	}
	if got, want := e.git.ReadFile(t, "app-of-apps", "main", "apps/web.yaml"), strings.Replace(webDoc, "1.0.0 #", "1.1.0 #", 1); got != want {
		t.Errorf("apps/web.yaml:\n%s\nwant\n%s", got, want)
	}
	if log := e.git.Log(t, "app-of-apps", "main"); !strings.Contains(log[0].Body, "updates chart web version '1.0.0' to '1.1.0'") {
		t.Errorf("commit message %q %q", log[0].Subject, log[0].Body)
	}
	if err := results[1].Err; err == nil || !strings.Contains(err.Error(), "Application "+ns+"/root, which Argo CD's tracking names as the parent of Application "+ns+"/intruder, does not list it among its resources") {
		t.Errorf("intruder: %v", err)
	}
}

// testAppOfAppsHelm: a parent that is a Helm chart emits its children
// from its values; the child's chart version and image are written into
// the values its values file marks with the child, the templates as they
// were.
func (e *gitEnv) testAppOfAppsHelm(t *testing.T) {
	ns := e.argoNamespace(t, "app-of-apps-helm", true)
	chart := "apiVersion: v2\nname: platform\nversion: 0.1.0\n"
	template := "{{- range $name, $app := .Values.apps }}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {{ $name }}\n" +
		"spec:\n  project: default\n  source:\n    repoURL: {{ $app.repoURL }}\n    chart: {{ $app.chart }}\n    targetRevision: {{ $app.version | quote }}\n" +
		"    helm:\n      parameters:\n      - name: image\n        value: {{ $app.image }}\n" +
		"  destination:\n    server: https://kubernetes.default.svc\n    namespace: {{ $name }}\n{{- end }}\n"
	values := "# the platform's applications\napps:\n  web:\n    repoURL: https://charts.example.com\n    chart: web\n" +
		"    version: 1.0.0 # {\"$imageupdater\": \"web/web\"} the chart's version\n" +
		"    image: " + gitAppImage + ":v0.0.1 # {\"$imageupdater\": \"" + ns + "/web/app\"}\n"
	files := map[string]string{"platform/Chart.yaml": chart, "platform/templates/apps.yaml": template, "platform/values.yaml": values}
	url := e.repo(t, "app-of-apps-helm", files)

	apps := e.dyn.Resource(application.Resource()).Namespace(ns)
	create := func(obj map[string]any) {
		t.Helper()
		if _, err := apps.Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": map[string]any{"name": "platform", "namespace": ns},
		"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": url, "path": "platform", "targetRevision": "main"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns}},
		"status": map[string]any{"resources": []any{
			map[string]any{"group": "argoproj.io", "version": "v1alpha1", "kind": "Application", "namespace": ns, "name": "web"},
		}}})
	src := application.Source{Index: -1, RepoURL: "https://charts.example.com", Chart: "web", TargetRevision: "1.0.0", Type: application.SourceHelm}
	create(map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "web", "namespace": ns, "annotations": map[string]any{trackingAnnotation: "platform:argoproj.io/Application:" + ns + "/web"}},
		"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": src.RepoURL, "chart": "web", "targetRevision": "1.0.0"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "web"}}})

	w := e.writer(t, ns, WithParents(NewKubeParents(e.dyn, ns)))
	app := &application.Application{Namespace: ns, Name: "web", Project: "default", Sources: []application.Source{src}}
	app.Settings.WriteBack = settings.WriteBack{Method: settings.WriteBackGit, Target: mustTarget("app-of-apps")}
	change := writeback.Change{App: app, Source: src,
		Images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2"}, Old: imageref.ParseVersion("v0.0.1")}},
		Charts: []writeback.ChartUpdate{{ChartSpec: settings.ChartSpec{Alias: "web", Chart: "web"}, Old: "1.0.0", New: "1.1.0"}}}
	results := w.Write(t.Context(), []writeback.Change{change})
	if r := results[0]; r.Err != nil || !r.Written || r.ParentName != "platform" || len(r.Changed) != 1 || len(r.ChangedCharts) != 1 {
		t.Fatalf("web: %+v", r)
	}
	want := strings.NewReplacer("1.0.0 #", "1.1.0 #", ":v0.0.1 #", ":v0.0.2 #").Replace(values)
	if got := e.git.ReadFile(t, "app-of-apps-helm", "main", "platform/values.yaml"); got != want {
		t.Errorf("platform/values.yaml:\n%s\nwant\n%s", got, want)
	}
	for _, p := range []string{"platform/Chart.yaml", "platform/templates/apps.yaml"} {
		if got := e.git.ReadFile(t, "app-of-apps-helm", "main", p); got != files[p] {
			t.Errorf("%s changed:\n%s", p, got)
		}
	}
	if log := e.git.Log(t, "app-of-apps-helm", "main"); !strings.Contains(log[0].Body, "updates chart web version '1.0.0' to '1.1.0'") {
		t.Errorf("commit message %q %q", log[0].Subject, log[0].Body)
	}
	// Written already: nothing more to commit.
	if r := w.Write(t.Context(), []writeback.Change{change})[0]; r.Err != nil || r.Written {
		t.Errorf("second write: %+v", r)
	}
}

// testAppOfAppsConfined: in a platform repository of one folder per team,
// team b's child cannot point its target at team a's folder, and a
// definition that names no namespace is not taken for the child's where
// its parent has no destination namespace; nothing is committed, and
// each child gets an error that says why.
func (e *gitEnv) testAppOfAppsConfined(t *testing.T) {
	ns := e.argoNamespace(t, "app-of-apps-confined", true)
	doc := func(name string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: " + name + "\n" +
			"spec:\n  project: default\n  source:\n    repoURL: https://git.example.com/" + name + ".git\n    path: deploy\n    targetRevision: main\n"
	}
	// Team a's web, which names no namespace: its parent creates it in
	// the same namespace as team b's.
	files := map[string]string{"apps/team-a/web.yaml": doc("web"), "apps/team-b/api.yaml": doc("api"), "root/orphan.yaml": doc("orphan")}
	url := e.repo(t, "app-of-apps-confined", files)

	apps := e.dyn.Resource(application.Resource()).Namespace(ns)
	create := func(obj map[string]any) {
		t.Helper()
		if _, err := apps.Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	parent := func(name, path string, destination map[string]any, children ...string) {
		var resources []any
		for _, c := range children {
			resources = append(resources, map[string]any{"group": "argoproj.io", "version": "v1alpha1", "kind": "Application", "namespace": ns, "name": c})
		}
		create(map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": map[string]any{"name": name, "namespace": ns},
			"spec":   map[string]any{"project": "default", "source": map[string]any{"repoURL": url, "path": path, "targetRevision": "main"}, "destination": destination},
			"status": map[string]any{"resources": resources}})
	}
	parent("platform-b", "apps/team-b", map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns}, "web")
	parent("root", "root", map[string]any{"server": "https://kubernetes.default.svc"}, "orphan")
	for name, p := range map[string]string{"web": "platform-b", "orphan": "root"} {
		create(map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{trackingAnnotation: p + ":argoproj.io/Application:" + ns + "/" + name}},
			"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": "https://git.example.com/" + name + ".git", "path": "deploy"},
				"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"}}})
	}

	w := e.writer(t, ns, WithParents(NewKubeParents(e.dyn, ns)))
	change := func(name, target string) writeback.Change {
		src := application.Source{Index: -1, RepoURL: "https://git.example.com/" + name + ".git", Path: "deploy", TargetRevision: "main", Type: application.SourceKustomize}
		app := &application.Application{Namespace: ns, Name: name, Project: "default", Sources: []application.Source{src}}
		app.Settings.WriteBack = settings.WriteBack{Method: settings.WriteBackGit, Target: mustTarget(target)}
		return writeback.Change{App: app, Source: src, Images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2"}, Old: imageref.ParseVersion("v0.0.1")}}}
	}
	before := e.git.Log(t, "app-of-apps-confined", "main")
	results := w.Write(t.Context(), []writeback.Change{change("web", "app-of-apps:../team-a"), change("orphan", "app-of-apps")})
	wantErr := []string{
		`write-back-target "app-of-apps:../team-a": path "../team-a" (from "apps/team-b") leaves apps/team-b, the folder its parent ` + ns + `/platform-b deploys`,
		"the Application orphan at root/orphan.yaml:1 names no namespace, and its parent " + ns + "/root has no spec.destination.namespace to create it in, so it is not taken as the definition of " + ns + "/orphan",
	}
	for i, r := range results {
		switch {
		case r.Err == nil || !strings.Contains(r.Err.Error(), wantErr[i]) || !strings.Contains(r.Err.Error(), "Application "+ns+"/"+r.Name):
			t.Errorf("%s: got %v, want an error naming the Application and containing %q", r.Name, r.Err, wantErr[i])
		case !errors.Is(r.Err, writeback.ErrInvalidTarget):
			t.Errorf("%s: %v does not match writeback.ErrInvalidTarget", r.Name, r.Err)
		case r.Written || r.Commit != "":
			t.Errorf("%s: failed yet reports commit %q", r.Name, r.Commit)
		}
	}
	for p, want := range files {
		if got := e.git.ReadFile(t, "app-of-apps-confined", "main", p); got != want {
			t.Errorf("%s changed:\n%s", p, got)
		}
	}
	if after := e.git.Log(t, "app-of-apps-confined", "main"); len(after) != len(before) {
		t.Errorf("%d new commits, want none", len(after)-len(before))
	}
}
