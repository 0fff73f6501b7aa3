package manifest

import (
	"slices"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

func TestSetApplicationSource(t *testing.T) {
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2"}}
	web := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(gitWebImage), HelmImageSpec: "web.image"}, New: imageref.Version{Tag: "1.5.0"}}
	child := ApplicationDefinition{Namespace: "argocd", Name: "child", DefaultNamespace: "argocd", Source: -1, SourceType: application.SourceKustomize}
	helmChild := child
	helmChild.SourceType = application.SourceHelm
	second := child
	second.Source = 1
	otherDefault, unknownDefault := child, child
	otherDefault.DefaultNamespace, unknownDefault.DefaultNamespace = "team-a", ""
	other := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: child # not an Application\n"
	header := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: child\n"
	tests := []struct {
		name   string
		def    ApplicationDefinition
		images []writeback.ImageUpdate
		src    string
		want   string
		found  bool
		// unproven are the lines of the documents not taken for want of
		// a namespace.
		unproven []int
		changed  []string
		// revision is the chart version written, revisionChanged whether
		// that changed the file.
		revision        string
		revisionChanged bool
	}{
		{
			name: "a new kustomize block after the source's last key, comments kept", def: child, images: []writeback.ImageUpdate{app},
			src: "# the team's apps\n" + header + "spec:\n  project: default # theirs\n  source:\n    repoURL: https://git.example.com/apps.git\n    path: child # here\n  destination:\n    namespace: main\n",
			want: "# the team's apps\n" + header + "spec:\n  project: default # theirs\n  source:\n    repoURL: https://git.example.com/apps.git\n    path: child # here\n" +
				"    kustomize:\n      images:\n      - " + gitAppImage + ":v0.0.2\n  destination:\n    namespace: main\n",
			found: true, changed: []string{"app"},
		},
		{
			name: "an existing entry rewritten, other entries and keys kept", def: child, images: []writeback.ImageUpdate{app},
			src:   header + "spec:\n  source:\n    kustomize:\n      namePrefix: prod-\n      images:\n        - nginx:1.25\n        - " + gitAppImage + ":v0.0.1\n    path: child\n",
			want:  header + "spec:\n  source:\n    kustomize:\n      namePrefix: prod-\n      images:\n      - nginx:1.25\n      - " + gitAppImage + ":v0.0.2\n    path: child\n",
			found: true, changed: []string{"app"},
		},
		{
			name: "already there: nothing changes", def: child, images: []writeback.ImageUpdate{app},
			src:   header + "spec:\n  source:\n    kustomize:\n      images: [" + gitAppImage + ":v0.0.2]\n",
			want:  header + "spec:\n  source:\n    kustomize:\n      images: [" + gitAppImage + ":v0.0.2]\n",
			found: true,
		},
		{
			name: "a flow block becomes a block", def: child, images: []writeback.ImageUpdate{app},
			src:   header + "spec:\n  source:\n    path: child\n    kustomize: {}\n  project: default\n",
			want:  header + "spec:\n  source:\n    path: child\n    kustomize:\n      images:\n      - " + gitAppImage + ":v0.0.2\n  project: default\n",
			found: true, changed: []string{"app"},
		},
		{
			name: "helm parameters", def: helmChild, images: []writeback.ImageUpdate{web},
			src: header + "spec:\n  source:\n    chart: web\n    helm:\n      # pinned by the platform team\n      parameters:\n      - name: replicas\n        value: \"3\"\n",
			want: header + "spec:\n  source:\n    chart: web\n    helm:\n      # pinned by the platform team\n      parameters:\n      - name: replicas\n        value: \"3\"\n" +
				"      - name: web.image\n        value: " + gitWebImage + ":1.5.0\n        forcestring: true\n",
			found: true, changed: []string{"web"},
		},
		{
			name: "the second of several sources, its first key after a dash", def: second, images: []writeback.ImageUpdate{app},
			src:   header + "spec:\n  sources:\n  - repoURL: https://git.example.com/values.git\n    ref: values\n  - repoURL: https://git.example.com/apps.git\n    kustomize:\n      images: []\n",
			want:  header + "spec:\n  sources:\n  - repoURL: https://git.example.com/values.git\n    ref: values\n  - repoURL: https://git.example.com/apps.git\n    kustomize:\n      images:\n      - " + gitAppImage + ":v0.0.2\n",
			found: true, changed: []string{"app"},
		},
		{
			name: "the document among others, which stay byte for byte", def: child, images: []writeback.ImageUpdate{app},
			src: other + "---\n" + strings.Replace(header, "child", "sibling", 1) + "spec:\n  source:\n    path: sibling\n---   # the child\n" + header + "spec:\n  source:\n    path: child\n---\n" + other,
			want: other + "---\n" + strings.Replace(header, "child", "sibling", 1) + "spec:\n  source:\n    path: sibling\n---   # the child\n" + header + "spec:\n  source:\n    path: child\n" +
				"    kustomize:\n      images:\n      - " + gitAppImage + ":v0.0.2\n---\n" + other,
			found: true, changed: []string{"app"},
		},
		{
			name: "another namespace's Application of that name is not it", def: child, images: []writeback.ImageUpdate{app},
			src:  strings.Replace(header, "name: child\n", "name: child\n  namespace: team-a\n", 1) + "spec:\n  source:\n    path: child\n",
			want: strings.Replace(header, "name: child\n", "name: child\n  namespace: team-a\n", 1) + "spec:\n  source:\n    path: child\n",
		},
		{
			name: "no namespace, where the parent creates it in the child's: it", def: child, images: []writeback.ImageUpdate{app},
			src:   header + "spec:\n  source:\n    path: child\n",
			want:  header + "spec:\n  source:\n    path: child\n    kustomize:\n      images:\n      - " + gitAppImage + ":v0.0.2\n",
			found: true, changed: []string{"app"},
		},
		{
			name: "no namespace, where the parent creates it in another: not it", def: otherDefault, images: []writeback.ImageUpdate{app},
			src:  header + "spec:\n  source:\n    path: child\n",
			want: header + "spec:\n  source:\n    path: child\n",
		},
		{
			name: "no namespace, where the namespace it is created in is not known: not it, and told", def: unknownDefault, images: []writeback.ImageUpdate{app},
			src:  other + "---\n" + header + "spec:\n  source:\n    path: child\n",
			want: other + "---\n" + header + "spec:\n  source:\n    path: child\n", unproven: []int{6},
		},
		{
			name: "its namespace written, where the namespace of others is not known: it", def: unknownDefault, images: []writeback.ImageUpdate{app},
			src:   strings.Replace(header, "name: child\n", "name: child\n  namespace: argocd\n", 1) + "spec:\n  source:\n    path: child\n",
			want:  strings.Replace(header, "name: child\n", "name: child\n  namespace: argocd\n", 1) + "spec:\n  source:\n    path: child\n    kustomize:\n      images:\n      - " + gitAppImage + ":v0.0.2\n",
			found: true, changed: []string{"app"},
		},
		{
			name: "a namespace that is no string: not it", def: child, images: []writeback.ImageUpdate{app},
			src:  strings.Replace(header, "name: child\n", "name: child\n  namespace: [argocd]\n", 1) + "spec:\n  source:\n    path: child\n",
			want: strings.Replace(header, "name: child\n", "name: child\n  namespace: [argocd]\n", 1) + "spec:\n  source:\n    path: child\n",
		},
		{
			name: "not in the file", def: child, images: []writeback.ImageUpdate{app},
			src: other, want: other,
		},
		{
			name: "a chart's version replaced in place, its quotes kept", def: helmChild, revision: "15.1.0",
			src:   header + "spec:\n  source:\n    chart: web\n    targetRevision: \"15.0.2\" # the chart\n    helm: {}\n",
			want:  header + "spec:\n  source:\n    chart: web\n    targetRevision: \"15.1.0\" # the chart\n    helm: {}\n",
			found: true, revisionChanged: true,
		},
		{
			name: "a version that would read as a number is quoted", def: helmChild, revision: "1.10",
			src:   header + "spec:\n  source:\n    chart: web\n    targetRevision: 1.9.0\n",
			want:  header + "spec:\n  source:\n    chart: web\n    targetRevision: \"1.10\"\n",
			found: true, revisionChanged: true,
		},
		{
			name: "a missing targetRevision added, with an image", def: helmChild, revision: "2.0.0", images: []writeback.ImageUpdate{web},
			src: header + "spec:\n  source:\n    chart: web\n  project: default\n",
			want: header + "spec:\n  source:\n    chart: web\n    helm:\n      parameters:\n      - name: web.image\n        value: " + gitWebImage + ":1.5.0\n        forcestring: true\n" +
				"    targetRevision: 2.0.0\n  project: default\n",
			found: true, changed: []string{"web"}, revisionChanged: true,
		},
		{
			name: "the version already there", def: helmChild, revision: "15.0.2",
			src:   header + "spec:\n  source:\n    chart: web\n    targetRevision: 15.0.2\n",
			want:  header + "spec:\n  source:\n    chart: web\n    targetRevision: 15.0.2\n",
			found: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, m, changed, err := SetApplicationSource("apps.yaml", []byte(tt.src), tt.def, SourceChange{Images: tt.images, Revision: tt.revision})
			if err != nil {
				t.Fatal(err)
			}
			if changed.Revision != tt.revisionChanged {
				t.Errorf("revision changed %v, want %v", changed.Revision, tt.revisionChanged)
			}
			if string(out) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", out, tt.want)
			}
			if m.Found() != tt.found || !slices.Equal(m.Unproven, tt.unproven) {
				t.Errorf("found %v, unproven %v; want %v, %v", m.Found(), m.Unproven, tt.found, tt.unproven)
			}
			var aliases []string
			for _, c := range changed.Images {
				aliases = append(aliases, c.Alias)
			}
			if !slices.Equal(aliases, tt.changed) {
				t.Errorf("changed %v, want %v", aliases, tt.changed)
			}
		})
	}
}

func TestSetApplicationSourceErrors(t *testing.T) {
	img := []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Image: mustRef("nginx")}, New: imageref.Version{Tag: "1"}}}
	def := ApplicationDefinition{Namespace: "argocd", Name: "child", DefaultNamespace: "argocd", Source: -1, SourceType: application.SourceKustomize}
	header := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: child\n"
	tests := []struct {
		name, src, want string
		def             *ApplicationDefinition
	}{
		{name: "defined twice", src: header + "spec:\n  source:\n    path: a\n---\n" + header + "spec:\n  source:\n    path: b\n", want: "apps.yaml: the documents at lines 1 and 9 both define Application argocd/child"},
		{name: "no source", src: header + "spec:\n  project: default\n", want: "apps.yaml:1: Application argocd/child has no spec.source"},
		{name: "a source in flow style", src: header + "spec:\n  source: {path: a}\n", want: "apps.yaml:6: spec.source of Application argocd/child is written in flow style"},
		{name: "images a map", src: header + "spec:\n  source:\n    kustomize:\n      images:\n        a: b\n", want: "apps.yaml:9: images is a map, not a list"},
		{name: "a plain-manifest source", src: header + "spec:\n  source:\n    path: a\n", def: &ApplicationDefinition{Namespace: "argocd", Name: "child", DefaultNamespace: "argocd", Source: -1, SourceType: application.SourceDirectory}, want: "cannot be written"},
		{name: "invalid YAML", src: header + "spec: [\n", want: "apps.yaml: invalid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := def
			if tt.def != nil {
				d = *tt.def
			}
			_, _, _, err := SetApplicationSource("apps.yaml", []byte(tt.src), d, SourceChange{Images: img})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// FuzzSetApplicationSource checks that any file either is refused or,
// once edited, holds the change: editing it again changes nothing.
func FuzzSetApplicationSource(f *testing.F) {
	header := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: child\n"
	for _, s := range []string{
		header + "spec:\n  source:\n    path: child\n",
		header + "spec:\n  source:\n    kustomize:\n      images:\n      - nginx:1\n",
		"kind: ConfigMap\n---\n" + header + "spec:\n  sources:\n  - path: a\n",
		header + "spec:\n  source:\n    kustomize: {images: [a]}\n    path: |\n      x\n",
	} {
		f.Add(s)
	}
	img := []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Image: mustRef("nginx")}, New: imageref.Version{Tag: "2"}}}
	def := ApplicationDefinition{Namespace: "argocd", Name: "child", DefaultNamespace: "argocd", Source: -1, SourceType: application.SourceKustomize}
	change := SourceChange{Images: img, Revision: "1.10"}
	f.Fuzz(func(t *testing.T, src string) {
		out, m, changed, err := SetApplicationSource("apps.yaml", []byte(src), def, change)
		if err != nil || len(changed.Images) == 0 && !changed.Revision {
			return
		}
		if !m.Found() {
			t.Fatal("changed without finding the definition")
		}
		again, m, changedAgain, err := SetApplicationSource("apps.yaml", out, def, change)
		if err != nil || !m.Found() || len(changedAgain.Images) != 0 || changedAgain.Revision || string(again) != string(out) {
			t.Fatalf("the edit is not stable: found %v, changed %v, error %v\n%s", m.Found(), changedAgain, err, out)
		}
	})
}
