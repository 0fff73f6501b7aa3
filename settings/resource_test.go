package settings

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
)

// FuzzParseImageUpdater feeds ParseImageUpdater what a tenant may write in a resource: it
// must never panic, and each image is either configured or named in a
// problem.
func FuzzParseImageUpdater(f *testing.F) {
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
		a := ParseImageUpdater(iu, 0)
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
		want       Forge
		wantBranch string
		wantLabels []string
		// wantProblem is the one problem reported, if any.
		wantProblem string
	}{
		{name: "github", branch: "main:image-updates", pr: &api.PullRequestConfig{GitHub: &api.ForgeConfig{}}, want: ForgeGitHub, wantBranch: "main:image-updates"},
		{name: "gitlab", branch: ":image-updates", pr: &api.PullRequestConfig{GitLab: &api.ForgeConfig{}}, want: ForgeGitLab, wantBranch: ":image-updates"},
		{name: "gitea", branch: ":image-updates", pr: &api.PullRequestConfig{Gitea: &api.ForgeConfig{}, Labels: []string{"image-update"}}, want: ForgeGitea, wantBranch: ":image-updates", wantLabels: []string{"image-update"}},
		{name: "bitbucket", branch: ":image-updates", pr: &api.PullRequestConfig{Bitbucket: &api.ForgeConfig{}}, want: ForgeBitbucket, wantBranch: ":image-updates"},
		{name: "bitbucket data center", branch: ":image-updates", pr: &api.PullRequestConfig{BitbucketServer: &api.ForgeConfig{}}, want: ForgeBitbucketServer, wantBranch: ":image-updates"},
		{name: "azure devops", branch: ":image-updates", pr: &api.PullRequestConfig{AzureDevOps: &api.ForgeConfig{}, Labels: []string{"image-update"}}, want: ForgeAzureDevOps, wantBranch: ":image-updates", wantLabels: []string{"image-update"}},
		{name: "bitbucket labels are ignored", branch: ":image-updates", pr: &api.PullRequestConfig{Bitbucket: &api.ForgeConfig{}, Labels: []string{"image-update"}}, want: ForgeBitbucket, wantBranch: ":image-updates",
			wantProblem: "spec.writeBackConfig.gitConfig.pullRequest.labels: ignored: bitbucket pull requests have no labels"},
		{name: "none", branch: "main", wantBranch: "main"},
		{name: "the base only, as v1.3.0", branch: "main", pr: &api.PullRequestConfig{GitHub: &api.ForgeConfig{}, Labels: []string{"image-update"}},
			want: ForgeGitHub, wantBranch: "main:image-updater-{{.TargetKey}}-{{.SHA256}}", wantLabels: []string{"image-update"}},
		{name: "no branch: the target revision is the base", pr: &api.PullRequestConfig{GitLab: &api.ForgeConfig{}},
			want: ForgeGitLab, wantBranch: ":image-updater-{{.TargetKey}}-{{.SHA256}}"},
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
			a := ParseImageUpdater(iu, 0)
			if a.WriteBack.PullRequest != tt.want || a.WriteBack.GitBranch != tt.wantBranch || !slices.Equal(a.WriteBack.PullRequestLabels, tt.wantLabels) {
				t.Errorf("PullRequest %q, branch %q, labels %q; want %q, %q, %q", a.WriteBack.PullRequest, a.WriteBack.GitBranch, a.WriteBack.PullRequestLabels, tt.want, tt.wantBranch, tt.wantLabels)
			}
			var problems []string
			for _, p := range a.Problems {
				problems = append(problems, p.Error())
			}
			if tt.wantProblem == "" && len(problems) != 0 || tt.wantProblem != "" && (len(problems) != 1 || !strings.Contains(problems[0], tt.wantProblem)) {
				t.Errorf("problems %q, want %q", problems, tt.wantProblem)
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
				{Alias: "d", ImageName: "nginx", ImagesVerification: &api.ImagesVerification{Keyless: &api.KeylessVerification{
					CertificateIdentityRegexp: "^https://ci/", CertificateOIDCIssuer: "https://issuer",
				}}},
				{Alias: "e", ImageName: "nginx", ImagesVerification: &api.ImagesVerification{Keyless: &api.KeylessVerification{
					CertificateOIDCIssuer: "https://issuer",
				}}},
				{Alias: "f", ImageName: "nginx", ImagesVerification: &api.ImagesVerification{CosignKey: &api.CosignKey{SecretName: "k"},
					Keyless: &api.KeylessVerification{CertificateIdentity: "a", CertificateOIDCIssuer: "https://issuer"}}},
			}}},
		},
	}
	a := ParseImageUpdater(iu, 0)
	wantProblems := []string{
		"ImageUpdater ns/iu spec.applicationRefs[0].images[4].imagesVerification.keyless (image e): keyless verification needs the signer's certificate identity",
		"ImageUpdater ns/iu spec.applicationRefs[0].images[5].imagesVerification (image f): verification is enabled and names no key or names two",
	}
	if len(a.Problems) != len(wantProblems) || len(a.Images) != 4 {
		t.Fatalf("images %d, problems %v", len(a.Images), a.Problems)
	}
	for i, p := range a.Problems {
		if !strings.HasPrefix(p.Error(), wantProblems[i]) {
			t.Errorf("problem %q, want %q", p.Error(), wantProblems[i])
		}
	}
	want := []SignatureKey{
		{Name: "spec-key", Field: DefaultCosignKeyField, Origin: "ImageUpdater ns/iu spec.imagesVerification.cosignKey"},
		{Name: "own", Field: "pub", Origin: "ImageUpdater ns/iu spec.applicationRefs[0].images[1].imagesVerification.cosignKey"},
		{},
		{Keyless: &KeylessIdentity{SubjectRegexp: "^https://ci/", Issuer: "https://issuer"}, Origin: "ImageUpdater ns/iu spec.applicationRefs[0].images[3].imagesVerification.keyless"},
	}
	for i, s := range a.Images {
		if !reflect.DeepEqual(s.SignatureKey, want[i]) {
			t.Errorf("image %s: key %+v, want %+v", s.Alias, s.SignatureKey, want[i])
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestOriginsNameTheirSource: the same bad value reads the same from
// either source, each problem naming where it is written.
func TestOriginsNameTheirSource(t *testing.T) {
	tests := []struct {
		name         string
		annotations  map[string]string
		resource     *api.ImageUpdaterSpec
		annotationAt string
		resourceAt   string
	}{
		{
			name:         "write-back method",
			annotations:  ann("image-list", "nginx", "write-back-method", "svn"),
			resource:     &api.ImageUpdaterSpec{WriteBackConfig: &api.WriteBackConfig{Method: ptr("svn")}},
			annotationAt: "annotation " + AnnotationPrefix + "write-back-method",
			resourceAt:   "ImageUpdater ns/iu spec.writeBackConfig.method",
		},
		{
			name:         "platforms",
			annotations:  ann("image-list", "web=nginx", "web.platforms", "linux/"),
			resource:     &api.ImageUpdaterSpec{CommonUpdateSettings: &api.CommonUpdateSettings{Platforms: []string{"linux/"}}},
			annotationAt: "annotation " + AnnotationPrefix + "web.platforms (image web)",
			resourceAt:   "ImageUpdater ns/iu spec.commonUpdateSettings.platforms (image web)",
		},
		{
			name:         "health gate window",
			annotations:  ann("image-list", "web=nginx", "web.health-gate", "3 days"),
			resource:     &api.ImageUpdaterSpec{HealthGate: &api.HealthGate{Window: ptr("3 days")}},
			annotationAt: "annotation " + AnnotationPrefix + "web.health-gate (image web)",
			resourceAt:   "ImageUpdater ns/iu spec.healthGate.window (image web)",
		},
		{
			name:         "minimum release age",
			annotations:  ann("image-list", "web=nginx", "web.minimum-release-age", "a week"),
			resource:     &api.ImageUpdaterSpec{CommonUpdateSettings: &api.CommonUpdateSettings{MinimumReleaseAge: ptr("a week")}},
			annotationAt: "annotation " + AnnotationPrefix + "web.minimum-release-age (image web)",
			resourceAt:   "ImageUpdater ns/iu spec.commonUpdateSettings.minimumReleaseAge (image web)",
		},
		{
			name:         "pin digest",
			annotations:  ann("image-list", "web=nginx", "pin-digest", "sometimes"),
			resource:     &api.ImageUpdaterSpec{CommonUpdateSettings: &api.CommonUpdateSettings{PinDigest: ptr("sometimes")}},
			annotationAt: "annotation " + AnnotationPrefix + "pin-digest (image web)",
			resourceAt:   "ImageUpdater ns/iu spec.commonUpdateSettings.pinDigest (image web)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fromAnnotations := ParseAnnotations(tt.annotations)
			iu := &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"}, Spec: *tt.resource}
			iu.Spec.ApplicationRefs = []api.ApplicationRef{{NamePattern: "*", Images: []api.ImageConfig{{Alias: "web", ImageName: "nginx"}}}}
			fromResource := ParseImageUpdater(iu, 0)
			if len(fromAnnotations.Problems) != 1 || len(fromResource.Problems) != 1 {
				t.Fatalf("problems: %q and %q, want one each", fromAnnotations.Problems, fromResource.Problems)
			}
			a, r := fromAnnotations.Problems[0].Error(), fromResource.Problems[0].Error()
			msgA, okA := strings.CutPrefix(a, tt.annotationAt+": ")
			msgR, okR := strings.CutPrefix(r, tt.resourceAt+": ")
			if !okA || !okR || msgA != msgR {
				t.Errorf("problems\n  %q\n  %q\nwant %q and %q, then the same message", a, r, tt.annotationAt, tt.resourceAt)
			}
		})
	}
	// Unset, the method is where the resource would set it.
	iu := &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
		Spec: api.ImageUpdaterSpec{ApplicationRefs: []api.ApplicationRef{{NamePattern: "*"}}}}
	if got := ParseImageUpdater(iu, 0).WriteBack.MethodOrigin; got != "ImageUpdater ns/iu spec.writeBackConfig.method" {
		t.Errorf("method origin %q", got)
	}
}

// TestImageBound: an Application with more than MaxImages images, from
// its annotations or an ImageUpdater, has none updated and one problem
// naming where the list is written; one at the bound is read as usual.
func TestImageBound(t *testing.T) {
	list := func(n int) (string, []api.ImageConfig) {
		entries := make([]string, n)
		refs := make([]api.ImageConfig, n)
		for i := range n {
			entries[i] = fmt.Sprintf("a%d=example.com/app%d", i, i)
			refs[i] = api.ImageConfig{Alias: fmt.Sprintf("a%d", i), ImageName: fmt.Sprintf("example.com/app%d", i)}
		}
		return strings.Join(entries, ", ") + ", ", refs
	}
	for _, tt := range []struct {
		n            int
		annotationAt string
		resourceAt   string
	}{
		{n: MaxImages},
		{n: MaxImages + 1, annotationAt: "annotation " + AnnotationPrefix + "image-list", resourceAt: "ImageUpdater ns/iu spec.applicationRefs[0].images"},
		{n: 6000, annotationAt: "annotation " + AnnotationPrefix + "image-list", resourceAt: "ImageUpdater ns/iu spec.applicationRefs[0].images"},
	} {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			entries, refs := list(tt.n)
			annotations := ann("image-list", entries, "a0.update-strategy", "semver", "a5999.update-strategy", "semver")
			iu := &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
				Spec: api.ImageUpdaterSpec{ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", Images: refs}}}}
			for _, got := range []struct {
				s  Settings
				at string
			}{{ParseAnnotations(annotations), tt.annotationAt}, {ParseImageUpdater(iu, 0), tt.resourceAt}} {
				if tt.annotationAt == "" {
					if len(got.s.Images) != tt.n {
						t.Errorf("%d images read, want %d", len(got.s.Images), tt.n)
					}
					continue
				}
				want := fmt.Sprintf("%s: %d images, more than the %d one Application may have; none of its images is updated", got.at, tt.n, MaxImages)
				if len(got.s.Images) != 0 || len(got.s.Problems) != 1 || !strings.HasPrefix(got.s.Problems[0].Error(), want) {
					t.Errorf("%d images, problems %q; want none, and one problem starting %q", len(got.s.Images), got.s.Problems, want)
				}
			}
		})
	}
}

// TestImageUpdaterPolicy: each image's policy and credential reference are
// compiled when the resource is read, from the most specific level that
// sets each value; a bad one is a problem naming that level's field, and
// images with the same settings share one policy.
func TestImageUpdaterPolicy(t *testing.T) {
	iu := &api.ImageUpdater{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
		Spec: api.ImageUpdaterSpec{
			CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr("regexp:^v"), PullSecret: ptr("pullsecret:ns/regcred")},
			ApplicationRefs: []api.ApplicationRef{{
				NamePattern:          "*",
				CommonUpdateSettings: &api.CommonUpdateSettings{IgnoreTags: []string{"*-rc"}},
				Images: []api.ImageConfig{
					{Alias: "a", ImageName: "nginx:~1.26"},
					{Alias: "b", ImageName: "redis:~1.26"},
					{Alias: "strat", ImageName: "c", CommonUpdateSettings: &api.CommonUpdateSettings{UpdateStrategy: ptr("newest")}},
					{Alias: "allow", ImageName: "d", CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: ptr("regexp:(")}},
					{Alias: "ignore", ImageName: "e", CommonUpdateSettings: &api.CommonUpdateSettings{IgnoreTags: []string{"["}}},
					{Alias: "range", ImageName: "f:>>1"},
					{Alias: "creds", ImageName: "g", CommonUpdateSettings: &api.CommonUpdateSettings{PullSecret: ptr("vault:x")}},
				},
			}},
		},
	}
	a := ParseImageUpdater(iu, 0)
	if len(a.Images) != 2 {
		t.Fatalf("images %d, want 2; problems %v", len(a.Images), a.Problems)
	}
	first, second := a.Images[0], a.Images[1]
	if first.Policy == nil || first.Policy != second.Policy {
		t.Errorf("images with the same settings have policies %p and %p, want one", first.Policy, second.Policy)
	}
	if got, want := first.Policy.String(), `semver constraint="~1.26" allow-tags="regexp:^v" ignore-tags="*-rc"`; got != want {
		t.Errorf("policy %s, want %s", got, want)
	}
	if got := first.PullSecret.String(); got != "pullsecret:ns/regcred" || first.PullSecretOrigin != "ImageUpdater ns/iu spec.commonUpdateSettings.pullSecret" {
		t.Errorf("pull secret %s at %q", got, first.PullSecretOrigin)
	}
	want := []string{
		`ImageUpdater ns/iu spec.applicationRefs[0].images[2].commonUpdateSettings.updateStrategy (image strat): invalid update-strategy "newest"`,
		`ImageUpdater ns/iu spec.applicationRefs[0].images[3].commonUpdateSettings.allowTags (image allow): invalid allow-tags "regexp:("`,
		`ImageUpdater ns/iu spec.applicationRefs[0].images[4].commonUpdateSettings.ignoreTags (image ignore): invalid ignore-tags "["`,
		`ImageUpdater ns/iu spec.applicationRefs[0].images[5].imageName (image range): invalid constraint ">>1"`,
		`ImageUpdater ns/iu spec.applicationRefs[0].images[6].commonUpdateSettings.pullSecret (image creds): `,
	}
	if len(a.Problems) != len(want) {
		t.Fatalf("problems %q, want %d", a.Problems, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(a.Problems[i].Error(), w) {
			t.Errorf("problem %d = %q, want it to start with %q", i, a.Problems[i].Error(), w)
		}
	}
}

// TestHealthGateLevels: the most specific healthGate block gives the whole
// setting, from an ImageUpdater's levels as from the annotations (per
// image, then for the Application); a bad window disables the image.
func TestHealthGateLevels(t *testing.T) {
	iu := &api.ImageUpdater{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
		Spec: api.ImageUpdaterSpec{
			HealthGate: &api.HealthGate{Window: ptr("10m")},
			ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", HealthGate: &api.HealthGate{}, Images: []api.ImageConfig{
				{Alias: "ref", ImageName: "nginx"},
				{Alias: "own", ImageName: "nginx", HealthGate: &api.HealthGate{Window: ptr("30s")}},
				{Alias: "off", ImageName: "nginx", HealthGate: &api.HealthGate{Enabled: ptr(false), Window: ptr("30s")}},
				{Alias: "bad", ImageName: "nginx", HealthGate: &api.HealthGate{Window: ptr("forever")}},
			}}, {NamePattern: "x", Images: []api.ImageConfig{{Alias: "spec", ImageName: "nginx"}}}},
		},
	}
	type gate struct {
		d  time.Duration
		at Origin
	}
	got := map[string]gate{}
	var problems []Problem
	for i := range iu.Spec.ApplicationRefs {
		a := ParseImageUpdater(iu, i)
		for _, s := range a.Images {
			got[s.Alias] = gate{s.HealthGate, s.HealthGateOrigin}
		}
		problems = append(problems, a.Problems...)
	}
	want := map[string]gate{
		"ref":  {DefaultHealthGateWindow, "ImageUpdater ns/iu spec.applicationRefs[0].healthGate"},
		"own":  {30 * time.Second, "ImageUpdater ns/iu spec.applicationRefs[0].images[1].healthGate.window"},
		"off":  {},
		"spec": {10 * time.Minute, "ImageUpdater ns/iu spec.healthGate.window"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("gates %v, want %v", got, want)
	}
	if len(problems) != 1 || problems[0].Image != "bad" || !strings.Contains(problems[0].Error(), `spec.applicationRefs[0].images[3].healthGate.window (image bad): "forever" is not a window`) {
		t.Errorf("problems %v, want one naming the bad window", problems)
	}

	a := ParseAnnotations(ann("image-list", "app=nginx,web=nginx,bad=nginx", "health-gate", "true", "web.health-gate", "2m", "bad.health-gate", "soon"))
	got = map[string]gate{}
	for _, s := range a.Images {
		got[s.Alias] = gate{s.HealthGate, s.HealthGateOrigin}
	}
	want = map[string]gate{
		"app": {DefaultHealthGateWindow, AnnotationOrigin("health-gate")},
		"web": {2 * time.Minute, AnnotationOrigin("web.health-gate")},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("gates from annotations %v, want %v", got, want)
	}
	if len(a.Problems) != 1 || !strings.Contains(a.Problems[0].Error(), `bad.health-gate (image bad): "soon" is not a window`) {
		t.Errorf("problems %v", a.Problems)
	}
	// The annotations the gate writes, and the one that clears skips,
	// are known.
	if p := ParseAnnotations(ann("image-list", "nginx", "health-gate-state", "{}", "health-gate-clear", "all")).Problems; len(p) != 0 {
		t.Errorf("problems %v", p)
	}
}

// TestRollbackHoldLevels: rollbackHold of the ref wins over the spec's;
// unset at both, a rollback is held.
func TestRollbackHoldLevels(t *testing.T) {
	images := []api.ImageConfig{{Alias: "app", ImageName: "nginx"}}
	tests := []struct {
		name      string
		spec, ref *bool
		off       bool
	}{
		{name: "unset"},
		{name: "the spec's false", spec: ptr(false), off: true},
		{name: "the ref's true over the spec's false", spec: ptr(false), ref: ptr(true)},
		{name: "the ref's false over the spec's true", spec: ptr(true), ref: ptr(false), off: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iu := &api.ImageUpdater{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
				Spec: api.ImageUpdaterSpec{RollbackHold: tt.spec,
					ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", RollbackHold: tt.ref, Images: images}}},
			}
			if got := ParseImageUpdater(iu, 0).RollbackHoldOff; got != tt.off {
				t.Errorf("RollbackHoldOff %v, want %v", got, tt.off)
			}
		})
	}
}

// TestPinDigestLevels: pin-digest from the most specific level that sets
// it, per image then for the Application, and the digest's own Helm
// parameter from either source.
func TestPinDigestLevels(t *testing.T) {
	type pin struct {
		p      DigestPin
		at     Origin
		helmAt string
	}
	iu := &api.ImageUpdater{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
		Spec: api.ImageUpdaterSpec{
			CommonUpdateSettings: &api.CommonUpdateSettings{PinDigest: ptr("always")},
			ApplicationRefs: []api.ApplicationRef{{NamePattern: "*", CommonUpdateSettings: &api.CommonUpdateSettings{PinDigest: ptr("if-not-present")}, Images: []api.ImageConfig{
				{Alias: "ref", ImageName: "nginx"},
				{Alias: "own", ImageName: "nginx", CommonUpdateSettings: &api.CommonUpdateSettings{PinDigest: ptr("never")},
					ManifestTarget: &api.ManifestTarget{Helm: &api.HelmTarget{Tag: ptr("image.tag"), Digest: ptr("image.digest")}}},
			}}, {NamePattern: "x", Images: []api.ImageConfig{{Alias: "spec", ImageName: "nginx"}}}},
		},
	}
	got := map[string]pin{}
	for i := range iu.Spec.ApplicationRefs {
		a := ParseImageUpdater(iu, i)
		if len(a.Problems) > 0 {
			t.Fatalf("problems %v", a.Problems)
		}
		for _, s := range a.Images {
			got[s.Alias] = pin{s.PinDigest, s.PinDigestOrigin, s.HelmImageDigest}
		}
	}
	want := map[string]pin{
		"ref":  {PinIfNotPresent, "ImageUpdater ns/iu spec.applicationRefs[0].commonUpdateSettings.pinDigest", ""},
		"own":  {PinNever, "ImageUpdater ns/iu spec.applicationRefs[0].images[1].commonUpdateSettings.pinDigest", "image.digest"},
		"spec": {PinAlways, "ImageUpdater ns/iu spec.commonUpdateSettings.pinDigest", ""},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pins %v, want %v", got, want)
	}

	a := ParseAnnotations(ann("image-list", "app=nginx,web=nginx", "pin-digest", "Always", "web.pin-digest", "if-not-present", "web.helm.image-digest", "web.digest"))
	if len(a.Problems) > 0 {
		t.Fatalf("problems %v", a.Problems)
	}
	got = map[string]pin{}
	for _, s := range a.Images {
		got[s.Alias] = pin{s.PinDigest, s.PinDigestOrigin, s.HelmImageDigest}
	}
	want = map[string]pin{
		"app": {PinAlways, AnnotationOrigin("pin-digest"), ""},
		"web": {PinIfNotPresent, AnnotationOrigin("web.pin-digest"), "web.digest"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pins from annotations %v, want %v", got, want)
	}
}

// A chart's minimum release age: its own annotation, else the
// Application's, which holds for images and charts alike; in an
// ImageUpdater the ref's, else the spec's. One not understood stops only
// that chart.
func TestChartMinReleaseAge(t *testing.T) {
	a := ParseAnnotations(ann("chart-list", "cache=redis:^18,db=postgresql", "minimum-release-age", "7d", "cache.minimum-release-age", "36h"))
	if len(a.Problems) > 0 {
		t.Fatalf("problems %v", a.Problems)
	}
	got := map[string]string{}
	for _, c := range a.Charts {
		got[c.Alias] = fmt.Sprintf("%s %s", c.MinReleaseAge, c.MinReleaseAgeOrigin)
	}
	want := map[string]string{
		"cache": "36h0m0s annotation argocd-image-updater.argoproj.io/cache.minimum-release-age",
		"db":    "168h0m0s annotation argocd-image-updater.argoproj.io/minimum-release-age",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ages %v, want %v", got, want)
	}

	bad := ParseAnnotations(ann("chart-list", "cache=redis,db=postgresql", "cache.minimum-release-age", "a week"))
	if len(bad.Charts) != 1 || bad.Charts[0].Alias != "db" || len(bad.Problems) != 1 || !strings.Contains(fmt.Sprint(bad.Problems[0]), "cache.minimum-release-age") {
		t.Errorf("charts %v, problems %v: want db alone, and a problem naming cache.minimum-release-age", bad.Charts, bad.Problems)
	}

	iu := &api.ImageUpdater{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
		Spec: api.ImageUpdaterSpec{
			CommonUpdateSettings: &api.CommonUpdateSettings{MinimumReleaseAge: ptr("2d")},
			ApplicationRefs: []api.ApplicationRef{
				{NamePattern: "a", CommonUpdateSettings: &api.CommonUpdateSettings{MinimumReleaseAge: ptr("12h")}, Charts: []api.ChartConfig{{Alias: "cache", ChartName: "redis"}}},
				{NamePattern: "b", Charts: []api.ChartConfig{{Alias: "db", ChartName: "postgresql"}}},
			},
		},
	}
	got = map[string]string{}
	for i := range iu.Spec.ApplicationRefs {
		r := ParseImageUpdater(iu, i)
		if len(r.Problems) > 0 {
			t.Fatalf("problems %v", r.Problems)
		}
		for _, c := range r.Charts {
			got[c.Alias] = fmt.Sprintf("%s %s", c.MinReleaseAge, c.MinReleaseAgeOrigin)
		}
	}
	want = map[string]string{
		"cache": "12h0m0s ImageUpdater ns/iu spec.applicationRefs[0].commonUpdateSettings.minimumReleaseAge",
		"db":    "48h0m0s ImageUpdater ns/iu spec.commonUpdateSettings.minimumReleaseAge",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ImageUpdater ages %v, want %v", got, want)
	}
}
