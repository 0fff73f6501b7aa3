package imageupdater

import (
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
// the write-back, and needs a branch of its own.
func TestWriteBackPullRequest(t *testing.T) {
	tests := []struct {
		name    string
		branch  string
		pr      *api.PullRequestConfig
		want    forge.Kind
		problem string
	}{
		{name: "github", branch: "main:image-updates", pr: &api.PullRequestConfig{GitHub: &api.ForgeConfig{}}, want: forge.GitHub},
		{name: "gitlab", branch: ":image-updates", pr: &api.PullRequestConfig{GitLab: &api.ForgeConfig{}}, want: forge.GitLab},
		{name: "none", branch: "main"},
		{name: "no branch of its own", branch: "main", pr: &api.PullRequestConfig{GitHub: &api.ForgeConfig{}},
			problem: "ImageUpdater ns/iu spec.writeBackConfig.gitConfig.branch: a pull request needs a branch of its own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iu := &api.ImageUpdater{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
				Spec: api.ImageUpdaterSpec{
					WriteBackConfig: &api.WriteBackConfig{Method: ptr("git"), GitConfig: &api.GitConfig{Branch: &tt.branch, PullRequest: tt.pr}},
					ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", Images: []api.ImageConfig{{Alias: "web", ImageName: "nginx"}}}},
				},
			}
			a := refConfig(iu, 0, nil)
			if a.WriteBack.PullRequest != tt.want {
				t.Errorf("PullRequest = %q, want %q", a.WriteBack.PullRequest, tt.want)
			}
			var problems []string
			for _, p := range a.Problems {
				problems = append(problems, p.Error())
			}
			if got := strings.Join(problems, "\n"); (tt.problem == "") != (got == "") || !strings.Contains(got, tt.problem) {
				t.Errorf("problems %q, want %q", got, tt.problem)
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
