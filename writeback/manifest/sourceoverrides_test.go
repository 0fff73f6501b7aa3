package manifest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/writeback"
)

func TestSetSourceOverrides(t *testing.T) {
	app := writeback.ImageUpdate{ImageSpec: appwatch.ImageSpec{Alias: "app", Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2"}}
	web := writeback.ImageUpdate{ImageSpec: appwatch.ImageSpec{Alias: "web", Image: mustRef(gitWebImage), HelmImageSpec: "web.image"}, New: imageref.Version{Tag: "1.5.0"}}
	tests := []struct {
		name       string
		sourceType appwatch.SourceType
		src        string
		images     []writeback.ImageUpdate
		want       string
		changed    []string
	}{
		{
			name: "new kustomize file", sourceType: appwatch.SourceKustomize, images: []writeback.ImageUpdate{app, web},
			want:    "kustomize:\n  images:\n    - " + gitAppImage + ":v0.0.2\n    - " + gitWebImage + ":1.5.0\n",
			changed: []string{"app", "web"},
		},
		{
			name: "new helm file", sourceType: appwatch.SourceHelm, images: []writeback.ImageUpdate{app, web},
			want: "helm:\n  parameters:\n" +
				"    - name: image.name\n      value: " + gitAppImage + "\n      forceString: true\n" +
				"    - name: image.tag\n      value: v0.0.2\n      forceString: true\n" +
				"    - name: web.image\n      value: " + gitWebImage + ":1.5.0\n      forceString: true\n",
			changed: []string{"app", "web"},
		},
		{
			name: "kustomize merge keeps other keys and entries", sourceType: appwatch.SourceKustomize, images: []writeback.ImageUpdate{app},
			src: "# managed by the image updater\nkustomize:\n  namePrefix: prod-\n  images:\n  - nginx:1.25\n  - " + gitAppImage + ":v0.0.1\n  - other=busybox:1\n",
			want: "# managed by the image updater\nkustomize:\n  namePrefix: prod-\n  images:\n" +
				"    - nginx:1.25\n    - " + gitAppImage + ":v0.0.2\n    - other=busybox:1\n",
			changed: []string{"app"},
		},
		{
			name: "helm merge keeps other parameters and their keys", sourceType: appwatch.SourceHelm, images: []writeback.ImageUpdate{app},
			src: "helm:\n  parameters:\n  - name: replicas\n    value: \"3\"\n  - name: image.tag\n    value: v0.0.1\n    forceString: true\n  - name: image.name\n    value: " + gitAppImage + "\n  valueFiles: [values-prod.yaml]\n",
			want: "helm:\n  parameters:\n" +
				"    - name: replicas\n      value: \"3\"\n" +
				"    - name: image.tag\n      value: v0.0.2\n      forceString: true\n" +
				"    - name: image.name\n      value: " + gitAppImage + "\n" +
				"  valueFiles: [values-prod.yaml]\n",
			changed: []string{"app"},
		},
		{
			name: "nothing to do", sourceType: appwatch.SourceKustomize, images: []writeback.ImageUpdate{app},
			src:  "kustomize:\n  images: [\"" + gitAppImage + ":v0.0.2\"]\n",
			want: "kustomize:\n  images: [\"" + gitAppImage + ":v0.0.2\"]\n",
		},
		{
			name: "kustomize override with an original name", sourceType: appwatch.SourceKustomize,
			images: []writeback.ImageUpdate{{ImageSpec: appwatch.ImageSpec{Alias: "app", Image: mustRef(gitAppImage), KustomizeImageName: mustRef("app")}, New: imageref.Version{Tag: "v2", Digest: gitDigest}}},
			src:    "kustomize:\n  images:\n  - app=" + gitAppImage + ":v1\n",
			want:   "kustomize:\n  images:\n    - app=" + gitAppImage + ":v2@" + gitDigest + "\n", changed: []string{"app"},
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
			_, _, err := SetSourceOverrides(".argocd-source-main.yaml", []byte(tt.src), appwatch.SourceKustomize, []writeback.ImageUpdate{{ImageSpec: appwatch.ImageSpec{Image: mustRef("nginx")}, New: imageref.Version{Tag: "1"}}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
