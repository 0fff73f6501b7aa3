package cycle

import (
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
)

// planApp builds an Application the way the watcher reads one.
func planApp(t *testing.T, namespace string, annotations map[string]string, spec, status map[string]any) *application.Application {
	t.Helper()
	if namespace == "" {
		namespace = "argocd"
	}
	ann := map[string]any{}
	for k, v := range annotations {
		ann[settings.AnnotationPrefix+k] = v
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "app", "namespace": namespace, "annotations": ann},
		"spec":     spec, "status": status,
	}}
	a, err := application.FromUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func running(images ...string) map[string]any {
	list := make([]any, len(images))
	for i, s := range images {
		list[i] = s
	}
	return map[string]any{"summary": map[string]any{"images": list}}
}

func kustomizeSource(images ...string) map[string]any {
	list := make([]any, len(images))
	for i, s := range images {
		list[i] = s
	}
	return map[string]any{"repoURL": "https://git.example.com/r.git", "path": "k", "kustomize": map[string]any{"images": list}}
}

var helmSource = map[string]any{"repoURL": "https://git.example.com/r.git", "path": "h", "helm": map[string]any{
	"parameters": []any{map[string]any{"name": "image.tag", "value": "2.0.0"}},
}}

// Planning is pure: which source, which current version, which images are
// skipped or refused, decided from the Application alone.
func TestPlanApplication(t *testing.T) {
	linuxAMD64 := []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	tests := []struct {
		name        string
		annotations map[string]string
		spec        map[string]any
		status      map[string]any
		// namespace is the Application's ("argocd" if empty) and
		// controllerNS the controller's ("argocd" unless noControllerNS).
		namespace      string
		noControllerNS bool
		// per planned image: alias -> "sourceIndex current"
		jobs        map[string]string
		skips       []string // aliases
		problems    []string // substrings
		notProblems []string // substrings no problem may contain
	}{
		{
			name:        "the override wins over the running image",
			annotations: map[string]string{"image-list": "a=nginx"},
			spec:        map[string]any{"source": kustomizeSource("docker.io/library/nginx:1.26.0")},
			status:      running("nginx:1.25.0"),
			jobs:        map[string]string{"a": "-1 1.26.0"},
		},
		{
			name:        "running image when no override names it",
			annotations: map[string]string{"image-list": "a=nginx"},
			spec:        map[string]any{"source": kustomizeSource("other:1")},
			status:      running("busybox:1", "index.docker.io/library/nginx:1.25.0"),
			jobs:        map[string]string{"a": "-1 1.25.0"},
		},
		{
			name:        "not running is skipped",
			annotations: map[string]string{"image-list": "a=nginx"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("busybox:1"),
			skips:       []string{"a"},
		},
		{
			name:        "not running with force-update is planned from nothing",
			annotations: map[string]string{"image-list": "a=nginx", "a.force-update": "true"},
			spec:        map[string]any{"source": kustomizeSource()},
			jobs:        map[string]string{"a": "-1 "},
		},
		{
			name:        "argocd write-back needs a Kustomize or Helm source",
			annotations: map[string]string{"image-list": "a=nginx"},
			spec:        map[string]any{"source": map[string]any{"repoURL": "r", "path": "p", "plugin": map[string]any{}}},
			status:      running("nginx:1"),
			problems:    []string{"image a: no Kustomize or Helm source", "Plugin"},
		},
		{
			name:        "plain manifests take the git method and markers",
			annotations: map[string]string{"image-list": "a=nginx"},
			spec:        map[string]any{"source": map[string]any{"repoURL": "r", "path": "p", "directory": map[string]any{}}},
			status:      running("nginx:1"),
			problems:    []string{"image a: a plain-manifest (Directory) source holds no override: set write-back-method git"},
		},
		{
			name:        "a bad image setting stops only that image",
			annotations: map[string]string{"image-list": "a=nginx,b=redis", "b.update-strategy": "newest"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1", "redis:7"),
			jobs:        map[string]string{"a": "-1 1"},
			// Named where it is written, as every setting's problem is.
			problems: []string{`annotation argocd-image-updater.argoproj.io/b.update-strategy (image b): invalid update-strategy "newest"`},
		},
		{
			name:        "a bad write-back setting stops the Application",
			annotations: map[string]string{"image-list": "a=nginx", "write-back-method": "svn"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1"),
			skips:       []string{"a"},
			problems:    []string{`unknown method "svn"`},
		},
		{
			name:        "multi-source: the source naming the image",
			annotations: map[string]string{"image-list": "a=nginx"},
			spec:        map[string]any{"sources": []any{map[string]any{"repoURL": "r", "chart": "c", "helm": map[string]any{}}, kustomizeSource("nginx:1.26.0")}},
			status:      running("nginx:1.25.0"),
			jobs:        map[string]string{"a": "1 1.26.0"},
		},
		{
			name:        "multi-source: helmvalues target writes for the Helm source",
			annotations: map[string]string{"image-list": "a=nginx", "write-back-method": "git", "write-back-target": "helmvalues"},
			spec:        map[string]any{"sources": []any{kustomizeSource("nginx:1.26.0"), helmSource}},
			status:      running("nginx:2.0.0"),
			jobs:        map[string]string{"a": "1 2.0.0"},
		},
		{
			name:        "multi-source: kustomization target writes for the Kustomize source",
			annotations: map[string]string{"image-list": "a=nginx", "write-back-method": "git", "write-back-target": "kustomization"},
			spec:        map[string]any{"sources": []any{helmSource, kustomizeSource("nginx:1.26.0")}},
			status:      running("nginx:2.0.0"),
			jobs:        map[string]string{"a": "1 1.26.0"},
		},
		{
			name:        "digest: several containers run the image; the followed tag's is this image's",
			annotations: map[string]string{"image-list": "a=nginx:latest", "a.update-strategy": "digest"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1.25.0", "nginx:latest@sha256:"+strings.Repeat("a", 64)),
			jobs:        map[string]string{"a": "-1 latest@sha256:" + strings.Repeat("a", 64)},
		},
		{
			name:        "digest: a running image known by digest alone keeps the tag it follows",
			annotations: map[string]string{"image-list": "a=nginx:stable", "a.update-strategy": "digest"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx@sha256:" + strings.Repeat("b", 64)),
			jobs:        map[string]string{"a": "-1 stable@sha256:" + strings.Repeat("b", 64)},
		},
		{
			name:        "a pull secret beside the Application",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=nginx", "a.pull-secret": "pullsecret:team-a/regcred"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1"),
			jobs:        map[string]string{"a": "-1 1"},
		},
		{
			name:        "a pull secret in another namespace is refused for that image only",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=nginx,b=evil.example.com/x", "b.pull-secret": "pullsecret:argocd/regcred"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1", "evil.example.com/x:1"),
			jobs:        map[string]string{"a": "-1 1"},
			problems: []string{"annotation argocd-image-updater.argoproj.io/b.pull-secret (image b): ",
				"pullsecret:argocd/regcred names a Secret in namespace argocd",
				"only Secrets in the Application's own namespace, team-a"},
		},
		{
			name:        "a Secret field in another namespace is refused",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=evil.example.com/x", "pull-secret": "secret:argocd/cluster-prod#config"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("evil.example.com/x:1"),
			problems:    []string{"annotation argocd-image-updater.argoproj.io/pull-secret (image a): ", "namespace argocd", "team-a"},
		},
		{
			name:        "the controller's namespace: its own Secrets",
			annotations: map[string]string{"image-list": "a=nginx", "a.pull-secret": "pullsecret:argocd/regcred"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1"),
			jobs:        map[string]string{"a": "-1 1"},
		},
		{
			name:        "the controller's namespace: not another namespace's",
			annotations: map[string]string{"image-list": "a=nginx", "a.pull-secret": "secret:team-a/creds#creds"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1"),
			problems:    []string{"a.pull-secret", "names a Secret in namespace team-a", "own namespace, argocd"},
		},
		{
			name:        "env: outside the controller's namespace",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=nginx", "a.pull-secret": "env:REGISTRY_CREDS"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1"),
			problems: []string{"annotation argocd-image-updater.argoproj.io/a.pull-secret (image a): ",
				"env: credentials may only be named by Applications in the controller's namespace (argocd); this Application is in team-a"},
		},
		{
			name:        "ecr with a role outside the controller's namespace",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=123456789012.dkr.ecr.eu-west-1.amazonaws.com/app", "a.pull-secret": "ecr:arn:aws:iam::123456789012:role/other-team"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("123456789012.dkr.ecr.eu-west-1.amazonaws.com/app:1"),
			problems:    []string{"a.pull-secret", "ecr: credentials may only be named by Applications in the controller's namespace (argocd)"},
		},
		{
			name:        "plain ecr from any namespace",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=123456789012.dkr.ecr.eu-west-1.amazonaws.com/app", "a.pull-secret": "ecr"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("123456789012.dkr.ecr.eu-west-1.amazonaws.com/app:1"),
			jobs:        map[string]string{"a": "-1 1"},
		},
		{
			name:        "ext: outside the controller's namespace",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=nginx", "a.pull-secret": "ext:/app/scripts/login.sh"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1"),
			problems:    []string{"a.pull-secret", "ext: credentials may only be named by Applications in the controller's namespace"},
		},
		{
			name:        "env: and ext: in the controller's namespace",
			annotations: map[string]string{"image-list": "a=nginx,b=redis", "a.pull-secret": "env:REGISTRY_CREDS", "b.pull-secret": "ext:/app/scripts/login.sh"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1", "redis:7"),
			jobs:        map[string]string{"a": "-1 1", "b": "-1 7"},
		},
		{
			name:           "env: when the controller's namespace is not known",
			noControllerNS: true,
			annotations:    map[string]string{"image-list": "a=nginx", "a.pull-secret": "env:REGISTRY_CREDS"},
			spec:           map[string]any{"source": kustomizeSource()},
			status:         running("nginx:1"),
			problems:       []string{"env: credentials may only be named by Applications in the controller's namespace"},
		},
		{
			name:        "native cloud credentials from any namespace",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=nginx,b=redis,c=example.azurecr.io/app", "a.pull-secret": "ecr", "b.pull-secret": "gcp", "c.pull-secret": "azure"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1", "redis:7", "example.azurecr.io/app:3"),
			jobs:        map[string]string{"a": "-1 1", "b": "-1 7", "c": "-1 3"},
		},
		{
			name:        "a rejected reference is not repeated",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=nginx", "a.pull-secret": "admin:hunter2"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1"),
			problems:    []string{"a.pull-secret", `invalid credential reference "<redacted>"`},
			notProblems: []string{"hunter2", "admin"},
		},
		{
			name:        "git:secret in another namespace stops the Application",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=nginx", "write-back-method": "git:secret:argocd/deploy-key", "git-repository": "https://evil.example.com/r.git"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1"),
			skips:       []string{"a"},
			problems: []string{"annotation argocd-image-updater.argoproj.io/write-back-method: ",
				"git:secret:argocd/deploy-key names a Secret in namespace argocd", "own namespace, team-a"},
		},
		{
			name:        "git:secret beside the Application",
			namespace:   "team-a",
			annotations: map[string]string{"image-list": "a=nginx", "write-back-method": "git:secret:team-a/deploy-key"},
			spec:        map[string]any{"source": kustomizeSource()},
			status:      running("nginx:1"),
			jobs:        map[string]string{"a": "-1 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := planApp(t, tt.namespace, tt.annotations, tt.spec, tt.status)
			controllerNS := "argocd"
			if tt.noControllerNS {
				controllerNS = ""
			}
			jobs, skips, problems := newPlanner(controllerNS, linuxAMD64).application(app)
			got := map[string]string{}
			for _, j := range jobs {
				got[j.spec.Alias] = strconv.Itoa(j.source.Index) + " " + j.current.String()
			}
			if len(got) != len(tt.jobs) {
				t.Errorf("jobs %v, want %v", got, tt.jobs)
			}
			for alias, want := range tt.jobs {
				if got[alias] != want {
					t.Errorf("image %s: planned %q, want %q", alias, got[alias], want)
				}
			}
			var gotSkips []string
			for _, s := range skips {
				gotSkips = append(gotSkips, s.image)
			}
			if strings.Join(gotSkips, ",") != strings.Join(tt.skips, ",") {
				t.Errorf("skips %v, want %v", gotSkips, tt.skips)
			}
			var msgs []string
			for _, p := range problems {
				if !isWarning(p) {
					msgs = append(msgs, p.Error())
				}
			}
			all := strings.Join(msgs, "\n")
			for _, want := range tt.problems {
				if !strings.Contains(all, want) {
					t.Errorf("problems %q lack %q", msgs, want)
				}
			}
			for _, not := range tt.notProblems {
				if strings.Contains(all, not) {
					t.Errorf("problems %q contain %q", msgs, not)
				}
			}
			if len(tt.problems) == 0 && len(msgs) > 0 {
				t.Errorf("unexpected problems %q", msgs)
			}
		})
	}
}
