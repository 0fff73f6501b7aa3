package manifest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/writeback"
)

func TestParseValuesPath(t *testing.T) {
	tests := []struct {
		in   string
		want []valuesPathElem
		err  bool
	}{
		{in: "image.tag", want: []valuesPathElem{{key: "image"}, {key: "tag"}}},
		{in: "images[1].image", want: []valuesPathElem{{key: "images"}, {index: 1, isIndex: true}, {key: "image"}}},
		{in: "a[0][2]", want: []valuesPathElem{{key: "a"}, {index: 0, isIndex: true}, {index: 2, isIndex: true}}},
		{in: `annotations.example\.com/tag`, want: []valuesPathElem{{key: "annotations"}, {key: "example.com/tag"}}},
		{in: "tag", want: []valuesPathElem{{key: "tag"}}},
		{in: "", err: true},
		{in: "a..b", err: true},
		{in: "[0].a", err: true},
		{in: "a[x]", err: true},
		{in: "a[0", err: true},
		{in: "a[0]b", err: true},
		{in: "a.", err: true},
	}
	for _, tt := range tests {
		got, err := parseValuesPath(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("%q: err %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(valuesPathElem{})); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.in, diff)
		}
		if err == nil && valuesPathString(got) != tt.in {
			t.Errorf("%q renders back as %q", tt.in, valuesPathString(got))
		}
	}
}

// TestHelmValuesGolden sets nested keys, a list entry by index and keys
// that do not exist yet, comparing with testdata/helmvalues/expected.
func TestHelmValuesGolden(t *testing.T) {
	tests := map[string]struct {
		images  []writeback.ImageUpdate
		changed []string
	}{
		"values.yaml": {
			images: []writeback.ImageUpdate{
				{ImageSpec: appwatch.ImageSpec{Alias: "app", Image: mustRef(gitAppImage), HelmImageName: "app.image.name", HelmImageTag: "app.image.tag"}, New: imageref.Version{Tag: "v0.0.2"}},
				{ImageSpec: appwatch.ImageSpec{Alias: "web", Image: mustRef(gitWebImage), HelmImageSpec: "images[1].image"}, New: imageref.Version{Tag: "1.5.0"}},
				{ImageSpec: appwatch.ImageSpec{Alias: "worker", Image: mustRef("ghcr.io/example/worker"), HelmImageName: "worker.image.repository", HelmImageTag: "worker.image.tag"}, New: imageref.Version{Tag: "2.0"}},
			},
			changed: []string{"app", "web", "worker"},
		},
		"null-parent.yaml": {
			images:  []writeback.ImageUpdate{{ImageSpec: appwatch.ImageSpec{Alias: "app", Image: mustRef(gitAppImage), HelmImageName: "app.image.repository", HelmImageTag: "app.image.tag"}, New: imageref.Version{Tag: "v0.0.2", Digest: gitDigest}}},
			changed: []string{"app"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			checkGolden(t, "testdata/helmvalues", name, tt.images, tt.changed, SetHelmValues)
		})
	}
}

func TestHelmValuesErrors(t *testing.T) {
	tests := []struct {
		name, src, param, want string
	}{
		{"index out of range", "images:\n- image: a\n", "images[3].image", "values.yaml:2: images has 1 entries, so images[3] does not exist"},
		{"value where a map is needed", "image: nginx\n", "image.tag", "values.yaml:1: image is a value, not a map"},
		{"map where a value is needed", "image:\n  tag:\n    x: 1\n", "image.tag", "values.yaml:3: image.tag is a map, not a single value"},
		{"invalid YAML", "a: b\n c: d\n", "image.tag", "values.yaml: invalid YAML: yaml: line 2"},
		{"flow map", "image: {name: a}\n", "image.tag", "values.yaml:1: cannot add image.tag to a flow-style map"},
		{"bad path", "a: b\n", "a..b", `invalid value path "a..b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := SetHelmValues("values.yaml", []byte(tt.src), []writeback.ImageUpdate{{ImageSpec: appwatch.ImageSpec{Image: mustRef("nginx"), HelmImageSpec: tt.param}, New: imageref.Version{Tag: "1"}}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestHelmValuesInPlace(t *testing.T) {
	tests := []struct{ name, src, param, want string }{
		{"flow map value", "image: {name: a, tag: v1}  # x\n", "image.tag", "image: {name: a, tag: v2}  # x\n"},
		{"single quotes", "tag: 'v1'\n", "tag", "tag: 'v2'\n"},
		{"empty value", "image:\n  tag:  # set me\n", "image.tag", "image:\n  tag: v2  # set me\n"},
		{"number becomes string", "tag: 1\n", "tag", "tag: v2\n"},
		{"list of values", "tags: [v0, v1]\n", "tags[1]", "tags: [v0, v2]\n"},
		{"empty file", "", "image.tag", "image:\n  tag: v2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := SetHelmValues("values.yaml", []byte(tt.src), []writeback.ImageUpdate{{ImageSpec: appwatch.ImageSpec{Image: mustRef("nginx"), HelmImageName: "unused", HelmImageTag: tt.param}, New: imageref.Version{Tag: "v2"}}})
			if err != nil {
				t.Fatal(err)
			}
			// The name parameter ("unused") is added too; look at the rest.
			got = []byte(strings.Replace(string(got), "unused: nginx\n", "", 1))
			if diff := cmp.Diff(tt.want, string(got)); diff != "" || len(changed) != 1 {
				t.Errorf("changed %d (-want +got):\n%s", len(changed), diff)
			}
		})
	}
}
