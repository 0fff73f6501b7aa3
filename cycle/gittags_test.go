package cycle

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// TestGitTags: a git source pinned to a tag moves to the newest tag within
// its constraint, listed once a cycle with Argo CD's read credentials; a
// source on a branch, or from a repository its AppProject does not
// permit, is left.
func TestGitTags(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test servers")
	}
	k := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	gitSrv := testenv.StartGitServer(t)
	gitSrv.CreateRepo(t, "example/config", "", map[string]string{"app/kustomization.yaml": "resources: []\n"})
	gitSrv.Tag(t, "example/config", "v1.0.0", "main")
	gitSrv.CommitFiles(t, "example/config", "main", "a change", map[string]string{"app/kustomization.yaml": "resources: []\n# changed\n"})
	gitSrv.Tag(t, "example/config", "v1.1.0", "main")
	gitSrv.Tag(t, "example/config", "v2.0.0", "main")
	url := gitSrv.HTTPRepoURL("example/config")
	k.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "repo-config", Namespace: testenv.ArgoCDNamespace, Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
		StringData: map[string]string{"url": url, "username": gitSrv.Username, "password": gitSrv.Password},
	})
	k.CreateAppProject(t, testenv.ArgoCDNamespace, "tags", []string{"*"}, nil)
	k.CreateAppProject(t, testenv.ArgoCDNamespace, "tags-narrow", []string{"https://git.example.com/*"}, nil)
	w := newWorld(t, k, reg, worldOptions{names: "tags-*", git: true})
	app := func(name, project, entry, revision string) *unstructured.Unstructured {
		obj := appObject(name, map[string]string{"git-tag-list": entry, "write-back-method": "argocd"}, map[string]any{"source": map[string]any{
			"repoURL": url, "path": "app", "targetRevision": revision,
		}})
		obj.Object["spec"].(map[string]any)["project"] = project
		return obj
	}
	w.create(t,
		app("tags-pinned", "tags", "config="+url+":^1", "v1.0.0"),
		// The same repository spelt another way is the same repository.
		app("tags-pinned-2", "tags", strings.TrimSuffix(url, ".git"), "v1.0.0"),
		app("tags-branch", "tags", url, "main"),
		app("tags-denied", "tags-narrow", url, "v1.0.0"),
	)
	listings := gitSrv.Fetches.Load()
	sum := w.updater.RunOnce(t.Context())
	if sum.Updated != 2 || sum.Errors != 1 {
		t.Errorf("summary %+v, want 2 updated and the denied one failing", sum)
	}
	if got := gitSrv.Fetches.Load() - listings; got != 1 {
		t.Errorf("%d listings of the repository, want 1 for the Applications of one project (the other is refused before)", got)
	}
	want := map[string]string{
		"tags-pinned":   "v1.1.0", // within ^1
		"tags-pinned-2": "v2.0.0",
		"tags-branch":   "main", // a branch is Argo CD's to follow
		"tags-denied":   "v1.0.0",
	}
	for name, rev := range want {
		if got, _, _ := unstructured.NestedString(w.get(t, name).Object, "spec", "source", "targetRevision"); got != rev {
			t.Errorf("%s: targetRevision %q, want %q", name, got, rev)
		}
	}
	logs := w.logs.String()
	for _, msg := range []string{
		`(git source ` + url + `): spec.source: targetRevision \"main\" is not a tag of ` + url,
		"repository " + url + " is not permitted by AppProject tags-narrow",
	} {
		if !strings.Contains(logs, msg) {
			t.Errorf("the log does not say %q", msg)
		}
	}
	for _, secret := range []string{gitSrv.Password} {
		if strings.Contains(logs, secret) {
			t.Error("the log holds the repository's password")
		}
	}
}
