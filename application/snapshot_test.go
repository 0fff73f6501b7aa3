package application

import (
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// decoded is an Application as the informer's decoder gives it: every
// object its own strings.
func decoded(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	return u
}

const fullApplication = `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application",
"metadata":{"name":"shop","namespace":"argocd","uid":"0a1b","resourceVersion":"42","generation":3,
 "labels":{"team":"a"},
 "annotations":{"argocd-image-updater.argoproj.io/image-list":"app=registry.example.com/shop/app:~1.2",
  "argocd-image-updater.argoproj.io/app.helm.image-tag":"app.tag",
  "kubectl.kubernetes.io/last-applied-configuration":"{\"a huge\":\"document\"}"},
 "managedFields":[{"manager":"kubectl","operation":"Update"}]},
"spec":{"project":"shop",
 "sources":[
  {"repoURL":"https://git.example.com/charts.git","chart":"shop","targetRevision":"1.0.0",
   "helm":{"valueFiles":["values.yaml"],"parameters":[{"name":"app.tag","value":"1.2.0","forceString":true,"futureField":{"x":1}}]}},
  {"repoURL":"https://git.example.com/deploy.git","path":"overlays/prod","targetRevision":"main","kustomize":{"images":["other:1"],"namePrefix":"p-"}},
  {"repoURL":"https://git.example.com/values.git","ref":"values"},
  {"repoURL":"https://git.example.com/cmp.git","path":"cmp","plugin":{"name":"tanka"}}],
 "destination":{"server":"https://kubernetes.default.svc","namespace":"shop"},
 "syncPolicy":{"automated":{"prune":true}}},
"status":{"sourceTypes":["Helm","Kustomize","Directory","Plugin"],"summary":{"images":["registry.example.com/shop/app:1.2.0"]},
 "resources":[{"kind":"Deployment","name":"app"}],"history":[{"id":1}],"operationState":{"phase":"Succeeded"}}}`

// newInterner shares strings as the informers' interner does.
func newInterner() func(string) string {
	seen := map[string]string{}
	return func(s string) string {
		if v, ok := seen[s]; ok {
			return v
		}
		seen[s] = s
		return s
	}
}

// The Snapshot keeps what the updater reads, and reads as the object does.
func TestSnapshotKeepsWhatTheUpdaterReads(t *testing.T) {
	obj := decoded(t, fullApplication)
	s := SnapshotOf(obj, KeepSpec(false), InternStrings(newInterner()))
	want := map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "shop", "namespace": "argocd", "uid": "0a1b", "resourceVersion": "42",
			"labels": map[string]any{"team": "a"},
			"annotations": map[string]any{
				"argocd-image-updater.argoproj.io/image-list":         "app=registry.example.com/shop/app:~1.2",
				"argocd-image-updater.argoproj.io/app.helm.image-tag": "app.tag",
			}},
		"spec": map[string]any{"project": "shop", "destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "shop"}, "sources": []any{
			map[string]any{"repoURL": "https://git.example.com/charts.git", "chart": "shop", "targetRevision": "1.0.0",
				"helm": map[string]any{"parameters": []any{map[string]any{"name": "app.tag", "value": "1.2.0", "forceString": true, "futureField": map[string]any{"x": int64(1)}}}}},
			map[string]any{"repoURL": "https://git.example.com/deploy.git", "path": "overlays/prod", "targetRevision": "main",
				"kustomize": map[string]any{"images": []any{"other:1"}}},
			map[string]any{"repoURL": "https://git.example.com/values.git", "ref": "values"},
			map[string]any{"repoURL": "https://git.example.com/cmp.git", "path": "cmp", "plugin": map[string]any{}},
		}},
		"status": map[string]any{"sourceTypes": []any{"Helm", "Kustomize", "Directory", "Plugin"},
			"summary": map[string]any{"images": []any{"registry.example.com/shop/app:1.2.0"}}},
	}
	if diff := cmp.Diff(want, s.object().Object); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}

	// What is kept reads as the whole object.
	fromObject, err := FromUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	fromKept, err := FromUnstructured(s.object())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromObject, fromKept, cmp.AllowUnexported(Source{}), cmpopts.IgnoreUnexported(Application{}), cmp.Comparer(func(a, b imageref.Reference) bool { return a.String() == b.String() }),
		cmp.Comparer(func(a, b *strategy.Policy) bool { return a.String() == b.String() })); diff != "" {
		t.Errorf("read from what is kept (-object +kept):\n%s", diff)
	}
	if v, ok := fromKept.Sources[0].HelmParameter("app.tag"); !ok || v != "1.2.0" {
		t.Errorf("Helm parameter app.tag = %q, %v", v, ok)
	}

	// An Application without the image-list annotation keeps its identity
	// and labels, unless ImageUpdaters may select it.
	obj.SetAnnotations(nil)
	if got := SnapshotOf(obj, KeepSpec(false)).object().Object; got["spec"] != nil || got["status"] != nil {
		t.Errorf("unannotated Application kept its spec or status: %v", got)
	}
	if got := SnapshotOf(obj, KeepSpec(true)).object().Object; got["spec"] == nil {
		t.Error("unannotated Application lost its spec with KeepUnannotated")
	}
}

func TestSnapshotSharesRepeatedStrings(t *testing.T) {
	in := InternStrings(newInterner())
	a := SnapshotOf(decoded(t, fullApplication), KeepSpec(false), in)
	b := SnapshotOf(decoded(t, fullApplication), KeepSpec(false), in)
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	if !same(a.Annotation(settings.AnnotationPrefix+settings.KeyImageList), b.Annotation(settings.AnnotationPrefix+settings.KeyImageList)) {
		t.Error("annotation values not shared")
	}
	if !same(a.running[0], b.running[0]) || !same(a.sources[1].RepoURL, b.sources[1].RepoURL) {
		t.Error("image names or repositories not shared")
	}
	if same(string(a.uid), string(b.uid)) || same(a.resourceVersion, b.resourceVersion) {
		t.Error("a field unique to each object was shared")
	}
}

func TestSnapshotReadsSettingsOncePerOptions(t *testing.T) {
	s := SnapshotOf(decoded(t, fullApplication))
	first, err := s.Application()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := s.Application()
	if &first.Settings.Images[0] != &again.Settings.Images[0] {
		t.Error("settings read again with the same options")
	}
	// Appending to one Application's problems never reaches another's.
	first.Settings.Problems = append(first.Settings.Problems, settings.Problem{Message: "mine"})
	if len(again.Settings.Problems) != 0 {
		t.Errorf("problems shared: %v", again.Settings.Problems)
	}
	other, _ := s.Application(imageref.WithDefaultRegistry("mirror.example.com"))
	if &other.Settings.Images[0] == &first.Settings.Images[0] {
		t.Error("settings not read again for other options")
	}

	bad := decoded(t, `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"bad","namespace":"argocd","annotations":{"argocd-image-updater.argoproj.io/image-list":"nginx"}},"spec":{"sources":["x"]}}`)
	if _, err := SnapshotOf(bad).Application(); err == nil || err.Error() != "application argocd/bad: spec.sources[0] is not an object" {
		t.Errorf("error %v", err)
	}
}

// An Application rendered by Argo CD's Source Hydrator is written back to
// its dry source.
func TestSnapshotDrySource(t *testing.T) {
	obj := decoded(t, `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application",
"metadata":{"name":"hydrated","namespace":"argocd","annotations":{"argocd-image-updater.argoproj.io/image-list":"nginx"}},
"spec":{"sourceHydrator":{"drySource":{"repoURL":"https://git.example.com/dry.git","path":"apps/web","targetRevision":"main"},
 "syncSource":{"targetBranch":"environments/prod","path":"web"}}},
"status":{"sourceType":"Directory"}}`)
	app, err := FromUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := Source{Index: -1, Dry: true, RepoURL: "https://git.example.com/dry.git", Path: "apps/web", TargetRevision: "main"}
	if diff := cmp.Diff([]Source{want}, app.Sources, cmp.AllowUnexported(Source{})); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
	kept, err := FromUnstructured(app.Object())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(app.Sources, kept.Sources, cmp.AllowUnexported(Source{})); diff != "" {
		t.Errorf("read from what is kept (-object +kept):\n%s", diff)
	}
}
