package settings

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

func ann(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[AnnotationPrefix+kv[i]] = kv[i+1]
	}
	return m
}

const ecr = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com"

func TestParseAnnotations(t *testing.T) {
	tests := []struct {
		name         string
		annotations  map[string]string
		wantImages   []ImageSpec
		wantWB       WriteBack
		wantProblems []string // substrings, in order
	}{
		{
			name: "seed 003",
			annotations: ann(
				"write-back-method", "argocd",
				"write-back-target", "kustomization:../../main/overlays/production",
				"git-branch", "main",
				"image-list", "app="+ecr+"/eks-app,web="+ecr+"/eks-web",
				"app.update-strategy", "semver",
				"web.update-strategy", "semver",
			),
			wantImages: []ImageSpec{
				{Alias: "app", Image: mustRef(ecr + "/eks-app"), Policy: pol(strategy.Settings{Strategy: "semver"})},
				{Alias: "web", Image: mustRef(ecr + "/eks-web"), Policy: pol(strategy.Settings{Strategy: "semver"})},
			},
			wantWB: WriteBack{Method: WriteBackArgoCD, Target: WriteBackTarget{Kind: TargetKustomization, Path: "../../main/overlays/production"}, GitBranch: "main"},
			wantProblems: []string{
				"write-back-target: has no effect with write-back-method argocd",
				"git-branch: has no effect",
			},
		},
		{
			name: "constraints, ports, digests and fallbacks",
			annotations: ann(
				"image-list", "nginx:~1.26, reg=localhost:5000/team/app:^2 ,pinned=ghcr.io/x/y:stable@sha256:abc, plain=quay.io/org/app",
				"update-strategy", "newest-build",
				"allow-tags", "regexp:^v",
				"reg.update-strategy", "semver",
				"reg.ignore-tags", "*-rc*, latest",
				"reg.force-update", "true",
				"reg.pull-secret", "pullsecret:argocd/regcred",
				"pinned.update-strategy", "digest",
				"pinned.platforms", "linux/amd64,linux/arm64",
			),
			wantImages: []ImageSpec{
				{Image: mustRef("nginx"), Constraint: "~1.26", Policy: pol(strategy.Settings{Strategy: "newest-build", AllowTags: "regexp:^v"})},
				{Alias: "reg", Image: mustRef("localhost:5000/team/app"), Constraint: "^2",
					Policy:      pol(strategy.Settings{Strategy: "semver", Constraint: "^2", AllowTags: "regexp:^v", IgnoreTags: []string{"*-rc*", "latest"}}),
					ForceUpdate: true, PullSecret: credref.Ref{Kind: credref.KindPullSecret, Namespace: "argocd", Name: "regcred"},
					PullSecretOrigin: AnnotationOrigin("reg.pull-secret")},
				{Alias: "pinned", Image: mustRef("ghcr.io/x/y"), Constraint: "stable", Platforms: []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}},
					Policy: pol(strategy.Settings{Strategy: "digest", Constraint: "stable", AllowTags: "regexp:^v", Platforms: []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}})},
				{Alias: "plain", Image: mustRef("quay.io/org/app"), Policy: pol(strategy.Settings{Strategy: "newest-build", AllowTags: "regexp:^v"})},
			},
			wantWB: WriteBack{Method: WriteBackArgoCD},
		},
		{
			name: "signature keys",
			annotations: ann(
				"image-list", "a=example.com/a, b=example.com/b, c=example.com/c, d=example.com/d, e=example.com/e",
				"verify-signature", "secret:cosign#cosign.pub",
				"b.verify-signature", "secret:team/keys#release.pub",
				"c.verify-signature", "none",
				"d.verify-signature", "cosign.pub",
				"e.verify-signature", "secret:/x#k",
			),
			wantImages: []ImageSpec{
				{Alias: "a", Image: mustRef("example.com/a"), SignatureKey: SignatureKey{Name: "cosign", Field: "cosign.pub", Origin: AnnotationOrigin("verify-signature")}},
				{Alias: "b", Image: mustRef("example.com/b"), SignatureKey: SignatureKey{Namespace: "team", Name: "keys", Field: "release.pub", Origin: AnnotationOrigin("b.verify-signature")}},
				{Alias: "c", Image: mustRef("example.com/c"), SignatureKey: SignatureKey{Origin: AnnotationOrigin("c.verify-signature")}},
			},
			wantWB: WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{
				`d.verify-signature (image d): "cosign.pub" must name the public key as secret:[<namespace>/]<name>#<field>`,
				`e.verify-signature (image e): "secret:/x#k" must name`,
			},
		},
		{
			name: "keyless signatures",
			annotations: ann(
				"image-list", "a=example.com/a, b=example.com/b, c=example.com/c, d=example.com/d, e=example.com/e, f=example.com/f",
				"verify-signature", "keyless",
				"certificate-identity", "release@example.com",
				"certificate-oidc-issuer", "https://accounts.example.com",
				// The image's regular expression replaces the Application's
				// exact identity: a pair is one setting.
				"b.certificate-identity-regexp", "^https://ci\\.example\\.com/",
				"c.verify-signature", "none",
				"d.certificate-oidc-issuer-regexp", "(",
				"e.certificate-identity", "x@example.com",
				"e.certificate-identity-regexp", "^x@",
			),
			wantImages: []ImageSpec{
				{Alias: "a", Image: mustRef("example.com/a"), SignatureKey: SignatureKey{Keyless: &KeylessIdentity{Subject: "release@example.com", Issuer: "https://accounts.example.com"}, Origin: AnnotationOrigin("verify-signature")}},
				{Alias: "b", Image: mustRef("example.com/b"), SignatureKey: SignatureKey{Keyless: &KeylessIdentity{SubjectRegexp: "^https://ci\\.example\\.com/", Issuer: "https://accounts.example.com"}, Origin: AnnotationOrigin("verify-signature")}},
				{Alias: "c", Image: mustRef("example.com/c"), SignatureKey: SignatureKey{Origin: AnnotationOrigin("c.verify-signature")}},
				{Alias: "f", Image: mustRef("example.com/f"), SignatureKey: SignatureKey{Keyless: &KeylessIdentity{Subject: "release@example.com", Issuer: "https://accounts.example.com"}, Origin: AnnotationOrigin("verify-signature")}},
			},
			wantWB: WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{
				`verify-signature (image d): certificate-oidc-issuer-regexp: error parsing regexp`,
				`verify-signature (image e): keyless verification needs the signer's certificate identity, either exactly (certificate-identity) or as a regular expression (certificate-identity-regexp), not both`,
			},
		},
		{
			name: "a keyless signer without verify-signature",
			annotations: ann(
				"image-list", "a=example.com/a",
				"a.certificate-identity", "release@example.com",
			),
			wantWB: WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{
				`a.certificate-identity (image a): names a keyless signer, and verify-signature is not set: set it to keyless`,
			},
		},
		{
			name: "helm and kustomize names, slash in alias",
			annotations: ann(
				"image-list", "org/app=example.com/org/app, spec=example.com/spec",
				"org_app.helm.image-name", "app.image.repository",
				"org_app.helm.image-tag", "app.image.tag",
				"org_app.kustomize.image-name", "original/app",
				"spec.helm.image-spec", "images[1].image",
				"write-back-method", "git:secret:argocd/git-creds",
				"write-back-target", "helmvalues:/charts/app/values.yaml",
				"git-branch", "main:image-updater-{{.SHA256}}",
			),
			wantImages: []ImageSpec{
				{Alias: "org/app", Image: mustRef("example.com/org/app"), HelmImageName: "app.image.repository", HelmImageTag: "app.image.tag", KustomizeImageName: mustRef("original/app")},
				{Alias: "spec", Image: mustRef("example.com/spec"), HelmImageSpec: "images[1].image"},
			},
			wantWB: WriteBack{Method: WriteBackGit, GitSecret: types.NamespacedName{Namespace: "argocd", Name: "git-creds"}, Target: WriteBackTarget{Kind: TargetHelmValues, Path: "/charts/app/values.yaml"}, GitBranch: "main:image-updater-{{.SHA256}}"},
		},
		{
			name: "bad entries affect only themselves",
			annotations: ann(
				"image-list", "good=nginx, =nginx, dup=a, dup=b, bad=has space, flag=redis",
				"flag.force-update", "yes",
				"good.update-stratgey", "semver",
				"ghost.update-strategy", "semver",
			),
			wantImages: []ImageSpec{
				{Alias: "good", Image: mustRef("nginx")},
				// An empty alias is no alias (v1.3.0).
				{Image: mustRef("nginx")},
				{Alias: "dup", Image: mustRef("a")},
			},
			wantWB: WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{
				`alias "dup" is used twice`,
				`"has space" is not an image name`,
				`flag.force-update (image flag): value "yes" is not true or false`,
				`ghost.update-strategy: no image in image-list has the alias "ghost"`,
				"good.update-stratgey: unknown annotation",
			},
		},
		{
			name: "deprecated tag-match read as allow-tags",
			annotations: ann(
				"image-list", "app=nginx, web=redis, api=quay.io/org/api",
				"app.tag-match", "regexp:^v1\\.",
				"web.tag-match", "any",
				"web.allow-tags", "regexp:^7",
				"api.tag-match", "^2",
			),
			wantImages: []ImageSpec{
				{Alias: "app", Image: mustRef("nginx"), Policy: pol(strategy.Settings{AllowTags: `regexp:^v1\.`})},
				{Alias: "web", Image: mustRef("redis"), Policy: pol(strategy.Settings{AllowTags: "regexp:^7"})},
			},
			wantWB: WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{
				"app.tag-match (image app): deprecated: read as allow-tags",
				"web.tag-match (image web): ignored: " + AnnotationPrefix + "web.allow-tags is set",
				"api.tag-match (image api): deprecated: read as allow-tags",
				`api.tag-match (image api): invalid allow-tags "^2"`,
			},
		},
		{
			name: "Application-wide allow-tags wins over tag-match",
			annotations: ann(
				"image-list", "app=nginx",
				"allow-tags", "regexp:^1",
				"app.tag-match", "regexp:^2",
				"tag-match", "regexp:^3",
			),
			wantImages: []ImageSpec{{Alias: "app", Image: mustRef("nginx"), Policy: pol(strategy.Settings{AllowTags: "regexp:^1"})}},
			wantWB:     WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{
				"app.tag-match (image app): ignored: " + AnnotationPrefix + "allow-tags is set",
				"/tag-match: unknown annotation: tag-match exists only per image",
			},
		},
		{
			name: "a bad policy or credential reference is named where it is written",
			annotations: ann(
				"image-list", "strat=a, allow=b, ignore=c, range=d:>>1, follow=e, creds=f, ok=g:~1",
				"allow-tags", "regexp:^v",
				"strat.update-strategy", "newest",
				"allow.allow-tags", "regexp:[",
				"ignore.ignore-tags", "ok-*, [",
				"follow.update-strategy", "digest",
				"creds.pull-secret", "vault:team/regcred",
			),
			wantImages: []ImageSpec{{Alias: "ok", Image: mustRef("g"), Constraint: "~1", Policy: pol(strategy.Settings{Constraint: "~1", AllowTags: "regexp:^v"})}},
			wantWB:     WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{
				"annotation " + AnnotationPrefix + "strat.update-strategy (image strat): invalid update-strategy \"newest\"",
				"annotation " + AnnotationPrefix + "allow.allow-tags (image allow): invalid allow-tags \"regexp:[\"",
				"annotation " + AnnotationPrefix + "ignore.ignore-tags (image ignore): invalid ignore-tags \"[\"",
				"annotation " + AnnotationPrefix + "image-list (image range): invalid constraint \">>1\"",
				"annotation " + AnnotationPrefix + "image-list (image follow): invalid constraint \"\"",
				"annotation " + AnnotationPrefix + "creds.pull-secret (image creds): ",
			},
		},
		// v1.3.0 reports an image-list that names no image ("annotation is
		// empty"); an empty entry beside images is only a warning.
		{
			name:         "empty image-list",
			annotations:  ann("image-list", ""),
			wantWB:       WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{"annotation " + AnnotationPrefix + "image-list: is empty: it names no image to update"},
		},
		{
			name:         "image-list of blank entries",
			annotations:  ann("image-list", "  ,  ,  "),
			wantWB:       WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{"annotation " + AnnotationPrefix + "image-list: is empty"},
		},
		{
			name:         "an empty entry beside an image",
			annotations:  ann("image-list", "nginx,,"),
			wantImages:   []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:       WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{"entry 2 is empty", "entry 3 is empty"},
		},
		{
			name:        "no image-list",
			annotations: ann("write-back-method", "argocd"),
			wantWB:      WriteBack{Method: WriteBackArgoCD},
		},
		{
			name:         "bad write-back method",
			annotations:  ann("image-list", "nginx", "write-back-method", "svn"),
			wantImages:   []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:       WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{`unknown method "svn"`},
		},
		{
			name:        "pull request",
			annotations: ann("image-list", "nginx", "write-back-method", "git", "git-branch", "main:image-updater-{{.SHA256}}", "git-pull-request", "gitlab"),
			wantImages:  []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:      WriteBack{Method: WriteBackGit, GitBranch: "main:image-updater-{{.SHA256}}", PullRequest: ForgeGitLab},
		},
		{
			name: "pull request labels",
			annotations: ann("image-list", "nginx", "write-back-method", "git", "git-branch", ":updates", "git-pull-request", "github",
				"git-pull-request-labels", " image-update, team-a,,image-update"),
			wantImages: []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:     WriteBack{Method: WriteBackGit, GitBranch: ":updates", PullRequest: ForgeGitHub, PullRequestLabels: []string{"image-update", "team-a"}},
		},
		{
			name:         "pull request labels without a pull request",
			annotations:  ann("image-list", "nginx", "write-back-method", "git", "git-pull-request-labels", "image-update"),
			wantImages:   []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:       WriteBack{Method: WriteBackGit},
			wantProblems: []string{"git-pull-request-labels: has no effect without " + AnnotationPrefix + "git-pull-request"},
		},
		{
			name:         "pull request without a branch of its own",
			annotations:  ann("image-list", "nginx", "write-back-method", "git", "git-branch", "main", "git-pull-request", "github"),
			wantImages:   []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:       WriteBack{Method: WriteBackGit, GitBranch: "main"},
			wantProblems: []string{AnnotationPrefix + "git-pull-request: a pull request needs a branch of its own: set " + AnnotationPrefix + "git-branch to <base>:<branch>"},
		},
		{
			name:         "unknown pull request service",
			annotations:  ann("image-list", "nginx", "write-back-method", "git", "git-branch", ":updates", "git-pull-request", "sourcehut"),
			wantImages:   []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:       WriteBack{Method: WriteBackGit, GitBranch: ":updates"},
			wantProblems: []string{`git-pull-request: unknown pull request service "sourcehut": use one of github, gitlab, gitea, bitbucket, bitbucket-server, azure-devops, forgejo, bitbucket-datacenter`},
		},
		{
			name: "forgejo is gitea",
			annotations: ann("image-list", "nginx", "write-back-method", "git", "git-branch", ":updates", "git-pull-request", "forgejo",
				"git-pull-request-labels", "image-update"),
			wantImages: []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:     WriteBack{Method: WriteBackGit, GitBranch: ":updates", PullRequest: ForgeGitea, PullRequestLabels: []string{"image-update"}},
		},
		{
			name:        "azure devops",
			annotations: ann("image-list", "nginx", "write-back-method", "git", "git-branch", ":updates", "git-pull-request", "azure-devops"),
			wantImages:  []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:      WriteBack{Method: WriteBackGit, GitBranch: ":updates", PullRequest: ForgeAzureDevOps},
		},
		{
			name: "bitbucket data center, whose pull requests have no labels",
			annotations: ann("image-list", "nginx", "write-back-method", "git", "git-branch", ":updates", "git-pull-request", "bitbucket-datacenter",
				"git-pull-request-labels", "image-update"),
			wantImages:   []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:       WriteBack{Method: WriteBackGit, GitBranch: ":updates", PullRequest: ForgeBitbucketServer},
			wantProblems: []string{"git-pull-request-labels: ignored: bitbucket-server pull requests have no labels"},
		},
		{
			name:         "pull request with the argocd method",
			annotations:  ann("image-list", "nginx", "git-pull-request", "github"),
			wantImages:   []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:       WriteBack{Method: WriteBackArgoCD},
			wantProblems: []string{"git-pull-request: has no effect with write-back-method argocd"},
		},
		{
			name:         "bad git secret and target",
			annotations:  ann("image-list", "nginx", "write-back-method", "git:secret:/name", "write-back-target", "kustomization.yaml"),
			wantImages:   []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:       WriteBack{Method: WriteBackGit, GitSecret: types.NamespacedName{Name: "name"}},
			wantProblems: []string{"git:secret:<namespace>/<name>", `unknown target "kustomization.yaml"`},
		},
		{
			// The resource-based updater's form: a Secret in the
			// Application's own namespace.
			name:        "git secret without a namespace",
			annotations: ann("image-list", "nginx", "write-back-method", "git:secret:git-creds"),
			wantImages:  []ImageSpec{{Image: mustRef("nginx")}},
			wantWB:      WriteBack{Method: WriteBackGit, GitSecret: types.NamespacedName{Name: "git-creds"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseAnnotations(tt.annotations)
			if got.WriteBack.MethodOrigin != AnnotationOrigin(KeyWriteBackMethod) {
				t.Errorf("method origin %q", got.WriteBack.MethodOrigin)
			}
			got.WriteBack.MethodOrigin = ""
			for i := range tt.wantImages {
				if tt.wantImages[i].Policy == nil {
					// Unsaid in the table: the default, semver with no filters.
					tt.wantImages[i].Policy = pol(strategy.Settings{Platforms: tt.wantImages[i].Platforms})
				}
			}
			if diff := cmp.Diff(tt.wantImages, got.Images, cmpRefs, cmpPolicies); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWB, got.WriteBack); diff != "" {
				t.Errorf("write-back (-want +got):\n%s", diff)
			}
			if len(got.Problems) != len(tt.wantProblems) {
				t.Fatalf("problems %q, want %d", got.Problems, len(tt.wantProblems))
			}
			for i, want := range tt.wantProblems {
				if !strings.Contains(got.Problems[i].Error(), want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got.Problems[i].Error(), want)
				}
			}
		})
	}
}

func FuzzParseAnnotations(f *testing.F) {
	f.Add("app=nginx:~1.26,web=localhost:5000/x:^1", "app", "semver", "git:secret:a/b")
	f.Add("a=b=c,,=:,x@y:z", "a", "digest", "argocd")
	f.Add("org/app=ghcr.io/org/app@sha256:00", "org_app", "", "git")
	f.Fuzz(func(t *testing.T, list, alias, strategy, method string) {
		a := ParseAnnotations(ann("image-list", list, alias+".update-strategy", strategy, "write-back-method", method))
		seen := map[string]bool{}
		for _, img := range a.Images {
			if img.Image.IsZero() {
				t.Fatalf("image with empty name from %q", list)
			}
			if img.Alias != "" {
				if seen[img.Alias] {
					t.Fatalf("alias %q twice", img.Alias)
				}
				seen[img.Alias] = true
			}
		}
		if a.WriteBack.Method != WriteBackArgoCD && a.WriteBack.Method != WriteBackGit {
			t.Fatalf("method %q", a.WriteBack.Method)
		}
	})
}

func mustRef(s string, opts ...imageref.Option) imageref.Reference {
	r, err := imageref.Parse(s, opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// pol is the policy New makes of s.
func pol(s strategy.Settings) *strategy.Policy {
	p, err := strategy.New(s)
	if err != nil {
		panic(err)
	}
	return p
}

// cmpPolicies compares policies by what they say.
var cmpPolicies = cmp.Comparer(func(a, b *strategy.Policy) bool {
	return a == b || a != nil && b != nil && a.String() == b.String()
})

// cmpRefs compares references by what they name and how they were written.
var cmpRefs = cmp.Comparer(func(a, b imageref.Reference) bool {
	return a.Equal(b) && a.Original() == b.Original()
})

func TestParseWriteBackTarget(t *testing.T) {
	tests := []struct {
		value   string
		want    WriteBackTarget
		wantErr string
	}{
		{value: "", want: WriteBackTarget{}},
		{value: "kustomization", want: WriteBackTarget{Kind: TargetKustomization}},
		{value: "kustomization:../../base", want: WriteBackTarget{Kind: TargetKustomization, Path: "../../base"}},
		{value: "helmvalues", want: WriteBackTarget{Kind: TargetHelmValues}},
		{value: "helmvalues:/charts/app/values.yaml", want: WriteBackTarget{Kind: TargetHelmValues, Path: "/charts/app/values.yaml"}},
		{value: "app-of-apps", want: WriteBackTarget{Kind: TargetAppOfApps}},
		{value: "app-of-apps:../apps", want: WriteBackTarget{Kind: TargetAppOfApps, Path: "../apps"}},
		// Anything else is the override file's path from the repository
		// root, as the old tool read it.
		{value: "values.yaml", want: WriteBackTarget{Kind: TargetOverrideFile, Path: "values.yaml"}},
		{value: "apps/guestbook/.argocd-source-guestbook.yaml", want: WriteBackTarget{Kind: TargetOverrideFile, Path: "apps/guestbook/.argocd-source-guestbook.yaml"}},
		{value: "/apps/guestbook/overrides.yaml", want: WriteBackTarget{Kind: TargetOverrideFile, Path: "/apps/guestbook/overrides.yaml"}},
		{value: "file:odd.yaml", want: WriteBackTarget{Kind: TargetOverrideFile, Path: "file:odd.yaml"}},
		// The two kinds followed by something other than ':' are typos,
		// not paths.
		{value: "kustomization.yaml", wantErr: `unknown target "kustomization.yaml"`},
		{value: "helmvalues.yaml", wantErr: `unknown target "helmvalues.yaml"`},
		{value: "app-of-apps.yaml", wantErr: `unknown target "app-of-apps.yaml"`},
		{value: "applicationset", want: WriteBackTarget{Kind: TargetApplicationSet}},
		{value: "applicationset:apps", wantErr: "takes no path"},
		{value: "applicationsets", wantErr: `unknown target "applicationsets"`},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, err := ParseWriteBackTarget(tt.value)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
			if got.String() != tt.value {
				t.Errorf("String() = %q, want %q", got.String(), tt.value)
			}
		})
	}
}

// Labels are refused past 100 distinct ones as they are met, so that the
// duplicate check over a long annotation costs no more than 100 labels
// each.
func TestPullRequestLabelsBound(t *testing.T) {
	labels := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf("l%d", i)
		}
		return strings.Join(parts, ",")
	}
	for _, tc := range []struct {
		n       int
		wantErr bool
	}{{100, false}, {101, true}, {52000, true}} {
		got, err := ParsePullRequestLabels(labels(tc.n) + ",l0")
		if (err != nil) != tc.wantErr || !tc.wantErr && len(got) != tc.n {
			t.Errorf("%d labels: %d kept, error %v", tc.n, len(got), err)
		}
	}
}
