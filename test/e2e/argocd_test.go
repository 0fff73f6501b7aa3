// Package e2e runs the updater against the real Argo CD: its
// application-controller and repo-server sync Applications from a real git
// server into a real API server, fill status.summary.images from the Pods
// they create, and render Kustomize and Helm sources. Each scenario ends
// with the Deployment that Argo CD manages carrying the new image: what the
// updater wrote is what Argo CD deployed.
package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	imageupdaterv1alpha1 "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// deployTimeout bounds how long Argo CD may take to deploy a change: a
// sync takes 2-3 s here, a first sync of a new Application up to 10 s.
const deployTimeout = 90 * time.Second

// world is one API server with the real Argo CD, a registry, a git server
// and the updater's binary, shared by the scenarios of this package.
type world struct {
	k          *testenv.Kube
	external   *testenv.Kube // a second cluster, deployed to as seed 000 does
	argo       *testenv.ArgoCD
	reg        *testenv.Registry
	git        *testenv.GitServer
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	bin        string
	kubeconfig string // the updater's ServiceAccount
	conf       string // registries.conf

	caOnce sync.Once
	ca     *testenv.CA // forgeCA's
}

// newWorld starts the servers with the real Argo CD, and a git repository
// "deploy" that Argo CD knows, holding the files that files(reg) returns.
func newWorld(t testing.TB, files func(reg *testenv.Registry) map[string]string, regOpts ...testenv.RegistryOption) *world {
	t.Helper()
	return newArgoWorld(t, files, nil, regOpts...)
}

// newArgoWorld is newWorld with Argo CD started with argoOpts.
func newArgoWorld(t testing.TB, files func(reg *testenv.Registry) map[string]string, argoOpts []testenv.ArgoCDOption, regOpts ...testenv.RegistryOption) *world {
	t.Helper()
	start := time.Now()
	w := &world{}
	w.k = testenv.StartKube(t, testenv.WithArgoCDCRDs(t), testenv.WithApplicationSetCRD(), testenv.WithImageUpdaterCRD(imageupdaterv1alpha1.AddToScheme))
	// Stopped after Argo CD, which watches it once it is registered.
	w.external = testenv.StartKube(t)
	w.external.StartControllerManager(t)
	w.argo = testenv.StartArgoCD(t, w.k, argoOpts...)
	t.Logf("API server and Argo CD %s started in %s", w.argo.Version, time.Since(start).Round(100*time.Millisecond))
	w.reg = testenv.StartRegistry(t, regOpts...)
	w.git = testenv.StartGitServer(t)
	w.cs = kubernetes.NewForConfigOrDie(w.k.Config)
	w.dyn = dynamic.NewForConfigOrDie(w.k.Config)
	w.bin = testenv.UpdaterBinary(t)

	w.k.CreateFromFile(t, filepath.Join("..", "..", "manifests", "base", "rbac.yaml"), testenv.ArgoCDNamespace)
	w.kubeconfig = testenv.WriteKubeconfig(t, w.k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater"), testenv.ArgoCDNamespace)
	w.k.CreateAppProject(t, testenv.ArgoCDNamespace, "default", []string{"*"}, nil)
	w.conf = filepath.Join(t.TempDir(), "registries.conf")
	writeFile(t, w.conf, fmt.Sprintf("registries:\n- name: local\n  prefix: %s\n  api_url: http://%s\n  credentials: env:REGISTRY_CREDS\n", w.reg.Host, w.reg.Host))
	w.git.CreateRepo(t, "deploy", "", files(w.reg))
	w.argo.AddRepository(t, "repo-deploy", w.git.HTTPRepoURL("deploy"), w.git.Username, w.git.Password)
	return w
}

func TestArgoCD(t *testing.T) {
	// Each of the package's tests has its own API server and Argo CD,
	// and waits on Argo CD most of the time: they run side by side.
	t.Parallel()
	w := newWorld(t, func(reg *testenv.Registry) map[string]string {
		files := map[string]string{}
		for _, name := range []string{"seed003", "kgit", "ksource", "notify", "notifywait"} {
			maps.Copy(files, overlay(name, reg))
		}
		maps.Copy(files, chart("chart", reg))
		maps.Copy(files, chart("chart-values", reg))
		files["tagged/front.yaml"] = deployment("front", fmt.Sprintf("      - name: app\n        image: %s:v0.0.1\n", reg.Repo("tagged-app")))
		files["plain/front.yaml"] = deployment("front",
			fmt.Sprintf("      - name: app\n        image: %s:v0.0.1 # {\"$imageupdater\": \"app\"}\n", reg.Repo("plain-app")))
		return files
	})

	t.Run("seed 003: two images by semver written to the Application, a Kustomize overlay", func(t *testing.T) {
		app, web := w.push(t, "seed003-app", "v0.0.1"), w.push(t, "seed003-web", "v0.0.1")
		w.createApp(t, "seed003", "seed003/overlays/production", nil, map[string]string{
			"image-list":          "app=" + app + ",web=" + web,
			"app.update-strategy": "semver",
			"web.update-strategy": "semver",
			"write-back-method":   "argocd",
		})
		w.waitDeployed(t, "seed003", "front", app+":v0.0.1", web+":v0.0.1")
		w.push(t, "seed003-app", "v0.1.0")
		w.push(t, "seed003-app", "v1.0.0-rc.1")
		w.push(t, "seed003-web", "v0.0.3")
		w.runOnce(t, "seed003")
		// Every event of the run reached the API server before it exited.
		if reasons := w.eventReasons(t, "seed003"); !slices.Contains(reasons, "ImagesUpdated") {
			t.Errorf("events right after run --once: %v, want ImagesUpdated", reasons)
		}
		w.waitDeployed(t, "seed003", "front", app+":v0.1.0", web+":v0.0.3")
	})

	t.Run("git write-back to the kustomization", func(t *testing.T) {
		app, web := w.push(t, "kgit-app", "v0.0.1"), w.push(t, "kgit-web", "v0.0.1")
		w.createApp(t, "kgit", "kgit/overlays/production", nil, map[string]string{
			"image-list":        "app=" + app + ",web=" + web,
			"write-back-method": "git",
			"write-back-target": "kustomization",
			"git-branch":        "main",
		})
		w.waitDeployed(t, "kgit", "front", app+":v0.0.1", web+":v0.0.1")
		w.push(t, "kgit-app", "v0.2.0")
		w.runOnce(t, "kgit")
		// Argo CD would see the commit only at its poll, 3 minutes away:
		// the updater's refresh makes it deploy now.
		w.waitDeployed(t, "kgit", "front", app+":v0.2.0", web+":v0.0.1")
		if got := w.git.ReadFile(t, "deploy", "main", "kgit/overlays/production/kustomization.yaml"); !strings.Contains(got, "newTag: v0.2.0") {
			t.Errorf("kustomization after the write-back:\n%s", got)
		}
	})

	t.Run("git write-back to .argocd-source-<app>.yaml", func(t *testing.T) {
		app := w.push(t, "ksource-app", "v0.0.1")
		w.createApp(t, "ksource", "ksource/overlays/production", nil, map[string]string{
			"image-list":        "app=" + app,
			"write-back-method": "git",
		})
		w.waitDeployed(t, "ksource", "front", app+":v0.0.1", w.reg.Repo("ksource-web")+":v0.0.1")
		w.push(t, "ksource-app", "v0.3.0")
		w.runOnce(t, "ksource")
		w.waitDeployed(t, "ksource", "front", app+":v0.3.0", w.reg.Repo("ksource-web")+":v0.0.1")
		if got := w.git.ReadFile(t, "deploy", "main", "ksource/overlays/production/.argocd-source-ksource.yaml"); !strings.Contains(got, app+":v0.3.0") {
			t.Errorf(".argocd-source-ksource.yaml after the write-back:\n%s", got)
		}
	})

	t.Run("git write-back to a plain manifest, where a comment marks the image", func(t *testing.T) {
		app := w.push(t, "plain-app", "v0.0.1")
		w.createApp(t, "plain", "plain", nil, map[string]string{
			"image-list":        "app=" + app,
			"write-back-method": "git",
		})
		w.waitDeployed(t, "plain", "front", app+":v0.0.1")
		w.push(t, "plain-app", "v0.4.0")
		w.runOnce(t, "plain")
		w.waitDeployed(t, "plain", "front", app+":v0.4.0")
		if got := w.git.ReadFile(t, "deploy", "main", "plain/front.yaml"); !strings.Contains(got, "image: "+app+":v0.4.0 # {\"$imageupdater\": \"app\"}") {
			t.Errorf("plain/front.yaml after the write-back:\n%s", got)
		}
	})

	t.Run("Helm parameters written to the Application", func(t *testing.T) {
		app := w.push(t, "chart-app", "1.0.0")
		w.createApp(t, "chart", "chart", map[string]any{"helm": map[string]any{}}, map[string]string{
			"image-list":          "app=" + app,
			"app.helm.image-name": "image.repository",
			"app.helm.image-tag":  "image.tag",
			"app.update-strategy": "semver",
			"write-back-method":   "argocd",
		})
		w.waitDeployed(t, "chart", "front", app+":1.0.0")
		w.push(t, "chart-app", "1.1.0")
		w.runOnce(t, "chart")
		w.waitDeployed(t, "chart", "front", app+":1.1.0")
	})

	t.Run("Helm values file written to git", func(t *testing.T) {
		app := w.push(t, "chart-values-app", "1.0.0")
		w.createApp(t, "chart-values", "chart-values", map[string]any{"helm": map[string]any{}}, map[string]string{
			"image-list":          "app=" + app,
			"app.helm.image-name": "image.repository",
			"app.helm.image-tag":  "image.tag",
			"write-back-method":   "git",
			"write-back-target":   "helmvalues:values.yaml",
		})
		w.waitDeployed(t, "chart-values", "front", app+":1.0.0")
		w.push(t, "chart-values-app", "1.2.0")
		w.runOnce(t, "chart-values")
		w.waitDeployed(t, "chart-values", "front", app+":1.2.0")
	})

	t.Run("app of apps: the images written into the child's definition in the parent's repository", func(t *testing.T) {
		app, web := w.push(t, "aoa-app", "v0.0.1"), w.push(t, "aoa-web", "v0.0.1")
		repo := w.git.HTTPRepoURL("deploy")
		files := overlay("aoa", w.reg)
		child := "# The team's application; the aoa Application creates it.\n" +
			"apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: aoa-child\n  namespace: argocd\n  annotations:\n" +
			"    " + settings.AnnotationPrefix + "image-list: app=" + app + "\n" +
			"    " + settings.AnnotationPrefix + "write-back-method: git\n" +
			"    " + settings.AnnotationPrefix + "write-back-target: app-of-apps\n" +
			"spec:\n  project: default\n  source:\n    repoURL: " + repo + "\n    path: aoa/overlays/production # the overlay\n    targetRevision: main\n" +
			"  destination:\n    server: " + testenv.InCluster + "\n    namespace: aoa-child\n" +
			"  syncPolicy:\n    automated:\n      prune: true\n      selfHeal: true\n"
		files["aoa-apps/child.yaml"] = child
		w.git.CommitFiles(t, "deploy", "main", "add the app of apps", files)
		w.k.CreateNamespace(t, "aoa")
		w.k.CreateNamespace(t, "aoa-child")
		w.createAppSpec(t, "aoa", map[string]any{"source": map[string]any{"repoURL": repo, "path": "aoa-apps", "targetRevision": "main"}}, testenv.InCluster, nil)
		w.waitCreated(t, "aoa-child", "aoa")
		w.waitDeployed(t, "aoa-child", "front", app+":v0.0.1", web+":v0.0.1")
		w.push(t, "aoa-app", "v0.5.0")
		w.runOnce(t, "aoa-child")
		// The parent's sync, which the updater's refresh starts, gives the
		// child its new override; a patch of the child would be undone by it.
		w.waitDeployed(t, "aoa-child", "front", app+":v0.5.0", web+":v0.0.1")
		want := strings.Replace(child, "    targetRevision: main\n", "    targetRevision: main\n    kustomize:\n      images:\n      - "+app+":v0.5.0\n", 1)
		if got := w.git.ReadFile(t, "deploy", "main", "aoa-apps/child.yaml"); got != want {
			t.Errorf("aoa-apps/child.yaml after the write-back:\n%s\nwant\n%s", got, want)
		}
	})

	t.Run("a multi-source Application: the Kustomize source naming the image is written", func(t *testing.T) {
		app := w.push(t, "multi-app", "v0.0.1")
		files := overlay("multi", w.reg)
		files["multi/config/configmap.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  level: info\n"
		w.git.CommitFiles(t, "deploy", "main", "add multi", files)
		w.k.CreateNamespace(t, "multi")
		repo := w.git.HTTPRepoURL("deploy")
		w.createAppSpec(t, "multi", map[string]any{
			"sources": []any{
				map[string]any{"repoURL": repo, "path": "multi/config", "targetRevision": "main"},
				map[string]any{"repoURL": repo, "path": "multi/overlays/production", "targetRevision": "main", "kustomize": map[string]any{}},
			},
		}, testenv.InCluster, map[string]string{
			"image-list":        "app=" + app,
			"write-back-method": "argocd",
		})
		w.waitDeployed(t, "multi", "front", app+":v0.0.1", w.reg.Repo("multi-web")+":v0.0.1")
		w.push(t, "multi-app", "v0.8.0")
		w.runOnce(t, "multi")
		w.waitDeployed(t, "multi", "front", app+":v0.8.0", w.reg.Repo("multi-web")+":v0.0.1")
		sources, _, _ := unstructured.NestedSlice(w.application(t, "multi").Object, "spec", "sources")
		if first := sources[0].(map[string]any); first["kustomize"] != nil {
			t.Errorf("the source without the image was written: %v", first)
		}
	})

	t.Run("a pull request: nothing is deployed until it is merged", func(t *testing.T) {
		const repo = "example/prs"
		app := w.push(t, "pr-app", "v0.0.1")
		w.git.CreateRepo(t, repo, "", overlay("pr", w.reg))
		w.argo.AddRepository(t, "repo-prs", w.git.HTTPRepoURL(repo), w.git.Username, w.git.Password)
		github := testenv.StartGitHubAPI(t, w.forgeCA(t), nil)
		github.AcceptToken(w.git.Password)
		github.RequireBranches(func(project, branch string) bool { return slices.Contains(w.git.Branches(t, project), branch) })
		w.k.CreateNamespace(t, "pr")
		w.createAppSpec(t, "pr", map[string]any{"source": map[string]any{
			"repoURL": w.git.HTTPRepoURL(repo), "path": "pr/overlays/production", "targetRevision": "main",
		}}, testenv.InCluster, map[string]string{
			"image-list":        "app=" + app,
			"write-back-method": "git",
			"write-back-target": "kustomization",
			"git-branch":        "main:image-updates",
			"git-pull-request":  "github",
		})
		w.waitDeployed(t, "pr", "front", app+":v0.0.1", w.reg.Repo("pr-web")+":v0.0.1")
		w.push(t, "pr-app", "v0.9.0")
		w.runOnce(t, "pr", "--github-enterprise-api-url", github.URL)
		reviews := github.Reviews(repo)
		if len(reviews) != 1 || reviews[0].Head != "image-updates" || reviews[0].Base != "main" {
			t.Fatalf("pull requests %+v, want one from image-updates into main", reviews)
		}
		if got := w.git.ReadFile(t, repo, "main", "pr/overlays/production/kustomization.yaml"); strings.Contains(got, "v0.9.0") {
			t.Fatalf("main changed before the merge:\n%s", got)
		}
		if got := testenv.DeploymentImages(t.Context(), w.cs, "pr", "front"); !slices.Equal(got, []string{app + ":v0.0.1", w.reg.Repo("pr-web") + ":v0.0.1"}) {
			t.Fatalf("deployed before the merge: %v", got)
		}
		// Merged (a fast-forward), and Argo CD told, as the git host's
		// webhook to Argo CD would.
		w.git.FastForward(t, repo, "main", "image-updates")
		w.refresh(t, "pr")
		w.waitDeployed(t, "pr", "front", app+":v0.9.0", w.reg.Repo("pr-web")+":v0.0.1")

		// The same through an ImageUpdater as v1.3.0 users write it: the
		// branch names the base, the request comes from a branch of its
		// own, with the resource's labels.
		v1 := w.push(t, "prv1-app", "v0.0.1")
		w.git.CommitFiles(t, repo, "main", "add prv1", overlay("prv1", w.reg))
		w.k.CreateNamespace(t, "prv1")
		w.createAppSpec(t, "prv1", map[string]any{"source": map[string]any{
			"repoURL": w.git.HTTPRepoURL(repo), "path": "prv1/overlays/production", "targetRevision": "main",
		}}, testenv.InCluster, nil)
		w.waitDeployed(t, "prv1", "front", v1+":v0.0.1", w.reg.Repo("prv1-web")+":v0.0.1")
		w.k.Create(t, &imageupdaterv1alpha1.ImageUpdater{
			ObjectMeta: metav1.ObjectMeta{Name: "prv1", Namespace: testenv.ArgoCDNamespace},
			Spec: imageupdaterv1alpha1.ImageUpdaterSpec{
				WriteBackConfig: &imageupdaterv1alpha1.WriteBackConfig{Method: ptr.To("git"), GitConfig: &imageupdaterv1alpha1.GitConfig{
					Branch: ptr.To("main"), WriteBackTarget: ptr.To("kustomization"),
					PullRequest: &imageupdaterv1alpha1.PullRequestConfig{GitHub: &imageupdaterv1alpha1.ForgeConfig{}, Labels: []string{"image-update"}},
				}},
				ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{
					NamePattern: "prv1", Images: []imageupdaterv1alpha1.ImageConfig{{Alias: "app", ImageName: v1}},
				}},
			},
		})
		w.push(t, "prv1-app", "v0.9.1")
		w.runOnce(t, "prv1", "--github-enterprise-api-url", github.URL)
		reviews = github.Reviews(repo)
		if len(reviews) != 2 || !v1Branch.MatchString(reviews[1].Head) || reviews[1].Base != "main" || !slices.Equal(reviews[1].Labels, []string{"image-update"}) {
			t.Fatalf("pull requests %+v, want a second one from image-updater-<key>-<hash> into main, labelled", reviews)
		}
		w.git.FastForward(t, repo, "main", reviews[1].Head)
		w.refresh(t, "prv1")
		w.waitDeployed(t, "prv1", "front", v1+":v0.9.1", w.reg.Repo("prv1-web")+":v0.0.1")
	})

	t.Run("a pull request on Gitea, Bitbucket Data Center and Azure DevOps: nothing is deployed until it is merged on the stand-in", func(t *testing.T) {
		// Bitbucket Cloud is left out: its API is api.bitbucket.org's
		// alone, which no flag moves to a stand-in.
		ca := w.forgeCA(t)
		for _, f := range []struct {
			name, kind, flag string
			start            func() (forgeStandIn, string)
			// gitPath is where the git server keeps the repository the
			// service names project.
			gitPath, project string
		}{
			{name: "prgitea", kind: "forgejo", flag: "--gitea-url", start: func() (forgeStandIn, string) { a := testenv.StartGiteaAPI(t, ca); return a, a.URL },
				gitPath: "example/prgitea", project: "example/prgitea"},
			{name: "prbbs", kind: "bitbucket-server", flag: "--bitbucket-server-url", start: func() (forgeStandIn, string) { a := testenv.StartBitbucketServerAPI(t, ca); return a, a.URL },
				gitPath: "bitbucket/scm/PRJ/prbbs", project: "PRJ/prbbs"},
			{name: "prazure", kind: "azure-devops", flag: "--azure-devops-url", start: func() (forgeStandIn, string) { a := testenv.StartAzureDevOpsAPI(t, ca); return a, a.URL },
				gitPath: "DefaultCollection/project/_git/prazure", project: "DefaultCollection/project/prazure"},
		} {
			t.Run(f.kind, func(t *testing.T) {
				api, apiURL := f.start()
				api.AcceptToken(w.git.Password)
				api.RequireBranches(func(_, branch string) bool { return slices.Contains(w.git.Branches(t, f.gitPath), branch) })
				// The merge button: a fast-forward of the base.
				api.MergeBranches(func(_, head, base string) error { w.git.FastForward(t, f.gitPath, base, head); return nil })
				app := w.push(t, f.name+"-app", "v0.0.1")
				w.git.CreateRepo(t, f.gitPath, "", overlay(f.name, w.reg))
				w.argo.AddRepository(t, "repo-"+f.name, w.git.HTTPRepoURL(f.gitPath), w.git.Username, w.git.Password)
				w.k.CreateNamespace(t, f.name)
				w.createAppSpec(t, f.name, map[string]any{"source": map[string]any{
					"repoURL": w.git.HTTPRepoURL(f.gitPath), "path": f.name + "/overlays/production", "targetRevision": "main",
				}}, testenv.InCluster, map[string]string{
					"image-list":              "app=" + app,
					"write-back-method":       "git",
					"write-back-target":       "kustomization",
					"git-branch":              "main:image-updates",
					"git-pull-request":        f.kind,
					"git-pull-request-labels": "image-update",
				})
				web := w.reg.Repo(f.name+"-web") + ":v0.0.1"
				w.waitDeployed(t, f.name, "front", app+":v0.0.1", web)
				w.push(t, f.name+"-app", "v0.9.0")
				w.runOnce(t, f.name, f.flag, apiURL)
				reviews := api.Reviews(f.project)
				labels := []string{"image-update"}
				if f.kind == "bitbucket-server" {
					// Bitbucket has no labels: the setting is ignored, with
					// a warning.
					labels = nil
				}
				if len(reviews) != 1 || reviews[0].Head != "image-updates" || reviews[0].Base != "main" || reviews[0].State != "open" ||
					!strings.Contains(reviews[0].Body, "to 'v0.9.0'") || !slices.Equal(reviews[0].Labels, labels) {
					t.Fatalf("pull requests %+v, want one from image-updates into main, labelled %q, listing the change", reviews, labels)
				}
				if got := w.git.ReadFile(t, f.gitPath, "main", f.name+"/overlays/production/kustomization.yaml"); strings.Contains(got, "v0.9.0") {
					t.Fatalf("main changed before the merge:\n%s", got)
				}
				if got := testenv.DeploymentImages(t.Context(), w.cs, f.name, "front"); !slices.Equal(got, []string{app + ":v0.0.1", web}) {
					t.Fatalf("deployed before the merge: %v", got)
				}
				// Merged on the stand-in, and Argo CD told, as the git
				// host's webhook to Argo CD would.
				if err := api.Merge(f.project, reviews[0].Number); err != nil {
					t.Fatal(err)
				}
				w.refresh(t, f.name)
				w.waitDeployed(t, f.name, "front", app+":v0.9.0", web)
				if p := api.ReviewProblems(); len(p) > 0 {
					t.Errorf("the service would refuse: %v", p)
				}
			})
		}
	})

	t.Run("a rollout in progress: the target file, not the first running image, is the current version", func(t *testing.T) {
		// Tags that sort as strings in the other order than as versions,
		// so that Argo CD's sorted status.summary.images lists the newest
		// first while a revert to the older rolls out.
		app := w.push(t, "rollout-app", "1.9.0")
		w.push(t, "rollout-app", "1.10.0")
		files := overlay("rollout", w.reg)
		files["rollout/base/front.yaml"] = rollingDeployment("front", app+":1.10.0")
		files["rollout/overlays/production/kustomization.yaml"] += "images:\n- name: " + app + "\n  newTag: 1.10.0\n"
		w.git.CommitFiles(t, "deploy", "main", "add rollout", files)
		w.createApp(t, "rollout", "rollout/overlays/production", nil, map[string]string{
			"image-list":          "app=" + app,
			"app.update-strategy": "semver",
			"write-back-method":   "git",
			"write-back-target":   "kustomization",
		})
		w.waitDeployed(t, "rollout", "front", app+":1.10.0")
		// Someone reverts to 1.9.0 in git; its Pods never become ready, so
		// those of 1.10.0 stay and Argo CD lists both.
		w.git.CommitFiles(t, "deploy", "main", "revert to 1.9.0", map[string]string{
			"rollout/overlays/production/kustomization.yaml": strings.Replace(files["rollout/overlays/production/kustomization.yaml"], "newTag: 1.10.0", "newTag: 1.9.0", 1),
		})
		w.refresh(t, "rollout")
		w.waitDeployed(t, "rollout", "front", app+":1.9.0")
		testenv.WaitFor(t, deployTimeout, "both versions in status.summary.images", func() (bool, string) {
			got := w.summaryImages(t, "rollout")
			return slices.Equal(got, []string{app + ":1.10.0", app + ":1.9.0"}), fmt.Sprint(got)
		})
		w.runOnce(t, "rollout")
		if got := w.git.ReadFile(t, "deploy", "main", "rollout/overlays/production/kustomization.yaml"); !strings.Contains(got, "newTag: 1.10.0") {
			t.Fatalf("the newest version was not written back, although the repository holds 1.9.0:\n%s", got)
		}
		w.waitDeployed(t, "rollout", "front", app+":1.10.0")
	})

	t.Run("Argo CD Notifications: each update, failure and wait told once, by the catalog's triggers", w.notificationsScenario)

	t.Run("git tags: a source pinned to a tag moves to the newest within its constraint", w.gitTagScenario)

	t.Run("ApplicationSets: the version lands in the file the git files generator reads", w.appSetScenario)

	t.Run("ApplicationSets: the version lands in the list generator's element, in the manifest its parent deploys", w.appSetListScenario)

	t.Run("an Application deploying to an external cluster", func(t *testing.T) {
		other := w.external
		server := w.argo.AddCluster(t, "external", other)
		other.CreateNamespace(t, "remote")
		app := w.push(t, "remote-app", "v0.0.1")
		w.git.CommitFiles(t, "deploy", "main", "add remote", overlay("remote", w.reg))
		w.createAppTo(t, "remote", "remote/overlays/production", server, nil, map[string]string{
			"image-list":        "app=" + app,
			"write-back-method": "argocd",
		})
		ocs := kubernetes.NewForConfigOrDie(other.Config)
		w.waitImages(t, ocs, "remote", "front", app+":v0.0.1", w.reg.Repo("remote-web")+":v0.0.1")
		w.push(t, "remote-app", "v0.4.0")
		w.runOnce(t, "remote")
		w.waitImages(t, ocs, "remote", "front", app+":v0.4.0", w.reg.Repo("remote-web")+":v0.0.1")
	})

	t.Run("an ImageUpdater resource configures an Application without annotations", func(t *testing.T) {
		app := w.push(t, "resource-app", "v0.0.1")
		w.git.CommitFiles(t, "deploy", "main", "add resource", overlay("resource", w.reg))
		w.createApp(t, "resource", "resource/overlays/production", nil, nil)
		w.waitDeployed(t, "resource", "front", app+":v0.0.1", w.reg.Repo("resource-web")+":v0.0.1")
		w.k.Create(t, &imageupdaterv1alpha1.ImageUpdater{
			ObjectMeta: metav1.ObjectMeta{Name: "resource", Namespace: testenv.ArgoCDNamespace},
			Spec: imageupdaterv1alpha1.ImageUpdaterSpec{
				CommonUpdateSettings: &imageupdaterv1alpha1.CommonUpdateSettings{UpdateStrategy: ptr.To("semver")},
				ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{
					NamePattern: "resource",
					Images:      []imageupdaterv1alpha1.ImageConfig{{Alias: "app", ImageName: app}},
				}},
			},
		})
		w.push(t, "resource-app", "v0.5.0")
		w.runOnce(t, "resource")
		w.waitDeployed(t, "resource", "front", app+":v0.5.0", w.reg.Repo("resource-web")+":v0.0.1")
	})

	t.Run("a bad image entry next to a good one changes only the good one's override", func(t *testing.T) {
		app, web := w.push(t, "mixed-app", "v0.0.1"), w.push(t, "mixed-web", "v0.0.1")
		w.git.CommitFiles(t, "deploy", "main", "add mixed", overlay("mixed", w.reg))
		w.createApp(t, "mixed", "mixed/overlays/production", nil, map[string]string{
			"image-list":          "app=" + app + ",web=" + web,
			"web.update-strategy": "newest-version-please",
			"write-back-method":   "argocd",
		})
		w.waitDeployed(t, "mixed", "front", app+":v0.0.1", web+":v0.0.1")
		w.push(t, "mixed-app", "v0.6.0")
		w.push(t, "mixed-web", "v0.6.0")
		before := w.application(t, "mixed")
		w.runOnce(t, "mixed")
		w.waitDeployed(t, "mixed", "front", app+":v0.6.0", web+":v0.0.1")
		after := w.application(t, "mixed")
		// What the updater may change: the one override list, and its
		// record of what it wrote (which a rollback is told from); what
		// Argo CD changes: status, the operation and bookkeeping.
		for _, obj := range []*unstructured.Unstructured{before, after} {
			unstructured.RemoveNestedField(obj.Object, "spec", "source", "kustomize", "images")
			unstructured.RemoveNestedField(obj.Object, "metadata", "annotations", settings.AnnotationPrefix+settings.KeyHealthGateState)
			unstructured.RemoveNestedField(obj.Object, "status")
			unstructured.RemoveNestedField(obj.Object, "operation")
			unstructured.RemoveNestedField(obj.Object, "metadata", "resourceVersion")
			unstructured.RemoveNestedField(obj.Object, "metadata", "generation")
			unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
			if kustomize, _, _ := unstructured.NestedMap(obj.Object, "spec", "source", "kustomize"); len(kustomize) == 0 {
				unstructured.RemoveNestedField(obj.Object, "spec", "source", "kustomize")
			}
		}
		if diff := cmp.Diff(before.Object, after.Object); diff != "" {
			t.Errorf("the Application changed besides its Kustomize images (-before +after):\n%s", diff)
		}
		testenv.WaitFor(t, 30*time.Second, "an UpdateFailed event naming the bad image", func() (bool, string) {
			evs, err := w.cs.CoreV1().Events(testenv.ArgoCDNamespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=mixed"})
			if err != nil {
				return false, err.Error()
			}
			var seen []string
			for _, e := range evs.Items {
				if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "web") && strings.Contains(e.Message, "newest-version-please") {
					return true, ""
				}
				seen = append(seen, e.Reason+": "+e.Message)
			}
			return false, strings.Join(seen, "; ")
		})
	})

	t.Run("the repo-server down: the write-back still lands, and Argo CD deploys it once back", func(t *testing.T) {
		app := w.push(t, "down-app", "v0.0.1")
		w.git.CommitFiles(t, "deploy", "main", "add down", overlay("down", w.reg))
		w.createApp(t, "down", "down/overlays/production", nil, map[string]string{
			"image-list":        "app=" + app,
			"write-back-method": "git",
			"write-back-target": "kustomization",
		})
		w.waitDeployed(t, "down", "front", app+":v0.0.1", w.reg.Repo("down-web")+":v0.0.1")
		w.argo.StopRepoServer()
		w.push(t, "down-app", "v0.7.0")
		w.runOnce(t, "down")
		if got := w.git.ReadFile(t, "deploy", "main", "down/overlays/production/kustomization.yaml"); !strings.Contains(got, "newTag: v0.7.0") {
			t.Fatalf("not written while the repo-server was down:\n%s", got)
		}
		w.argo.StartRepoServer(t)
		w.runOnce(t, "down")
		w.waitDeployed(t, "down", "front", app+":v0.7.0", w.reg.Repo("down-web")+":v0.0.1")
	})
}

// push pushes a tag of repo to the registry and returns the repository's
// image name.
func (w *world) push(t testing.TB, repo, tag string) string {
	t.Helper()
	w.reg.PushImage(t, repo, []string{tag})
	return w.reg.Repo(repo)
}

// createApp creates an automatically synced Application of the deploy
// repository's folder path, deploying to the namespace of the same name.
// source adds fields to its source (helm, kustomize).
func (w *world) createApp(t testing.TB, name, path string, source map[string]any, annotations map[string]string) {
	t.Helper()
	w.k.CreateNamespace(t, name)
	w.createAppTo(t, name, path, testenv.InCluster, source, annotations)
}

// createAppTo is createApp to the cluster whose API server is server.
func (w *world) createAppTo(t testing.TB, name, path, server string, source map[string]any, annotations map[string]string) {
	t.Helper()
	src := map[string]any{"repoURL": w.git.HTTPRepoURL("deploy"), "path": path, "targetRevision": "main"}
	maps.Copy(src, source)
	w.createAppSpec(t, name, map[string]any{"source": src}, server, annotations)
}

// createAppSpec creates an automatically synced Application with these
// sources (spec.source or spec.sources) deploying to namespace name of
// the cluster whose API server is server.
func (w *world) createAppSpec(t testing.TB, name string, sources map[string]any, server string, annotations map[string]string) {
	t.Helper()
	obj := testenv.SyncedApplication(name, server, sources, prefixed(annotations))
	if _, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// prefixed puts the updater's prefix before each annotation key.
func prefixed(annotations map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		out[settings.AnnotationPrefix+k] = v
	}
	return out
}

// waitDeployed waits until Argo CD deployed the Deployment with these
// images, and its Application's status.summary.images, which Argo CD
// fills from the Pods, lists them.
func (w *world) waitDeployed(t testing.TB, app, deployment string, images ...string) {
	t.Helper()
	w.waitImages(t, w.cs, app, deployment, images...)
	testenv.WaitFor(t, deployTimeout, "status.summary.images of "+app, func() (bool, string) {
		summary := w.summaryImages(t, app)
		for _, img := range images {
			if !slices.Contains(summary, img) {
				return false, fmt.Sprint(summary)
			}
		}
		return true, ""
	})
}

// waitImages waits until the Deployment name, in the namespace and the
// Application of the same name, has these images.
func (w *world) waitImages(t testing.TB, cs kubernetes.Interface, namespace, name string, images ...string) {
	t.Helper()
	start := time.Now()
	testenv.WaitFor(t, deployTimeout, "Deployment "+namespace+"/"+name+" with "+strings.Join(images, ", "), func() (bool, string) {
		got := testenv.DeploymentImages(t.Context(), cs, namespace, name)
		return slices.Equal(got, images), fmt.Sprintf("images %v; Application %s", got, w.appState(t, namespace))
	})
	t.Logf("Deployment %s/%s has %s after %s", namespace, name, strings.Join(images, ", "), time.Since(start).Round(10*time.Millisecond))
}

// eventReasons lists the reasons of the events of an Application.
func (w *world) eventReasons(t testing.TB, app string) []string {
	t.Helper()
	evs, err := w.cs.CoreV1().Events(testenv.ArgoCDNamespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range evs.Items {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// refresh asks Argo CD to read an Application's sources now, as a person
// would after a commit.
func (w *world) refresh(t testing.TB, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`)
	if _, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitCreated waits for the Application name, which the sync of the
// Application parent creates.
func (w *world) waitCreated(t testing.TB, name, parent string) {
	t.Helper()
	testenv.WaitFor(t, deployTimeout, "Application "+name+", which "+parent+"'s sync creates", func() (bool, string) {
		_, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), name, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err, "; ", parent, ": ", w.appState(t, parent))
	})
}

func (w *world) application(t testing.TB, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func (w *world) summaryImages(t testing.TB, app string) []string {
	t.Helper()
	images, _, _ := unstructured.NestedStringSlice(w.application(t, app).Object, "status", "summary", "images")
	return images
}

// appState is what Argo CD says of an Application, for failure messages.
func (w *world) appState(t testing.TB, name string) string {
	t.Helper()
	obj := w.application(t, name).Object
	sync, _, _ := unstructured.NestedString(obj, "status", "sync", "status")
	health, _, _ := unstructured.NestedString(obj, "status", "health", "status")
	phase, _, _ := unstructured.NestedString(obj, "status", "operationState", "phase")
	msg, _, _ := unstructured.NestedString(obj, "status", "operationState", "message")
	conditions, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	return fmt.Sprintf("sync %s, health %s, operation %s %q, conditions %v", sync, health, phase, msg, conditions)
}

// runOnce runs the updater's binary for one cycle over the Applications
// whose names match, as its ServiceAccount.
func (w *world) runOnce(t testing.TB, names string, flags ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), w.bin, append([]string{"run", "--once", "--kubeconfig", w.kubeconfig,
		"--registries-conf-path", w.conf, "--health-port", "0", "--metrics-port", "0",
		"--match-application-name", names, "--loglevel", "debug"}, flags...)...)
	cmd.Env = append(os.Environ(), "REGISTRY_CREDS="+w.reg.Username+":"+w.reg.Password, "IMAGE_UPDATER_GIT_CLONE_DIR="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("run --once: %v\n%s", err, out.String())
	}
	t.Logf("run --once:\n%s", out.String())
	return out.String()
}

// forgeStandIn is a forge's stand-in as the scenarios drive it.
type forgeStandIn interface {
	Reviews(repo string) []testenv.Review
	AcceptToken(token string)
	RequireBranches(exists func(project, branch string) bool)
	MergeBranches(merge func(project, head, base string) error)
	Merge(repo string, number int) error
	ReviewProblems() []string
}

// forgeCA is the CA of the forges' stand-ins, whose certificate is in
// argocd-tls-certs-cm for 127.0.0.1, as Argo CD keeps such certificates.
func (w *world) forgeCA(t testing.TB) *testenv.CA {
	t.Helper()
	w.caOnce.Do(func() {
		w.ca = testenv.NewCA(t, "e2e CA")
		w.k.Create(t, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "argocd-tls-certs-cm", Namespace: testenv.ArgoCDNamespace},
			Data:       map[string]string{"127.0.0.1": string(w.ca.PEM)},
		})
	})
	return w.ca
}

// v1Branch is the branch v1.3.0 names a pull request's.
var v1Branch = regexp.MustCompile(`^image-updater-[0-9a-f]{8}-[0-9a-f]{64}$`)

// overlay is a Kustomize base with one Deployment of two containers and a
// production overlay, under name/.
func overlay(name string, reg *testenv.Registry) map[string]string {
	return map[string]string{
		name + "/base/kustomization.yaml": "resources:\n- front.yaml\n",
		name + "/base/front.yaml": deployment("front",
			fmt.Sprintf("      - name: app\n        image: %s:v0.0.1\n      - name: web\n        image: %s:v0.0.1\n", reg.Repo(name+"-app"), reg.Repo(name+"-web"))),
		name + "/overlays/production/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n# Production overlay.\nresources:\n- ../../base\n",
	}
}

// chart is a Helm chart under name/ whose values name the image.
func chart(name string, reg *testenv.Registry) map[string]string {
	return map[string]string{
		name + "/Chart.yaml":  "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n",
		name + "/values.yaml": fmt.Sprintf("# The image.\nimage:\n  repository: %s\n  tag: 1.0.0\n", reg.Repo(name+"-app")),
		name + "/templates/deployment.yaml": deployment("front",
			"      - name: app\n        image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n"),
	}
}

// rollingDeployment is a Deployment of one container that rolls out
// Pod by Pod; as no Pod ever becomes ready here, the old Pods stay.
func rollingDeployment(name, image string) string {
	return strings.Replace(deployment(name, "      - name: app\n        image: "+image+"\n"), "type: Recreate", "type: RollingUpdate", 1)
}

// deployment is a Deployment with these container entries. Recreate keeps
// the Pods of an old ReplicaSet out of status.summary.images.
func deployment(name, containers string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
%[2]s`, name, containers)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
