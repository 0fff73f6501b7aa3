package appwatch

import (
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/image-updater/argocd-image-updater/test/poll"
)

func newApp(namespace, name string, labels map[string]string, annotations map[string]string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "https://git.example.com/r.git", "path": "main/overlays/production", "kustomize": map[string]any{}},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"},
			"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}},
		},
	}}
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	return obj
}

func TestWatcher(t *testing.T) {
	k := testenv.StartKube(t)
	k.CreateNamespace(t, "team-a")
	dyn := dynamic.NewForConfigOrDie(k.Config)
	ctx := t.Context()
	managed := map[string]string{settings.AnnotationPrefix + settings.KeyImageList: "app=example.com/app"}
	create := func(obj *unstructured.Unstructured) {
		t.Helper()
		if _, err := dyn.Resource(application.Resource()).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(newApp("argocd", "main", map[string]string{"team": "a"}, managed))
	create(newApp("argocd", "main-staging", map[string]string{"team": "a"}, managed))
	create(newApp("argocd", "unmanaged", map[string]string{"team": "a"}, nil))
	create(newApp("argocd", "other-team", map[string]string{"team": "b"}, managed))
	create(newApp("team-a", "main", map[string]string{"team": "a"}, managed))

	w, err := NewWatcher(dyn, Namespaces("argocd"), MatchNames("main*"), MatchLabels("team=a"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	updated := map[string]int{}
	w.OnUpdate(func(s *application.Snapshot) {
		mu.Lock()
		defer mu.Unlock()
		updated[s.Namespace()+"/"+s.Name()]++
	})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		var out []string
		for _, a := range w.Applications() {
			out = append(out, a.Key())
		}
		return out
	}
	if got := keys(); len(got) != 2 || got[0] != "argocd/main" || got[1] != "argocd/main-staging" {
		t.Fatalf("applications %v", got)
	}
	apps := w.Applications()
	if len(apps[0].Settings.Images) != 1 || apps[0].Sources[0].Type != application.SourceKustomize {
		t.Errorf("parsed %+v", apps[0])
	}
	if _, ok := apps[0].Object().Object["spec"].(map[string]any)["syncPolicy"]; ok {
		t.Error("a field the updater does not read kept in the cache")
	}
	// Settings are read once per version of an Application.
	if again := w.Applications(); &again[0].Settings.Images[0] != &apps[0].Settings.Images[0] {
		t.Error("the annotations of an unchanged Application were read again")
	}

	// A change reaches the view without a new list.
	obj, err := dyn.Resource(application.Resource()).Namespace("argocd").Get(ctx, "main-staging", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.SetAnnotations(nil)
	if _, err := dyn.Resource(application.Resource()).Namespace("argocd").Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "the view to show the Application main-staging once its annotations are gone", func() bool { return len(keys()) == 1 })
	// Each change is told, and Get finds what is watched, managed or not.
	poll.True(t, 10*time.Second, "the change of main-staging to be told", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return updated["argocd/main-staging"] == 2
	})
	for name, want := range map[string]bool{"main": true, "main-staging": true, "unmanaged": false, "other-team": false, "missing": false} {
		if s, ok := w.Get("argocd", name); ok != want || ok && s.Name() != name {
			t.Errorf("Get(argocd, %s) = %v, %v; want found %v", name, s, ok, want)
		}
	}

	all, err := NewWatcher(dyn, Namespaces("argocd", "team-a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := all.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(all.Applications()); got != 3 {
		t.Errorf("applications in two namespaces: %d, want 3", got)
	}
}

func TestWatcherOptionErrors(t *testing.T) {
	if _, err := NewWatcher(nil, MatchNames("[")); err == nil {
		t.Error("bad glob accepted")
	}
	if _, err := NewWatcher(nil, MatchLabels("a in (")); err == nil {
		t.Error("bad selector accepted")
	}
}
