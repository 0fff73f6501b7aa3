package manifest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

func TestSetSourceOverrides(t *testing.T) {
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2"}}
	web := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(gitWebImage), HelmImageSpec: "web.image"}, New: imageref.Version{Tag: "1.5.0"}}
	cmpApp := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "cmp-app", Image: mustRef(gitAppImage), PluginEnvName: "APP_IMAGE", PluginEnvTag: "APP_TAG"}, New: imageref.Version{Tag: "v0.0.2"}}
	cmpWeb := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "cmp-web", Image: mustRef(gitWebImage), PluginEnvSpec: "WEB"}, New: imageref.Version{Tag: "1.5.0"}}
	tests := []struct {
		name       string
		sourceType application.SourceType
		src        string
		images     []writeback.ImageUpdate
		want       string
		changed    []string
	}{
		{
			name: "new kustomize file", sourceType: application.SourceKustomize, images: []writeback.ImageUpdate{app, web},
			want:    "kustomize:\n  images:\n  - " + gitAppImage + ":v0.0.2\n  - " + gitWebImage + ":1.5.0\n",
			changed: []string{"app", "web"},
		},
		{
			name: "new helm file", sourceType: application.SourceHelm, images: []writeback.ImageUpdate{app, web},
			want: "helm:\n  parameters:\n" +
				"  - name: image.name\n    value: " + gitAppImage + "\n    forcestring: true\n" +
				"  - name: image.tag\n    value: v0.0.2\n    forcestring: true\n" +
				"  - name: web.image\n    value: " + gitWebImage + ":1.5.0\n    forcestring: true\n",
			changed: []string{"app", "web"},
		},
		{
			name: "kustomize merge keeps other keys and entries", sourceType: application.SourceKustomize, images: []writeback.ImageUpdate{app},
			src: "# managed by the image updater\nkustomize:\n  namePrefix: prod-\n  images:\n  - nginx:1.25\n  - " + gitAppImage + ":v0.0.1\n  - other=busybox:1\n",
			want: "# managed by the image updater\nkustomize:\n  namePrefix: prod-\n  images:\n" +
				"  - nginx:1.25\n  - " + gitAppImage + ":v0.0.2\n  - other=busybox:1\n",
			changed: []string{"app"},
		},
		{
			name: "helm merge keeps other parameters and their keys", sourceType: application.SourceHelm, images: []writeback.ImageUpdate{app},
			src: "helm:\n  parameters:\n  - name: replicas\n    value: \"3\"\n  - name: image.tag\n    value: v0.0.1\n    forceString: true\n  - name: image.name\n    value: " + gitAppImage + "\n  valueFiles: [values-prod.yaml]\n",
			want: "helm:\n  parameters:\n" +
				"  - name: image.name\n    value: " + gitAppImage + "\n" +
				"  - name: image.tag\n    value: v0.0.2\n    forceString: true\n" +
				"  - name: replicas\n    value: \"3\"\n" +
				"  valueFiles: [values-prod.yaml]\n",
			changed: []string{"app"},
		},
		{
			// Images with a plugin target go to the plugin's environment,
			// in place and in order; the others to Helm parameters, as
			// Argo CD Image Updater writes them for plugin sources.
			name: "plugin environment and parameters", sourceType: application.SourcePlugin, images: []writeback.ImageUpdate{app, cmpApp, cmpWeb},
			src: "plugin:\n  name: tanka\n  env:\n  - name: OTHER\n    value: kept\n  - name: APP_TAG\n    value: v0.0.1\n    comment: mine\n",
			want: "plugin:\n  name: tanka\n  env:\n  - name: OTHER\n    value: kept\n" +
				"  - name: APP_TAG\n    value: v0.0.2\n    comment: mine\n" +
				"  - name: APP_IMAGE\n    value: " + gitAppImage + "\n" +
				"  - name: WEB\n    value: " + gitWebImage + ":1.5.0\n" +
				"helm:\n  parameters:\n" +
				"  - name: image.name\n    value: " + gitAppImage + "\n    forcestring: true\n" +
				"  - name: image.tag\n    value: v0.0.2\n    forcestring: true\n",
			changed: []string{"cmp-app", "cmp-web", "app"},
		},
		{
			name: "nothing to do", sourceType: application.SourceKustomize, images: []writeback.ImageUpdate{app},
			src:  "kustomize:\n  images: [\"" + gitAppImage + ":v0.0.2\"]\n",
			want: "kustomize:\n  images: [\"" + gitAppImage + ":v0.0.2\"]\n",
		},
		{
			name: "kustomize override with an original name", sourceType: application.SourceKustomize,
			images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(gitAppImage), KustomizeImageName: mustRef("app")}, New: imageref.Version{Tag: "v2", Digest: gitDigest}}},
			src:    "kustomize:\n  images:\n  - app=" + gitAppImage + ":v1\n",
			want:   "kustomize:\n  images:\n  - app=" + gitAppImage + ":v2@" + gitDigest + "\n", changed: []string{"app"},
		},
		// The file as Argo CD Image Updater writes it changes only in the
		// values it updates.
		{
			name: "a file the old tool wrote", sourceType: application.SourceHelm, images: []writeback.ImageUpdate{app},
			src: "helm:\n  parameters:\n  - name: image.name\n    value: " + gitAppImage + "\n    forcestring: true\n" +
				"  - name: image.tag\n    value: v0.0.1\n    forcestring: true\n",
			want: "helm:\n  parameters:\n  - name: image.name\n    value: " + gitAppImage + "\n    forcestring: true\n" +
				"  - name: image.tag\n    value: v0.0.2\n    forcestring: true\n",
			changed: []string{"app"},
		},
		{
			name: "document start kept", sourceType: application.SourceKustomize, images: []writeback.ImageUpdate{app},
			src:     "---\nkustomize:\n  images:\n  - nginx:1.25\n",
			want:    "---\nkustomize:\n  images:\n  - nginx:1.25\n  - " + gitAppImage + ":v0.0.2\n",
			changed: []string{"app"},
		},
		{
			name: "directive, comment and marker kept", sourceType: application.SourceKustomize, images: []writeback.ImageUpdate{app},
			src:     "%YAML 1.2\n# header\n---\t# start\n# body\nkustomize:\n  images: []\n",
			want:    "%YAML 1.2\n# header\n---\t# start\n# body\nkustomize:\n  images:\n  - " + gitAppImage + ":v0.0.2\n",
			changed: []string{"app"},
		},
		{
			name: "no marker added", sourceType: application.SourceKustomize, images: []writeback.ImageUpdate{app},
			src:     "# header\nkustomize:\n  images: []\n",
			want:    "# header\nkustomize:\n  images:\n  - " + gitAppImage + ":v0.0.2\n",
			changed: []string{"app"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var src []byte
			if tt.src != "" {
				src = []byte(tt.src)
			}
			got, changed, err := SetSourceOverrides(".argocd-source-main.yaml", src, tt.sourceType, tt.images)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("file (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.changed, aliases(changed)); diff != "" {
				t.Errorf("changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetSourceOverridesErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"invalid YAML", "kustomize:\n  images: [\n", ".argocd-source-main.yaml: invalid YAML: yaml: line"},
		{"top level a list", "- a\n", ".argocd-source-main.yaml:1: the top level is a list, not a map"},
		{"images a map", "kustomize:\n  images:\n    a: b\n", ".argocd-source-main.yaml:3: images is a map, not a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := SetSourceOverrides(".argocd-source-main.yaml", []byte(tt.src), application.SourceKustomize, []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Image: mustRef("nginx")}, New: imageref.Version{Tag: "1"}}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestSplitDocumentStart(t *testing.T) {
	tests := []struct{ src, prefix string }{
		{"---\na: 1\n", "---\n"},
		{"--- # c\na: 1\n", "--- # c\n"},
		{"\n# c\n%YAML 1.2\n---\r\na: 1\n", "\n# c\n%YAML 1.2\n---\r\n"},
		{"---", "---\n"},
		{"   ---\na: 1\n", ""},
		{"--- a: 1\n", ""},
		{"----\n", ""},
		{"a: 1\n---\nb: 2\n", ""},
		{"", ""},
	}
	for _, tt := range tests {
		prefix, body := splitDocumentStart([]byte(tt.src))
		if string(prefix) != tt.prefix {
			t.Errorf("%q: prefix %q, want %q", tt.src, prefix, tt.prefix)
		}
		if tt.prefix == "" && string(body) != tt.src {
			t.Errorf("%q: body %q, want the whole text", tt.src, body)
		}
	}
}
