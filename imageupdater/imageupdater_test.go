package imageupdater_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/imageupdater"
)

func TestImageUpdater(t *testing.T) {
	s := startServers(t)
	t.Run("fields", func(t *testing.T) { testFields(t, s) })
	t.Run("precedence", func(t *testing.T) { testPrecedence(t, s) })
	t.Run("selection", func(t *testing.T) { testSelection(t, s) })
	t.Run("overlap", func(t *testing.T) { testOverlap(t, s) })
	t.Run("status", func(t *testing.T) { testStatus(t, s) })
}

// refs is one applicationRef selecting every Application with these images.
func refs(images ...api.ImageConfig) []api.ApplicationRef {
	return []api.ApplicationRef{{NamePattern: "*", Images: images}}
}

func condition(iu *api.ImageUpdater, typ string) metav1.Condition {
	if c := apimeta.FindStatusCondition(iu.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// testFields covers each field of the schema: the Application "app" of a
// namespace of its own, running 1.0.0 of an image with the tags below,
// under one ImageUpdater.
func testFields(t *testing.T, s *servers) {
	tags := []string{"1.0.0", "1.0.1", "1.1.0", "2.0.0"}
	kustomizeIs := func(want func(img string) []string) func(*testing.T, *world, *unstructured.Unstructured) {
		return func(t *testing.T, w *world, app *unstructured.Unstructured) {
			t.Helper()
			if got, want := kustomizeImages(t, app), want(w.image("web")); !slices.Equal(got, want) {
				t.Errorf("kustomize images = %q, want %q", got, want)
			}
		}
	}
	unchanged := kustomizeIs(func(string) []string { return nil })
	cases := []struct {
		name string
		helm bool
		// running is what the Application runs; 1.0.0 when empty.
		running string
		spec    func(img string) api.ImageUpdaterSpec
		want    func(*testing.T, *world, *unstructured.Unstructured)
		// wantError is in the Error condition's message; "" for none.
		wantError string
	}{
		{
			name: "imageName constraint, semver by default",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img + ":~1.0"})}
			},
			want: kustomizeIs(func(img string) []string { return []string{img + ":1.0.1"} }),
		},
		{
			name: "deprecated spec.namespace is accepted and ignored",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{Namespace: ptr("elsewhere"), ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img})}
			},
			want: kustomizeIs(func(img string) []string { return []string{img + ":2.0.0"} }),
		},
		{
			name: "updateStrategy",
			spec: func(img string) api.ImageUpdaterSpec {
				// alphabetical: "2.0.0" sorts last, as semver would have it too;
				// ignoreTags keeps it out to tell the strategies apart below.
				return api.ImageUpdaterSpec{
					CommonUpdateSettings: &api.CommonUpdateSettings{UpdateStrategy: ptr("alphabetical"), IgnoreTags: []string{"2.0.0"}, AllowTags: ptr("regexp:^1\\.(0\\.0|0\\.1)$")},
					ApplicationRefs:      refs(api.ImageConfig{Alias: "web", ImageName: img}),
				}
			},
			want: kustomizeIs(func(img string) []string { return []string{img + ":1.0.1"} }),
		},
		{
			name: "allowTags",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{
					CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr("regexp:^1\\.")},
					ApplicationRefs:      refs(api.ImageConfig{Alias: "web", ImageName: img}),
				}
			},
			want: kustomizeIs(func(img string) []string { return []string{img + ":1.1.0"} }),
		},
		{
			name: "ignoreTags",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{
					CommonUpdateSettings: &api.CommonUpdateSettings{IgnoreTags: []string{"2.*", "1.1.*"}},
					ApplicationRefs:      refs(api.ImageConfig{Alias: "web", ImageName: img}),
				}
			},
			want: kustomizeIs(func(img string) []string { return []string{img + ":1.0.1"} }),
		},
		{
			name:    "without forceUpdate an image not running is left alone",
			running: "example.com/other:1.0.0",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img})}
			},
			want: unchanged,
		},
		{
			name:    "forceUpdate",
			running: "example.com/other:1.0.0",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{
					CommonUpdateSettings: &api.CommonUpdateSettings{ForceUpdate: ptr(true)},
					ApplicationRefs:      refs(api.ImageConfig{Alias: "web", ImageName: img}),
				}
			},
			want: kustomizeIs(func(img string) []string { return []string{img + ":2.0.0"} }),
		},
		{
			name: "manifestTargets.kustomize.name",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img,
					ManifestTarget: &api.ManifestTarget{Kustomize: &api.KustomizeTarget{Name: ptr("example/web")}}})}
			},
			want: kustomizeIs(func(img string) []string { return []string{"example/web=" + img + ":2.0.0"} }),
		},
		{
			name: "manifestTargets.helm name and tag",
			helm: true,
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img,
					ManifestTarget: &api.ManifestTarget{Helm: &api.HelmTarget{Name: ptr("web.repository"), Tag: ptr("web.tag")}}})}
			},
			want: func(t *testing.T, w *world, app *unstructured.Unstructured) {
				got := helmParameters(t, app)
				if got["web.repository"] != w.image("web") || got["web.tag"] != "2.0.0" {
					t.Errorf("helm parameters = %v", got)
				}
			},
		},
		{
			name: "manifestTargets.helm spec",
			helm: true,
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img,
					ManifestTarget: &api.ManifestTarget{Helm: &api.HelmTarget{Spec: ptr("web.image")}}})}
			},
			want: func(t *testing.T, w *world, app *unstructured.Unstructured) {
				if got := helmParameters(t, app); got["web.image"] != w.image("web")+":2.0.0" {
					t.Errorf("helm parameters = %v", got)
				}
			},
		},
		{
			name: "manifestTargets.plugin is refused",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img,
					ManifestTarget: &api.ManifestTarget{Plugin: &api.HelmTarget{Name: ptr("image")}}})}
			},
			want:      unchanged,
			wantError: "spec.applicationRefs[0].images[0].manifestTargets.plugin (image web): config management plugin targets are not supported",
		},
		{
			name: "pullSecret of another namespace is refused",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{
					CommonUpdateSettings: &api.CommonUpdateSettings{PullSecret: ptr("pullsecret:argocd/registry")},
					ApplicationRefs:      refs(api.ImageConfig{Alias: "web", ImageName: img}),
				}
			},
			want:      unchanged,
			wantError: "spec.commonUpdateSettings.pullSecret (image web): pullsecret:argocd/registry names a Secret in namespace argocd",
		},
		{
			name: "env: credentials outside the controller's namespace are refused",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img,
					CommonUpdateSettings: &api.CommonUpdateSettings{PullSecret: ptr("env:REGISTRY_CREDS")}})}
			},
			want:      unchanged,
			wantError: "spec.applicationRefs[0].images[0].commonUpdateSettings.pullSecret (image web): env: credentials may only be named by Applications in the controller's namespace",
		},
		{
			name: "git:secret: of another namespace is refused",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{
					WriteBackConfig: &api.WriteBackConfig{Method: ptr("git:secret:argocd/git-creds")},
					ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img}),
				}
			},
			want:      unchanged,
			wantError: "spec.writeBackConfig.method: git:secret:argocd/git-creds names a Secret in namespace argocd",
		},
		{
			name: "writeBackTarget that misspells a kind",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{
					WriteBackConfig: &api.WriteBackConfig{Method: ptr("git"), GitConfig: &api.GitConfig{WriteBackTarget: ptr("kustomization.yaml")}},
					ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img}),
				}
			},
			want:      unchanged,
			wantError: `spec.writeBackConfig.gitConfig.writeBackTarget: unknown target "kustomization.yaml"`,
		},
		{
			name: "pullRequest is not acted on: nothing is written",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{
					ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", Images: []api.ImageConfig{{Alias: "web", ImageName: img}},
						WriteBackConfig: &api.WriteBackConfig{Method: ptr("git"), GitConfig: &api.GitConfig{
							Repository: ptr("https://git.example.com/deploy.git"), Branch: ptr("main"),
							PullRequest: &api.PullRequestConfig{GitHub: &api.ForgeConfig{}}}}}},
				}
			},
			want:      unchanged,
			wantError: "spec.applicationRefs[0].writeBackConfig.gitConfig.pullRequest: pull and merge requests are not supported",
		},
		{
			name: "imagesVerification is not acted on: the image is not updated",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{
					ImagesVerification: &api.ImagesVerification{CosignKey: &api.CosignKey{SecretName: "cosign", Key: "cosign.pub"}},
					ApplicationRefs:    refs(api.ImageConfig{Alias: "web", ImageName: img}),
				}
			},
			want:      unchanged,
			wantError: "spec.imagesVerification (image web): signature verification is not supported",
		},
		{
			name: "imagesVerification disabled",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{
					ImagesVerification: &api.ImagesVerification{Enabled: ptr(false)},
					ApplicationRefs:    refs(api.ImageConfig{Alias: "web", ImageName: img}),
				}
			},
			want: kustomizeIs(func(img string) []string { return []string{img + ":2.0.0"} }),
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := s.world(t, fmt.Sprintf("fields-%d", i))
			w.push(t, "web", tags...)
			running := tc.running
			if running == "" {
				running = w.image("web") + ":1.0.0"
			}
			app := w.app("app", nil, nil, running)
			if tc.helm {
				app = w.helmApp("app", running)
			}
			w.createApps(t, app)
			w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "updater"}, Spec: tc.spec(w.image("web"))})

			w.updater.RunOnce(t.Context())

			tc.want(t, w, w.getApp(t, "app"))
			iu := w.getUpdater(t, "updater")
			errCond := condition(iu, imageupdater.ConditionError)
			switch {
			case tc.wantError == "" && errCond.Status != metav1.ConditionFalse:
				t.Errorf("Error condition = %+v, want False", errCond)
			case tc.wantError != "" && (errCond.Status != metav1.ConditionTrue || !strings.Contains(errCond.Message, tc.wantError)):
				t.Errorf("Error condition = %+v, want True with %q", errCond, tc.wantError)
			}
			if iu.Status.ApplicationsMatched != 1 || iu.Status.ImagesManaged > 1 {
				t.Errorf("status = %d Applications, %d images; want 1 Application", iu.Status.ApplicationsMatched, iu.Status.ImagesManaged)
			}
		})
	}
}

func testPrecedence(t *testing.T, s *servers) {}
func testSelection(t *testing.T, s *servers)  {}
func testOverlap(t *testing.T, s *servers)    {}
func testStatus(t *testing.T, s *servers)     {}
