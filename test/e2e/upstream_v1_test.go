package e2e

// Upstream's own end-to-end scenarios of its v1.x line (tag v1.3.0): the
// ginkgo suite its CI runs (test/ginkgo: parallel/1-001 to 1-011,
// sequential/1-008 and 1-009) and the older kuttl suite (test/e2e/suite:
// 001 to 008, 101, 102), each a subtest of TestUpstreamV1, against the
// real Argo CD with upstream's fixtures (testdata/upstream-v1, copied as
// they are) and upstream's expectations.
//
// The controller is started as upstream starts it. For the ginkgo suite,
// as argocd-operator's Deployment does: the v1.x image's /manager with the
// one argument "run", configured by the IMAGE_UPDATER_* variables each
// scenario gives the ArgoCD resource, and probed on /readyz. For the
// kuttl suite, as its steps do: "argocd-image-updater run --once" with
// their flags.
//
// What a machine without a cluster, GitHub or Quay changes, the same for
// every scenario:
//   - Upstream gives each ginkgo scenario an Argo CD of its own in a fresh
//     namespace, where its Applications, ImageUpdaters and controller
//     live. Here one Argo CD (in "argocd") serves every scenario, with
//     Applications in any namespace: each scenario's Applications and
//     ImageUpdaters are in its own namespace, Argo CD's default project
//     admits them, and the scenario's controller watches that namespace
//     (IMAGE_UPDATER_WATCH_NAMESPACES, unless the scenario sets it) and
//     holds its Lease there (--leader-election-namespace, which v1.x
//     wants when run outside a pod). Its ServiceAccount has the
//     cluster-wide install's ClusterRole and, in that namespace, the
//     Lease; its kubeconfig is that of a pod in Argo CD's namespace.
//   - A pod's own ports and files: the probes listen on a free port
//     (--health-probe-bind-address), registries.conf (the ConfigMap
//     argocd-operator mounts) is a file (--registries-conf-path), /tmp is
//     a folder of the test's (TMPDIR).
//   - Registries: quay.io, Docker Hub, 127.0.0.1:30000 and 10.42.0.1:30000
//     are served, through registries.conf entries with those prefixes, by
//     a Distribution registry holding the same repositories and tags, so
//     that image names and expectations stay upstream's. The ginkgo suite
//     and the kuttl suite each have one, as each saw quay.io when it was
//     written (quay.io/dkarpele/my-guestbook gained 29437546.0 after the
//     kuttl suite expected 2.0.0 to be its newest build).
//   - Git: upstream's git server container, and GitHub for
//     github.com/argoproj-labs/argocd-image-updater, are this package's
//     git server, with one repository per scenario as each upstream
//     scenario has its own container (on branch master, as there), and
//     the git/git credentials upstream's take. Argo CD has them as one
//     repo-creds Secret for the server rather than a repository Secret
//     per scenario. 1-009's pull request is opened on the GitHub stand-in.
//   - The kuttl suite's Argo CD namespace, argocd-image-updater-e2e, is
//     "argocd": its steps' files are read with that name, and with the
//     scenario's repository for its git server's URLs.
//   - No kubelet runs: Pods stay Pending, so no Application becomes
//     Healthy, and a rolling update never ends, the old Pods listed in
//     status.summary.images beside the new. Where upstream waits for
//     Healthy and Synced, the scenario waits for Synced and for the
//     Deployment Argo CD applied to run the images expected; where it
//     expects the new image first in status.summary.images, for the
//     Deployment to run it and the list to hold it.
// What is particular to one scenario is said where it is done.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	imageupdaterv1alpha1 "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/signature/layout"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/test/testenv/sigstoretest"
)

// upstreamTimeout bounds each wait of a scenario: upstream's own waits are
// 4 and 5 minutes; here every scenario runs at once on a small machine.
const upstreamTimeout = 3 * time.Minute

// upstreamWorld is the servers every scenario of TestUpstreamV1 shares.
type upstreamWorld struct {
	k   *testenv.Kube
	cs  kubernetes.Interface
	dyn dynamic.Interface
	git *testenv.GitServer
	// ginkgoReg and kuttlReg stand in for the registries each suite
	// used; ginkgoConf and kuttlConf are the registries.conf files that
	// point upstream's image names at them.
	ginkgoReg, kuttlReg   *testenv.Registry
	ginkgoConf, kuttlConf string
	github                *testenv.GitHubAPI
	// bin is the updater's binary, manager the same under the name the
	// v1.x image gives it.
	bin, manager string
	// controllerKubeconfig is that of a pod of the updater's
	// ServiceAccount in Argo CD's namespace; adminKubeconfig the one the
	// kuttl steps run with.
	controllerKubeconfig, adminKubeconfig string
	// guestbookRepo stands in for https://github.com/argoproj-labs/argocd-image-updater/.
	guestbookRepo string
	// kuttlDigests are the digests of the kuttl registry's test-image
	// tags.
	kuttlDigests map[string]v1.Hash
	// cosignPub is the public key of the key that signed
	// 127.0.0.1:30000/test-image:1.0.2, as cosign.pub holds it.
	cosignPub []byte
}

// The fixtures, as upstream's tag v1.3.0 holds them.
var (
	ginkgoGitFixtures = filepath.Join("testdata", "upstream-v1", "ginkgo-git")   // test/ginkgo/prereqs/containers/git/testdata
	e2eFixtures       = filepath.Join("testdata", "upstream-v1", "e2e-testdata") // test/e2e/testdata
	kuttlSteps        = filepath.Join("testdata", "upstream-v1", "kuttl")        // test/e2e/suite
)

// Upstream's git servers take git/git.
const gitUser, gitPassword = "git", "git"

func TestUpstreamV1(t *testing.T) {
	t.Parallel()
	u := newUpstreamWorld(t)
	t.Run("side by side", func(t *testing.T) {
		// All at once, as upstream's CI runs its parallel specs: each
		// waits on Argo CD most of the time. Not t.Parallel, which would
		// hold them to -parallel (the number of CPUs) at a time.
		var wg sync.WaitGroup
		run := func(name string, f func(t *testing.T)) { wg.Go(func() { t.Run(name, f) }) }
		for _, s := range ginkgoParallel {
			run("ginkgo/parallel/"+s.name, func(t *testing.T) {
				u.k.CreateNamespace(t, s.ns)
				s.run(t, u, s.ns)
			})
		}
		// Upstream runs it after the parallel ones since it edits the
		// operator; here it touches nothing another scenario reads.
		run("ginkgo/sequential/1-008-app-in-any-ns", func(t *testing.T) {
			u.appsInNamespaces(t, "s1-008", false)
		})
		// The kuttl suite runs one scenario after the other (parallel:
		// 1), each ending with its 99-delete step: its Applications and
		// ImageUpdaters all live in Argo CD's namespace, and each run of
		// the updater serves every ImageUpdater there.
		run("kuttl", func(t *testing.T) {
			for _, s := range kuttlSuite {
				t.Run(s.dir, func(t *testing.T) { s.run(t, u) })
			}
		})
		wg.Wait()
	})
	// Alone: a controller of every namespace would serve the ImageUpdaters
	// of the scenarios above too.
	t.Run("ginkgo/sequential/1-009-cluster-wide-mode", func(t *testing.T) {
		u.appsInNamespaces(t, "s1-009", true)
	})
}

func newUpstreamWorld(t *testing.T) *upstreamWorld {
	t.Helper()
	start := time.Now()
	u := &upstreamWorld{}
	u.k = testenv.StartKube(t, testenv.WithArgoCDCRDs(t), testenv.WithImageUpdaterCRD(imageupdaterv1alpha1.AddToScheme))
	argo := testenv.StartArgoCD(t, u.k, testenv.WithApplicationNamespaces("*"))
	t.Logf("API server and Argo CD %s started in %s", argo.Version, time.Since(start).Round(100*time.Millisecond))
	u.cs = kubernetes.NewForConfigOrDie(u.k.Config)
	u.dyn = dynamic.NewForConfigOrDie(u.k.Config)
	u.git = testenv.StartGitServer(t)
	u.git.AcceptCredentials(gitUser, gitPassword)
	u.ginkgoReg = testenv.StartRegistry(t, testenv.WithoutAuth())
	u.kuttlReg = testenv.StartRegistry(t, testenv.WithoutAuth())
	u.bin = testenv.UpdaterBinary(t)
	u.manager = filepath.Join(t.TempDir(), "manager")
	if err := os.Symlink(u.bin, u.manager); err != nil {
		t.Fatal(err)
	}

	// Argo CD's default project, admitting the Applications of every
	// namespace; the updater's ServiceAccount with the install's Role in
	// Argo CD's namespace and the cluster-wide install's ClusterRole.
	u.k.CreateAppProject(t, testenv.ArgoCDNamespace, "default", []string{"*"}, []string{"*"})
	u.k.CreateFromFile(t, filepath.Join("..", "..", "manifests", "base", "rbac.yaml"), testenv.ArgoCDNamespace)
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "cluster-wide", "clusterrole.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range testenv.DecodeYAML(t, data) {
		if obj.GetKind() == "ClusterRole" {
			u.createObject(t, obj)
		}
	}
	u.k.Create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-image-updater-" + testenv.ArgoCDNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "argocd-image-updater"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "argocd-image-updater", Namespace: testenv.ArgoCDNamespace}},
	})
	u.controllerKubeconfig = testenv.WriteKubeconfig(t, u.k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater"), testenv.ArgoCDNamespace)
	u.adminKubeconfig = testenv.WriteKubeconfig(t, u.k.Config, testenv.ArgoCDNamespace)

	u.pushGinkgoImages(t)
	u.pushKuttlImages(t)
	dir := t.TempDir()
	u.ginkgoConf = filepath.Join(dir, "ginkgo-registries.conf")
	writeFile(t, u.ginkgoConf, registriesConf(u.ginkgoReg, "quay.io",
		// 1-010's argocd-image-updater-config, and the registry of 1-008's values.
		"127.0.0.1:30000"))
	u.kuttlConf = filepath.Join(dir, "kuttl-registries.conf")
	writeFile(t, u.kuttlConf, registriesConf(u.kuttlReg,
		"10.42.0.1:30000", // test/e2e/assets/registries.conf
		"quay.io", "docker.io"))

	// github.com/argoproj-labs/argocd-image-updater, for the Applications
	// of its test/e2e/testdata/005-public-guestbook.
	const guestbook = "argoproj-labs/argocd-image-updater"
	files := map[string]string{}
	readTree(t, filepath.Join(e2eFixtures, "005-public-guestbook"), "test/e2e/testdata/005-public-guestbook", files)
	u.git.CreateRepo(t, guestbook, "", files)
	u.guestbookRepo = u.git.HTTPRepoURL(guestbook)

	// The GitHub stand-in, and its certificate as Argo CD keeps such
	// certificates, where the updater reads it.
	ca := testenv.NewCA(t, "upstream e2e CA")
	u.github = testenv.StartGitHubAPI(t, ca, nil)
	u.github.RequireBranches(func(project, branch string) bool { return slices.Contains(u.git.Branches(t, project), branch) })
	u.k.Create(t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-tls-certs-cm", Namespace: testenv.ArgoCDNamespace},
		Data:       map[string]string{"127.0.0.1": string(ca.PEM)},
	})

	// 1-011's plugin, as its ArgoCD resource adds it to the repo-server.
	argo.StartPlugin(t, pluginConfig)

	// Registered with Argo CD once for every repository of the git
	// server: each scenario's repositories are created as it runs.
	u.k.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git-server-creds", Namespace: testenv.ArgoCDNamespace,
			Labels: map[string]string{"argocd.argoproj.io/secret-type": "repo-creds"}},
		StringData: map[string]string{"type": "git", "url": u.git.HTTPURL + "/", "username": gitUser, "password": gitPassword},
	})
	t.Logf("world ready in %s", time.Since(start).Round(100*time.Millisecond))
	return u
}

// registriesConf maps each prefix to reg.
func registriesConf(reg *testenv.Registry, prefixes ...string) string {
	var b strings.Builder
	b.WriteString("registries:\n")
	for _, p := range prefixes {
		fmt.Fprintf(&b, "- name: %s, served by the test registry\n  prefix: %s\n  api_url: http://%s\n", p, p, reg.Host)
	}
	return b.String()
}

// pushGinkgoImages pushes what the ginkgo suite finds on quay.io and on
// its own registry: quay.io/dkarpele/my-guestbook's tags, the newest
// 29437546.0 (a build of December 2025, its name the minutes since
// 1970), and 127.0.0.1:30000/test-image 1.0.0 to 1.0.2, 1.0.2 signed with
// cosign's key as `cosign sign --key` signs today: a sigstore bundle
// among its referrers, kept under the tag sha256-<hex> by a registry
// without the Referrers API, as upstream's Distribution registry does.
func (u *upstreamWorld) pushGinkgoImages(t *testing.T) {
	t.Helper()
	for _, tag := range guestbookTags {
		u.ginkgoReg.PushImage(t, "dkarpele/my-guestbook", []string{tag.name}, testenv.Created(tag.created))
	}
	u.ginkgoReg.PushImage(t, "dkarpele/my-guestbook", []string{"29437546.0"}, testenv.Created(time.Date(2025, 12, 20, 17, 46, 0, 0, time.UTC)))
	u.ginkgoReg.PushImage(t, "test-image", []string{"1.0.0"})
	u.ginkgoReg.PushImage(t, "test-image", []string{"1.0.1"})
	signed := u.ginkgoReg.PushImage(t, "test-image", []string{"1.0.2"})
	key, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := key.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	u.cosignPub = []byte(pub)
	bundle := sigstoretest.SignBundle(t, sigstoretest.Statement(t, signed, layout.SignPredicateType), key, sign.BundleOptions{})
	u.ginkgoReg.AttachBundle(t, "test-image", signed, bundle, layout.SignPredicateType)
}

// guestbookTags are quay.io/dkarpele/my-guestbook's tags as the kuttl
// suite's logs list them, oldest build first.
var guestbookTags = []struct {
	name    string
	created time.Time
}{
	{"1.0.0", time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)},
	{"1.0.1", time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC)},
	{"1.0.2", time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)},
	{"2.0.0", time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC)},
}

// pushKuttlImages pushes what the kuttl suite finds: its e2e-test.sh's
// test-image tags, quay.io/dkarpele/my-guestbook then, and Docker Hub's
// nginx and memcached around the versions it names.
func (u *upstreamWorld) pushKuttlImages(t *testing.T) {
	t.Helper()
	u.kuttlDigests = map[string]v1.Hash{}
	for _, tag := range []string{"1.0.0", "1.0.1", "1.0.2", "2.0.0", "2.0.1", "2.1.0", "latest"} {
		u.kuttlDigests[tag] = u.kuttlReg.PushImage(t, "test-image", []string{tag})
	}
	for _, tag := range guestbookTags {
		u.kuttlReg.PushImage(t, "dkarpele/my-guestbook", []string{tag.name}, testenv.Created(tag.created))
	}
	u.kuttlReg.PushImage(t, "library/nginx", []string{"1.17.0", "1.17.9", "1.17.10", "1.18.0", "mainline-alpine"})
	u.kuttlReg.PushImage(t, "library/memcached", []string{"1.6.0", "1.6.9", "1.6.10", "1.6.21", "alpine"})
}

// readTree adds the files under dir to files, under prefix.
func readTree(t *testing.T, dir, prefix string, files map[string]string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		files[filepath.ToSlash(filepath.Join(prefix, rel))] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testdataRepo creates a copy of the repository of upstream's git server
// container for one scenario, on its branch master, and returns its URL.
func (u *upstreamWorld) testdataRepo(t *testing.T, name, fixtures string) string {
	t.Helper()
	repo := name + "/testdata"
	u.git.CreateRepoOn(t, repo, "master", fixtures, nil)
	return u.git.HTTPRepoURL(repo)
}

// --- the ginkgo suite ---

// ginkgoScenario is one It of the ginkgo suite: run gets the namespace
// ns, its own.
type ginkgoScenario struct {
	name, ns string
	run      func(t *testing.T, u *upstreamWorld, ns string)
}

var ginkgoParallel = []ginkgoScenario{
	{"1-001-argocd-write-back-target", "u1-001", func(t *testing.T, u *upstreamWorld, ns string) {
		u.startController(t, ns, v1Env("0"))
		u.createApp(t, ns, "app-01", nil, nil, map[string]any{"source": u.guestbookSource()}, false)
		u.waitRunning(t, ns, "app-01", ns, "quay.io/dkarpele/my-guestbook:1.0.0")
		u.createImageUpdater(t, ns, "image-updater", imageupdaterv1alpha1.ImageUpdaterSpec{
			ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{NamePattern: "app*", Images: []imageupdaterv1alpha1.ImageConfig{{
				Alias: "guestbook", ImageName: "quay.io/dkarpele/my-guestbook:~29437546.0",
				CommonUpdateSettings: &imageupdaterv1alpha1.CommonUpdateSettings{UpdateStrategy: ptr.To("semver")},
			}}}},
		})
		u.waitKustomizeImage(t, ns, "app-01", "quay.io/dkarpele/my-guestbook:29437546.0")
		u.waitRunning(t, ns, "app-01", ns, "quay.io/dkarpele/my-guestbook:29437546.0")
	}},
	{"1-002-git-write-back-target", "u1-002", func(t *testing.T, u *upstreamWorld, ns string) {
		u.gitWriteBack(t, ns, "git:secret:e2e-repository")
	}},
	{"1-002-git-write-back-target/legacy-namespace-secret-format", "u1-002-legacy", func(t *testing.T, u *upstreamWorld, ns string) {
		// The namespace/secret form, of the resource's own namespace.
		u.gitWriteBack(t, ns, "git:secret:"+ns+"/e2e-repository")
	}},
	{"1-003-multi-source-helm-kustomize", "u1-003", func(t *testing.T, u *upstreamWorld, ns string) {
		repo := u.localGitRepo(t, ns)
		u.startController(t, ns, v1Env("0"))
		u.createApp(t, ns, "multi-source-app", nil, nil, map[string]any{"sources": []any{
			// The Kustomize source first, as upstream's bug report had it.
			map[string]any{"repoURL": repo, "path": "1-003-multi-source-helm-kustomize-test/kustomize", "targetRevision": "HEAD", "kustomize": map[string]any{}},
			map[string]any{"repoURL": repo, "path": "1-003-multi-source-helm-kustomize-test/helm", "targetRevision": "HEAD",
				"helm": map[string]any{"valueFiles": []any{"values.yaml", "../helm-overrides.yaml"}}},
		}}, true)
		u.waitRunning(t, ns, "multi-source-app", ns, "quay.io/dkarpele/my-guestbook:1.0.0")
		u.createImageUpdater(t, ns, "image-updater", gitSpec(repo, "git:secret:e2e-repository", "helmvalues:/1-003-multi-source-helm-kustomize-test/helm-overrides.yaml",
			imageupdaterv1alpha1.ApplicationRef{NamePattern: "multi-source*", Images: []imageupdaterv1alpha1.ImageConfig{
				helmImage("guestbook", "quay.io/dkarpele/my-guestbook:29437546.X", "image.name", "image.tag"),
			}}))
		u.waitUpdated(t, ns, "multi-source-app", ns, "quay.io/dkarpele/my-guestbook:29437546.0")
	}},
	{"1-004-git-helm", "u1-004", func(t *testing.T, u *upstreamWorld, ns string) {
		repo := u.localGitRepo(t, ns)
		u.startController(t, ns, v1Env("0"))
		u.createApp(t, ns, "helm-app", nil, nil, map[string]any{"source": map[string]any{
			"repoURL": repo, "path": "1-004-git-helm-test/helm", "targetRevision": "HEAD",
			"helm": map[string]any{"valueFiles": []any{"values.yaml"}},
		}}, true)
		u.waitRunning(t, ns, "helm-app", ns, "quay.io/dkarpele/my-guestbook:1.0.0")
		u.createImageUpdater(t, ns, "image-updater", gitSpec(repo, "git:secret:e2e-repository", "helmvalues:/1-004-git-helm-test/helm/values.yaml",
			imageupdaterv1alpha1.ApplicationRef{NamePattern: "helm-*", Images: []imageupdaterv1alpha1.ImageConfig{
				helmImage("guestbook", "quay.io/dkarpele/my-guestbook:29437546.X", "image.name", "image.tag"),
			}}))
		u.waitUpdated(t, ns, "helm-app", ns, "quay.io/dkarpele/my-guestbook:29437546.0")
	}},
	{"1-005-annotations-argocd", "u1-005", func(t *testing.T, u *upstreamWorld, ns string) {
		u.startController(t, ns, v1Env("0"))
		u.createApp(t, ns, "app-01", map[string]string{"env": "prod"}, map[string]string{
			"argocd-image-updater.argoproj.io/image-list":      "guestbook=quay.io/dkarpele/my-guestbook:~29437546.0",
			"argocd-image-updater.argoproj.io/update-strategy": "semver",
		}, map[string]any{"source": u.guestbookSource()}, false)
		u.waitRunning(t, ns, "app-01", ns, "quay.io/dkarpele/my-guestbook:1.0.0")
		u.createImageUpdater(t, ns, "image-updater", annotationsSpec())
		u.waitKustomizeImage(t, ns, "app-01", "quay.io/dkarpele/my-guestbook:29437546.0")
		u.waitStatus(t, ns, "image-updater", func(s imageupdaterv1alpha1.ImageUpdaterStatus) []string {
			return append(matchedStatus(s), check(s.LastUpdatedAt != nil, "lastUpdatedAt unset after an update"),
				check(len(s.RecentUpdates) > 0, "no recentUpdates after an update"),
				conditionIs(s, "Error", metav1.ConditionFalse))
		})
		u.waitRunning(t, ns, "app-01", ns, "quay.io/dkarpele/my-guestbook:29437546.0")
	}},
	{"1-006-annotations-git", "u1-006", func(t *testing.T, u *upstreamWorld, ns string) {
		repo := u.localGitRepo(t, ns)
		u.startController(t, ns, v1Env("0"))
		u.createApp(t, ns, "app-01", map[string]string{"env": "prod"}, map[string]string{
			"argocd-image-updater.argoproj.io/image-list":        "test=quay.io/dkarpele/my-guestbook:29437546.X",
			"argocd-image-updater.argoproj.io/update-strategy":   "semver",
			"argocd-image-updater.argoproj.io/write-back-method": "git:secret:e2e-repository",
			"argocd-image-updater.argoproj.io/git-branch":        "master",
			"argocd-image-updater.argoproj.io/git-repository":    repo,
			"argocd-image-updater.argoproj.io/test.force-update": "false",
		}, map[string]any{"source": map[string]any{"repoURL": repo, "path": "1-006-annotations-git-test", "targetRevision": "HEAD"}}, true)
		u.waitRunning(t, ns, "app-01", ns, "quay.io/dkarpele/my-guestbook:1.0.0")
		u.createImageUpdater(t, ns, "image-updater", annotationsSpec())
		u.waitUpdated(t, ns, "app-01", ns, "quay.io/dkarpele/my-guestbook:29437546.0")
	}},
	{"1-007-status-subresource/normal-operation", "u1-007-normal", func(t *testing.T, u *upstreamWorld, ns string) {
		// IMAGE_UPDATER_INTERVAL=30 has no unit: a warning, and the default.
		u.startController(t, ns, v1Env("30"))
		u.createApp(t, ns, "status-app-01", nil, nil, map[string]any{"source": u.guestbookSource()}, false)
		u.waitRunning(t, ns, "status-app-01", ns, "quay.io/dkarpele/my-guestbook:1.0.0")
		u.createImageUpdater(t, ns, "image-updater-status", imageupdaterv1alpha1.ImageUpdaterSpec{
			ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{NamePattern: "status-app*", Images: []imageupdaterv1alpha1.ImageConfig{{
				Alias: "guestbook", ImageName: "quay.io/dkarpele/my-guestbook:~29437546.0",
				CommonUpdateSettings: &imageupdaterv1alpha1.CommonUpdateSettings{UpdateStrategy: ptr.To("semver")},
			}}}},
		})
		u.waitStatus(t, ns, "image-updater-status", func(s imageupdaterv1alpha1.ImageUpdaterStatus) []string {
			return append(matchedStatus(s), conditionIs(s, "Reconciling", metav1.ConditionFalse), conditionIs(s, "Error", metav1.ConditionFalse))
		})
	}},
	{"1-007-status-subresource/zero-matched", "u1-007-zero", func(t *testing.T, u *upstreamWorld, ns string) {
		u.startController(t, ns, v1Env("30"))
		u.createImageUpdater(t, ns, "image-updater-no-match", imageupdaterv1alpha1.ImageUpdaterSpec{
			ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{NamePattern: "nonexistent-app-*",
				Images: []imageupdaterv1alpha1.ImageConfig{{Alias: "nginx", ImageName: "nginx:1.20"}}}},
		})
		u.waitStatus(t, ns, "image-updater-no-match", func(s imageupdaterv1alpha1.ImageUpdaterStatus) []string {
			return []string{
				check(s.ApplicationsMatched == 0, fmt.Sprintf("applicationsMatched %d, want 0", s.ApplicationsMatched)),
				check(s.ImagesManaged == 0, fmt.Sprintf("imagesManaged %d, want 0", s.ImagesManaged)),
				check(s.LastCheckedAt != nil, "lastCheckedAt unset"),
				check(s.LastUpdatedAt == nil, "lastUpdatedAt set with nothing updated"),
				check(len(s.RecentUpdates) == 0, fmt.Sprintf("recentUpdates %v with nothing matched", s.RecentUpdates)),
				conditionIs(s, "Ready", metav1.ConditionTrue),
				conditionIs(s, "Error", metav1.ConditionFalse),
			}
		})
	}},
	{"1-007-status-subresource/misconfigured", "u1-007-bad", func(t *testing.T, u *upstreamWorld, ns string) {
		c := u.startController(t, ns, v1Env("30"))
		u.createImageUpdater(t, ns, "image-updater-bad-pattern", imageupdaterv1alpha1.ImageUpdaterSpec{
			ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{NamePattern: "foo[bar", // an unclosed bracket
				Images: []imageupdaterv1alpha1.ImageConfig{{Alias: "nginx", ImageName: "nginx:1.20"}}}},
		})
		u.waitStatus(t, ns, "image-updater-bad-pattern", func(s imageupdaterv1alpha1.ImageUpdaterStatus) []string {
			var problems []string
			if e := apimeta.FindStatusCondition(s.Conditions, "Error"); e == nil {
				problems = append(problems, "no Error condition")
			} else {
				problems = append(problems,
					check(e.Status == metav1.ConditionTrue, "Error condition "+string(e.Status)),
					check(e.Reason == "ReconcileError", "Error reason "+e.Reason+", want ReconcileError"),
					check(strings.Contains(e.Message, "invalid application name pattern"), fmt.Sprintf("Error message %q", e.Message)))
			}
			return append(problems, conditionIs(s, "Ready", metav1.ConditionFalse), check(s.LastCheckedAt != nil, "lastCheckedAt unset"))
		})
		// As upstream's Consistently over the Deployment's ready replicas.
		holds(t, 30*time.Second, "the controller running and ready after the misconfigured resource", c.ready)
	}},
	{"1-008-helmvalues-non-live-images", "u1-008", func(t *testing.T, u *upstreamWorld, ns string) {
		repo := u.localGitRepo(t, ns)
		u.startController(t, ns, v1Env("0"))
		u.createApp(t, ns, "multi-image-helm-app", nil, nil, map[string]any{"source": map[string]any{
			"repoURL": repo, "path": "1-008-helmvalues-non-live-images/helm", "targetRevision": "HEAD",
			"helm": map[string]any{"valueFiles": []any{"values.yaml"}},
		}}, true)
		u.waitRunning(t, ns, "multi-image-helm-app", ns, "quay.io/dkarpele/my-guestbook:1.0.0")
		// manager runs; session and reaper, of repositories of their own,
		// run nowhere.
		u.createImageUpdater(t, ns, "image-updater", gitSpec(repo, "git:secret:e2e-repository", "helmvalues:/1-008-helmvalues-non-live-images/helm/values.yaml",
			imageupdaterv1alpha1.ApplicationRef{NamePattern: "multi-image-helm-app", Images: []imageupdaterv1alpha1.ImageConfig{
				helmImage("manager", "quay.io/dkarpele/my-guestbook:29437546.X", "manager.image.repository", "manager.image.tag"),
				helmImage("session", "quay.io/dkarpele/my-guestbook-session:29437546.X", "session.image.repository", "session.image.tag"),
				helmImage("reaper", "quay.io/dkarpele/my-guestbook-reaper:29437546.X", "reaper.image.repository", "reaper.image.tag"),
			}}))
		u.waitRunning(t, ns, "multi-image-helm-app", ns, "quay.io/dkarpele/my-guestbook:29437546.0")
		waitFor(t, upstreamTimeout, "the chart's ConfigMap non-live-image-tags to keep session and reaper at 1.0.0", func() (bool, string) {
			cm, err := u.cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "non-live-image-tags", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			want := map[string]string{"session-tag": "1.0.0", "reaper-tag": "1.0.0"}
			return maps.Equal(cm.Data, want), fmt.Sprint(cm.Data)
		})
	}},
	{"1-009-github-pull-request", "u1-009", func(t *testing.T, u *upstreamWorld, ns string) { u.pullRequest(t, ns) }},
	{"1-010-verify-image", "u1-010", func(t *testing.T, u *upstreamWorld, ns string) { u.verifyImage(t, ns) }},
	{"1-011-plugin-argocd-write-back", "u1-011", func(t *testing.T, u *upstreamWorld, ns string) {
		repo := u.localGitRepo(t, ns)
		u.startController(t, ns, v1Env("0"))
		u.createApp(t, ns, "plugin-app", nil, nil, map[string]any{"source": map[string]any{
			"repoURL": repo, "path": "1-011-plugin-argocd-write-back-test", "targetRevision": "HEAD",
			"plugin": map[string]any{"env": []any{
				map[string]any{"name": "IMAGE_NAME", "value": "quay.io/dkarpele/my-guestbook"},
				map[string]any{"name": "IMAGE_TAG", "value": "1.0.0"},
			}},
		}}, true)
		u.waitRunning(t, ns, "plugin-app", ns, "quay.io/dkarpele/my-guestbook:1.0.0")
		u.createImageUpdater(t, ns, "image-updater", imageupdaterv1alpha1.ImageUpdaterSpec{
			CommonUpdateSettings: &imageupdaterv1alpha1.CommonUpdateSettings{UpdateStrategy: ptr.To("semver")},
			ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{NamePattern: "plugin-*", Images: []imageupdaterv1alpha1.ImageConfig{{
				Alias: "guestbook", ImageName: "quay.io/dkarpele/my-guestbook:~29437546.0",
				ManifestTarget: &imageupdaterv1alpha1.ManifestTarget{Plugin: &imageupdaterv1alpha1.PluginTarget{Name: ptr.To("IMAGE_NAME"), Tag: ptr.To("IMAGE_TAG")}},
			}}}},
		})
		refresh := u.refresher(t, ns, "plugin-app")
		waitFor(t, upstreamTimeout, "the plugin's IMAGE_TAG 29437546.0", func() (bool, string) {
			refresh()
			env, _, _ := unstructured.NestedSlice(u.application(t, ns, "plugin-app").Object, "spec", "source", "plugin", "env")
			for _, e := range env {
				if m, ok := e.(map[string]any); ok && m["name"] == "IMAGE_TAG" {
					return m["value"] == "29437546.0", fmt.Sprint(env)
				}
			}
			return false, fmt.Sprint(env)
		})
		u.waitUpdated(t, ns, "plugin-app", ns, "quay.io/dkarpele/my-guestbook:29437546.0")
	}},
}

// pluginConfig is 1-011's plugin.yaml: it renders a Deployment of the
// image its environment names.
const pluginConfig = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: e2e-plugin
spec:
  generate:
    command: [sh, -c]
    args:
      - |
        cat <<EOF
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: plugin-app
        spec:
          replicas: 1
          selector:
            matchLabels:
              app: plugin-app
          template:
            metadata:
              labels:
                app: plugin-app
            spec:
              containers:
              - name: test
                image: ${ARGOCD_ENV_IMAGE_NAME}:${ARGOCD_ENV_IMAGE_TAG}
        EOF
  discover:
    fileName: "plugin-app.yaml"
`

// v1Env is the environment each scenario's ArgoCD resource gives the
// updater: trace logs and this interval.
func v1Env(interval string) map[string]string {
	return map[string]string{"IMAGE_UPDATER_LOGLEVEL": "trace", "IMAGE_UPDATER_INTERVAL": interval}
}

func (u *upstreamWorld) guestbookSource() map[string]any {
	return map[string]any{"repoURL": u.guestbookRepo, "path": "test/e2e/testdata/005-public-guestbook", "targetRevision": "HEAD"}
}

// localGitRepo is upstream's CreateLocalGitRepo: the git server's
// testdata repository, and its Secret e2e-repository in the namespace
// (for git:secret:; Argo CD has the server's credentials already).
func (u *upstreamWorld) localGitRepo(t *testing.T, ns string) string {
	t.Helper()
	repo := u.testdataRepo(t, ns, ginkgoGitFixtures)
	u.k.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-repository", Namespace: ns,
			Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository", "component": ns}},
		StringData: map[string]string{"url": repo, "type": "git", "username": gitUser, "password": gitPassword, "insecure": "true"},
	})
	return repo
}

// gitWriteBack is 1-002: the Kustomize Application's image written to
// git, through the Secret method names.
func (u *upstreamWorld) gitWriteBack(t *testing.T, ns, method string) {
	repo := u.localGitRepo(t, ns)
	u.startController(t, ns, v1Env("0"))
	u.createApp(t, ns, "app-01", nil, nil, map[string]any{"source": map[string]any{
		"repoURL": repo, "path": "1-002-git-write-back-target-test", "targetRevision": "HEAD"}}, true)
	u.waitRunning(t, ns, "app-01", ns, "quay.io/dkarpele/my-guestbook:1.0.0")
	u.createImageUpdater(t, ns, "image-updater", gitSpec(repo, method, "",
		imageupdaterv1alpha1.ApplicationRef{NamePattern: "app*", Images: []imageupdaterv1alpha1.ImageConfig{
			{Alias: "test", ImageName: "quay.io/dkarpele/my-guestbook:29437546.X"},
		}}))
	u.waitUpdated(t, ns, "app-01", ns, "quay.io/dkarpele/my-guestbook:29437546.0")
}

// gitSpec is the spec the git scenarios share: semver without force,
// written to repo's branch master through method, at target when given.
func gitSpec(repo, method, target string, ref imageupdaterv1alpha1.ApplicationRef) imageupdaterv1alpha1.ImageUpdaterSpec {
	git := &imageupdaterv1alpha1.GitConfig{Branch: ptr.To("master"), Repository: ptr.To(repo)}
	if target != "" {
		git.WriteBackTarget = ptr.To(target)
	}
	return imageupdaterv1alpha1.ImageUpdaterSpec{
		CommonUpdateSettings: &imageupdaterv1alpha1.CommonUpdateSettings{UpdateStrategy: ptr.To("semver"), ForceUpdate: ptr.To(false)},
		WriteBackConfig:      &imageupdaterv1alpha1.WriteBackConfig{Method: ptr.To(method), GitConfig: git},
		ApplicationRefs:      []imageupdaterv1alpha1.ApplicationRef{ref},
	}
}

func helmImage(alias, image, name, tag string) imageupdaterv1alpha1.ImageConfig {
	return imageupdaterv1alpha1.ImageConfig{Alias: alias, ImageName: image,
		ManifestTarget: &imageupdaterv1alpha1.ManifestTarget{Helm: &imageupdaterv1alpha1.HelmTarget{Name: ptr.To(name), Tag: ptr.To(tag)}}}
}

// annotationsSpec is 1-005's and 1-006's resource: the Applications
// labelled env=prod read their own annotations.
func annotationsSpec() imageupdaterv1alpha1.ImageUpdaterSpec {
	return imageupdaterv1alpha1.ImageUpdaterSpec{ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{
		NamePattern: "app*", UseAnnotations: ptr.To(true),
		LabelSelectors: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
	}}}
}

// pullRequest is 1-009: the Application's source is the local git
// server; its image is written to another repository, on GitHub, in a
// pull request. GitHub is the stand-in (its API at
// IMAGE_UPDATER_GITHUB_ENTERPRISE_API_URLS), and the repository,
// E2E_GITHUB_OWNER/E2E_GITHUB_REPO with one commit on main there, is one
// of the git server's, which takes the token as GitHub takes a PAT.
func (u *upstreamWorld) pullRequest(t *testing.T, ns string) {
	repo := u.localGitRepo(t, ns)
	const owner, name, branch = "e2e-owner", "e2e-repo", "main"
	target := owner + "/" + name
	u.git.CreateRepoOn(t, target, branch, "", map[string]string{"README.md": "Image updates land here.\n"})
	token := "ghp_" + strings.Repeat("0", 36)
	u.git.AcceptCredentials("x-access-token", token)
	u.github.AcceptToken(token)
	env := v1Env("0")
	env["IMAGE_UPDATER_GITHUB_ENTERPRISE_API_URLS"] = u.github.URL
	u.startController(t, ns, env)
	u.createApp(t, ns, "app-01", nil, nil, map[string]any{"source": map[string]any{
		"repoURL": repo, "path": "1-009-git-pull-request", "targetRevision": "HEAD"}}, true)
	u.waitRunning(t, ns, "app-01", ns, "quay.io/dkarpele/my-guestbook:1.0.0")
	u.k.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "github-creds", Namespace: ns},
		StringData: map[string]string{"username": "x-access-token", "password": token},
	})
	u.createImageUpdater(t, ns, "image-updater", imageupdaterv1alpha1.ImageUpdaterSpec{
		CommonUpdateSettings: &imageupdaterv1alpha1.CommonUpdateSettings{UpdateStrategy: ptr.To("semver"), ForceUpdate: ptr.To(false)},
		WriteBackConfig: &imageupdaterv1alpha1.WriteBackConfig{Method: ptr.To("git:secret:github-creds"), GitConfig: &imageupdaterv1alpha1.GitConfig{
			Branch: ptr.To(branch), Repository: ptr.To(u.git.HTTPRepoURL(target)),
			PullRequest: &imageupdaterv1alpha1.PullRequestConfig{GitHub: &imageupdaterv1alpha1.ForgeConfig{}},
		}},
		ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{NamePattern: "app*", Images: []imageupdaterv1alpha1.ImageConfig{
			{Alias: "test", ImageName: "quay.io/dkarpele/my-guestbook:29437546.X"},
		}}},
	})
	const title = "build: automatic update of app-01"
	head := regexp.MustCompile(`^image-updater-[a-f0-9]{8}-[a-f0-9]{64}$`)
	refresh := u.refresher(t, ns, "app-01")
	var pr testenv.Review
	waitFor(t, upstreamTimeout, "a pull request titled "+title+" from image-updater-<key>-<hash> into "+branch, func() (bool, string) {
		refresh()
		reviews := u.github.Reviews(target)
		for _, r := range reviews {
			if r.State == "open" && r.Title == title && head.MatchString(r.Head) && r.Base == branch {
				pr = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", reviews)
	})
	// The pull request is the stand-in's: it has no author or head
	// repository to check as upstream checks GitHub's.
	if want := "updates image dkarpele/my-guestbook tag '1.0.0' to '29437546.0'"; !strings.Contains(pr.Body, want) {
		t.Errorf("pull request body %q, want it to contain %q", pr.Body, want)
	}
	commits := u.git.Log(t, target, pr.Head)
	if len(commits) < 2 || commits[0].Subject == "" {
		t.Errorf("commits on %s: %+v, want the update on top of %s", pr.Head, commits, branch)
	}
	// Upstream's Application lives in its Argo CD's namespace and has
	// its overrides in .argocd-source-app-01.yaml; this one, in another
	// namespace, in .argocd-source-<namespace>_app-01.yaml, the name both
	// v1.3.0 and Argo CD give it there.
	overrides := "1-009-git-pull-request/.argocd-source-" + ns + "_app-01.yaml"
	if got := u.git.ReadFile(t, target, pr.Head, overrides); !strings.Contains(got, "29437546.0") {
		t.Errorf("%s on %s:\n%s", overrides, pr.Head, got)
	}
}

// verifyImage is 1-010: signatures verified with the key of a Secret.
// Its argocd-image-updater-config ConfigMap maps 127.0.0.1:30000 to its
// registry, as the ginkgo registries.conf here does.
func (u *upstreamWorld) verifyImage(t *testing.T, ns string) {
	u.k.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign-pubkey", Namespace: ns},
		Data: map[string][]byte{"cosign.pub": u.cosignPub}})
	repo := u.localGitRepo(t, ns)
	u.startController(t, ns, v1Env("15s"))
	u.createApp(t, ns, "app-01", nil, nil, map[string]any{"source": map[string]any{
		"repoURL": repo, "path": "1-010-verify-image-test", "targetRevision": "HEAD"}}, true)
	u.waitRunning(t, ns, "app-01", ns, "127.0.0.1:30000/test-image:1.0.0")
	spec := func(image string) imageupdaterv1alpha1.ImageUpdaterSpec {
		s := gitSpec(repo, "git:secret:e2e-repository", "", imageupdaterv1alpha1.ApplicationRef{NamePattern: "app*",
			Images: []imageupdaterv1alpha1.ImageConfig{{Alias: "test", ImageName: image}}})
		s.ImagesVerification = &imageupdaterv1alpha1.ImagesVerification{Enabled: ptr.To(true),
			CosignKey: &imageupdaterv1alpha1.CosignKey{SecretName: "cosign-pubkey", Key: "cosign.pub"}}
		return s
	}
	matched := func(s imageupdaterv1alpha1.ImageUpdaterStatus) []string {
		return []string{check(s.ApplicationsMatched > 0, "no Application matched yet")}
	}

	// 1.0.1 is not signed: nothing is written.
	u.createImageUpdater(t, ns, "image-updater", spec("127.0.0.1:30000/test-image:1.0.1"))
	u.waitStatus(t, ns, "image-updater", matched)
	refresh := u.refresher(t, ns, "app-01")
	holds(t, 30*time.Second, "the Application at 1.0.0, 1.0.1 being unsigned", func() (bool, string) {
		refresh()
		images := summaryImages(u.application(t, ns, "app-01"))
		return len(images) > 0 && images[0] == "127.0.0.1:30000/test-image:1.0.0", fmt.Sprint(images)
	})
	u.deleteImageUpdater(t, ns, "image-updater")

	// 1.0.2, the highest of ~1.0, is signed.
	u.createImageUpdater(t, ns, "image-updater", spec("127.0.0.1:30000/test-image:~1.0"))
	u.waitStatus(t, ns, "image-updater", matched)
	u.waitUpdated(t, ns, "app-01", ns, "127.0.0.1:30000/test-image:1.0.2")
}

// appsInNamespaces is sequential 1-008 and 1-009: Applications of two
// namespaces other than the controller's, each with its AppProject and
// its ImageUpdater, served by a controller that watches those two
// (IMAGE_UPDATER_WATCH_NAMESPACES=dev,qe) or every namespace (*).
func (u *upstreamWorld) appsInNamespaces(t *testing.T, prefix string, clusterWide bool) {
	ns, dev, qe := prefix, prefix+"-dev", prefix+"-qe"
	for _, n := range []string{ns, dev, qe} {
		u.k.CreateNamespace(t, n)
	}
	env := v1Env("0")
	env["IMAGE_UPDATER_WATCH_NAMESPACES"] = dev + "," + qe
	if clusterWide {
		env["IMAGE_UPDATER_WATCH_NAMESPACES"] = "*"
	}
	u.startController(t, ns, env)
	for _, n := range []string{dev, qe} {
		u.k.Create(t, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
			"metadata": map[string]any{"name": n, "namespace": testenv.ArgoCDNamespace},
			"spec": map[string]any{
				"sourceRepos":              []any{"*"},
				"sourceNamespaces":         []any{n},
				"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
				"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
			},
		}})
		u.createAppIn(t, n, n, "app-01", nil, nil, map[string]any{"source": u.guestbookSource()}, false)
	}
	for _, n := range []string{dev, qe} {
		u.waitRunning(t, n, "app-01", n, "quay.io/dkarpele/my-guestbook:1.0.0")
	}
	for _, n := range []string{dev, qe} {
		u.createImageUpdater(t, n, "image-updater", imageupdaterv1alpha1.ImageUpdaterSpec{
			ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{NamePattern: "app*", Images: []imageupdaterv1alpha1.ImageConfig{{
				Alias: "guestbook", ImageName: "quay.io/dkarpele/my-guestbook:~29437546.0",
				CommonUpdateSettings: &imageupdaterv1alpha1.CommonUpdateSettings{UpdateStrategy: ptr.To("semver")},
			}}}},
		})
		u.waitKustomizeImage(t, n, "app-01", "quay.io/dkarpele/my-guestbook:29437546.0")
	}
}

// --- the kuttl suite ---

// kuttlScenario is one folder of the kuttl suite: its 01-install.yaml
// (and 03-revert.yaml), with what its asserts expect.
type kuttlScenario struct {
	dir string
	// installed is what 01-assert waits for: each Application synced and
	// running these images in its destination namespace.
	installed []kuttlApp
	// updated is 02-assert, after the first run; reverted is 04-assert,
	// after 03-revert.yaml and the second run.
	updated, reverted func(t *testing.T, r *kuttlRun)
	// adapt changes the installed objects where upstream's cannot work as
	// written; flags are added to the run's for the same reason.
	adapt func(r *kuttlRun, objs []*unstructured.Unstructured)
	flags []string
}

type kuttlApp struct {
	name, namespace string // the Application's namespace: Argo CD's unless said
	destination     string
	images          []string
}

// kuttlRun is one scenario as it runs.
type kuttlRun struct {
	u         *upstreamWorld
	dir, repo string
}

const kuttlTestImage = "10.42.0.1:30000/test-image"

var kuttlSuite = []kuttlScenario{
	{
		dir:       "001-simple-kustomize-app-semver",
		installed: []kuttlApp{{name: "image-updater-001", destination: testenv.ArgoCDNamespace, images: []string{kuttlTestImage + ":1.0.0"}}},
		// 02-assert also looks for the Pod in image-updater-e2e-001, where
		// the Application does not deploy: its destination is Argo CD's
		// namespace, where the Deployment is looked at.
		updated: func(t *testing.T, r *kuttlRun) {
			r.waitKustomizeImages(t, "image-updater-001", kuttlTestImage+":1.0.2")
			r.u.waitRunning(t, testenv.ArgoCDNamespace, "image-updater-001", testenv.ArgoCDNamespace, kuttlTestImage+":1.0.2")
		},
	},
	{
		dir:       "002-simple-kustomize-app-latest",
		installed: []kuttlApp{{name: "image-updater-002", destination: "image-updater-e2e-002", images: []string{kuttlTestImage + ":1.0.0"}}},
		// 02-assert: the Deployment changed once (observedGeneration 2):
		// to latest, at its digest.
		updated: func(t *testing.T, r *kuttlRun) {
			r.u.waitRunning(t, testenv.ArgoCDNamespace, "image-updater-002", "image-updater-e2e-002", kuttlTestImage+":latest@"+r.u.kuttlDigests["latest"].String())
			r.u.waitGeneration(t, "image-updater-e2e-002", 2)
		},
		// 04-assert names Application image-updater-007, which exists only
		// in scenario 007 (it is 007's 04-assert): what it expects of it,
		// test-image 1.0.0 running, is expected of this scenario's, pinned
		// to 1.0.0's digest as the digest strategy writes it.
		reverted: func(t *testing.T, r *kuttlRun) {
			r.u.waitRunning(t, testenv.ArgoCDNamespace, "image-updater-002", "image-updater-e2e-002", kuttlTestImage+":1.0.0@"+r.u.kuttlDigests["1.0.0"].String())
		},
	},
	{
		dir:       "003-invalid-image-specified",
		installed: []kuttlApp{{name: "image-updater-003", destination: "image-updater-e2e-003", images: []string{kuttlTestImage + ":1.0.0"}}},
		// some/invalid, on Docker Hub, does not exist: nothing changes.
		updated: func(t *testing.T, r *kuttlRun) {
			r.u.waitRunning(t, testenv.ArgoCDNamespace, "image-updater-003", "image-updater-e2e-003", kuttlTestImage+":1.0.0")
			r.u.waitGeneration(t, "image-updater-e2e-003", 1)
		},
	},
	{
		dir:       "004-multiple-images",
		installed: []kuttlApp{{name: "image-updater-004", destination: "image-updater-e2e-004", images: []string{"nginx:1.17.0", "memcached:1.6.0"}}},
		updated: func(t *testing.T, r *kuttlRun) {
			r.waitKustomizeImages(t, "image-updater-004", "nginx:1.17.10", "memcached:1.6.10")
			r.u.waitRunning(t, testenv.ArgoCDNamespace, "image-updater-004", "image-updater-e2e-004", "nginx:1.17.10", "memcached:1.6.10")
		},
	},
	{
		dir: "005-app-wide-update-strategy",
		installed: []kuttlApp{
			{name: "image-updater-005-01", destination: "image-updater-e2e-005-01", images: []string{"quay.io/dkarpele/my-guestbook:1.0.0"}},
			{name: "image-updater-005-02", destination: "image-updater-e2e-005-02", images: []string{"quay.io/dkarpele/my-guestbook:1.0.0"}},
		},
		updated: func(t *testing.T, r *kuttlRun) {
			r.waitKustomizeImages(t, "image-updater-005-01", "quay.io/dkarpele/my-guestbook:1.0.2")
			r.waitKustomizeImages(t, "image-updater-005-02", "quay.io/dkarpele/my-guestbook:2.0.0")
			r.u.waitRunning(t, testenv.ArgoCDNamespace, "image-updater-005-01", "image-updater-e2e-005-01", "quay.io/dkarpele/my-guestbook:1.0.2")
			r.u.waitRunning(t, testenv.ArgoCDNamespace, "image-updater-005-02", "image-updater-e2e-005-02", "quay.io/dkarpele/my-guestbook:2.0.0")
		},
	},
	{
		dir: "006-apps-in-any-namespace",
		// As written, 006 cannot pass for v1.3.0 either: its ImageUpdater,
		// in Argo CD's namespace, selects that namespace's Applications
		// only, and the run watches no other; and its source,
		// argoproj/argocd-example-apps' kustomize-guestbook, runs
		// gcr.io/google-samples/gb-frontend:v5, not the my-guestbook it
		// expects. Here its ImageUpdater is in the Application's namespace,
		// the run watches it (--watch-namespaces), and the source is
		// upstream's 005-public-guestbook, which runs my-guestbook: what is
		// left is 006's point, an Application outside Argo CD's namespace,
		// of an AppProject naming that namespace, updated.
		installed: []kuttlApp{{name: "image-updater-006", namespace: "image-updater-e2e-006-01", destination: "image-updater-e2e-006-01",
			images: []string{"quay.io/dkarpele/my-guestbook:1.0.0"}}},
		adapt: func(r *kuttlRun, objs []*unstructured.Unstructured) {
			for _, obj := range objs {
				switch obj.GetKind() {
				case "Application":
					_ = unstructured.SetNestedMap(obj.Object, map[string]any{
						"repoURL": r.repo, "path": "./005-public-guestbook", "targetRevision": "HEAD"}, "spec", "source")
				case "ImageUpdater":
					obj.SetNamespace("image-updater-e2e-006-01")
				}
			}
		},
		flags: []string{"--watch-namespaces", "image-updater-e2e-006-01"},
		updated: func(t *testing.T, r *kuttlRun) {
			r.u.waitKustomizeImage(t, "image-updater-e2e-006-01", "image-updater-006", "quay.io/dkarpele/my-guestbook:1.0.2")
			r.u.waitRunning(t, "image-updater-e2e-006-01", "image-updater-006", "image-updater-e2e-006-01", "quay.io/dkarpele/my-guestbook:1.0.2")
		},
	},
	{
		dir:       "007-git-repository",
		installed: []kuttlApp{{name: "image-updater-007", destination: "image-updater-e2e-007", images: []string{kuttlTestImage + ":1.0.0"}}},
		updated: func(t *testing.T, r *kuttlRun) {
			r.u.waitUpdated(t, testenv.ArgoCDNamespace, "image-updater-007", "image-updater-e2e-007", kuttlTestImage+":1.0.2")
		},
		reverted: func(t *testing.T, r *kuttlRun) {
			r.u.waitUpdated(t, testenv.ArgoCDNamespace, "image-updater-007", "image-updater-e2e-007", kuttlTestImage+":1.0.0")
		},
	},
	{
		dir:       "008-git-repository-helm",
		installed: []kuttlApp{{name: "image-updater-008", destination: "image-updater-e2e-008", images: []string{"quay.io/dkarpele/my-guestbook:1.0.0"}}},
		updated: func(t *testing.T, r *kuttlRun) {
			r.u.waitUpdated(t, testenv.ArgoCDNamespace, "image-updater-008", "image-updater-e2e-008", "quay.io/dkarpele/my-guestbook:1.0.2")
		},
		reverted: func(t *testing.T, r *kuttlRun) {
			r.u.waitUpdated(t, testenv.ArgoCDNamespace, "image-updater-008", "image-updater-e2e-008", "quay.io/dkarpele/my-guestbook:1.0.0")
		},
	},
	{
		dir: "101-kustomize-match-application-label",
		installed: []kuttlApp{
			{name: "image-updater-101-0", destination: "image-updater-e2e-101-0", images: []string{"quay.io/dkarpele/my-guestbook:1.0.0"}},
			{name: "image-updater-101-1", destination: "image-updater-e2e-101-1", images: []string{"quay.io/dkarpele/my-guestbook:1.0.0"}},
			{name: "image-updater-101-2", destination: "image-updater-e2e-101-2", images: []string{"quay.io/dkarpele/my-guestbook:1.0.0"}},
		},
		// Only 101-0's labels match its entry.
		updated: func(t *testing.T, r *kuttlRun) {
			r.waitKustomizeImages(t, "image-updater-101-0", "quay.io/dkarpele/my-guestbook:1.0.2")
			r.u.waitRunning(t, testenv.ArgoCDNamespace, "image-updater-101-0", "image-updater-e2e-101-0", "quay.io/dkarpele/my-guestbook:1.0.2")
			r.u.waitGeneration(t, "image-updater-e2e-101-0", 2)
			r.u.waitGeneration(t, "image-updater-e2e-101-1", 1)
			r.u.waitGeneration(t, "image-updater-e2e-101-2", 1)
		},
	},
	{
		dir: "102-kustomize-match-application-name",
		installed: []kuttlApp{
			{name: "image-updater-102-0", destination: "image-updater-e2e-102-0", images: []string{"quay.io/dkarpele/my-guestbook:1.0.0"}},
			{name: "image-updater-102-1", destination: "image-updater-e2e-102-1", images: []string{"quay.io/dkarpele/my-guestbook:1.0.0"}},
			{name: "image-updater-102-2", destination: "image-updater-e2e-102-2", images: []string{"quay.io/dkarpele/my-guestbook:1.0.0"}},
		},
		// Each Application by its most specific entry.
		updated: func(t *testing.T, r *kuttlRun) {
			for app, tag := range map[string]string{"0": "1.0.1", "1": "1.0.2", "2": "2.0.0"} {
				r.waitKustomizeImages(t, "image-updater-102-"+app, "quay.io/dkarpele/my-guestbook:"+tag)
				r.u.waitRunning(t, testenv.ArgoCDNamespace, "image-updater-102-"+app, "image-updater-e2e-102-"+app, "quay.io/dkarpele/my-guestbook:"+tag)
				r.u.waitGeneration(t, "image-updater-e2e-102-"+app, 2)
			}
		},
	},
}

// kuttlNamespace is where the kuttl suite runs: its Argo CD's.
const kuttlNamespace = "argocd-image-updater-e2e"

func (s kuttlScenario) run(t *testing.T, u *upstreamWorld) {
	// The suite's git server, its test/e2e/testdata on master, for this
	// scenario alone, as kuttl runs one scenario at a time.
	r := &kuttlRun{u: u, dir: s.dir, repo: u.testdataRepo(t, "kuttl-"+s.dir[:3], e2eFixtures)}
	// 01-install.
	objs := r.load(t, "01-install.yaml")
	if s.adapt != nil {
		s.adapt(r, objs)
	}
	// As kuttl applies a step's file: created (unknown fields, such as
	// the roleRef.namespace of 006's RoleBinding, dropped), or, when it
	// exists, changed.
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" {
			u.k.CreateNamespace(t, obj.GetName())
			continue
		}
		u.createObject(t, obj)
	}
	// 99-delete: the Applications (Argo CD removes what they deployed)
	// and the ImageUpdaters, before the next scenario.
	t.Cleanup(func() {
		for _, obj := range objs {
			if k := obj.GetKind(); k == "Application" || k == "ImageUpdater" {
				u.deleteObject(t, obj)
			}
		}
	})
	for _, app := range s.installed {
		ns := app.namespace
		if ns == "" {
			ns = testenv.ArgoCDNamespace
		}
		u.waitRunning(t, ns, app.name, app.destination, app.images...)
	}
	// 02-run-updater, then 02-assert.
	u.runKuttlUpdater(t, s.flags...)
	s.updated(t, r)
	if s.reverted == nil {
		return
	}
	// 03-revert: the ImageUpdater's new spec; 04-run-updater-revert,
	// then 04-assert.
	for _, obj := range r.load(t, "03-revert.yaml") {
		u.replaceSpec(t, obj)
	}
	u.runKuttlUpdater(t, s.flags...)
	s.reverted(t, r)
}

// load reads one of the scenario's steps, in this world: Argo CD's
// namespace for the suite's, and this scenario's repository for the
// suite's git server (by HTTP and by HTTPS, both served by the same
// container there).
func (r *kuttlRun) load(t *testing.T, step string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(kuttlSteps, r.dir, step))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer(
		kuttlNamespace, testenv.ArgoCDNamespace,
		"http://10.42.0.1:30002/testdata.git", r.repo,
		"https://10.42.0.1:30003/testdata.git", r.repo,
	).Replace(string(data))
	var objs []*unstructured.Unstructured
	for _, obj := range testenv.DecodeYAML(t, []byte(text)) {
		// kuttl's own step (006 restarts Argo CD's server and controller
		// to read application.namespaces, which this Argo CD reads from
		// its command line).
		if obj.GetAPIVersion() == "kuttl.dev/v1beta1" {
			continue
		}
		objs = append(objs, obj)
	}
	return objs
}

func (r *kuttlRun) waitKustomizeImages(t *testing.T, app string, images ...string) {
	t.Helper()
	waitFor(t, upstreamTimeout, "spec.source.kustomize.images of "+app+": "+strings.Join(images, ", "), func() (bool, string) {
		got := testenv.KustomizeImages(t, r.u.application(t, testenv.ArgoCDNamespace, app))
		return slices.Equal(got, images), fmt.Sprint(got)
	})
}

// runKuttlUpdater is the kuttl suite's run-updater step: its command, as
// the person running the suite, with this world's registries.conf.
func (u *upstreamWorld) runKuttlUpdater(t *testing.T, flags ...string) {
	t.Helper()
	args := append([]string{"run", "--once",
		"--argocd-namespace", testenv.ArgoCDNamespace,
		"--registries-conf-path", u.kuttlConf,
		"--loglevel", "trace",
		"--leader-election-namespace", "image-updater-system",
		"--max-concurrent-reconciles", "10"}, flags...)
	u.k.CreateNamespace(t, "image-updater-system")
	cmd := exec.CommandContext(t.Context(), u.bin, args...)
	cmd.Env = append(cleanEnv(), "KUBECONFIG="+u.adminKubeconfig, "TMPDIR="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("argocd-image-updater %s:\n%s", strings.Join(args, " "), tail(out.String()))
		}
	})
	if err != nil {
		t.Fatalf("argocd-image-updater run --once: %v", err)
	}
}

// --- the controller, as argocd-operator runs it ---

// controller is one scenario's updater.
type controller struct {
	probe  string // http://127.0.0.1:<port>
	exited chan struct{}
	err    error
}

// startController starts the updater as argocd-operator's Deployment
// does, for a scenario whose upstream Argo CD (and controller) live in
// ns, with the environment its ArgoCD resource gives.
func (u *upstreamWorld) startController(t *testing.T, ns string, env map[string]string) *controller {
	t.Helper()
	u.k.CreateNamespace(t, ns)
	u.grantLease(t, ns)
	env = maps.Clone(env)
	if _, ok := env["IMAGE_UPDATER_WATCH_NAMESPACES"]; !ok {
		env["IMAGE_UPDATER_WATCH_NAMESPACES"] = ns
	}
	port := testenv.FreePort(t)
	cmd := exec.Command(u.manager, "run",
		"--registries-conf-path", u.ginkgoConf,
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", port),
		"--leader-election-namespace", ns)
	cmd.Env = append(cleanEnv(), "KUBECONFIG="+u.controllerKubeconfig, "TMPDIR="+t.TempDir())
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logPath := filepath.Join(t.TempDir(), "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &controller{probe: fmt.Sprintf("http://127.0.0.1:%d", port), exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(40 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("/manager run (%s):\n%s", strings.Join(slices.Sorted(maps.Keys(env)), ", "), tail(string(data)))
		}
	})
	// As the operator's readiness probe.
	waitFor(t, time.Minute, "the controller's /readyz", c.ready)
	return c
}

// ready is the readiness probe's answer.
func (c *controller) ready() (bool, string) {
	select {
	case <-c.exited:
		return false, fmt.Sprintf("exited: %v", c.err)
	default:
	}
	resp, err := http.Get(c.probe + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

// grantLease lets the updater's ServiceAccount hold its Lease in ns, as
// argocd-operator's Role for it there does.
func (u *upstreamWorld) grantLease(t *testing.T, ns string) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-image-updater-lease", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"get", "create", "update"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-image-updater-lease", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "argocd-image-updater", Namespace: testenv.ArgoCDNamespace}},
	}
	if err := u.k.Client.Create(t.Context(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := u.k.Client.Create(t.Context(), binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// cleanEnv is this process's environment without the updater's
// variables, which only the scenario sets.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "IMAGE_UPDATER_") || k == "KUBECONFIG" || k == "TMPDIR" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// tail is the end of a log, enough to read a failure by.
func tail(s string) string {
	const max = 24 << 10
	if len(s) > max {
		return "...\n" + s[len(s)-max:]
	}
	return s
}

// --- objects and waits ---

// createApp creates an Application in ns, of the default project,
// deploying to ns, automatically synced (pruning when prune).
func (u *upstreamWorld) createApp(t *testing.T, ns, name string, labels, annotations map[string]string, sources map[string]any, prune bool) {
	t.Helper()
	u.createAppIn(t, ns, "default", name, labels, annotations, sources, prune)
}

func (u *upstreamWorld) createAppIn(t *testing.T, ns, project, name string, labels, annotations map[string]string, sources map[string]any, prune bool) {
	t.Helper()
	automated := map[string]any{}
	if prune {
		automated["prune"] = true
	}
	spec := map[string]any{
		"project":     project,
		"destination": map[string]any{"server": testenv.InCluster, "namespace": ns},
		"syncPolicy":  map[string]any{"automated": automated},
	}
	maps.Copy(spec, sources)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	u.createObject(t, obj)
	t.Cleanup(func() { u.deleteObject(t, obj) })
}

func (u *upstreamWorld) createImageUpdater(t *testing.T, ns, name string, spec imageupdaterv1alpha1.ImageUpdaterSpec) {
	t.Helper()
	iu := &imageupdaterv1alpha1.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	u.k.Create(t, iu)
	t.Cleanup(func() { _ = u.k.Client.Delete(context.Background(), iu) })
}

// deleteImageUpdater deletes an ImageUpdater and waits until it is gone.
func (u *upstreamWorld) deleteImageUpdater(t *testing.T, ns, name string) {
	t.Helper()
	iu := &imageupdaterv1alpha1.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := u.k.Client.Delete(t.Context(), iu); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "ImageUpdater "+ns+"/"+name+" gone", func() (bool, string) {
		err := u.k.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, iu)
		return apierrors.IsNotFound(err), fmt.Sprint(err, iu.Finalizers)
	})
}

// resource is the client of obj's kind, in its namespace.
func (u *upstreamWorld) resource(t *testing.T, obj *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := obj.GroupVersionKind()
	mapping, err := u.k.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s %s: %v", gvk.Kind, obj.GetName(), err)
	}
	if mapping.Scope.Name() == apimeta.RESTScopeNameNamespace {
		return u.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	return u.dyn.Resource(mapping.Resource)
}

// createObject creates an object of any kind the API server serves.
func (u *upstreamWorld) createObject(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	if _, err := u.resource(t, obj).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}

func (u *upstreamWorld) deleteObject(t *testing.T, obj *unstructured.Unstructured) {
	if err := u.resource(t, obj).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}

// replaceSpec gives an existing object obj's spec, as applying the
// changed file does.
func (u *upstreamWorld) replaceSpec(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	client := u.resource(t, obj)
	current, err := client.Get(t.Context(), obj.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current.Object["spec"] = obj.Object["spec"]
	if _, err := client.Update(t.Context(), current, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}

func (u *upstreamWorld) application(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := u.dyn.Resource(application.Resource()).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func summaryImages(app *unstructured.Unstructured) []string {
	images, _, _ := unstructured.NestedStringSlice(app.Object, "status", "summary", "images")
	return images
}

// waitRunning waits until Application ns/app is synced and the one
// Deployment in destination runs images, which the Application's
// status.summary.images lists: Argo CD applied what was written.
func (u *upstreamWorld) waitRunning(t *testing.T, ns, app, destination string, images ...string) {
	t.Helper()
	u.waitDeployedAs(t, ns, app, destination, func() {}, images...)
}

func (u *upstreamWorld) waitDeployedAs(t *testing.T, ns, app, destination string, refresh func(), images ...string) {
	t.Helper()
	waitFor(t, upstreamTimeout, fmt.Sprintf("Application %s/%s synced, running %s", ns, app, strings.Join(images, ", ")), func() (bool, string) {
		refresh()
		obj := u.application(t, ns, app)
		sync, _, _ := unstructured.NestedString(obj.Object, "status", "sync", "status")
		summary := summaryImages(obj)
		deployed, detail := u.deployment(t, destination)
		var got []string
		if deployed != nil {
			got = testenvImages(deployed)
		}
		ok := sync == "Synced" && slices.Equal(got, images)
		for _, img := range images {
			ok = ok && slices.Contains(summary, img)
		}
		return ok, fmt.Sprintf("sync %s, Deployment %v%s, status.summary.images %v", sync, got, detail, summary)
	})
}

// deployment is the one Deployment in ns.
func (u *upstreamWorld) deployment(t *testing.T, ns string) (*appsv1.Deployment, string) {
	t.Helper()
	list, err := u.cs.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return nil, " (" + err.Error() + ")"
	}
	if len(list.Items) != 1 {
		var names []string
		for _, d := range list.Items {
			names = append(names, d.Name)
		}
		return nil, fmt.Sprintf(" (Deployments in %s: %v)", ns, names)
	}
	return &list.Items[0], ""
}

func testenvImages(d *appsv1.Deployment) []string {
	var images []string
	for _, c := range d.Spec.Template.Spec.Containers {
		images = append(images, c.Image)
	}
	return images
}

// waitGeneration waits until the one Deployment in ns has been observed
// at generation gen.
func (u *upstreamWorld) waitGeneration(t *testing.T, ns string, gen int64) {
	t.Helper()
	waitFor(t, upstreamTimeout, fmt.Sprintf("the Deployment in %s at observedGeneration %d", ns, gen), func() (bool, string) {
		d, detail := u.deployment(t, ns)
		if d == nil {
			return false, detail
		}
		return d.Status.ObservedGeneration == gen && d.Generation == gen, fmt.Sprintf("generation %d, observed %d", d.Generation, d.Status.ObservedGeneration)
	})
}

// refresher returns what upstream's waits call on each poll
// (TriggerArgoCDRefresh): a hard refresh of the Application, every other
// poll of 3 seconds.
func (u *upstreamWorld) refresher(t *testing.T, ns, app string) func() {
	var last time.Time
	return func() {
		if time.Since(last) < 6*time.Second {
			return
		}
		last = time.Now()
		patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"hard"}}}`)
		if _, err := u.dyn.Resource(application.Resource()).Namespace(ns).Patch(t.Context(), app, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Logf("refresh %s/%s: %v", ns, app, err)
		}
	}
}

// waitKustomizeImage waits, refreshing as upstream does, until the first
// Kustomize image of the Application's source is image: what the argocd
// write-back wrote.
func (u *upstreamWorld) waitKustomizeImage(t *testing.T, ns, app, image string) {
	t.Helper()
	refresh := u.refresher(t, ns, app)
	waitFor(t, upstreamTimeout, fmt.Sprintf("spec.source.kustomize.images[0] of %s/%s: %s", ns, app, image), func() (bool, string) {
		refresh()
		got := testenv.KustomizeImages(t, u.application(t, ns, app))
		return len(got) > 0 && got[0] == image, fmt.Sprint(got)
	})
}

// waitUpdated is waitRunning refreshing the Application as upstream's
// waits do: what a git write-back wrote, deployed. Where upstream expects
// the image first in status.summary.images, the Application's
// Deployment running it is expected: no Pod becoming ready here, a
// rolling update never ends and the old Pods stay listed beside the new.
func (u *upstreamWorld) waitUpdated(t *testing.T, ns, app, destination string, images ...string) {
	t.Helper()
	u.waitDeployedAs(t, ns, app, destination, u.refresher(t, ns, app), images...)
}

// waitStatus waits until problems finds none in the ImageUpdater's status.
func (u *upstreamWorld) waitStatus(t *testing.T, ns, name string, problems func(imageupdaterv1alpha1.ImageUpdaterStatus) []string) {
	t.Helper()
	waitFor(t, upstreamTimeout, "the status of ImageUpdater "+ns+"/"+name, func() (bool, string) {
		iu := &imageupdaterv1alpha1.ImageUpdater{}
		if err := u.k.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, iu); err != nil {
			return false, err.Error()
		}
		var found []string
		for _, p := range problems(iu.Status) {
			if p != "" {
				found = append(found, p)
			}
		}
		return len(found) == 0, strings.Join(found, "; ")
	})
}

// matchedStatus is what upstream expects of the status of a resource
// that matched and checked an Application.
func matchedStatus(s imageupdaterv1alpha1.ImageUpdaterStatus) []string {
	return []string{
		check(s.ApplicationsMatched >= 1, fmt.Sprintf("applicationsMatched %d", s.ApplicationsMatched)),
		check(s.ImagesManaged >= 1, fmt.Sprintf("imagesManaged %d", s.ImagesManaged)),
		check(s.LastCheckedAt != nil, "lastCheckedAt unset"),
		check(s.ObservedGeneration > 0, "observedGeneration unset"),
		conditionIs(s, "Ready", metav1.ConditionTrue),
	}
}

// check is problem unless ok.
func check(ok bool, problem string) string {
	if ok {
		return ""
	}
	return problem
}

func conditionIs(s imageupdaterv1alpha1.ImageUpdaterStatus, kind string, want metav1.ConditionStatus) string {
	c := apimeta.FindStatusCondition(s.Conditions, kind)
	if c == nil {
		return "no " + kind + " condition"
	}
	return check(c.Status == want, fmt.Sprintf("%s condition %s (%s: %s), want %s", kind, c.Status, c.Reason, c.Message, want))
}

// waitFor is testenv.WaitFor asking cond at most twice a second: the
// scenarios wait side by side, each asking the API server.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, throttled(cond))
}

// holds fails the test when cond stops holding within d, as upstream's
// Consistently does.
func holds(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	start := time.Now()
	ask := throttled(cond)
	var broken bool
	var detail string
	poll.Until(t, d+time.Minute, what, func() (bool, string) {
		var ok bool
		if ok, detail = ask(); !ok {
			broken = true
			return true, ""
		}
		return time.Since(start) >= d, ""
	})
	if broken {
		t.Fatalf("%s: stopped holding after %s: %s", what, time.Since(start).Round(time.Second), detail)
	}
}

// throttled asks cond at most every half second, answering what it said
// last in between.
func throttled(cond func() (bool, string)) func() (bool, string) {
	var (
		mu     sync.Mutex
		last   time.Time
		ok     bool
		detail = "not asked yet"
	)
	return func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) >= 500*time.Millisecond {
			last = time.Now()
			ok, detail = cond()
		}
		return ok, detail
	}
}
