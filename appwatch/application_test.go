package appwatch

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSplitImage(t *testing.T) {
	tests := []struct{ in, name, version string }{
		{"nginx", "nginx", ""},
		{"nginx:1.27", "nginx", "1.27"},
		{"localhost:5000/app", "localhost:5000/app", ""},
		{"localhost:5000/app:v1", "localhost:5000/app", "v1"},
		{"ghcr.io/x/y:stable@sha256:abc", "ghcr.io/x/y", "stable@sha256:abc"},
		{"ghcr.io/x/y@sha256:abc", "ghcr.io/x/y", "sha256:abc"},
	}
	for _, tt := range tests {
		name, version := SplitImage(tt.in)
		if name != tt.name || version != tt.version {
			t.Errorf("SplitImage(%q) = %q, %q; want %q, %q", tt.in, name, version, tt.name, tt.version)
		}
	}
	orig, name, version := SplitKustomizeImage("nginx=registry.local:5000/mirror/nginx:1.27")
	if orig != "nginx" || name != "registry.local:5000/mirror/nginx" || version != "1.27" {
		t.Errorf("SplitKustomizeImage = %q %q %q", orig, name, version)
	}
}

func app(t *testing.T, spec, status map[string]any) *Application {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "main", "namespace": "argocd",
			"annotations": map[string]any{AnnotationPrefix + KeyImageList: "app=example.com/app"}},
		"spec": spec, "status": status,
	}}
	a, err := FromUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestSourcesAndVersions(t *testing.T) {
	img := ImageSpec{Alias: "app", Image: "example.com/app", HelmImageName: DefaultHelmImageName, HelmImageTag: DefaultHelmImageTag}

	t.Run("kustomize override wins over running image", func(t *testing.T) {
		a := app(t, map[string]any{"source": map[string]any{
			"repoURL": "https://git.example.com/r.git", "path": "main/overlays/production",
			"kustomize": map[string]any{"images": []any{"other:1", "example.com/app:v0.0.2"}},
		}}, map[string]any{"summary": map[string]any{"images": []any{"example.com/app:v0.0.1"}}})
		src, ok := a.TargetSource(img)
		if !ok || src.Index != -1 || src.Type != SourceKustomize {
			t.Fatalf("target source %+v %v", src, ok)
		}
		if v, ok := src.CurrentVersion(img); !ok || v != "v0.0.2" {
			t.Errorf("current version %q %v", v, ok)
		}
		if v, ok := a.RunningVersion(img); !ok || v != "v0.0.1" {
			t.Errorf("running version %q %v", v, ok)
		}
	})
	t.Run("type from status", func(t *testing.T) {
		a := app(t, map[string]any{"source": map[string]any{"repoURL": "r", "path": "p"}}, map[string]any{"sourceType": "Helm"})
		if src, ok := a.TargetSource(img); !ok || src.Type != SourceHelm {
			t.Errorf("target source %+v %v", src, ok)
		}
	})
	t.Run("directory source cannot be written", func(t *testing.T) {
		a := app(t, map[string]any{"source": map[string]any{"repoURL": "r", "path": "p"}}, map[string]any{"sourceType": "Directory"})
		if _, ok := a.TargetSource(img); ok {
			t.Error("directory source accepted")
		}
	})
	t.Run("multi-source prefers the source naming the image", func(t *testing.T) {
		a := app(t, map[string]any{"sources": []any{
			map[string]any{"repoURL": "values", "ref": "values"},
			map[string]any{"repoURL": "charts", "chart": "app", "helm": map[string]any{}},
			map[string]any{"repoURL": "r", "path": "k", "kustomize": map[string]any{"images": []any{"example.com/app:1.0"}}},
		}}, map[string]any{"sourceTypes": []any{"Directory", "Helm", "Kustomize"}})
		src, ok := a.TargetSource(img)
		if !ok || src.Index != 2 {
			t.Fatalf("target source %+v %v", src, ok)
		}
		other := ImageSpec{Image: "example.com/other", HelmImageName: DefaultHelmImageName, HelmImageTag: DefaultHelmImageTag}
		if src, ok := a.TargetSource(other); !ok || src.Index != 1 {
			t.Errorf("first writable source for a new image: %+v %v", src, ok)
		}
	})
	t.Run("helm parameters", func(t *testing.T) {
		a := app(t, map[string]any{"source": map[string]any{"repoURL": "r", "chart": "c", "helm": map[string]any{"parameters": []any{
			map[string]any{"name": "image.tag", "value": "1.2.3"},
			map[string]any{"name": "images[1].image", "value": "example.com/app:2.0.0"},
		}}}}, nil)
		src, _ := a.TargetSource(img)
		if v, _ := src.CurrentVersion(img); v != "1.2.3" {
			t.Errorf("tag parameter version %q", v)
		}
		spec := ImageSpec{Image: "example.com/app", HelmImageSpec: "images[1].image"}
		if v, _ := src.CurrentVersion(spec); v != "2.0.0" {
			t.Errorf("image-spec parameter version %q", v)
		}
	})
	t.Run("docker hub names", func(t *testing.T) {
		a := app(t, map[string]any{"source": map[string]any{"repoURL": "r", "path": "p"}},
			map[string]any{"summary": map[string]any{"images": []any{"docker.io/library/nginx:1.27.0"}}})
		if v, ok := a.RunningVersion(ImageSpec{Image: "nginx"}); !ok || v != "1.27.0" {
			t.Errorf("running version %q %v", v, ok)
		}
	})
}
