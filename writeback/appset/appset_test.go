package appset

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func spec(t *testing.T, doc string) Spec {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	s, err := FromObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const listSet = `
metadata: {name: teams, namespace: argocd}
spec:
  generators:
  - list:
      elements:
      - {name: web, tag: v1.0.0, replicas: "1.0.0"}
      - {name: api, tag: v1.0.0, image: "registry.example.com/api:v1.0.0"}
  template:
    metadata: {name: "app-{{name}}"}
    spec:
      source:
        kustomize:
          images: ["registry.example.com/web:{{tag}}", "{{image}}"]
        helm:
          parameters: [{name: sidecar.tag, value: "2.0.0"}]
`

func TestElement(t *testing.T) {
	s := spec(t, listSet)
	for _, tc := range []struct {
		app      string
		elem     int
		ok       bool
		wantPath string
		change   Change
		want     string
		err      string
	}{
		// replicas holds 1.0.0 too, but no placeholder uses it.
		{app: "app-web", elem: 0, ok: true, change: Change{From: "v1.0.0", To: "v1.1.0"}, wantPath: "tag", want: "v1.1.0"},
		// Two values hold the version and the template uses both.
		{app: "app-api", elem: 1, ok: true, change: Change{From: "v1.0.0", To: "v1.1.0"}, err: "image, tag all hold"},
		{app: "app-db"},
	} {
		t.Run(tc.app, func(t *testing.T) {
			_, elem, ok, err := s.Element(tc.app)
			if err != nil || ok != tc.ok || ok && elem != tc.elem {
				t.Fatalf("Element: %d %v %v", elem, ok, err)
			}
			if !ok {
				return
			}
			v, found, err := s.InParams(ListParams(s.Generators[0].Elements[elem]), tc.change)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("InParams: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !found || v.Path.String() != tc.wantPath || v.To != tc.want {
				t.Fatalf("InParams: %+v %v %v", v, found, err)
			}
		})
	}
}

func TestInTemplate(t *testing.T) {
	s := spec(t, listSet)
	v, ok, err := s.InTemplate(Change{From: "2.0.0", To: "2.1.0"})
	if err != nil || !ok || v.Path.String() != "spec.template.spec.source.helm.parameters[0].value" || v.To != "2.1.0" {
		t.Fatalf("%+v %v %v", v, ok, err)
	}
	// A value with a placeholder is an element's, not the template's.
	if _, ok, err := s.InTemplate(Change{From: "v1.0.0", To: "v1.1.0"}); ok || err != nil {
		t.Fatalf("found %v, %v", ok, err)
	}
}

func TestFiles(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
	}{
		{"fasttemplate", `
metadata: {name: files, namespace: argocd}
spec:
  generators:
  - git: {repoURL: "https://git.example.com/config.git", revision: main, files: [{path: "envs/*/config.json"}]}
  template:
    metadata: {name: "{{path.basename}}-{{app.name}}"}
    spec: {source: {helm: {parameters: [{name: image.tag, value: "{{app.image.tag}}"}]}}}
`},
		{"goTemplate", `
metadata: {name: files, namespace: argocd}
spec:
  goTemplate: true
  generators:
  - git: {repoURL: "https://git.example.com/config.git", revision: main, files: [{path: "envs/*/config.json"}]}
  template:
    metadata: {name: "{{ .path.basename }}-{{ .app.name | lower }}"}
    spec: {source: {helm: {parameters: [{name: image.tag, value: "{{ .app.image.tag }}"}]}}}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(t, tc.doc)
			g := s.Generators[0]
			if !g.Matches("envs/prod/config.json") || g.Matches("envs/prod/other/config.json") || g.RepoURL == "" || g.Revision != "main" {
				t.Fatalf("generator %+v", g)
			}
			p := s.FileParams("envs/prod/config.json", map[string]any{"app": map[string]any{"name": "Web", "image": map[string]any{"tag": "v1.0.0"}}})
			want := "prod-Web"
			if s.GoTemplate {
				want = "prod-web"
			}
			if ok, err := s.Generates(p, want); !ok || err != nil {
				n, _ := s.name(p)
				t.Fatalf("renders %q, want %q (%v)", n, want, err)
			}
			v, ok, err := s.InParams(p, Change{From: "v1.0.0", To: "v1.2.0"})
			if err != nil || !ok || v.Path.String() != "app.image.tag" {
				t.Fatalf("%+v %v %v", v, ok, err)
			}
		})
	}
}

func TestRenderUnknownFunction(t *testing.T) {
	s := Spec{Name: "x", Namespace: "argocd", GoTemplate: true}
	if _, err := s.Render("{{ .name | sha256sum }}", Params{"name": "a"}); err == nil || !strings.Contains(err.Error(), "sha256sum") {
		t.Fatalf("err %v", err)
	}
}

// Rendering takes any template text and parameters without a panic.
func FuzzRender(f *testing.F) {
	f.Add("app-{{name}}", false, "web")
	f.Add("{{ .path.basename }}-{{ .name | lower }}", true, "Web")
	f.Add("{{", true, "")
	f.Fuzz(func(t *testing.T, text string, goTemplate bool, name string) {
		s := Spec{GoTemplate: goTemplate}
		_, _ = s.Render(text, s.FileParams("a/b/c.json", map[string]any{"name": name}))
	})
}
