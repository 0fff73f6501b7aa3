package manifest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

func param(name, value string) map[string]any {
	return map[string]any{"name": name, "value": value, "forceString": true}
}

func TestUpdateHelmParameters(t *testing.T) {
	tests := []struct {
		name        string
		current     []any
		images      []writeback.ImageUpdate
		want        []any
		wantChanged []string
	}{
		{
			name:        "default names appended",
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}}},
			want:        []any{param("image.name", ecrApp), param("image.tag", "v0.0.2")},
			wantChanged: []string{"app"},
		},
		{
			name:        "custom names",
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp), HelmImageName: "app.image.repository", HelmImageTag: "app.image.tag"}, New: imageref.Version{Tag: "v0.0.2"}}},
			want:        []any{param("app.image.repository", ecrApp), param("app.image.tag", "v0.0.2")},
			wantChanged: []string{"app"},
		},
		{
			name:        "image spec with a list index wins over the other names",
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb), HelmImageName: "ignored", HelmImageTag: "ignored", HelmImageSpec: "images[1].image"}, New: imageref.Version{Tag: "v0.0.3"}}},
			want:        []any{param("images[1].image", ecrWeb+":v0.0.3")},
			wantChanged: []string{"web"},
		},
		{
			name:        "tag with digest",
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("nginx")}, New: imageref.Version{Tag: "latest", Digest: digestA}}},
			want:        []any{param("image.name", "nginx"), param("image.tag", "latest@"+digestA)},
			wantChanged: []string{"app"},
		},
		{
			name:        "digest in its own parameter, the tag alone in the tag's",
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("nginx"), HelmImageDigest: "image.digest"}, New: imageref.Version{Tag: "1.27", Digest: digestA}}},
			want:        []any{param("image.name", "nginx"), param("image.tag", "1.27"), param("image.digest", digestA)},
			wantChanged: []string{"app"},
		},
		{
			name:        "a version not pinned empties the digest parameter",
			current:     []any{param("image.tag", "1.26"), param("image.digest", digestA)},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("nginx"), HelmImageDigest: "image.digest"}, New: imageref.Version{Tag: "1.27"}}},
			want:        []any{param("image.tag", "1.27"), param("image.digest", ""), param("image.name", "nginx")},
			wantChanged: []string{"app"},
		},
		{
			name:        "image spec with digest",
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("nginx"), HelmImageSpec: "image"}, New: imageref.Version{Tag: "latest", Digest: digestA}}},
			want:        []any{param("image", "nginx:latest@"+digestA)},
			wantChanged: []string{"app"},
		},
		{
			name: "existing parameters kept, ours replaced in place with their other keys",
			current: []any{
				map[string]any{"name": "replicaCount", "value": "2"},
				map[string]any{"name": "image.tag", "value": "v0.0.1", "futureField": map[string]any{"x": int64(1)}},
				map[string]any{"name": "service.port", "value": "8080", "forceString": false},
			},
			images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}}},
			want: []any{
				map[string]any{"name": "replicaCount", "value": "2"},
				map[string]any{"name": "image.tag", "value": "v0.0.2", "forceString": true, "futureField": map[string]any{"x": int64(1)}},
				map[string]any{"name": "service.port", "value": "8080", "forceString": false},
				param("image.name", ecrApp),
			},
			wantChanged: []string{"app"},
		},
		{
			name:    "already written, forceString left as the user set it",
			current: []any{map[string]any{"name": "image.name", "value": ecrApp}, param("image.tag", "v0.0.2")},
			images:  []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}}},
			want:    []any{map[string]any{"name": "image.name", "value": ecrApp}, param("image.tag", "v0.0.2")},
		},
		{
			name:        "every entry of a repeated name is updated",
			current:     []any{param("image.tag", "1"), param("image.tag", "2")},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("nginx"), HelmImageName: "image.repository"}, New: imageref.Version{Tag: "3"}}},
			want:        []any{param("image.tag", "3"), param("image.tag", "3"), param("image.repository", "nginx")},
			wantChanged: []string{"app"},
		},
		{
			name:        "a non-string value is replaced",
			current:     []any{map[string]any{"name": "image.tag", "value": int64(2)}},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("nginx"), HelmImageSpec: "image.tag"}, New: imageref.Version{Tag: "2"}}},
			want:        []any{param("image.tag", "nginx:2")},
			wantChanged: []string{"app"},
		},
		{
			name: "two images",
			current: []any{
				param("app.image", ecrApp+":v0.0.1"),
				param("web.image", ecrWeb+":v0.0.2"),
			},
			images: []writeback.ImageUpdate{
				{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp), HelmImageSpec: "app.image"}, New: imageref.Version{Tag: "v0.0.2"}},
				{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb), HelmImageSpec: "web.image"}, New: imageref.Version{Tag: "v0.0.2"}},
			},
			want: []any{
				param("app.image", ecrApp+":v0.0.2"),
				param("web.image", ecrWeb+":v0.0.2"),
			},
			wantChanged: []string{"app"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneList(tt.current)
			got, changed := UpdateHelmParameters(tt.current, tt.images)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("parameters (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.wantChanged, aliases(changed)); d != "" {
				t.Errorf("changed (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, tt.current); d != "" {
				t.Errorf("input modified (-before +after):\n%s", d)
			}
		})
	}
}

func cloneList(l []any) []any {
	if l == nil {
		return nil
	}
	out := make([]any, len(l))
	for i, e := range l {
		if m, ok := e.(map[string]any); ok {
			c := make(map[string]any, len(m))
			for k, v := range m {
				c[k] = v
			}
			e = c
		}
		out[i] = e
	}
	return out
}
