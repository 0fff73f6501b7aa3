package manifest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// mustRef parses an image name as the annotations would.
func mustRef(s string) imageref.Reference {
	r, err := imageref.Parse(s)
	if err != nil {
		panic(err)
	}
	return r
}

const (
	ecrApp  = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app"
	ecrWeb  = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web"
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestUpdateKustomizeImages(t *testing.T) {
	tests := []struct {
		name        string
		current     []any
		images      []writeback.ImageUpdate
		want        []any
		wantChanged []string // aliases
	}{
		{
			name:    "no list yet",
			current: nil,
			images: []writeback.ImageUpdate{
				{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
				{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb)}, New: imageref.Version{Tag: "v0.0.3"}},
			},
			want:        []any{ecrApp + ":v0.0.2", ecrWeb + ":v0.0.3"},
			wantChanged: []string{"app", "web"},
		},
		{
			name:        "replaced in place, others kept in order",
			current:     []any{"busybox:1.36", "nginx:1.25.0", "quay.io/x/y:3"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "n", Image: mustRef("nginx")}, New: imageref.Version{Tag: "1.26.0"}}},
			want:        []any{"busybox:1.36", "nginx:1.26.0", "quay.io/x/y:3"},
			wantChanged: []string{"n"},
		},
		{
			name:    "already written",
			current: []any{ecrApp + ":v0.0.2", ecrWeb + ":v0.0.3"},
			images: []writeback.ImageUpdate{
				{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
				{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb)}, New: imageref.Version{Tag: "v0.0.3"}},
			},
			want: []any{ecrApp + ":v0.0.2", ecrWeb + ":v0.0.3"},
		},
		{
			name:        "override of another name",
			current:     []any{"nginx=registry.example.com/mirror/nginx:1.25.0"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "n", Image: mustRef("registry.example.com/mirror/nginx"), KustomizeImageName: mustRef("nginx")}, New: imageref.Version{Tag: "1.26.0"}}},
			want:        []any{"nginx=registry.example.com/mirror/nginx:1.26.0"},
			wantChanged: []string{"n"},
		},
		{
			name:        "override of another name, appended",
			current:     []any{"busybox:1.36"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "n", Image: mustRef("registry.example.com/mirror/nginx"), KustomizeImageName: mustRef("nginx")}, New: imageref.Version{Tag: "1.26.0"}}},
			want:        []any{"busybox:1.36", "nginx=registry.example.com/mirror/nginx:1.26.0"},
			wantChanged: []string{"n"},
		},
		{
			name:        "override name equal to the image is written plainly",
			current:     []any{"nginx=nginx:1.25.0"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "n", Image: mustRef("nginx"), KustomizeImageName: mustRef("nginx")}, New: imageref.Version{Tag: "1.26.0"}}},
			want:        []any{"nginx:1.26.0"},
			wantChanged: []string{"n"},
		},
		// Argo CD Image Updater's answers: an entry naming the image's
		// repository path (on another registry, or without the name it
		// overrides) is replaced rather than kept beside a new one.
		{
			name:        "plain entry of the image becomes the override of another name",
			current:     []any{"registry.example.com/mirror/nginx:1.25.0"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "n", Image: mustRef("registry.example.com/mirror/nginx"), KustomizeImageName: mustRef("nginx")}, New: imageref.Version{Tag: "1.26.0"}}},
			want:        []any{"nginx=registry.example.com/mirror/nginx:1.26.0"},
			wantChanged: []string{"n"},
		},
		{
			name:        "moved to another registry through kustomize.image-name, same version",
			current:     []any{"jannfis/foobar:1.0.1"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "foobar", Image: mustRef("gcr.io/jannfis/foobar"), KustomizeImageName: mustRef("jannfis/foobar")}, New: imageref.Version{Tag: "1.0.1"}}},
			want:        []any{"jannfis/foobar=gcr.io/jannfis/foobar:1.0.1"},
			wantChanged: []string{"foobar"},
		},
		{
			name:        "moved to another registry",
			current:     []any{"docker.io/example/app:1.0", "busybox:1.36"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("gcr.io/example/app")}, New: imageref.Version{Tag: "1.1"}}},
			want:        []any{"gcr.io/example/app:1.1", "busybox:1.36"},
			wantChanged: []string{"app"},
		},
		{
			name:        "an override of another name is not taken over",
			current:     []any{"other=quay.io/example/app:1.0"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("gcr.io/example/app")}, New: imageref.Version{Tag: "1.1"}}},
			want:        []any{"other=quay.io/example/app:1.0", "gcr.io/example/app:1.1"},
			wantChanged: []string{"app"},
		},
		{
			name:        "an entry by name wins over one on another registry",
			current:     []any{"quay.io/example/app:1.0", "gcr.io/example/app:1.0"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("gcr.io/example/app")}, New: imageref.Version{Tag: "1.1"}}},
			want:        []any{"quay.io/example/app:1.0", "gcr.io/example/app:1.1"},
			wantChanged: []string{"app"},
		},
		{
			name:        "another spelling of the image is updated in place, keeping its spelling",
			current:     []any{"docker.io/library/nginx:1.25.0", "busybox:1.36"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "n", Image: mustRef("nginx")}, New: imageref.Version{Tag: "1.26.0"}}},
			want:        []any{"docker.io/library/nginx:1.26.0", "busybox:1.36"},
			wantChanged: []string{"n"},
		},
		{
			name:        "the short spelling is updated for a full image name",
			current:     []any{"nginx:1.25.0"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "n", Image: mustRef("index.docker.io/library/nginx")}, New: imageref.Version{Tag: "1.26.0"}}},
			want:        []any{"nginx:1.26.0"},
			wantChanged: []string{"n"},
		},
		{
			name:        "an override of another name in another spelling",
			current:     []any{"library/nginx=registry.example.com/mirror/nginx:1.25.0"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "n", Image: mustRef("registry.example.com/mirror/nginx"), KustomizeImageName: mustRef("nginx")}, New: imageref.Version{Tag: "1.26.0"}}},
			want:        []any{"library/nginx=registry.example.com/mirror/nginx:1.26.0"},
			wantChanged: []string{"n"},
		},
		{
			name:        "digest replaced",
			current:     []any{"ghcr.io/org/api:v1@" + digestA},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "api", Image: mustRef("ghcr.io/org/api")}, New: imageref.Version{Tag: "v1", Digest: digestB}}},
			want:        []any{"ghcr.io/org/api:v1@" + digestB},
			wantChanged: []string{"api"},
		},
		{
			name:        "digest without tag",
			current:     []any{"ghcr.io/org/api@" + digestA},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "api", Image: mustRef("ghcr.io/org/api")}, New: imageref.Version{Digest: digestB}}},
			want:        []any{"ghcr.io/org/api@" + digestB},
			wantChanged: []string{"api"},
		},
		{
			name:        "registry with a port",
			current:     []any{"localhost:5000/app:1.0", "localhost:5000/app-two:1.0"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("localhost:5000/app")}, New: imageref.Version{Tag: "1.1"}}},
			want:        []any{"localhost:5000/app:1.1", "localhost:5000/app-two:1.0"},
			wantChanged: []string{"app"},
		},
		{
			name:        "prefix of another name does not match",
			current:     []any{"localhost:5000/app-two:1.0"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("localhost:5000/app")}, New: imageref.Version{Tag: "1.1"}}},
			want:        []any{"localhost:5000/app-two:1.0", "localhost:5000/app:1.1"},
			wantChanged: []string{"app"},
		},
		{
			name:        "entries that are not strings are kept",
			current:     []any{int64(3), "nginx:1.0"},
			images:      []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "n", Image: mustRef("nginx")}, New: imageref.Version{Tag: "1.1"}}},
			want:        []any{int64(3), "nginx:1.1"},
			wantChanged: []string{"n"},
		},
		{
			name:    "only the image that changed is reported",
			current: []any{ecrApp + ":v0.0.2", ecrWeb + ":v0.0.1"},
			images: []writeback.ImageUpdate{
				{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(ecrApp)}, New: imageref.Version{Tag: "v0.0.2"}},
				{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(ecrWeb)}, New: imageref.Version{Tag: "v0.0.2"}},
			},
			want:        []any{ecrApp + ":v0.0.2", ecrWeb + ":v0.0.2"},
			wantChanged: []string{"web"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]any(nil), tt.current...)
			got, changed := UpdateKustomizeImages(tt.current, tt.images)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("images (-want +got):\n%s", d)
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

func aliases(images []writeback.ImageUpdate) []string {
	var out []string
	for _, img := range images {
		out = append(out, img.Alias)
	}
	return out
}
