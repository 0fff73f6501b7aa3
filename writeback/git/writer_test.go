package git

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitsign"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// Names Argo CD gives its repository credentials and SSH known hosts,
// and the user it sends with a token alone.
const (
	argoCDSecretTypeLabel      = "argocd.argoproj.io/secret-type"
	argoCDSecretTypeRepository = "repository"
	argoCDSecretTypeRepoCreds  = "repo-creds"
	// Argo CD's write credentials.
	argoCDSecretTypeRepositoryWrite = "repository-write"
	argoCDSecretTypeRepoWriteCreds  = "repo-write-creds"
	argoCDKnownHostsConfigMap       = "argocd-ssh-known-hosts-cm"
	argoCDKnownHostsKey             = "ssh_known_hosts"
	githubTokenUser                 = "x-access-token"
)

// noObjects is a cluster without Secrets, ConfigMaps or AppProjects.
type noObjects struct{}

func (noObjects) RepositorySecrets(context.Context, string) ([]corev1.Secret, error) {
	return nil, nil
}

func (noObjects) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func (noObjects) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
}

func (noObjects) AppProject(_ context.Context, _, name string) (*repoaccess.AppProject, error) {
	return nil, apierrors.NewNotFound(repoaccess.AppProjectsResource().GroupResource(), name)
}

// gitAppImage is the image the seed repository's manifests name.
const gitAppImage = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app"

// mustTarget parses a write-back-target as the annotations would.
func mustTarget(s string) settings.WriteBackTarget {
	t, err := settings.ParseWriteBackTarget(s)
	if err != nil {
		panic(err)
	}
	return t
}

func changedAliases(images []writeback.ImageUpdate) []string {
	var out []string
	for _, img := range images {
		out = append(out, img.Alias)
	}
	return out
}

// gitEnv holds the servers the git write-back tests share: one API server
// for Secrets and the known hosts ConfigMap, and one git server over HTTP
// and SSH. Each subtest has its own repositories and its own Argo CD
// namespace, so credentials of one subtest never serve another.
type gitEnv struct {
	kube *testenv.Kube
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	git  *testenv.GitServer
	sshd *testenv.SSHServer
}

var testClock = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func TestGitWriter(t *testing.T) {
	// With the ApplicationSet CRD, for the applicationset target.
	kube := testenv.StartKube(t, testenv.WithApplicationSetCRD())
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	srv := testenv.StartGitServer(t)
	e := &gitEnv{kube: kube, cs: cs, dyn: dynamic.NewForConfigOrDie(kube.Config), git: srv, sshd: srv.StartSSH(t)}

	t.Run("argocd-source files", e.testSourceFiles)
	t.Run("kustomization targets", e.testKustomizationTargets)
	t.Run("kustomization file names", e.testKustomizationFileNames)
	t.Run("helm values", e.testHelmValues)
	t.Run("override file targets", e.testOverrideFileTargets)
	t.Run("invalid targets", e.testInvalidTargets)
	t.Run("app of apps", e.testAppOfApps)
	t.Run("app of apps: a Helm parent", e.testAppOfAppsHelm)
	t.Run("app of apps: only what the parent deploys", e.testAppOfAppsConfined)
	t.Run("ApplicationSets", e.testApplicationSets)
	t.Run("fifty applications one push", e.testFiftyApplications)
	t.Run("clone kept between cycles", e.testCloneReuse)
	t.Run("clone kept across restarts", e.testCloneAcrossRestarts)
	t.Run("leftovers of interrupted clones", e.testLeftoverClones)
	t.Run("clone eviction", e.testCloneEviction)
	t.Run("a fetch past the clones' bound", e.testFetchBound)
	t.Run("shallow clones", e.testShallowClones)
	t.Run("shallow fetch figures", e.testShallowFigures)
	t.Run("push raced by another writer", e.testPushRace)
	t.Run("push gate", e.testPushGate)
	t.Run("transient failures retried", e.testTransientFailures)
	t.Run("one commit refused by a pre-receive hook", e.testRefusedCommit)
	t.Run("credentials from repository Secret", e.testRepositorySecret)
	t.Run("credentials from repo-creds prefix", e.testRepoCredsPrefix)
	t.Run("project-scoped credentials", e.testProjectScopedCredentials)
	t.Run("credentials from git:secret", e.testGitSecret)
	t.Run("AppProject sourceRepos and sourceNamespaces", e.testAppProjects)
	t.Run("wrong password", e.testWrongPassword)
	t.Run("ssh", e.testSSH)
	t.Run("branch template", e.testBranchTemplate)
	t.Run("pull requests", e.testPullRequests)
	t.Run("pull request errors", e.testPullRequestErrors)
	t.Run("openpgp signing", e.testOpenPGPSigning)
	t.Run("ssh signing", e.testSSHSigning)
	t.Run("dry run", e.testDryRun)
	t.Run("github app", e.testGitHubApp)
	t.Run("write credentials", e.testWriteCredentials)
	t.Run("commits through the GitHub API", e.testAPICommits)
	t.Run("tls", e.testTLS)
	t.Run("gnupg key id", e.testGnuPGKeyID)
	t.Run("repo-creds on URL boundaries", e.testRepoCredsBoundaries)
	t.Run("redirects", e.testRedirects)
	t.Run("credentials in the URL stay out of errors", e.testCredentialsInErrors)
}

// argoNamespace creates a namespace standing in for Argo CD's, holding a
// repo-creds Secret for every repository of the HTTP server unless
// withCreds is false, and Argo CD's default AppProject, which allows every
// repository. The tests' Applications live in the argocd namespace and in
// team-* namespaces, which the project lists as source namespaces.
func (e *gitEnv) argoNamespace(t *testing.T, name string, withCreds bool) string {
	t.Helper()
	e.kube.CreateNamespace(t, name)
	e.kube.CreateAppProject(t, name, repoaccess.DefaultAppProject, []string{"*"}, []string{testenv.ArgoCDNamespace, "team-*"})
	if withCreds {
		e.secret(t, name, "server-creds", argoCDSecretTypeRepoCreds, map[string]string{
			"url": e.git.HTTPURL + "/", "username": e.git.Username, "password": e.git.Password,
		})
	}
	return name
}

func (e *gitEnv) secret(t *testing.T, ns, name, secretType string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
	if secretType != "" {
		s.Labels = map[string]string{argoCDSecretTypeLabel: secretType}
	}
	e.kube.Create(t, s)
}

func (e *gitEnv) writer(t *testing.T, ns string, opts ...Option) *Writer {
	t.Helper()
	base := []Option{WithArgoCDNamespace(ns), WithWorkDir(t.TempDir()), WithClock(func() time.Time { return testClock })}
	w, err := NewWriter(repoaccess.NewKubeSecretLister(e.cs), repoaccess.NewKubeAppProjectGetter(e.dyn), append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// repo creates a repository laid out like seed 003 plus files.
func (e *gitEnv) repo(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	e.git.CreateRepo(t, name, "testdata/seed003", files)
	return e.git.HTTPRepoURL(name)
}

func (e *gitEnv) bare(name string) string { return filepath.Join(e.git.Root, name+".git") }

// appUpdate is seed 003's main Application moving eks-app to v0.0.2.
func appUpdate(name, repoURL string) update {
	return update{
		Namespace: "argocd", Name: name, ControllerNamespace: "argocd",
		RepoURL: repoURL, TargetRevision: "main",
		SourcePath: "main/overlays/production", SourceType: application.SourceKustomize,
		Images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2"}, Old: imageref.ParseVersion("v0.0.1")}},
	}
}

func mustWrite(t *testing.T, w *Writer, updates ...update) []writeback.Result {
	t.Helper()
	results := w.write(context.Background(), updates)
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("%s/%s: %v", r.Namespace, r.Name, r.Err)
		}
	}
	return results
}

// gitCLI runs git with no user or system configuration.
func gitCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=other", "GIT_AUTHOR_EMAIL=other@example.com",
		"GIT_COMMITTER_NAME=other", "GIT_COMMITTER_EMAIL=other@example.com")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// otherWriter commits and pushes from its own clone, as a person or CI
// job would, running change in the clone first.
func (e *gitEnv) otherWriter(t *testing.T, repo, branch, subject string, change func(dir string)) {
	t.Helper()
	dir := t.TempDir()
	gitCLI(t, "", "clone", "--quiet", "--branch", branch, e.bare(repo), dir)
	change(dir)
	gitCLI(t, dir, "add", "--all")
	gitCLI(t, dir, "commit", "--quiet", "--message", subject)
	gitCLI(t, dir, "push", "--quiet", "origin", branch)
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func subjects(commits []testenv.Commit) []string {
	var out []string
	for _, c := range commits {
		out = append(out, c.Subject)
	}
	return out
}

func (e *gitEnv) testSourceFiles(t *testing.T) {
	ns := e.argoNamespace(t, "source-files", true)
	url := e.repo(t, "source-files", map[string]string{
		"charts/main/.argocd-source-main-helm.yaml": "helm:\n  parameters:\n  - name: replicaCount\n    value: \"3\"\n  - name: image.tag\n    value: v0.0.1\n    forceString: true\n  valueFiles:\n  - values-production.yaml\n",
	})
	w := e.writer(t, ns)

	kustomize := appUpdate("main", url)
	kustomize.Images = append(kustomize.Images, writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web"), KustomizeImageName: mustRef("web")}, New: imageref.Version{Tag: "v0.0.3"}, Old: imageref.ParseVersion("v0.0.1")})
	helm := appUpdate("main-helm", url)
	helm.SourcePath, helm.SourceType = "charts/main", application.SourceHelm
	otherNS := appUpdate("main", url)
	otherNS.Namespace = "team-a"

	results := mustWrite(t, w, kustomize, helm, otherNS)
	want := "kustomize:\n  images:\n" +
		"  - " + gitAppImage + ":v0.0.2\n" +
		"  - web=123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web:v0.0.3\n"
	if diff := cmp.Diff(want, e.git.ReadFile(t, "source-files", "main", "main/overlays/production/.argocd-source-main.yaml")); diff != "" {
		t.Errorf("new kustomize file (-want +got):\n%s", diff)
	}
	wantHelm := "helm:\n  parameters:\n" +
		"  - name: image.name\n    value: " + gitAppImage + "\n    forcestring: true\n" +
		"  - name: image.tag\n    value: v0.0.2\n    forceString: true\n" +
		"  - name: replicaCount\n    value: \"3\"\n" +
		"  valueFiles:\n  - values-production.yaml\n"
	if diff := cmp.Diff(wantHelm, e.git.ReadFile(t, "source-files", "main", "charts/main/.argocd-source-main-helm.yaml")); diff != "" {
		t.Errorf("merged helm file (-want +got):\n%s", diff)
	}
	if got := e.git.ReadFile(t, "source-files", "main", "main/overlays/production/.argocd-source-team-a_main.yaml"); !strings.Contains(got, gitAppImage+":v0.0.2") {
		t.Errorf("namespaced file: %q", got)
	}

	log := e.git.Log(t, "source-files", "main")
	if diff := cmp.Diff([]string{"build: automatic update of main", "build: automatic update of main-helm", "build: automatic update of main", "initial commit"}, subjects(log)); diff != "" {
		t.Errorf("subjects (-want +got):\n%s", diff)
	}
	top := log[len(log)-2]
	if top.Author != DefaultGitAuthorName || top.Email != DefaultGitAuthorEmail {
		t.Errorf("author %s <%s>", top.Author, top.Email)
	}
	// The images without their registry host, as Argo CD Image Updater
	// names them.
	wantBody := "updates image eks-app tag 'v0.0.1' to 'v0.0.2'\nupdates image eks-web tag 'v0.0.1' to 'v0.0.3'"
	if top.Body != wantBody {
		t.Errorf("body %q, want %q", top.Body, wantBody)
	}
	for i, r := range results {
		if r.Commit != log[len(log)-2-i].Hash || r.Branch != "main" {
			t.Errorf("result %d: commit %s branch %s, want %s on main", i, r.Commit, r.Branch, log[len(log)-2-i].Hash)
		}
	}
	if diff := cmp.Diff([]string{"app", "web"}, changedAliases(results[0].Changed)); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
}

func (e *gitEnv) testKustomizationTargets(t *testing.T) {
	ns := e.argoNamespace(t, "kustomization-targets", true)
	url := e.repo(t, "kustomization-targets", nil)
	w := e.writer(t, ns)

	inSource := appUpdate("in-source", url)
	inSource.Target = mustTarget("kustomization")
	relative := appUpdate("relative", url)
	relative.Target = mustTarget("kustomization:../../base")
	relative.Images[0].New.Tag = "v0.0.5"
	rooted := appUpdate("rooted", url)
	rooted.SourcePath, rooted.Target = "charts/main", mustTarget("kustomization:/main/overlays/production")
	rooted.Images = []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web")}, New: imageref.Version{Tag: "v0.0.2"}}}
	// Seed 003's own annotation: relative to the source path it names
	// main/main/overlays/production, which does not exist.
	seed := appUpdate("seed", url)
	seed.Target = mustTarget("kustomization:../../main/overlays/production")

	results := w.write(context.Background(), []update{inSource, relative, rooted, seed})
	for _, r := range results[:3] {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Name, r.Err)
		}
	}
	if err := results[3].Err; err == nil || !strings.Contains(err.Error(), "Application argocd/seed") || !strings.Contains(err.Error(), "folder main/main/overlays/production does not exist") {
		t.Errorf("seed annotation: %v", err)
	}
	wantOverlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncommonLabels:\n  env: production\nresources:\n- ../../base\n" +
		"images:\n- name: " + gitAppImage + "\n  newTag: v0.0.2\n" +
		"- name: 123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web\n  newTag: v0.0.2\n"
	if diff := cmp.Diff(wantOverlay, e.git.ReadFile(t, "kustomization-targets", "main", "main/overlays/production/kustomization.yaml")); diff != "" {
		t.Errorf("overlay (-want +got):\n%s", diff)
	}
	wantBase := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- front.yaml\n" +
		"images:\n- name: " + gitAppImage + "\n  newTag: v0.0.5\n"
	if diff := cmp.Diff(wantBase, e.git.ReadFile(t, "kustomization-targets", "main", "main/base/kustomization.yaml")); diff != "" {
		t.Errorf("base (-want +got):\n%s", diff)
	}
	if n := len(e.git.Log(t, "kustomization-targets", "main")); n != 4 {
		t.Errorf("%d commits, want 3 and the initial one", n)
	}
}

func (e *gitEnv) testKustomizationFileNames(t *testing.T) {
	ns := e.argoNamespace(t, "kustomization-names", true)
	files := map[string]string{}
	for dir, name := range map[string]string{"a": "kustomization.yaml", "b": "kustomization.yml", "c": "Kustomization"} {
		files["apps/"+dir+"/"+name] = "resources:\n- ../../main/base\n"
	}
	url := e.repo(t, "kustomization-names", files)
	w := e.writer(t, ns)
	pushes := e.git.Pushes.Load()
	var updates []update
	// main, HEAD and "" all name the default branch: one push.
	for dir, revision := range map[string]string{"a": "main", "b": "HEAD", "c": ""} {
		u := appUpdate("app-"+dir, url)
		u.SourcePath, u.Target, u.TargetRevision = "apps/"+dir, mustTarget("kustomization"), revision
		updates = append(updates, u)
	}
	mustWrite(t, w, updates...)
	want := "resources:\n- ../../main/base\nimages:\n- name: " + gitAppImage + "\n  newTag: v0.0.2\n"
	for path := range files {
		if got := e.git.ReadFile(t, "kustomization-names", "main", path); got != want {
			t.Errorf("%s:\n%s", path, got)
		}
	}
	if d := e.git.Pushes.Load() - pushes; d != 1 {
		t.Errorf("%d pushes, want 1", d)
	}
}

func (e *gitEnv) testHelmValues(t *testing.T) {
	ns := e.argoNamespace(t, "helm-values", true)
	url := e.repo(t, "helm-values", nil)
	w := e.writer(t, ns)
	app := appUpdate("main-app", url)
	app.SourcePath, app.SourceType, app.Target = "charts/main", application.SourceHelm, mustTarget("helmvalues")
	app.Images[0].HelmImageName, app.Images[0].HelmImageTag = "app.image.name", "app.image.tag"
	// A second Application writes the same file by its rooted path; its
	// edit builds on the first one's.
	web := appUpdate("main-web", url)
	web.SourcePath, web.SourceType, web.Target = "main/overlays/production", application.SourceHelm, mustTarget("helmvalues:/charts/main/values.yaml")
	web.Images = []writeback.ImageUpdate{
		{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web"), HelmImageSpec: "sidecars[1].image"}, New: imageref.Version{Tag: "v0.0.2"}},
		{ImageSpec: settings.ImageSpec{Alias: "probe", Image: mustRef("ghcr.io/example/probe"), HelmImageName: "probe.image.repository", HelmImageTag: "probe.image.tag"}, New: imageref.Version{Tag: "1.0"}},
	}
	results := mustWrite(t, w, app, web)
	want := `# Values of the main chart (the Helm variant of seed 003's application).
app:
  image:
    name: 123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app
    tag: v0.0.2   # written by the image updater
sidecars:
  - name: log-shipper
    image: fluent/fluent-bit:3.0.0
  - name: web
    image: 123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web:v0.0.2
probe:
  image:
    tag: "1.0"
    repository: ghcr.io/example/probe
`
	if diff := cmp.Diff(want, e.git.ReadFile(t, "helm-values", "main", "charts/main/values.yaml")); diff != "" {
		t.Errorf("values.yaml (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"web", "probe"}, changedAliases(results[1].Changed)); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	// The name parameter already held the image: only the tag changed.
	if diff := cmp.Diff([]string{"app"}, changedAliases(results[0].Changed)); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
}

// testOverrideFileTargets: a write-back-target that names neither a
// kustomization nor a Helm values file is the path, from the repository
// root, of a file in the .argocd-source format.
func (e *gitEnv) testOverrideFileTargets(t *testing.T) {
	ns := e.argoNamespace(t, "override-files", true)
	url := e.repo(t, "override-files", map[string]string{
		"config/README.md":           "overrides live here\n",
		"charts/main/overrides.yaml": "helm:\n  parameters:\n  - name: replicaCount\n    value: \"3\"\n",
	})
	w := e.writer(t, ns)

	// Relative to the repository root, not to the source path.
	created := appUpdate("created", url)
	created.Target = mustTarget("config/main-images.yaml")
	merged := appUpdate("merged", url)
	merged.SourcePath, merged.SourceType, merged.Target = "charts/main", application.SourceHelm, mustTarget("/charts/main/overrides.yaml")
	escaping := appUpdate("escaping", url)
	escaping.Target = mustTarget("../outside.yaml")
	// Its folders are created, as Argo CD Image Updater creates them.
	noFolder := appUpdate("no-folder", url)
	noFolder.Target = mustTarget("nowhere/deep/images.yaml")

	results := w.write(context.Background(), []update{created, merged, escaping, noFolder})
	wantErr := map[string]string{
		"escaping": `write-back-target "../outside.yaml": path "../outside.yaml" (from ".") leaves the repository`,
	}
	for _, r := range results {
		want, bad := wantErr[r.Name]
		switch {
		case bad && (r.Err == nil || !strings.Contains(r.Err.Error(), want) || !errors.Is(r.Err, writeback.ErrInvalidTarget)):
			t.Errorf("%s: got %v, want an invalid target error containing %q", r.Name, r.Err, want)
		case !bad && (r.Err != nil || r.Commit == ""):
			t.Errorf("%s: commit %q, err %v", r.Name, r.Commit, r.Err)
		}
	}
	want := "kustomize:\n  images:\n  - " + gitAppImage + ":v0.0.2\n"
	if diff := cmp.Diff(want, e.git.ReadFile(t, "override-files", "main", "config/main-images.yaml")); diff != "" {
		t.Errorf("created file (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, e.git.ReadFile(t, "override-files", "main", "nowhere/deep/images.yaml")); diff != "" {
		t.Errorf("created file in new folders (-want +got):\n%s", diff)
	}
	wantHelm := "helm:\n  parameters:\n" +
		"  - name: image.name\n    value: " + gitAppImage + "\n    forcestring: true\n" +
		"  - name: image.tag\n    value: v0.0.2\n    forcestring: true\n" +
		"  - name: replicaCount\n    value: \"3\"\n"
	if diff := cmp.Diff(wantHelm, e.git.ReadFile(t, "override-files", "main", "charts/main/overrides.yaml")); diff != "" {
		t.Errorf("merged file (-want +got):\n%s", diff)
	}
}

func (e *gitEnv) testInvalidTargets(t *testing.T) {
	ns := e.argoNamespace(t, "invalid-targets", true)
	url := e.repo(t, "invalid-targets", map[string]string{
		"main/overlays/broken/kustomization.yaml": "resources:\n- ../../base\nimages: [\n",
	})
	e.otherWriter(t, "invalid-targets", "main", "add symbolic links", func(dir string) {
		for link, target := range map[string]string{
			"main/overlays/production/up": "../../../..",
			"main/overlays/absolute":      "/etc",
			"main/overlays/staging":       "production",
		} {
			if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
				t.Fatal(err)
			}
		}
	})
	w := e.writer(t, ns)
	good := appUpdate("good", url)
	missing := appUpdate("missing", url)
	missing.SourceType, missing.Target = application.SourceHelm, mustTarget("helmvalues")
	invalid := appUpdate("invalid", url)
	invalid.SourcePath, invalid.Target = "main/overlays/broken", mustTarget("kustomization")
	escaping := appUpdate("escaping", url)
	escaping.Target = mustTarget("kustomization:../../../../elsewhere")
	symlinkUp := appUpdate("symlink-up", url)
	symlinkUp.Target = mustTarget("kustomization:up/tmp")
	symlinkAbs := appUpdate("symlink-absolute", url)
	symlinkAbs.Target = mustTarget("kustomization:/main/overlays/absolute")
	// A symbolic link inside the repository is followed.
	staging := appUpdate("staging", url)
	staging.SourcePath = "main/overlays/staging"

	before := e.git.Log(t, "invalid-targets", "main")
	results := w.write(context.Background(), []update{good, missing, invalid, escaping, symlinkUp, symlinkAbs, staging})
	wantErr := map[string]string{
		"invalid":          "main/overlays/broken/kustomization.yaml: invalid YAML: yaml: line 3",
		"escaping":         `path "../../../../elsewhere" (from "main/overlays/production") leaves the repository`,
		"symlink-up":       "main/overlays/production/up is a symbolic link to ../../../.., which leaves the repository",
		"symlink-absolute": "main/overlays/absolute is a symbolic link to /etc, which leaves the repository",
	}
	for _, r := range results {
		want, bad := wantErr[r.Name]
		switch {
		case bad && (r.Err == nil || !strings.Contains(r.Err.Error(), want) || !strings.Contains(r.Err.Error(), "Application argocd/"+r.Name)):
			t.Errorf("%s: got %v, want an error naming the Application and containing %q", r.Name, r.Err, want)
		case bad && !errors.Is(r.Err, writeback.ErrInvalidTarget):
			t.Errorf("%s: %v does not match writeback.ErrInvalidTarget", r.Name, r.Err)
		case bad && (r.Commit != "" || len(r.Changed) != 0):
			t.Errorf("%s: failed yet reports commit %q", r.Name, r.Commit)
		case !bad && (r.Err != nil || r.Commit == ""):
			t.Errorf("%s: commit %q, err %v", r.Name, r.Commit, r.Err)
		}
	}
	after := e.git.Log(t, "invalid-targets", "main")
	if len(after) != len(before)+3 {
		t.Errorf("%d new commits, want 3 (good, missing and staging)", len(after)-len(before))
	}
	// A values file that does not exist is created, as Argo CD Image
	// Updater creates it.
	wantValues := "# auto generated by argocd image updater\n\nimage:\n  tag: v0.0.2\n  name: " + gitAppImage + "\n"
	if diff := cmp.Diff(wantValues, e.git.ReadFile(t, "invalid-targets", "main", "main/overlays/production/values.yaml")); diff != "" {
		t.Errorf("created values file (-want +got):\n%s", diff)
	}
	for _, file := range []string{".argocd-source-good.yaml", ".argocd-source-staging.yaml"} {
		if got := e.git.ReadFile(t, "invalid-targets", "main", "main/overlays/production/"+file); !strings.Contains(got, gitAppImage+":v0.0.2") {
			t.Errorf("%s: %q", file, got)
		}
	}
}

func (e *gitEnv) testFiftyApplications(t *testing.T) {
	ns := e.argoNamespace(t, "fifty", true)
	url := e.repo(t, "fifty", nil)
	w := e.writer(t, ns)
	var updates []update
	for i := range 50 {
		updates = append(updates, appUpdate(fmt.Sprintf("app-%02d", i), url))
	}
	pushes, fetches := e.git.Pushes.Load(), e.git.Fetches.Load()
	start := time.Now()
	results := mustWrite(t, w, updates...)
	elapsed := time.Since(start)
	t.Logf("50 Applications, first cycle (clone, 50 commits, 1 push): %s; %d fetches, %d pushes",
		elapsed.Round(time.Millisecond), e.git.Fetches.Load()-fetches, e.git.Pushes.Load()-pushes)
	if d := e.git.Pushes.Load() - pushes; d != 1 {
		t.Errorf("%d pushes, want 1", d)
	}
	log := e.git.Log(t, "fifty", "main")
	if len(log) != 51 {
		t.Errorf("%d commits, want 50 and the initial one", len(log))
	}
	// The server checks the objects our pack delivered.
	gitCLI(t, e.bare("fifty"), "fsck", "--strict", "--no-progress")
	seen := map[string]bool{}
	for i, r := range results {
		if r.Commit == "" || seen[r.Commit] || len(r.Changed) != 1 {
			t.Errorf("result %d: commit %q, changed %d", i, r.Commit, len(r.Changed))
		}
		seen[r.Commit] = true
	}
	// Each result carries the push: the tip it was made on, and the
	// commits in order, the newest last, the earlier held by the later.
	var want []string
	for _, c := range slices.Backward(log[:50]) {
		want = append(want, c.Hash)
	}
	for i, r := range results {
		if r.Push != results[0].Push || r.Push == nil || r.Push.Base != log[50].Hash || !slices.Equal(r.Push.Commits, want) || r.Push.Commits[i] != r.Commit {
			t.Fatalf("result %d: push %+v, want one made on %s with the branch's 50 new commits in order", i, r.Push, log[50].Hash)
		}
	}

	for i := range updates {
		updates[i].Images[0].Old, updates[i].Images[0].New = imageref.Version{Tag: "v0.0.2"}, imageref.Version{Tag: "v0.0.3"}
	}
	pushes, fetches = e.git.Pushes.Load(), e.git.Fetches.Load()
	start = time.Now()
	mustWrite(t, w, updates...)
	t.Logf("50 Applications, next cycle (kept clone, 50 commits, 1 push): %s; %d fetches, %d pushes",
		time.Since(start).Round(time.Millisecond), e.git.Fetches.Load()-fetches, e.git.Pushes.Load()-pushes)

	pushes = e.git.Pushes.Load()
	start = time.Now()
	results = mustWrite(t, w, updates...)
	t.Logf("50 Applications, nothing to change: %s", time.Since(start).Round(time.Millisecond))
	if d := e.git.Pushes.Load() - pushes; d != 0 {
		t.Errorf("%d pushes with nothing to change, want 0", d)
	}
	for _, r := range results {
		if r.Commit != "" || len(r.Changed) != 0 {
			t.Errorf("%s: commit %q with nothing to change", r.Name, r.Commit)
		}
	}
}

func (e *gitEnv) testCloneReuse(t *testing.T) {
	ns := e.argoNamespace(t, "clone-reuse", true)
	url := e.repo(t, "clone-reuse", nil)
	w := e.writer(t, ns)
	mustWrite(t, w, appUpdate("main", url))

	// The branch holds our own last push: listing it is the only request
	// before the push.
	u := appUpdate("main", url)
	u.Images[0].New.Tag = "v0.0.3"
	fetches := e.git.Fetches.Load()
	mustWrite(t, w, u)
	if d := e.git.Fetches.Load() - fetches; d != 1 {
		t.Errorf("%d upload-pack requests, want 1 (the branch listing)", d)
	}

	// Someone else pushed: the clone fetches just that.
	e.otherWriter(t, "clone-reuse", "main", "edit by hand", func(dir string) {
		writeTestFile(t, filepath.Join(dir, "README.md"), "hello\n")
	})
	u.Images[0].New.Tag = "v0.0.4"
	fetches = e.git.Fetches.Load()
	mustWrite(t, w, u)
	if d := e.git.Fetches.Load() - fetches; d != 2 {
		t.Errorf("%d upload-pack requests, want 2 (listing and fetch)", d)
	}
	entries, err := os.ReadDir(w.WorkDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || !entries[0].IsDir() {
		t.Errorf("work folder holds %v, want one clone", entries)
	}
	if diff := cmp.Diff([]string{"build: automatic update of main", "edit by hand", "build: automatic update of main", "build: automatic update of main", "initial commit"}, subjects(e.git.Log(t, "clone-reuse", "main"))); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

func (e *gitEnv) testPushRace(t *testing.T) {
	ns := e.argoNamespace(t, "push-race", true)
	url := e.repo(t, "push-race", nil)
	w := e.writer(t, ns)
	// Both Applications write the overlay's kustomization; the other
	// writer edits the same file between our fetch and our push.
	a := appUpdate("main", url)
	a.Target = mustTarget("kustomization")
	b := appUpdate("main-web", url)
	b.Target = mustTarget("kustomization")
	b.Images = []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web")}, New: imageref.Version{Tag: "v0.0.2"}}}
	var attempts []int
	w.beforePush = func(_, branch string, attempt int) {
		attempts = append(attempts, attempt)
		if attempt == 0 {
			e.otherWriter(t, "push-race", branch, "raise the replica count by hand", func(dir string) {
				path := filepath.Join(dir, "main/overlays/production/kustomization.yaml")
				content, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				writeTestFile(t, path, strings.Replace(string(content), "resources:", "replicas:\n- name: front-deployment\n  count: 3\nresources:", 1))
			})
		}
	}
	pushes := e.git.Pushes.Load()
	results := mustWrite(t, w, a, b)
	if diff := cmp.Diff([]int{0, 1}, attempts); diff != "" {
		t.Errorf("push attempts (-want +got):\n%s", diff)
	}
	if d := e.git.Pushes.Load() - pushes; d != 2 {
		t.Errorf("%d push requests, want 2 (refused, then accepted)", d)
	}
	log := e.git.Log(t, "push-race", "main")
	if diff := cmp.Diff([]string{"build: automatic update of main-web", "build: automatic update of main", "raise the replica count by hand", "initial commit"}, subjects(log)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if results[0].Commit != log[1].Hash || results[1].Commit != log[0].Hash {
		t.Errorf("results name commits %s and %s, history has %s and %s", results[0].Commit, results[1].Commit, log[1].Hash, log[0].Hash)
	}
	want := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncommonLabels:\n  env: production\n" +
		"replicas:\n- name: front-deployment\n  count: 3\nresources:\n- ../../base\n" +
		"images:\n- name: " + gitAppImage + "\n  newTag: v0.0.2\n" +
		"- name: 123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-web\n  newTag: v0.0.2\n"
	if diff := cmp.Diff(want, e.git.ReadFile(t, "push-race", "main", "main/overlays/production/kustomization.yaml")); diff != "" {
		t.Errorf("kustomization (-want +got):\n%s", diff)
	}

	// A branch that keeps moving gives up after the retries, with an error.
	w = e.writer(t, ns, WithPushRetries(1))
	w.beforePush = func(_, branch string, attempt int) {
		e.otherWriter(t, "push-race", branch, fmt.Sprintf("busy %d", attempt), func(dir string) {
			writeTestFile(t, filepath.Join(dir, "busy.txt"), fmt.Sprint(attempt))
		})
	}
	a.Images[0].New.Tag = "v0.0.9"
	r := w.write(context.Background(), []update{a})[0]
	if r.Err == nil || !strings.Contains(r.Err.Error(), "after 1 retries") || !errors.Is(r.Err, gitwire.ErrBranchMoved) || r.Commit != "" {
		t.Errorf("busy branch: commit %q, err %v", r.Commit, r.Err)
	}
	if got := subjects(e.git.Log(t, "push-race", "main"))[:2]; !slices.Equal(got, []string{"busy 1", "busy 0"}) {
		t.Errorf("history starts with %v", got)
	}
}

// testPushGate: a push, retries included, starts only while the gate is
// open; a refused one writes nothing and says so with writeback.ErrWriteNotStarted.
func (e *gitEnv) testPushGate(t *testing.T) {
	ns := e.argoNamespace(t, "push-gate", true)
	stopped := errors.New("stopping")
	tests := []struct {
		name string
		// closeAt is the push attempt before which the gate closes; -1:
		// never.
		closeAt int
		// race moves the branch before the first push, so that a retry
		// follows.
		race        bool
		wantPushed  bool
		wantHistory []string
	}{
		{name: "open", closeAt: -1, wantPushed: true, wantHistory: []string{"build: automatic update of main", "initial commit"}},
		{name: "closed", closeAt: 0, wantHistory: []string{"initial commit"}},
		{name: "closed before the retry", closeAt: 1, race: true, wantHistory: []string{"moved", "initial commit"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := fmt.Sprintf("push-gate-%d", i)
			url := e.repo(t, repo, nil)
			attempt := 0
			w := e.writer(t, ns, WithPushGate(func() error {
				if tt.closeAt >= 0 && attempt >= tt.closeAt {
					return stopped
				}
				return nil
			}))
			w.beforePush = func(_, branch string, n int) {
				if tt.race && n == 0 {
					e.otherWriter(t, repo, branch, "moved", func(dir string) { writeTestFile(t, filepath.Join(dir, "moved.txt"), "x") })
				}
				attempt = n + 1
			}
			r := w.write(context.Background(), []update{appUpdate("main", url)})[0]
			if tt.wantPushed {
				if r.Err != nil || r.Commit == "" {
					t.Errorf("commit %q, err %v", r.Commit, r.Err)
				}
			} else if !errors.Is(r.Err, writeback.ErrWriteNotStarted) || !errors.Is(r.Err, stopped) || r.Commit != "" || len(r.Changed) > 0 {
				t.Errorf("commit %q, changed %v, err %v; want writeback.ErrWriteNotStarted", r.Commit, r.Changed, r.Err)
			}
			if diff := cmp.Diff(tt.wantHistory, subjects(e.git.Log(t, repo, "main"))); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
		})
	}
}

func (e *gitEnv) testRepositorySecret(t *testing.T) {
	ns := e.argoNamespace(t, "creds-repository", false)
	url := e.repo(t, "creds-repository", nil)
	// The repository Secret wins over a matching repo-creds Secret, and
	// matches the URL spelled without .git.
	e.secret(t, ns, "repo-creds-wrong", argoCDSecretTypeRepoCreds, map[string]string{"url": e.git.HTTPURL, "username": e.git.Username, "password": "wrong"})
	e.secret(t, ns, "repo", argoCDSecretTypeRepository, map[string]string{"url": strings.TrimSuffix(url, ".git"), "username": e.git.Username, "password": e.git.Password, "type": "git"})
	mustWrite(t, e.writer(t, ns), appUpdate("main", url))
}

// testWriteCredentials: Argo CD's write credentials (repository-write,
// then repo-write-creds) push where they match, before its read ones;
// where none matches, the read ones do.
func (e *gitEnv) testWriteCredentials(t *testing.T) {
	ns := e.argoNamespace(t, "creds-write", false)
	exact, prefixed, readOnly := e.repo(t, "creds-write-exact", nil), e.repo(t, "creds-write-prefix/app", nil), e.repo(t, "creds-write-none", nil)
	// The read credentials cannot push to the repositories with write
	// credentials.
	for name, u := range map[string]string{"read-exact": exact, "read-prefixed": prefixed} {
		e.secret(t, ns, name, argoCDSecretTypeRepository, map[string]string{"url": u, "username": e.git.Username, "password": "wrong"})
	}
	e.secret(t, ns, "read-prefix", argoCDSecretTypeRepoCreds, map[string]string{"url": e.git.HTTPURL, "username": e.git.Username, "password": e.git.Password})
	e.secret(t, ns, "write-exact", argoCDSecretTypeRepositoryWrite, map[string]string{"url": exact, "username": e.git.Username, "password": e.git.Password})
	e.secret(t, ns, "write-short", argoCDSecretTypeRepoWriteCreds, map[string]string{"url": e.git.HTTPURL + "/creds-write-exact", "username": e.git.Username, "password": "wrong"})
	e.secret(t, ns, "write-prefix", argoCDSecretTypeRepoWriteCreds, map[string]string{"url": e.git.HTTPURL + "/creds-write-prefix", "username": e.git.Username, "password": e.git.Password})
	w := e.writer(t, ns)
	for _, u := range []string{exact, prefixed, readOnly} {
		mustWrite(t, w, appUpdate("main", u))
	}
}

func (e *gitEnv) testRepoCredsPrefix(t *testing.T) {
	ns := e.argoNamespace(t, "creds-prefix", false)
	url := e.repo(t, "creds-prefix", nil)
	e.secret(t, ns, "short", argoCDSecretTypeRepoCreds, map[string]string{"url": e.git.HTTPURL, "username": e.git.Username, "password": "wrong"})
	e.secret(t, ns, "long", argoCDSecretTypeRepoCreds, map[string]string{"url": e.git.HTTPURL + "/creds-prefix", "username": e.git.Username, "password": e.git.Password})
	// A repository Secret without credentials of its own defers to them.
	e.secret(t, ns, "repo-no-creds", argoCDSecretTypeRepository, map[string]string{"url": url})
	mustWrite(t, e.writer(t, ns), appUpdate("main", url))
}

// testProjectScopedCredentials: team-a's repository Secret (project
// team-a) pushes team-a's Application's commit; team-b's Application, whose
// AppProject allows the same repository, does not get it, and its push in
// the same Write is refused for want of credentials.
func (e *gitEnv) testProjectScopedCredentials(t *testing.T) {
	ns := e.argoNamespace(t, "creds-projects", false)
	url := e.repo(t, "creds-projects", nil)
	e.kube.CreateAppProject(t, ns, "team-a", []string{"*"}, []string{"argocd"})
	e.kube.CreateAppProject(t, ns, "team-b", []string{"*"}, []string{"argocd"})
	e.secret(t, ns, "team-a-repo", argoCDSecretTypeRepository, map[string]string{"url": url, "username": e.git.Username, "password": e.git.Password, "project": "team-a"})
	a, b := appUpdate("team-a-app", url), appUpdate("team-b-app", url)
	a.Project, b.Project = "team-a", "team-b"
	b.SourcePath = "main/overlays/staging"
	pushes := e.git.Pushes.Load()
	results := e.writer(t, ns).write(context.Background(), []update{a, b})
	if results[0].Err != nil || results[0].Commit == "" {
		t.Errorf("team-a: %+v", results[0])
	}
	if results[1].Err == nil || !strings.Contains(results[1].Err.Error(), "authentication required") || results[1].Commit != "" {
		t.Errorf("team-b: %+v, want its push refused without team-a's credentials", results[1])
	}
	if got := e.git.Pushes.Load() - pushes; got != 1 {
		t.Errorf("%d pushes, want team-a's alone", got)
	}
}

func (e *gitEnv) testWrongPassword(t *testing.T) {
	ns := e.argoNamespace(t, "wrong-password", false)
	url := e.repo(t, "wrong-password", nil)
	const password = "not-the-password-4711"
	e.secret(t, ns, "creds", argoCDSecretTypeRepoCreds, map[string]string{"url": e.git.HTTPURL, "username": e.git.Username, "password": password})
	pushes := e.git.Pushes.Load()
	r := e.writer(t, ns).write(context.Background(), []update{appUpdate("main", url)})[0]
	if r.Err == nil || !strings.Contains(r.Err.Error(), "authentication required") || !strings.Contains(r.Err.Error(), "Secret "+ns+"/creds") || !strings.Contains(r.Err.Error(), "Application argocd/main") {
		t.Errorf("got %v, want an authentication error naming the Application and the Secret", r.Err)
	}
	if errors.Is(r.Err, writeback.ErrInvalidTarget) {
		t.Errorf("an authentication failure is not an invalid target: %v", r.Err)
	}
	if r.Err != nil && strings.Contains(r.Err.Error(), password) {
		t.Errorf("the error shows the password: %v", r.Err)
	}
	if d := e.git.Pushes.Load() - pushes; d != 0 || len(e.git.Log(t, "wrong-password", "main")) != 1 {
		t.Errorf("%d pushes; history %v", d, subjects(e.git.Log(t, "wrong-password", "main")))
	}
}

func (e *gitEnv) testSSH(t *testing.T) {
	ns := e.argoNamespace(t, "ssh", false)
	e.git.CreateRepo(t, "ssh", "testdata/seed003", nil)
	url := e.git.SSHRepoURL("ssh")
	e.secret(t, ns, "ssh-repo", argoCDSecretTypeRepository, map[string]string{"url": url, "sshPrivateKey": string(e.sshd.ClientKey)})
	host := e.sshd.Addr

	// No known hosts at all.
	r := e.writer(t, ns).write(context.Background(), []update{appUpdate("main", url)})[0]
	if r.Err == nil || !strings.Contains(r.Err.Error(), "of "+host) || !strings.Contains(r.Err.Error(), "ConfigMap ssh/argocd-ssh-known-hosts-cm does not exist") {
		t.Errorf("no known hosts: %v", r.Err)
	}
	// Known hosts with another key for this host.
	otherPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := ssh.NewPublicKey(otherPub)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: argoCDKnownHostsConfigMap},
		Data:       map[string]string{argoCDKnownHostsKey: "github.com " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(otherKey))) + "\n"},
	}
	e.kube.Create(t, cm)
	r = e.writer(t, ns).write(context.Background(), []update{appUpdate("main", url)})[0]
	if r.Err == nil || !strings.Contains(r.Err.Error(), "of "+host+" is unknown") || !strings.Contains(r.Err.Error(), ssh.FingerprintSHA256(e.sshd.HostKey)) {
		t.Errorf("unknown host key: %v", r.Err)
	}
	if n := len(e.git.Log(t, "ssh", "main")); n != 1 {
		t.Errorf("%d commits after refused host keys", n)
	}

	// The right key, as Argo CD's ConfigMap would hold it.
	cm.Data[argoCDKnownHostsKey] += e.sshd.KnownHosts() + "\n"
	if err := e.kube.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	pushes := e.git.Pushes.Load()
	mustWrite(t, e.writer(t, ns), appUpdate("main", url))
	if got := e.git.ReadFile(t, "ssh", "main", "main/overlays/production/.argocd-source-main.yaml"); !strings.Contains(got, gitAppImage+":v0.0.2") {
		t.Errorf("file: %q", got)
	}
	if d := e.git.Pushes.Load() - pushes; d != 0 {
		t.Errorf("%d pushes over HTTP, want none (SSH only)", d)
	}
}

func (e *gitEnv) testBranchTemplate(t *testing.T) {
	ns := e.argoNamespace(t, "branch-template", true)
	url := e.repo(t, "branch-template", nil)
	w := e.writer(t, ns)
	u := appUpdate("main", url)
	u.Branch = "main:image-updater-{{range .Images}}{{.Alias}}{{end}}"
	r := mustWrite(t, w, u)[0]
	if r.Branch != "image-updater-app" {
		t.Errorf("branch %q", r.Branch)
	}
	if n := len(e.git.Log(t, "branch-template", "main")); n != 1 {
		t.Errorf("main has %d commits, want only the initial one", n)
	}
	// Next cycle: the branch exists and gets a commit on top.
	u.Images[0].Old, u.Images[0].New = imageref.Version{Tag: "v0.0.2"}, imageref.Version{Tag: "v0.0.3"}
	mustWrite(t, w, u)
	log := e.git.Log(t, "branch-template", "image-updater-app")
	if diff := cmp.Diff([]string{"build: automatic update of main", "build: automatic update of main", "initial commit"}, subjects(log)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if got := e.git.ReadFile(t, "branch-template", "image-updater-app", "main/overlays/production/.argocd-source-main.yaml"); !strings.Contains(got, ":v0.0.3") {
		t.Errorf("file: %q", got)
	}
	// ":target" starts from targetRevision; .SHA256 names the changes.
	u.Branch = ":updates/{{.SHA256}}"
	r = mustWrite(t, w, u)[0]
	if !strings.HasPrefix(r.Branch, "updates/") || len(r.Branch) != len("updates/")+64 {
		t.Errorf("branch %q", r.Branch)
	}
	if branches := e.git.Branches(t, "branch-template"); !slices.Contains(branches, r.Branch) || len(branches) != 3 {
		t.Errorf("branches %v", branches)
	}
}

func (e *gitEnv) testOpenPGPSigning(t *testing.T) {
	ns := e.argoNamespace(t, "signing-openpgp", true)
	url := e.repo(t, "signing-openpgp", nil)
	entity, err := openpgp.NewEntity("argocd-image-updater", "", "noreply@argoproj.io", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "signing.asc")
	var private, public bytes.Buffer
	aw, err := armor.Encode(&private, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := entity.SerializePrivate(aw, nil); err != nil {
		t.Fatal(err)
	}
	aw.Close()
	aw, err = armor.Encode(&public, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := entity.Serialize(aw); err != nil {
		t.Fatal(err)
	}
	aw.Close()
	writeTestFile(t, keyFile, private.String())

	w := e.writer(t, ns, WithSigningKey(keyFile, gitsign.MethodOpenPGP), WithSignOff(true), WithAuthor("Image Bot", "bot@example.com"))
	r := mustWrite(t, w, appUpdate("main", url))[0]
	repo, err := gogit.PlainOpen(e.bare("signing-openpgp"))
	if err != nil {
		t.Fatal(err)
	}
	commit, err := repo.CommitObject(plumbing.NewHash(r.Commit))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := commit.Verify(public.String())
	if err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	if signer.PrimaryKey.KeyId != entity.PrimaryKey.KeyId {
		t.Errorf("signed by %X", signer.PrimaryKey.KeyId)
	}
	if !strings.HasSuffix(commit.Message, "\n\nSigned-off-by: Image Bot <bot@example.com>\n") || commit.Author.Name != "Image Bot" || commit.Committer.Email != "bot@example.com" {
		t.Errorf("author %v, message %q", commit.Author, commit.Message)
	}
	if !commit.Author.When.Equal(testClock) {
		t.Errorf("dated %v", commit.Author.When)
	}
}

func (e *gitEnv) testSSHSigning(t *testing.T) {
	ns := e.argoNamespace(t, "signing-ssh", true)
	url := e.repo(t, "signing-ssh", nil)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "id_ed25519"), string(pem.EncodeToMemory(block)))
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "allowed_signers"), DefaultGitAuthorEmail+" "+string(ssh.MarshalAuthorizedKey(sshPub)))

	w := e.writer(t, ns, WithSigningKey(filepath.Join(dir, "id_ed25519"), gitsign.MethodSSH))
	r := mustWrite(t, w, appUpdate("main", url))[0]
	// git itself checks the signature, through ssh-keygen.
	out := gitCLI(t, e.bare("signing-ssh"), "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+filepath.Join(dir, "allowed_signers"),
		"log", "-1", "--format=%G?", r.Commit)
	if strings.TrimSpace(out) != "G" {
		t.Errorf("git reports signature status %q, want G (good)", out)
	}
	gitCLI(t, e.bare("signing-ssh"), "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+filepath.Join(dir, "allowed_signers"), "verify-commit", r.Commit)
}

func (e *gitEnv) testDryRun(t *testing.T) {
	ns := e.argoNamespace(t, "dry-run", true)
	url := e.repo(t, "dry-run", nil)
	w := e.writer(t, ns, WithDryRun(true))
	pushes := e.git.Pushes.Load()
	a := appUpdate("main", url)
	b := appUpdate("other", url)
	b.Target = mustTarget("kustomization")
	results := mustWrite(t, w, a, b)
	for _, r := range results {
		if len(r.Changed) != 1 || r.Commit != "" {
			t.Errorf("%s: changed %d, commit %q", r.Name, len(r.Changed), r.Commit)
		}
	}
	if d := e.git.Pushes.Load() - pushes; d != 0 || len(e.git.Log(t, "dry-run", "main")) != 1 {
		t.Errorf("dry run pushed %d times", d)
	}
}

// A server hook refuses the commit of one Application; the other twenty
// land, and only that one reports the refusal.
func (e *gitEnv) testRefusedCommit(t *testing.T) {
	ns := e.argoNamespace(t, "refused", true)
	url := e.repo(t, "refused", nil)
	hook := filepath.Join(e.bare("refused"), "hooks", "pre-receive")
	script := `#!/bin/sh
while read old new ref; do
  if git diff --name-only "$old" "$new" | grep -q 'argocd-source-app-13'; then
    echo "app-13's overrides are protected" >&2
    exit 1
  fi
done
`
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	w := e.writer(t, ns)
	var updates []update
	for i := range 21 {
		updates = append(updates, appUpdate(fmt.Sprintf("app-%02d", i), url))
	}
	pushes := e.git.Pushes.Load()
	results := w.write(context.Background(), updates)
	for _, r := range results {
		switch {
		case r.Name == "app-13" && (r.Err == nil || !strings.Contains(r.Err.Error(), "pre-receive hook declined") || r.Commit != ""):
			t.Errorf("app-13: commit %q, err %v; want the refusal", r.Commit, r.Err)
		case r.Name != "app-13" && (r.Err != nil || r.Commit == ""):
			t.Errorf("%s: commit %q, err %v; want it landed", r.Name, r.Commit, r.Err)
		}
	}
	if got := len(e.git.Log(t, "refused", "main")); got != 21 {
		t.Errorf("%d commits on main, want the initial one and 20", got)
	}
	t.Logf("%d pushes to land 20 Applications around a refused one", e.git.Pushes.Load()-pushes)
	gitCLI(t, e.bare("refused"), "fsck", "--strict", "--no-progress")
}
