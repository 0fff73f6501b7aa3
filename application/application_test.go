package application

import (
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func app(t *testing.T, spec, status map[string]any) *Application {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "main", "namespace": "argocd",
			"annotations": map[string]any{settings.AnnotationPrefix + settings.KeyImageList: "app=example.com/app"}},
		"spec": spec, "status": status,
	}}
	a, err := FromUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestSourcesAndVersions(t *testing.T) {
	img := settings.ImageSpec{Alias: "app", Image: mustRef("example.com/app"), HelmImageName: settings.DefaultHelmImageName, HelmImageTag: settings.DefaultHelmImageTag}

	t.Run("kustomize override wins over running image", func(t *testing.T) {
		a := app(t, map[string]any{"source": map[string]any{
			"repoURL": "https://git.example.com/r.git", "path": "main/overlays/production",
			"kustomize": map[string]any{"images": []any{"other:1", "example.com/app:v0.0.2"}},
		}}, map[string]any{"summary": map[string]any{"images": []any{"example.com/app:v0.0.1"}}})
		src, ok := a.TargetSource(img)
		if !ok || src.Index != -1 || src.Type != SourceKustomize {
			t.Fatalf("target source %+v %v", src, ok)
		}
		if v, ok := src.CurrentVersion(img); !ok || v.String() != "v0.0.2" {
			t.Errorf("current version %q %v", v, ok)
		}
		if v, ok, _ := a.RunningVersion(img); !ok || v.String() != "v0.0.1" {
			t.Errorf("running version %q %v", v, ok)
		}
	})
	// Argo CD Image Updater looks for a running image under its
	// kustomize.image-name first, and writes the override at once when the
	// image runs, or is overridden, under that name only.
	t.Run("kustomize.image-name naming another registry", func(t *testing.T) {
		moved := settings.ImageSpec{Alias: "foobar", Image: mustRef("gcr.io/jannfis/foobar"), KustomizeImageName: mustRef("jannfis/foobar")}
		a := app(t, map[string]any{"source": map[string]any{"repoURL": "r", "path": "p", "kustomize": map[string]any{}}},
			map[string]any{"summary": map[string]any{"images": []any{"jannfis/foobar:1.0.1"}}})
		if v, ok, renamed := a.RunningVersion(moved); !ok || !renamed || v.String() != "1.0.1" {
			t.Errorf("running under the kustomize name: %q %v %v", v, ok, renamed)
		}
		a = app(t, map[string]any{"source": map[string]any{"repoURL": "r", "path": "p", "kustomize": map[string]any{}}},
			map[string]any{"summary": map[string]any{"images": []any{"gcr.io/jannfis/foobar:1.0.1"}}})
		if v, ok, renamed := a.RunningVersion(moved); !ok || renamed || v.String() != "1.0.1" {
			t.Errorf("running under its own name: %q %v %v", v, ok, renamed)
		}
		for entry, stale := range map[string]bool{
			"jannfis/foobar:1.0.1":                        true,
			"jannfis/foobar=gcr.io/jannfis/foobar:1.0.1":  false,
			"jannfis/foobar=quay.io/jannfis/foobar:1.0.1": true,
		} {
			a := app(t, map[string]any{"source": map[string]any{"repoURL": "r", "path": "p", "kustomize": map[string]any{"images": []any{entry}}}}, nil)
			if v, ok := a.Sources[0].CurrentVersion(moved); !ok || v.String() != "1.0.1" {
				t.Errorf("%s: current version %q %v", entry, v, ok)
			}
			if got := a.Sources[0].KustomizeStale(moved); got != stale {
				t.Errorf("%s: stale %v, want %v", entry, got, stale)
			}
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
		other := settings.ImageSpec{Image: mustRef("example.com/other"), HelmImageName: settings.DefaultHelmImageName, HelmImageTag: settings.DefaultHelmImageTag}
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
		if v, _ := src.CurrentVersion(img); v.String() != "1.2.3" {
			t.Errorf("tag parameter version %q", v)
		}
		spec := settings.ImageSpec{Image: mustRef("example.com/app"), HelmImageSpec: "images[1].image"}
		if v, _ := src.CurrentVersion(spec); v.String() != "2.0.0" {
			t.Errorf("image-spec parameter version %q", v)
		}
	})
	t.Run("kustomize entries in any spelling of the image", func(t *testing.T) {
		nginx := settings.ImageSpec{Image: mustRef("nginx")}
		for _, entry := range []string{"nginx:1.26", "docker.io/library/nginx:1.26", "index.docker.io/nginx:1.26", "library/nginx:1.26"} {
			a := app(t, map[string]any{"source": map[string]any{"repoURL": "r", "path": "p",
				"kustomize": map[string]any{"images": []any{"other:1", entry}}}}, nil)
			if v, ok := a.Sources[0].CurrentVersion(nginx); !ok || v.String() != "1.26" {
				t.Errorf("%s: current version %q %v", entry, v, ok)
			}
		}
	})
	t.Run("running images under registries.conf defaults", func(t *testing.T) {
		opts := []imageref.Option{imageref.WithDefaultRegistry("registry.example.com"), imageref.WithDefaultNamespace("team")}
		spec := settings.ImageSpec{Image: mustRef("app", opts...)}
		a := app(t, map[string]any{"source": map[string]any{"repoURL": "r", "path": "p"}},
			map[string]any{"summary": map[string]any{"images": []any{"docker.io/library/app:9", "Registry.Example.com/team/app:1.2"}}})
		if v, ok, _ := a.RunningVersion(spec); !ok || v.String() != "1.2" {
			t.Errorf("running version %q %v", v, ok)
		}
	})
	t.Run("docker hub names", func(t *testing.T) {
		a := app(t, map[string]any{"source": map[string]any{"repoURL": "r", "path": "p"}},
			map[string]any{"summary": map[string]any{"images": []any{"docker.io/library/nginx:1.27.0"}}})
		if v, ok, _ := a.RunningVersion(settings.ImageSpec{Image: mustRef("nginx")}); !ok || v.String() != "1.27.0" {
			t.Errorf("running version %q %v", v, ok)
		}
	})
}

func TestProject(t *testing.T) {
	tests := []struct {
		spec map[string]any
		want string
	}{
		{spec: map[string]any{"project": "team-a", "source": map[string]any{"repoURL": "https://git.example.com/r.git"}}, want: "team-a"},
		{spec: map[string]any{"source": map[string]any{"repoURL": "https://git.example.com/r.git"}}, want: ""},
	}
	for _, tt := range tests {
		if got := app(t, tt.spec, nil).Project; got != tt.want {
			t.Errorf("project %q, want %q", got, tt.want)
		}
	}
}

func mustRef(s string, opts ...imageref.Option) imageref.Reference {
	r, err := imageref.Parse(s, opts...)
	if err != nil {
		panic(err)
	}
	return r
}
