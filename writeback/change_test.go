package writeback

import (
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
)

// mustRef parses an image name as the annotations would.
func mustRef(s string) imageref.Reference {
	r, err := imageref.Parse(s)
	if err != nil {
		panic(err)
	}
	return r
}

func TestReportedChange(t *testing.T) {
	const ecr = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com"
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tags := func(old, new string) (imageref.Version, imageref.Version) {
		return imageref.Version{Tag: old}, imageref.Version{Tag: new}
	}
	tests := []struct {
		image, constraint string
		old, new          imageref.Version
		want              ReportedChange
	}{
		{image: "nginx", want: ReportedChange{FullName: "nginx", Name: "nginx"}},
		{image: "nginx", constraint: "~1.26", want: ReportedChange{FullName: "nginx", Name: "nginx"}},
		{image: "library/nginx", want: ReportedChange{FullName: "library/nginx", Name: "library/nginx"}},
		{image: "bitnami/redis", constraint: "7.x", want: ReportedChange{FullName: "bitnami/redis", Name: "bitnami/redis"}},
		// Written with Docker Hub's host: the host stays, library/ goes...
		{image: "docker.io/library/nginx", constraint: "1.x", want: ReportedChange{FullName: "docker.io/nginx", Name: "nginx"}},
		// ... unless the constraint is not a tag, where the text is split.
		{image: "docker.io/library/nginx", constraint: "^1", want: ReportedChange{FullName: "docker.io/library/nginx", Name: "library/nginx"}},
		{image: "index.docker.io/bitnami/redis", want: ReportedChange{FullName: "bitnami/redis", Name: "bitnami/redis"}},
		{image: "quay.io/org/app", constraint: "^2", want: ReportedChange{FullName: "quay.io/org/app", Name: "org/app"}},
		// Elsewhere than Docker Hub, library/ is kept (upstream main #1783).
		{image: "harbor.example.com/library/test-image", constraint: "0.1", want: ReportedChange{FullName: "harbor.example.com/library/test-image", Name: "library/test-image"}},
		{image: "harbor.example.com/library/nested/test-image", constraint: "^1", want: ReportedChange{FullName: "harbor.example.com/library/nested/test-image", Name: "library/nested/test-image"}},
		{image: ecr + "/eks-app", want: ReportedChange{FullName: ecr + "/eks-app", Name: "eks-app"}},
		{image: "localhost:5000/team/app", constraint: "stable", want: ReportedChange{FullName: "localhost:5000/team/app", Name: "team/app"}},
		{image: "reg.example.com:5000/app", constraint: ">=1.2 <2", want: ReportedChange{FullName: "reg.example.com:5000/app", Name: "app"}},
		// A host without '.' and a range: the old text split stops at the
		// port's ':'.
		{image: "localhost:5000/team/app", constraint: "^2", want: ReportedChange{FullName: "localhost", Name: "localhost"}},
		// Versions: the digest when there is one.
		{
			image: "ghcr.io/x/y", constraint: "stable",
			old: imageref.Version{Tag: "stable"}, new: imageref.Version{Tag: "stable", Digest: digest},
			want: ReportedChange{FullName: "ghcr.io/x/y", Name: "x/y", OldTag: "stable", NewTag: digest},
		},
	}
	for _, tt := range tests {
		t.Run(tt.image+":"+tt.constraint, func(t *testing.T) {
			old, new := tt.old, tt.new
			if old.IsZero() && new.IsZero() {
				old, new = tags("v1.0.0", "v1.1.0")
				tt.want.OldTag, tt.want.NewTag = "v1.0.0", "v1.1.0"
			}
			u := ImageUpdate{ImageSpec: settings.ImageSpec{Image: mustRef(tt.image), Constraint: tt.constraint}, Old: old, New: new}
			if got := u.Reported(); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The image written back keeps its name as written: library/ on a
// registry other than Docker Hub included (upstream main #1783).
func TestWrittenKeepsSpelling(t *testing.T) {
	for image, want := range map[string]string{
		"harbor.example.com/library/test-image": "harbor.example.com/library/test-image:v2",
		"harbor.example.com/library/a/b":        "harbor.example.com/library/a/b:v2",
		"nginx":                                 "nginx:v2",
		"docker.io/library/nginx":               "docker.io/library/nginx:v2",
	} {
		u := ImageUpdate{ImageSpec: settings.ImageSpec{Image: mustRef(image)}, New: imageref.Version{Tag: "v2"}}
		if got := u.Written(); got != want {
			t.Errorf("%s written as %q, want %q", image, got, want)
		}
	}
}
