package imageupdater_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageupdater"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback/git"
)

func TestImageUpdater(t *testing.T) {
	s := startServers(t)
	t.Run("fields", func(t *testing.T) { testFields(t, s) })
	t.Run("precedence", func(t *testing.T) { testPrecedence(t, s) })
	t.Run("selection", func(t *testing.T) { testSelection(t, s) })
	t.Run("overlap", func(t *testing.T) { testOverlap(t, s) })
	t.Run("status", func(t *testing.T) { testStatus(t, s) })
	t.Run("one listing per repository", func(t *testing.T) { testListings(t, s) })
	t.Run("samples", func(t *testing.T) { testSamples(t, s) })
	t.Run("schema", func(t *testing.T) { testSchema(t, s) })
	t.Run("one push per repository and branch", func(t *testing.T) { testOnePush(t, s) })
	t.Run("signed versions only", func(t *testing.T) { testSignatures(t, s) })
	t.Run("applicationRefs bound", func(t *testing.T) { testRefsBound(t, s) })
}

// testRefsBound: the CRD holds spec.applicationRefs to
// api.MaxApplicationRefs; an ImageUpdater stored with more before the CRD
// had the bound is refused by the controller, its Error condition naming
// the field, and none of its refs is matched (app-0 would be).
func testRefsBound(t *testing.T, s *servers) {
	w := s.world(t, "refs-bound")
	w.createApps(t, w.app("app-0", nil, nil, w.image("web")+":1.0.0"))
	updater := func(name string, n int) *api.ImageUpdater {
		iu := &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
		for i := range n {
			iu.Spec.ApplicationRefs = append(iu.Spec.ApplicationRefs, api.ApplicationRef{NamePattern: fmt.Sprintf("app-%d", i),
				Images: []api.ImageConfig{{Alias: "web", ImageName: w.image("web")}}})
		}
		return iu
	}
	// The cleanup restores the CRD after the test's context has ended.
	ctx := context.Background()
	refused := func() error {
		return w.k.Client.Create(ctx, updater("dry-run", api.MaxApplicationRefs+1), client.DryRunAll)
	}
	if err := refused(); err == nil || !strings.Contains(err.Error(), "spec.applicationRefs") || !strings.Contains(err.Error(), fmt.Sprint(api.MaxApplicationRefs)) {
		t.Fatalf("%d refs: %v, want a refusal naming spec.applicationRefs and its bound", api.MaxApplicationRefs+1, err)
	}
	if err := w.k.Client.Create(t.Context(), updater("at-the-bound", api.MaxApplicationRefs), client.DryRunAll); err != nil {
		t.Fatalf("%d refs: %v", api.MaxApplicationRefs, err)
	}

	// The CRD as it was before it had the bound, for as long as it takes
	// to store one ImageUpdater past it.
	crds := dynamic.NewForConfigOrDie(s.k.Config).Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	const crdName = "imageupdaters." + "argocd-image-updater.argoproj.io"
	setBound := func(on bool) {
		t.Helper()
		crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			refs := []string{"schema", "openAPIV3Schema", "properties", "spec", "properties", "applicationRefs", "maxItems"}
			if on {
				err = unstructured.SetNestedField(v.(map[string]any), int64(api.MaxApplicationRefs), refs...)
			} else {
				unstructured.RemoveNestedField(v.(map[string]any), refs...)
			}
		}
		if err == nil {
			err = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
		}
		if err == nil {
			_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	restore := func() {
		setBound(true)
		poll.True(t, 15*time.Second, "the API server to refuse an ImageUpdater past the applicationRefs bound again", func() bool { return refused() != nil })
	}
	t.Cleanup(restore)
	setBound(false)
	past := updater("past-the-bound", api.MaxApplicationRefs+1)
	poll.True(t, 15*time.Second, "the API server to accept an ImageUpdater past the applicationRefs bound", func() bool { return w.k.Client.Create(t.Context(), past) == nil })
	restore()

	w.waitForUpdater(t, past.Name, past.Generation)
	w.updater.RunOnce(t.Context())
	w.syncUpdater(t, past.Name)
	iu := w.getUpdater(t, past.Name)
	want := fmt.Sprintf("spec.applicationRefs: %d refs, more than the %d an ImageUpdater may have", api.MaxApplicationRefs+1, api.MaxApplicationRefs)
	if c := condition(iu, imageupdater.ConditionError); c.Status != metav1.ConditionTrue || c.Reason != imageupdater.ReasonReconcileError || !strings.Contains(c.Message, want) {
		t.Errorf("Error condition %+v, want True %s naming %q", c, imageupdater.ReasonReconcileError, want)
	}
	if iu.Status.ApplicationsMatched != 0 {
		t.Errorf("%d Applications matched by a refused ImageUpdater", iu.Status.ApplicationsMatched)
	}
}

// testSignatures: imagesVerification's key, from a Secret of the
// resource's namespace, admits only versions signed with it; the image's
// own setting overrides the spec's.
func testSignatures(t *testing.T, s *servers) {
	w := s.world(t, "signatures")
	key := testenv.NewSigningKey(t)
	repo := w.ns + "/web"
	s.reg.PushImage(t, repo, []string{"1.0.0"})
	signed := s.reg.PushImage(t, repo, []string{"1.1.0"})
	s.reg.SignImage(t, repo, signed, key)
	s.reg.PushImage(t, repo, []string{"2.0.0"}) // unsigned
	s.k.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "cosign"},
		Data:       map[string][]byte{settings.DefaultCosignKeyField: key.PublicPEM},
	})
	running := w.image("web") + ":1.0.0"
	w.createApps(t, w.app("verified", map[string]string{"verify": "yes"}, nil, running), w.app("unverified", map[string]string{"verify": "no"}, nil, running))
	w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "updater"}, Spec: api.ImageUpdaterSpec{
		ImagesVerification: &api.ImagesVerification{CosignKey: &api.CosignKey{SecretName: "cosign"}},
		ApplicationRefs: []api.ApplicationRef{
			{NamePattern: "verified", Images: []api.ImageConfig{{Alias: "web", ImageName: w.image("web")}}},
			{NamePattern: "unverified", Images: []api.ImageConfig{{Alias: "web", ImageName: w.image("web"),
				ImagesVerification: &api.ImagesVerification{Enabled: ptr(false)}}}},
		},
	}})

	w.updater.RunOnce(t.Context())

	for name, want := range map[string]string{"verified": ":1.1.0", "unverified": ":2.0.0"} {
		got := testenv.KustomizeImages(t, w.getApp(t, name))
		if len(got) != 1 || got[0] != w.image("web")+want {
			t.Errorf("%s: kustomize images %v, want %s%s", name, got, w.image("web"), want)
		}
	}
	if c := condition(w.getUpdater(t, "updater"), imageupdater.ConditionError); c.Status != metav1.ConditionFalse {
		t.Errorf("Error condition = %+v, want False", c)
	}
}

// refs is one applicationRef selecting every Application with these images.
func refs(images ...api.ImageConfig) []api.ApplicationRef {
	return []api.ApplicationRef{{NamePattern: "*", Images: images}}
}

var appResource = application.Resource()

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
			if got, want := testenv.KustomizeImages(t, app), want(w.image("web")); !slices.Equal(got, want) {
				t.Errorf("kustomize images = %q, want %q", got, want)
			}
		}
	}
	unchanged := kustomizeIs(func(string) []string { return nil })
	cases := []struct {
		name   string
		helm   bool
		plugin bool // a config management plugin source, env OTHER=kept WEB_TAG=1.0.0
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
			name:   "manifestTargets.plugin name and tag",
			plugin: true,
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img,
					ManifestTarget: &api.ManifestTarget{Plugin: &api.PluginTarget{Name: ptr("WEB_IMAGE"), Tag: ptr("WEB_TAG")}}})}
			},
			want: func(t *testing.T, w *world, app *unstructured.Unstructured) {
				want := []any{
					map[string]any{"name": "OTHER", "value": "kept"},
					map[string]any{"name": "WEB_TAG", "value": "2.0.0"},
					map[string]any{"name": "WEB_IMAGE", "value": w.image("web")},
				}
				plugin, _, _ := unstructured.NestedMap(app.Object, "spec", "source", "plugin")
				if diff := cmp.Diff(map[string]any{"name": "cmp", "env": want}, plugin); diff != "" {
					t.Errorf("spec.source.plugin (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:   "manifestTargets.plugin spec",
			plugin: true,
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img,
					ManifestTarget: &api.ManifestTarget{Plugin: &api.PluginTarget{Spec: ptr("WEB")}}})}
			},
			want: func(t *testing.T, w *world, app *unstructured.Unstructured) {
				env, _, _ := unstructured.NestedSlice(app.Object, "spec", "source", "plugin", "env")
				if got := fmt.Sprint(env); got != fmt.Sprintf("[map[name:OTHER value:kept] map[name:WEB_TAG value:1.0.0] map[name:WEB value:%s:2.0.0]]", w.image("web")) {
					t.Errorf("plugin env = %s", got)
				}
			},
		},
		{
			name: "manifestTargets.plugin without a plugin source",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: img,
					ManifestTarget: &api.ManifestTarget{Plugin: &api.PluginTarget{Spec: ptr("WEB")}}})}
			},
			want:      unchanged,
			wantError: "image web: no config management plugin source to hold the image's plugin environment (source types: Kustomize)",
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
			name: "useAnnotations on an Application without image-list",
			spec: func(string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{ApplicationRefs: []api.ApplicationRef{{NamePattern: "app", UseAnnotations: ptr(true)}}}
			},
			want:      unchanged,
			wantError: "spec.applicationRefs[0].useAnnotations: the Application has no argocd-image-updater.argoproj.io/image-list annotation",
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
			name: "imagesVerification naming a missing Secret: the image is not updated",
			spec: func(img string) api.ImageUpdaterSpec {
				return api.ImageUpdaterSpec{
					ImagesVerification: &api.ImagesVerification{CosignKey: &api.CosignKey{SecretName: "cosign"}},
					ApplicationRefs:    refs(api.ImageConfig{Alias: "web", ImageName: img}),
				}
			},
			want:      unchanged,
			wantError: "image web: signature key: secret:",
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
			if tc.plugin {
				_ = unstructured.SetNestedMap(app.Object, map[string]any{
					"repoURL": "https://git.example.com/deploy.git", "path": "cmp/app", "targetRevision": "main",
					"plugin": map[string]any{"name": "cmp", "env": []any{
						map[string]any{"name": "OTHER", "value": "kept"},
						map[string]any{"name": "WEB_TAG", "value": "1.0.0"},
					}},
				}, "spec", "source")
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

// testPrecedence: each setting comes from the most specific level that
// sets it: image, then applicationRef, then spec.
func testPrecedence(t *testing.T, s *servers) {
	t.Run("inherited across a block set at a narrower level", func(t *testing.T) {
		w := s.world(t, "inheritance")
		w.push(t, "web", "1.0.0", "1.1.0")
		// Not running: only the spec's forceUpdate lets it be written.
		w.createApps(t, w.app("web", nil, nil, "example.com/other:1.0.0"))
		w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "updater"}, Spec: api.ImageUpdaterSpec{
			CommonUpdateSettings: &api.CommonUpdateSettings{ForceUpdate: ptr(true)},
			ApplicationRefs: []api.ApplicationRef{{NamePattern: "*",
				CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr(`regexp:^1\.`)},
				Images:               []api.ImageConfig{{Alias: "web", ImageName: w.image("web")}}}},
		}})
		w.updater.RunOnce(t.Context())
		if got, want := testenv.KustomizeImages(t, w.getApp(t, "web")), []string{w.image("web") + ":1.1.0"}; !slices.Equal(got, want) {
			t.Errorf("kustomize images = %q, want %q (the spec's forceUpdate, the ref's allowTags)", got, want)
		}
	})
	t.Run("the most specific applicationRef", func(t *testing.T) {
		w := s.world(t, "specificity")
		w.push(t, "web", "1.0.0", "1.1.0", "2.0.0")
		w.createApps(t, w.app("app-prod", nil, nil, w.image("web")+":1.0.0"), w.app("app-dev", nil, nil, w.image("web")+":1.0.0"))
		w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "updater"}, Spec: api.ImageUpdaterSpec{
			ApplicationRefs: []api.ApplicationRef{
				{NamePattern: "app-*", CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr(`regexp:^1\.`)},
					Images: []api.ImageConfig{{Alias: "web", ImageName: w.image("web")}}},
				{NamePattern: "app-prod", Images: []api.ImageConfig{{Alias: "web", ImageName: w.image("web")}}},
			},
		}})
		w.updater.RunOnce(t.Context())
		for name, want := range map[string]string{"app-prod": ":2.0.0", "app-dev": ":1.1.0"} {
			if got := testenv.KustomizeImages(t, w.getApp(t, name)); !slices.Equal(got, []string{w.image("web") + want}) {
				t.Errorf("%s: kustomize images = %q, want %s%s", name, got, w.image("web"), want)
			}
		}
	})
	w := s.world(t, "precedence")
	for _, repo := range []string{"a", "b", "c"} {
		w.push(t, repo, "1.0.0", "1.0.1", "1.1.0", "2.0.0")
	}
	w.createApps(t,
		w.app("first", nil, nil, w.image("a")+":1.0.0", w.image("b")+":1.0.0"),
		w.app("second", nil, nil, w.image("c")+":1.0.0"))
	w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "updater"}, Spec: api.ImageUpdaterSpec{
		CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr(`regexp:^1\.0`)},
		ApplicationRefs: []api.ApplicationRef{
			{
				NamePattern:          "first",
				CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr(`regexp:^1\.1`)},
				Images: []api.ImageConfig{
					{Alias: "a", ImageName: w.image("a"), CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr("regexp:^2")}},
					{Alias: "b", ImageName: w.image("b")},
				},
			},
			{NamePattern: "second", Images: []api.ImageConfig{{Alias: "c", ImageName: w.image("c")}}},
		},
	}})

	w.updater.RunOnce(t.Context())

	first := testenv.KustomizeImages(t, w.getApp(t, "first"))
	slices.Sort(first)
	if want := []string{w.image("a") + ":2.0.0", w.image("b") + ":1.1.0"}; !slices.Equal(first, want) {
		t.Errorf("first: kustomize images = %q, want %q (image's allowTags, then the ref's)", first, want)
	}
	if got, want := testenv.KustomizeImages(t, w.getApp(t, "second")), []string{w.image("c") + ":1.0.1"}; !slices.Equal(got, want) {
		t.Errorf("second: kustomize images = %q, want %q (the spec's allowTags)", got, want)
	}
	if st := w.getUpdater(t, "updater").Status; st.ApplicationsMatched != 2 || st.ImagesManaged != 3 {
		t.Errorf("status: %d Applications, %d images; want 2 and 3", st.ApplicationsMatched, st.ImagesManaged)
	}
}

// testSelection: namePattern and labelSelectors select Applications of the
// resource's own namespace only; useAnnotations reads the Application's
// annotations as the annotation path does.
func testSelection(t *testing.T, s *servers) {
	t.Run("labelSelectors and own namespace", func(t *testing.T) {
		w := s.world(t, "selection", "selection-other")
		w.push(t, "web", "1.0.0", "1.0.1")
		running := w.image("web") + ":1.0.0"
		w.createApps(t,
			w.app("web-a", map[string]string{"team": "a", "tier": "prod"}, nil, running),
			w.app("web-b", map[string]string{"team": "b", "tier": "prod"}, nil, running),
			w.app("web-test", map[string]string{"team": "a", "tier": "test"}, nil, running),
			w.app("api-a", map[string]string{"team": "a", "tier": "prod"}, nil, running))
		other := w.app("web-a", map[string]string{"team": "a", "tier": "prod"}, nil, running)
		other.SetNamespace("selection-other")
		if _, err := w.dyn.Resource(appResource).Namespace("selection-other").Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.True(t, 15*time.Second, "the watcher to hold the Application in selection-other", func() bool { return len(w.watcher.InNamespace("selection-other")) == 1 })
		w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "updater"}, Spec: api.ImageUpdaterSpec{
			ApplicationRefs: []api.ApplicationRef{{
				NamePattern: "web-*",
				LabelSelectors: &metav1.LabelSelector{
					MatchLabels:      map[string]string{"team": "a"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"test"}}},
				},
				Images: []api.ImageConfig{{Alias: "web", ImageName: w.image("web")}},
			}},
		}})

		w.updater.RunOnce(t.Context())

		for name, want := range map[string][]string{
			"web-a": {w.image("web") + ":1.0.1"}, "web-b": nil, "web-test": nil, "api-a": nil,
		} {
			if got := testenv.KustomizeImages(t, w.getApp(t, name)); !slices.Equal(got, want) {
				t.Errorf("%s: kustomize images = %q, want %q", name, got, want)
			}
		}
		got, err := w.dyn.Resource(appResource).Namespace("selection-other").Get(t.Context(), "web-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if imgs := testenv.KustomizeImages(t, got); imgs != nil {
			t.Errorf("the Application of another namespace was written: %q", imgs)
		}
		if n := w.getUpdater(t, "updater").Status.ApplicationsMatched; n != 1 {
			t.Errorf("applicationsMatched = %d, want 1", n)
		}
	})

	t.Run("useAnnotations", func(t *testing.T) {
		w := s.world(t, "selection-annotations")
		w.push(t, "web", "1.0.0", "1.0.1", "1.1.0")
		w.createApps(t, w.app("annotated", nil, map[string]string{
			"image-list":     "web=" + w.image("web") + ":1.x",
			"web.allow-tags": `regexp:^1\.0`,
		}, w.image("web")+":1.0.0"))
		w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "updater"}, Spec: api.ImageUpdaterSpec{
			// The spec's settings do not apply to Applications read through
			// their annotations.
			CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr(`regexp:^1\.1`)},
			ApplicationRefs:      []api.ApplicationRef{{NamePattern: "annotated", UseAnnotations: ptr(true)}},
		}})

		w.updater.RunOnce(t.Context())

		if got, want := testenv.KustomizeImages(t, w.getApp(t, "annotated")), []string{w.image("web") + ":1.0.1"}; !slices.Equal(got, want) {
			t.Errorf("kustomize images = %q, want %q", got, want)
		}
		if st := w.getUpdater(t, "updater").Status; st.ApplicationsMatched != 1 || st.ImagesManaged != 1 {
			t.Errorf("status: %d Applications, %d images; want 1 and 1", st.ApplicationsMatched, st.ImagesManaged)
		}
		for _, e := range w.events(t, "annotated") {
			if e.Type == "Warning" {
				t.Errorf("unexpected warning: %s", e.Message)
			}
		}
	})

	// An empty image-list is reported once, as the annotation's problem
	// (v1.3.0: "annotation is empty"), not as a missing annotation.
	t.Run("useAnnotations with an empty image-list", func(t *testing.T) {
		w := s.world(t, "selection-empty-list")
		w.push(t, "web", "1.0.0")
		w.createApps(t, w.app("empty", nil, map[string]string{"image-list": " "}, w.image("web")+":1.0.0"))
		w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "updater"}, Spec: api.ImageUpdaterSpec{
			ApplicationRefs: []api.ApplicationRef{{NamePattern: "empty", UseAnnotations: ptr(true)}},
		}})

		w.updater.RunOnce(t.Context())

		// Events reach the API server after RunOnce returns.
		var warnings []string
		poll.True(t, 15*time.Second, "a Warning event on the Application empty", func() bool {
			warnings = nil
			for _, e := range w.events(t, "empty") {
				if e.Type == "Warning" {
					warnings = append(warnings, e.Message)
				}
			}
			return len(warnings) > 0
		})
		if len(warnings) != 1 || !strings.Contains(warnings[0], "annotation argocd-image-updater.argoproj.io/image-list: is empty") ||
			strings.Contains(warnings[0], "has no argocd-image-updater.argoproj.io/image-list annotation") {
			t.Errorf("warnings %q, want one naming the empty annotation", warnings)
		}
	})
}

// testOverlap: an Application that several resources select, or a
// resource and its own annotations, is handled once, with a Warning
// naming both.
func testOverlap(t *testing.T, s *servers) {
	w := s.world(t, "overlap")
	w.push(t, "web", "1.0.0", "1.0.1", "1.1.0")
	w.createApps(t,
		w.app("shared", nil, nil, w.image("web")+":1.0.0"),
		w.app("annotated", nil, map[string]string{"image-list": "web=" + w.image("web")}, w.image("web")+":1.0.0"))
	allow := map[string]string{"a-first": `regexp:^1\.0`, "b-second": `regexp:^1\.1`}
	for _, name := range []string{"b-second", "a-first"} {
		w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: api.ImageUpdaterSpec{
			CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr(allow[name])},
			ApplicationRefs:      refs(api.ImageConfig{Alias: "web", ImageName: w.image("web")}),
		}})
	}

	w.updater.RunOnce(t.Context())

	for _, name := range []string{"shared", "annotated"} {
		if got, want := testenv.KustomizeImages(t, w.getApp(t, name)), []string{w.image("web") + ":1.0.1"}; !slices.Equal(got, want) {
			t.Errorf("%s: kustomize images = %q, want %q (a-first's settings)", name, got, want)
		}
	}
	if n := w.getUpdater(t, "a-first").Status.ApplicationsMatched; n != 2 {
		t.Errorf("a-first: applicationsMatched = %d, want 2", n)
	}
	if n := w.getUpdater(t, "b-second").Status.ApplicationsMatched; n != 0 {
		t.Errorf("b-second: applicationsMatched = %d, want 0", n)
	}
	both := "ImageUpdater overlap/b-second spec.applicationRefs[0]: also selects this Application, which ImageUpdater overlap/a-first handles"
	wantWarnings := map[string][]string{
		"shared":    {both},
		"annotated": {both, "annotation argocd-image-updater.argoproj.io/image-list: ignored: ImageUpdater overlap/a-first selects this Application"},
	}
	for app, wants := range wantWarnings {
		poll.True(t, 15*time.Second, "the overlap warnings on the Application "+app, func() bool {
			var msgs []string
			for _, e := range w.events(t, app) {
				if e.Type == "Warning" {
					msgs = append(msgs, e.Message)
				}
			}
			for _, want := range wants {
				if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, want) }) {
					return false
				}
			}
			return true
		})
	}
}

// testStatus: the status after an update, after an error and after its
// fix, and no write when nothing changed.
func testStatus(t *testing.T, s *servers) {
	w := s.world(t, "status")
	w.push(t, "web", "1.0.0")
	w.createApps(t, w.app("app", nil, nil, w.image("web")+":1.0.0"))
	w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "updater"}, Spec: api.ImageUpdaterSpec{
		ApplicationRefs: refs(api.ImageConfig{Alias: "web", ImageName: w.image("web") + ":1.x"}),
	}})
	check := func(step string, iu *api.ImageUpdater, gen int64, ready, readyReason, errStatus, errReason string) {
		t.Helper()
		st := iu.Status
		if st.ObservedGeneration != gen || st.ApplicationsMatched != 1 || st.ImagesManaged != 1 || st.LastCheckedAt == nil {
			t.Errorf("%s: status = %+v", step, st)
		}
		if c := condition(iu, imageupdater.ConditionReady); string(c.Status) != ready || c.Reason != readyReason || c.ObservedGeneration != gen {
			t.Errorf("%s: Ready = %+v, want %s %s", step, c, ready, readyReason)
		}
		if c := condition(iu, imageupdater.ConditionError); string(c.Status) != errStatus || c.Reason != errReason {
			t.Errorf("%s: Error = %+v, want %s %s", step, c, errStatus, errReason)
		}
		if c := condition(iu, imageupdater.ConditionReconciling); c.Status != metav1.ConditionFalse || c.Reason != imageupdater.ReasonIdle {
			t.Errorf("%s: Reconciling = %+v, want False Idle", step, c)
		}
	}
	run := func() *api.ImageUpdater {
		w.updater.RunOnce(t.Context())
		w.syncUpdater(t, "updater")
		w.syncApp(t, "app")
		return w.getUpdater(t, "updater")
	}
	update := func(iu *api.ImageUpdater) {
		if err := w.k.Client.Update(t.Context(), iu); err != nil {
			t.Fatal(err)
		}
		w.syncUpdater(t, "updater")
	}

	iu := run()
	check("nothing new", iu, 1, "True", imageupdater.ReasonSucceeded, "False", imageupdater.ReasonNoErrors)
	if iu.Status.LastUpdatedAt != nil || len(iu.Status.RecentUpdates) != 0 {
		t.Errorf("nothing new: status = %+v", iu.Status)
	}

	writes := w.statusPatches(t)
	if again := run(); again.ResourceVersion != iu.ResourceVersion || w.statusPatches(t) != writes {
		t.Errorf("a cycle that changed nothing wrote the status: %d writes before, %d after", writes, w.statusPatches(t))
	}

	w.push(t, "web", "1.0.1")
	iu = run()
	check("after an update", iu, 1, "True", imageupdater.ReasonSucceeded, "False", imageupdater.ReasonNoErrors)
	want := []api.RecentUpdate{{Alias: "web", Image: w.image("web"), NewVersion: "1.0.1", ApplicationsUpdated: 1, Message: "Updated from 1.0.0 to 1.0.1."}}
	got := slices.Clone(iu.Status.RecentUpdates)
	for i := range got {
		got[i].UpdatedAt = metav1.Time{}
	}
	if !slices.Equal(got, want) || iu.Status.LastUpdatedAt == nil {
		t.Errorf("after an update: recentUpdates = %+v, want %+v; lastUpdatedAt = %v", got, want, iu.Status.LastUpdatedAt)
	}

	iu.Spec.CommonUpdateSettings = &api.CommonUpdateSettings{PullSecret: ptr("pullsecret:argocd/registry")}
	update(iu)
	iu = run()
	check("after an error", iu, 2, "True", imageupdater.ReasonCompletedErrors, "True", imageupdater.ReasonPartialErrors)
	if c := condition(iu, imageupdater.ConditionError); !strings.Contains(c.Message, "status/app: ImageUpdater status/updater spec.commonUpdateSettings.pullSecret (image web)") {
		t.Errorf("after an error: the Error condition does not name the Application and field: %q", c.Message)
	}
	if len(iu.Status.RecentUpdates) != 1 {
		t.Errorf("after an error: the last update should be kept: %+v", iu.Status.RecentUpdates)
	}
	failedAt := condition(iu, imageupdater.ConditionError).LastTransitionTime

	iu.Spec.CommonUpdateSettings = nil
	update(iu)
	iu = run()
	check("after the fix", iu, 3, "True", imageupdater.ReasonSucceeded, "False", imageupdater.ReasonNoErrors)
	if c := condition(iu, imageupdater.ConditionError); c.LastTransitionTime.Before(&failedAt) {
		t.Errorf("after the fix: the Error condition did not move: %+v", c)
	}

	iu.Spec.ApplicationRefs[0].NamePattern = "[app"
	update(iu)
	iu = run()
	// The messages v1.3.0's users and tests match on.
	if c := condition(iu, imageupdater.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != imageupdater.ReasonFailed ||
		!strings.Contains(c.Message, `spec.applicationRefs[0].namePattern: invalid application name pattern "[app"`) ||
		!strings.HasPrefix(c.Message, "Reconciliation failed: ") {
		t.Errorf("bad namePattern: Ready = %+v", c)
	}
	if c := condition(iu, imageupdater.ConditionError); c.Reason != imageupdater.ReasonReconcileError || !strings.Contains(c.Message, "invalid application name pattern") {
		t.Errorf("bad namePattern: Error = %+v", c)
	}
	if c := condition(iu, imageupdater.ConditionReconciling); c.Message != "Last check completed. Awaiting next cycle." {
		t.Errorf("Reconciling = %+v", c)
	}
}

// testListings: 500 Applications under 5 ImageUpdaters, and 50 annotated
// ones, running the same 5 images cost one tag listing per repository.
func testListings(t *testing.T, s *servers) {
	w := s.world(t, "listings")
	var images []api.ImageConfig
	var running []string
	var list []string
	for i := range 5 {
		repo := fmt.Sprintf("img-%d", i)
		w.push(t, repo, "1.0.0")
		images = append(images, api.ImageConfig{Alias: repo, ImageName: w.image(repo)})
		running = append(running, w.image(repo)+":1.0.0")
		list = append(list, repo+"="+w.image(repo))
	}
	var apps []*unstructured.Unstructured
	for team := range 5 {
		for i := range 100 {
			apps = append(apps, w.app(fmt.Sprintf("team-%d-app-%03d", team, i), nil, nil, running...))
		}
	}
	for i := range 50 {
		apps = append(apps, w.app(fmt.Sprintf("annotated-%02d", i), nil, map[string]string{"image-list": strings.Join(list, ",")}, running...))
	}
	w.createApps(t, apps...)
	for team := range 5 {
		w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%d", team)}, Spec: api.ImageUpdaterSpec{
			ApplicationRefs: []api.ApplicationRef{{NamePattern: fmt.Sprintf("team-%d-*", team), Images: images}},
		}})
	}

	before := s.tagLists.Load()
	sum := w.updater.RunOnce(t.Context())

	if got := s.tagLists.Load() - before; got != 5 || sum.TagListings != 5 {
		t.Errorf("tag listings: %d requests, %d in the summary; want 5 (one per repository)", got, sum.TagListings)
	}
	if sum.Applications != 550 || sum.Images != 2750 || sum.Errors != 0 {
		t.Errorf("summary = %+v, want 550 Applications and 2750 images without errors", sum)
	}
	for team := range 5 {
		if st := w.getUpdater(t, fmt.Sprintf("team-%d", team)).Status; st.ApplicationsMatched != 100 || st.ImagesManaged != 500 {
			t.Errorf("team-%d: %d Applications, %d images; want 100 and 500", team, st.ApplicationsMatched, st.ImagesManaged)
		}
	}
}

// testSamples: the example resources of manifests/examples/imageupdater
// apply unchanged (but for the registry and namespace) and work.
func testSamples(t *testing.T, s *servers) {
	w := s.world(t, "samples")
	w.push(t, "web", "1.0.0", "1.0.1", "2.0.0")
	web := w.image("web")
	w.createApps(t,
		w.app("web-frontend", nil, nil, web+":1.0.0"),
		w.app("legacy", map[string]string{"image-updater": "annotations"},
			map[string]string{"image-list": "web=" + web + ":~1.0"}, web+":1.0.0"))
	for _, file := range []string{"simple.yaml", "use-annotations.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "manifests", "examples", "imageupdater", file))
		if err != nil {
			t.Fatal(err)
		}
		iu := &api.ImageUpdater{}
		if err := yaml.UnmarshalStrict([]byte(strings.ReplaceAll(string(data), "registry.example.com/team", w.reg.Host+"/"+w.ns)), iu); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		w.createUpdater(t, iu)
	}

	w.updater.RunOnce(t.Context())

	for name, want := range map[string]string{"web-frontend": web + ":1.0.1", "legacy": web + ":1.0.1"} {
		if got := testenv.KustomizeImages(t, w.getApp(t, name)); !slices.Equal(got, []string{want}) {
			t.Errorf("%s: kustomize images = %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"simple", "from-annotations"} {
		if iu := w.getUpdater(t, name); iu.Status.ApplicationsMatched != 1 || condition(iu, imageupdater.ConditionReady).Status != metav1.ConditionTrue {
			t.Errorf("%s: status = %+v", name, iu.Status)
		}
	}
}

// testSchema: the CRD holds v1.3.0's rules and no defaults below the
// spec, which would hide what a wider level sets; every example applies.
func testSchema(t *testing.T, s *servers) {
	w := s.world(t, "schema")
	refs := func(ref api.ApplicationRef) []api.ApplicationRef {
		ref.NamePattern = "*"
		ref.Images = []api.ImageConfig{{Alias: "web", ImageName: "nginx"}}
		return []api.ApplicationRef{ref}
	}
	refused := []struct {
		name string
		spec api.ImageUpdaterSpec
		want string
	}{
		{"verification without a key", api.ImageUpdaterSpec{ImagesVerification: &api.ImagesVerification{}, ApplicationRefs: refs(api.ApplicationRef{})},
			"at least one verification method (cosignKey or keyless) is required"},
		{"a key and keyless", api.ImageUpdaterSpec{ImagesVerification: &api.ImagesVerification{CosignKey: &api.CosignKey{SecretName: "k"},
			Keyless: &api.KeylessVerification{CertificateIdentity: "a@example.com", CertificateOIDCIssuer: "https://issuer"}}, ApplicationRefs: refs(api.ApplicationRef{})},
			"cosignKey and keyless are exclusive"},
		{"keyless without an identity", api.ImageUpdaterSpec{ImagesVerification: &api.ImagesVerification{
			Keyless: &api.KeylessVerification{CertificateOIDCIssuer: "https://issuer"}}, ApplicationRefs: refs(api.ApplicationRef{})},
			"set exactly one of certificateIdentity and certificateIdentityRegexp"},
		{"keyless with two issuers", api.ImageUpdaterSpec{ImagesVerification: &api.ImagesVerification{
			Keyless: &api.KeylessVerification{CertificateIdentity: "a@example.com", CertificateOIDCIssuer: "https://issuer", CertificateOIDCIssuerRegexp: "^https://"}}, ApplicationRefs: refs(api.ApplicationRef{})},
			"set exactly one of certificateOidcIssuer and certificateOidcIssuerRegexp"},
		{"two forges", api.ImageUpdaterSpec{WriteBackConfig: &api.WriteBackConfig{GitConfig: &api.GitConfig{PullRequest: &api.PullRequestConfig{GitHub: &api.ForgeConfig{}, GitLab: &api.ForgeConfig{}}}}, ApplicationRefs: refs(api.ApplicationRef{})},
			"Exactly one of github, gitlab, gitea, bitbucket, bitbucketServer or azureDevOps must be set"},
		{"two of the other forges", api.ImageUpdaterSpec{WriteBackConfig: &api.WriteBackConfig{GitConfig: &api.GitConfig{PullRequest: &api.PullRequestConfig{Gitea: &api.ForgeConfig{}, AzureDevOps: &api.ForgeConfig{}}}}, ApplicationRefs: refs(api.ApplicationRef{})},
			"Exactly one of github, gitlab, gitea, bitbucket, bitbucketServer or azureDevOps must be set"},
		{"an empty label", api.ImageUpdaterSpec{WriteBackConfig: &api.WriteBackConfig{GitConfig: &api.GitConfig{PullRequest: &api.PullRequestConfig{GitHub: &api.ForgeConfig{}, Labels: []string{""}}}}, ApplicationRefs: refs(api.ApplicationRef{})},
			"labels[0]"},
		{"a plugin target naming nothing", api.ImageUpdaterSpec{ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", Images: []api.ImageConfig{{Alias: "web", ImageName: "nginx", ManifestTarget: &api.ManifestTarget{Plugin: &api.PluginTarget{Tag: ptr("TAG")}}}}}}},
			"At least one of spec or name must be specified in plugin target"},
	}
	for i, tt := range refused {
		iu := &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: fmt.Sprintf("refused-%d", i)}, Spec: tt.spec}
		if err := w.k.Client.Create(t.Context(), iu); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: created (%v), want a refusal containing %q", tt.name, err, tt.want)
		}
	}

	// Each forge alone is taken.
	for i, pr := range []*api.PullRequestConfig{
		{Gitea: &api.ForgeConfig{}, Labels: []string{"image-update"}}, {Bitbucket: &api.ForgeConfig{}},
		{BitbucketServer: &api.ForgeConfig{}}, {AzureDevOps: &api.ForgeConfig{}, Labels: []string{"image-update"}},
	} {
		iu := &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: fmt.Sprintf("forge-%d", i)}, Spec: api.ImageUpdaterSpec{
			WriteBackConfig: &api.WriteBackConfig{Method: ptr("git"), GitConfig: &api.GitConfig{Branch: ptr("main"), PullRequest: pr}},
			ApplicationRefs: refs(api.ApplicationRef{}),
		}}
		if err := w.k.Client.Create(t.Context(), iu); err != nil {
			t.Errorf("pull request %+v: %v", pr, err)
		}
	}

	// A ref that sets one setting of a block gets no default for the
	// others: the spec's method and forceUpdate still apply to it.
	w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "inherits"}, Spec: api.ImageUpdaterSpec{
		WriteBackConfig: &api.WriteBackConfig{Method: ptr("git")},
		ApplicationRefs: refs(api.ApplicationRef{
			CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr("any")},
			WriteBackConfig:      &api.WriteBackConfig{GitConfig: &api.GitConfig{Branch: ptr("main")}},
		}),
	}})
	ref := w.getUpdater(t, "inherits").Spec.ApplicationRefs[0]
	if ref.CommonUpdateSettings.UpdateStrategy != nil || ref.CommonUpdateSettings.ForceUpdate != nil || ref.WriteBackConfig.Method != nil {
		t.Errorf("the API server filled defaults in the ref: %+v %+v", ref.CommonUpdateSettings, ref.WriteBackConfig)
	}

	files, err := filepath.Glob(filepath.Join("..", "manifests", "examples", "imageupdater", "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("examples %v, %v", files, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		iu := &api.ImageUpdater{}
		if err := yaml.UnmarshalStrict(data, iu); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		iu.Namespace, iu.Name = w.ns, "example-"+iu.Name
		if err := w.k.Client.Create(t.Context(), iu); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
}

// testOnePush: an annotated Application and one an ImageUpdater
// configures, both written back to the same repository and branch, get
// their commits in one push.
func testOnePush(t *testing.T, s *servers) {
	const ns = "one-push"
	g := testenv.StartGitServer(t)
	g.CreateRepo(t, "deploy", "", map[string]string{
		"apps/annotated/kustomization.yaml":   "resources: []\n",
		"apps/by-resource/kustomization.yaml": "resources: []\n",
	})
	s.k.CreateAppProject(t, testenv.ArgoCDNamespace, "default", []string{"*"}, []string{ns})
	gw, err := git.NewWriter(repoaccess.NewKubeSecretLister(kubernetes.NewForConfigOrDie(s.k.Config)),
		repoaccess.NewKubeAppProjectGetter(dynamic.NewForConfigOrDie(s.k.Config)),
		git.WithArgoCDNamespace(testenv.ArgoCDNamespace), git.WithWorkDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	w := s.worldWith(t, ns, nil, []cycle.Option{cycle.WithGitWriter(gw)})
	s.k.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gitcreds"},
		StringData: map[string]string{"username": g.Username, "password": g.Password}})
	w.push(t, "web", "1.0.0", "1.0.1")
	web := w.image("web")
	method := "git:secret:" + ns + "/gitcreds"
	annotated := w.app("annotated", nil, map[string]string{
		"image-list": "web=" + web, "write-back-method": method, "write-back-target": "kustomization", "git-branch": "main",
	}, web+":1.0.0")
	byResource := w.app("by-resource", nil, nil, web+":1.0.0")
	for _, obj := range []*unstructured.Unstructured{annotated, byResource} {
		if err := unstructured.SetNestedField(obj.Object, g.HTTPRepoURL("deploy"), "spec", "source", "repoURL"); err != nil {
			t.Fatal(err)
		}
	}
	w.createApps(t, annotated, byResource)
	w.createUpdater(t, &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: "updater"}, Spec: api.ImageUpdaterSpec{
		// v1.3.0's form: a Secret in the resource's own namespace.
		WriteBackConfig: &api.WriteBackConfig{Method: ptr("git:secret:gitcreds"), GitConfig: &api.GitConfig{Branch: ptr("main"), WriteBackTarget: ptr("kustomization")}},
		ApplicationRefs: []api.ApplicationRef{{NamePattern: "by-resource", Images: []api.ImageConfig{{Alias: "web", ImageName: web}}}},
	}})
	commits := len(g.Log(t, "deploy", "main"))
	pushes := g.Pushes.Load()

	sum := w.updater.RunOnce(t.Context())

	if sum.Updated != 2 || sum.Errors != 0 {
		t.Fatalf("summary = %+v, want 2 updates without errors\n%s", sum, w.logs.String())
	}
	if n := g.Pushes.Load() - pushes; n != 1 {
		t.Errorf("%d pushes, want 1 for both Applications", n)
	}
	if n := len(g.Log(t, "deploy", "main")) - commits; n != 2 {
		t.Errorf("%d new commits on main, want one per Application", n)
	}
	for _, app := range []string{"annotated", "by-resource"} {
		if got := g.ReadFile(t, "deploy", "main", "apps/"+app+"/kustomization.yaml"); !strings.Contains(got, "newTag: 1.0.1") {
			t.Errorf("apps/%s/kustomization.yaml:\n%s", app, got)
		}
	}
}
