package imageupdater

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
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
