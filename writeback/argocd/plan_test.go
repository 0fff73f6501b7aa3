package argocd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// mustRef parses an image name as the annotations would.
func mustRef(s string) imageref.Reference {
	r, err := imageref.Parse(s)
	if err != nil {
		panic(err)
	}
	return r
}

func appFromYAML(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatalf("parse Application: %v", err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func TestPlanWrite(t *testing.T) {
	const multi = `
metadata: {name: m, namespace: argocd, resourceVersion: "7"}
spec:
  sources:
  - {repoURL: "https://git.example.com/values.git", targetRevision: main, ref: values}
  - repoURL: https://charts.example.com
    chart: web
    helm: {parameters: [{name: image.tag, value: "1"}]}
  - {repoURL: "https://git.example.com/app.git", path: overlays/prod}
`
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("nginx")}, New: imageref.Version{Tag: "2"}}
	web := writeback.ChartUpdate{ChartSpec: settings.ChartSpec{Alias: "web", Chart: "web"}, New: "1.3.0", Old: "1.2.0"}
	tests := []struct {
		name, app string
		update    update
		wantPatch string // "" = nothing to write
		wantErr   string
	}{
		{
			name: "single source, kustomize block created",
			app: `
metadata: {name: s, namespace: argocd, resourceVersion: "5"}
spec: {source: {repoURL: "https://git.example.com/app.git", path: app}}`,
			update:    update{SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{app}},
			wantPatch: `[{"op":"replace","path":"/metadata/resourceVersion","value":"5"},{"op":"add","path":"/spec/source/kustomize","value":{"images":["nginx:2"]}}]`,
		},
		{
			name: "single source, existing kustomize block",
			app: `
metadata: {name: s, namespace: argocd, resourceVersion: "5"}
spec: {source: {repoURL: "https://git.example.com/app.git", path: app, kustomize: {namePrefix: p-}}}`,
			update:    update{SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{app}},
			wantPatch: `[{"op":"replace","path":"/metadata/resourceVersion","value":"5"},{"op":"add","path":"/spec/source/kustomize/images","value":["nginx:2"]}]`,
		},
		{
			name: "single source, nothing to write",
			app: `
metadata: {name: s, namespace: argocd, resourceVersion: "5"}
spec: {source: {repoURL: "https://git.example.com/app.git", path: app, kustomize: {images: ["nginx:2"]}}}`,
			update: update{SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{app}},
		},
		{
			name:      "multi source, helm",
			app:       multi,
			update:    update{SourceIndex: 1, SourceType: application.SourceHelm, Images: []writeback.ImageUpdate{app}},
			wantPatch: `[{"op":"replace","path":"/metadata/resourceVersion","value":"7"},{"op":"add","path":"/spec/sources/1/helm/parameters","value":[{"forceString":true,"name":"image.tag","value":"2"},{"forceString":true,"name":"image.name","value":"nginx"}]}]`,
		},
		{
			name:      "multi source, kustomize block created",
			app:       multi,
			update:    update{SourceIndex: 2, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{app}},
			wantPatch: `[{"op":"replace","path":"/metadata/resourceVersion","value":"7"},{"op":"add","path":"/spec/sources/2/kustomize","value":{"images":["nginx:2"]}}]`,
		},
		{
			name:      "multi source, chart",
			app:       multi,
			update:    update{SourceIndex: 1, SourceType: application.SourceHelm, Charts: []writeback.ChartUpdate{web}},
			wantPatch: `[{"op":"replace","path":"/metadata/resourceVersion","value":"7"},{"op":"add","path":"/spec/sources/1/targetRevision","value":"1.3.0"}]`,
		},
		{
			name:      "multi source, chart and image in one patch",
			app:       multi,
			update:    update{SourceIndex: 1, SourceType: application.SourceHelm, Images: []writeback.ImageUpdate{app}, Charts: []writeback.ChartUpdate{web}},
			wantPatch: `[{"op":"replace","path":"/metadata/resourceVersion","value":"7"},{"op":"add","path":"/spec/sources/1/helm/parameters","value":[{"forceString":true,"name":"image.tag","value":"2"},{"forceString":true,"name":"image.name","value":"nginx"}]},{"op":"add","path":"/spec/sources/1/targetRevision","value":"1.3.0"}]`,
		},
		{
			name: "single source, chart already at the version",
			app: `
metadata: {name: s, namespace: argocd, resourceVersion: "5"}
spec: {source: {repoURL: "https://charts.example.com", chart: web, targetRevision: 1.3.0}}`,
			update: update{SourceIndex: -1, SourceType: application.SourceHelm, Charts: []writeback.ChartUpdate{web}},
		},
		{
			name: "single source, chart replaced",
			app: `
metadata: {name: s, namespace: argocd, resourceVersion: "5"}
spec: {source: {repoURL: "https://charts.example.com", chart: web, targetRevision: 1.2.0}}`,
			update:    update{SourceIndex: -1, SourceType: application.SourceHelm, Charts: []writeback.ChartUpdate{web}},
			wantPatch: `[{"op":"replace","path":"/metadata/resourceVersion","value":"5"},{"op":"add","path":"/spec/source/targetRevision","value":"1.3.0"}]`,
		},
		{
			name:    "the source deploys another chart now",
			app:     multi,
			update:  update{SourceIndex: 2, SourceType: application.SourceKustomize, Charts: []writeback.ChartUpdate{web}},
			wantErr: `chart web: spec.sources[2] deploys chart ""`,
		},
		{
			name:    "index out of range",
			app:     multi,
			update:  update{SourceIndex: 3, SourceType: application.SourceHelm, Images: []writeback.ImageUpdate{app}},
			wantErr: "spec.sources has 3 entries, no index 3",
		},
		{
			name:    "no spec.source",
			app:     multi,
			update:  update{SourceIndex: -1, SourceType: application.SourceHelm, Images: []writeback.ImageUpdate{app}},
			wantErr: "it has no spec.source",
		},
		{
			name: "no spec.sources",
			app: `
metadata: {name: s, namespace: argocd, resourceVersion: "5"}
spec: {source: {repoURL: "https://git.example.com/app.git"}}`,
			update:  update{SourceIndex: 0, SourceType: application.SourceHelm, Images: []writeback.ImageUpdate{app}},
			wantErr: "it has no spec.sources",
		},
		{
			name: "images is not a list",
			app: `
metadata: {name: s, namespace: argocd, resourceVersion: "5"}
spec: {source: {repoURL: "https://git.example.com/app.git", kustomize: {images: "nginx:1"}}}`,
			update:  update{SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{app}},
			wantErr: "spec.source.kustomize.images is a string, not a list",
		},
		{
			name: "helm is not an object",
			app: `
metadata: {name: s, namespace: argocd, resourceVersion: "5"}
spec: {sources: [{repoURL: "https://git.example.com/app.git", helm: [1]}]}`,
			update:  update{SourceIndex: 0, SourceType: application.SourceHelm, Images: []writeback.ImageUpdate{app}},
			wantErr: "spec.sources[0].helm is a []interface {}, not an object",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := appFromYAML(t, tt.app)
			before := obj.DeepCopy()
			p, err := planWrite(obj, tt.update)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(p.patch); got != tt.wantPatch {
				t.Errorf("patch:\n got %s\nwant %s", got, tt.wantPatch)
			}
			if (len(p.changed)+len(p.charts) == 0) != (tt.wantPatch == "") {
				t.Errorf("changed = %v with patch %q", p.changed, tt.wantPatch)
			}
			if d := cmp.Diff(before.Object, obj.Object); d != "" {
				t.Errorf("object modified (-before +after):\n%s", d)
			}
		})
	}
}

func TestApplicationUpdateValidate(t *testing.T) {
	ok := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "a", Image: mustRef("nginx")}, New: imageref.Version{Tag: "1"}}
	tests := []struct {
		name    string
		update  update
		wantErr string
	}{
		{"valid", update{Namespace: "argocd", Name: "a", SourceIndex: -1, SourceType: application.SourceHelm, Images: []writeback.ImageUpdate{ok}}, ""},
		{"no name", update{Namespace: "argocd", SourceIndex: -1, SourceType: application.SourceHelm}, "namespace and name are required"},
		{"bad index", update{Namespace: "argocd", Name: "a", SourceIndex: -2, SourceType: application.SourceHelm}, "invalid source index -2"},
		{"directory source", update{Namespace: "argocd", Name: "a", SourceIndex: -1, SourceType: "Directory"}, `source type "Directory" cannot be written`},
		{"no version", update{Namespace: "argocd", Name: "a", SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "a", Image: mustRef("nginx")}}}}, "image nginx: neither a tag nor a digest"},
		{"chart only", update{Namespace: "argocd", Name: "a", SourceIndex: 0, SourceType: "", Charts: []writeback.ChartUpdate{{ChartSpec: settings.ChartSpec{Chart: "web"}, New: "1.0.0"}}}, ""},
		{"chart without version", update{Namespace: "argocd", Name: "a", SourceIndex: 0, SourceType: application.SourceHelm, Charts: []writeback.ChartUpdate{{ChartSpec: settings.ChartSpec{Chart: "web"}}}}, `chart web: "" is no version`},
		{"no image", update{Namespace: "argocd", Name: "a", SourceIndex: -1, SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "a"}, New: imageref.Version{Tag: "1"}}}}, `image "a": empty image name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.update.validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestStillWantedCharts: a write retried after the Application changed
// keeps only the charts its annotations still list, unpaused, under the
// argocd method.
func TestStillWantedCharts(t *testing.T) {
	web := writeback.ChartUpdate{ChartSpec: settings.ChartSpec{Alias: "web", Chart: "podinfo"}, New: "1.1.0"}
	tests := []struct {
		name        string
		annotations map[string]string
		want        int
	}{
		{"still listed", map[string]string{"chart-list": "web=podinfo", "write-back-method": "argocd"}, 1},
		{"paused", map[string]string{"chart-list": "web=podinfo", "web.ignore-tags": "*", "write-back-method": "argocd"}, 0},
		{"removed", map[string]string{"chart-list": "other=redis", "write-back-method": "argocd"}, 0},
		{"another chart under the alias", map[string]string{"chart-list": "web=redis", "write-back-method": "argocd"}, 0},
		{"now git", map[string]string{"chart-list": "web=podinfo", "write-back-method": "git"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{}}
			a := map[string]string{}
			for k, v := range tt.annotations {
				a[settings.AnnotationPrefix+k] = v
			}
			obj.SetAnnotations(a)
			_, charts := stillWanted(obj, nil, []writeback.ChartUpdate{web})
			if len(charts) != tt.want {
				t.Errorf("kept %v, want %d", charts, tt.want)
			}
		})
	}
}
