package imageupdater

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/forge"
)

// FuzzRefConfig feeds refConfig what a tenant may write in a resource: it
// must never panic, and each image is either configured or named in a
// problem.
func FuzzRefConfig(f *testing.F) {
	f.Add("nginx:~1.26", "regexp:^1\\.", "pullsecret:ns/name", "git:secret:ns/name", "kustomization:/apps", "linux/amd64", "web")
	f.Add("localhost:5000/app@sha256:abc", "any", "env:X", "git", "helmvalues", "linux/arm64/v8,windows/amd64", "")
	f.Add(":", "regexp:(", "", "git:secret:", "kustomization.yaml", "/", "a=b")
	f.Fuzz(func(t *testing.T, imageName, allowTags, pullSecret, method, target, platforms, kustomizeName string) {
		iu := &api.ImageUpdater{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
			Spec: api.ImageUpdaterSpec{
				CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: &allowTags, PullSecret: &pullSecret, Platforms: strings.Split(platforms, ",")},
				WriteBackConfig:      &api.WriteBackConfig{Method: &method, GitConfig: &api.GitConfig{WriteBackTarget: &target}},
				ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", Images: []api.ImageConfig{{
					Alias: "web", ImageName: imageName,
					ManifestTarget: &api.ManifestTarget{Kustomize: &api.KustomizeTarget{Name: &kustomizeName}},
				}}}},
			},
		}
		a := refConfig(iu, 0, nil)
		if len(a.Images) == 0 && len(a.Problems) == 0 {
			t.Fatalf("image %q neither configured nor reported", imageName)
		}
		for _, p := range a.Problems {
			if !strings.HasPrefix(p.Error(), "ImageUpdater ns/iu spec.") {
				t.Errorf("problem does not name the resource and field: %q", p.Error())
			}
		}
	})
}

// TestWriteBackPullRequest: gitConfig.pullRequest chooses the service of
// the write-back; a branch naming only the base gets v1.3.0's branch of
// the request's own.
func TestWriteBackPullRequest(t *testing.T) {
	tests := []struct {
		name       string
		branch     string
		pr         *api.PullRequestConfig
		want       forge.Kind
		wantBranch string
		wantLabels []string
	}{
		{name: "github", branch: "main:image-updates", pr: &api.PullRequestConfig{GitHub: &api.ForgeConfig{}}, want: forge.GitHub, wantBranch: "main:image-updates"},
		{name: "gitlab", branch: ":image-updates", pr: &api.PullRequestConfig{GitLab: &api.ForgeConfig{}}, want: forge.GitLab, wantBranch: ":image-updates"},
		{name: "none", branch: "main", wantBranch: "main"},
		{name: "the base only, as v1.3.0", branch: "main", pr: &api.PullRequestConfig{GitHub: &api.ForgeConfig{}, Labels: []string{"image-update"}},
			want: forge.GitHub, wantBranch: "main:image-updater-{{.TargetKey}}-{{.SHA256}}", wantLabels: []string{"image-update"}},
		{name: "no branch: the target revision is the base", pr: &api.PullRequestConfig{GitLab: &api.ForgeConfig{}},
			want: forge.GitLab, wantBranch: ":image-updater-{{.TargetKey}}-{{.SHA256}}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var branch *string
			if tt.branch != "" {
				branch = &tt.branch
			}
			iu := &api.ImageUpdater{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
				Spec: api.ImageUpdaterSpec{
					WriteBackConfig: &api.WriteBackConfig{Method: ptr("git"), GitConfig: &api.GitConfig{Branch: branch, PullRequest: tt.pr}},
					ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", Images: []api.ImageConfig{{Alias: "web", ImageName: "nginx"}}}},
				},
			}
			a := refConfig(iu, 0, nil)
			if a.WriteBack.PullRequest != tt.want || a.WriteBack.GitBranch != tt.wantBranch || !slices.Equal(a.WriteBack.PullRequestLabels, tt.wantLabels) {
				t.Errorf("PullRequest %q, branch %q, labels %q; want %q, %q, %q", a.WriteBack.PullRequest, a.WriteBack.GitBranch, a.WriteBack.PullRequestLabels, tt.want, tt.wantBranch, tt.wantLabels)
			}
			if len(a.Problems) != 0 {
				t.Errorf("problems %v", a.Problems)
			}
		})
	}
}

// TestImagesVerificationKey: the most specific imagesVerification gives
// the key, in the resource's namespace, with cosign's default field.
func TestImagesVerificationKey(t *testing.T) {
	iu := &api.ImageUpdater{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
		Spec: api.ImageUpdaterSpec{
			ImagesVerification: &api.ImagesVerification{CosignKey: &api.CosignKey{SecretName: "spec-key"}},
			ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", Images: []api.ImageConfig{
				{Alias: "a", ImageName: "nginx"},
				{Alias: "b", ImageName: "nginx", ImagesVerification: &api.ImagesVerification{CosignKey: &api.CosignKey{SecretName: "own", Key: "pub"}}},
				{Alias: "c", ImageName: "nginx", ImagesVerification: &api.ImagesVerification{Enabled: ptr(false)}},
			}}},
		},
	}
	a := refConfig(iu, 0, nil)
	if len(a.Problems) != 0 || len(a.Images) != 3 {
		t.Fatalf("images %d, problems %v", len(a.Images), a.Problems)
	}
	want := []appwatch.SignatureKey{
		{Name: "spec-key", Field: DefaultCosignKeyField, Setting: "ImageUpdater ns/iu spec.imagesVerification.cosignKey"},
		{Name: "own", Field: "pub", Setting: "ImageUpdater ns/iu spec.applicationRefs[0].images[1].imagesVerification.cosignKey"},
		{},
	}
	for i, s := range a.Images {
		if s.SignatureKey != want[i] {
			t.Errorf("image %s: key %+v, want %+v", s.Alias, s.SignatureKey, want[i])
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestSpecificity: v1.3.0's order of applicationRefs selecting one
// Application: an exact name, then label selectors, then longer literals.
func TestSpecificity(t *testing.T) {
	sel := func(labels int) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := range labels {
			s.MatchLabels[string(rune('a'+i))] = "x"
		}
		return s
	}
	ordered := []api.ApplicationRef{
		{NamePattern: "app-prod"},
		{NamePattern: "*", LabelSelectors: sel(2)},
		{NamePattern: "*", LabelSelectors: sel(1)},
		{NamePattern: "app-prod-*"},
		{NamePattern: "app-[a-z]*"},
		{NamePattern: "*"},
	}
	for i := 1; i < len(ordered); i++ {
		if a, b := specificity(ordered[i-1]), specificity(ordered[i]); a <= b {
			t.Errorf("%+v (%d) should rank above %+v (%d)", ordered[i-1], a, ordered[i], b)
		}
	}
}
