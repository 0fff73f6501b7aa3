package testenv

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// ArgoCDModule is the module of the Argo CD that `make testbin` builds.
const ArgoCDModule = "github.com/argoproj/argo-cd/v3"

// ArgoCDVersion is the version of the Argo CD that `make testbin` built
// (hack/testbin.sh says why that one).
func ArgoCDVersion(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(assetsDir(t), "argocd.version"))
	if err != nil {
		t.Fatalf("Argo CD version: %v: run `make testbin`", err)
	}
	return strings.TrimSpace(string(data))
}

// WithArgoCDCRDs installs the Application and AppProject CRDs of the Argo
// CD that StartArgoCD runs, in place of the default ones (the
// ApplicationSet CRD: WithApplicationSetCRD).
func WithArgoCDCRDs(t testing.TB) KubeOption {
	t.Helper()
	v := ArgoCDVersion(t)
	return WithCRDs(ArgoCDCRD(t, ArgoCDModule, v), ArgoCDProjectCRD(t, ArgoCDModule, v))
}

// ArgoCD is Argo CD's own application-controller and repo-server, with
// redis, against a Kube, plus a kube-controller-manager so that Deployments
// get ReplicaSets and Pods: Argo CD fills an Application's
// status.summary.images from the Pods of its resource tree. No kubelet
// runs, so Pods stay Pending and health stays Progressing; a Deployment's
// spec is what Argo CD deployed.
type ArgoCD struct {
	Version string
	kube    *Kube
	env     []string
	redis   string
	// repoAddr is where the repo-server listens; it keeps the address
	// across RestartRepoServer.
	repoAddr   string
	repoServer *process
	// controllerArgs and controllerEnv start the application-controller,
	// again after StopController.
	controllerArgs, controllerEnv []string
	controllerMetrics             string
	controller                    *process
	// pluginsDir is where the repo-server looks for plugins' sockets.
	pluginsDir string
	t          testing.TB
}

// ArgoCDOption changes how StartArgoCD runs Argo CD.
type ArgoCDOption func(*argoCDOptions)

type argoCDOptions struct {
	appNamespaces []string
	settings      map[string]string
	controllerEnv []string
}

// WithApplicationNamespaces makes the application-controller manage the
// Applications of these namespaces too (a glob, "*" for all), besides its
// own: Argo CD's "applications in any namespace"
// (--application-namespaces). Their AppProjects must name them in
// sourceNamespaces.
func WithApplicationNamespaces(namespaces ...string) ArgoCDOption {
	return func(o *argoCDOptions) { o.appNamespaces = append(o.appNamespaces, namespaces...) }
}

// WithArgoCDSettings puts these keys into argocd-cm, such as a resource
// health customization (resource.customizations.health.<group>_<kind>).
func WithArgoCDSettings(data map[string]string) ArgoCDOption {
	return func(o *argoCDOptions) { o.settings = data }
}

// WithPersistedResourceHealth has the application-controller keep each
// resource's health, with its message, in the Application's
// status.resources, as Argo CD 2 did and Argo CD 3 does with
// controller.resource.health.persist.
func WithPersistedResourceHealth() ArgoCDOption {
	return func(o *argoCDOptions) {
		o.controllerEnv = append(o.controllerEnv, "ARGOCD_APPLICATION_CONTROLLER_PERSIST_RESOURCE_HEALTH=true")
	}
}

// StartArgoCD starts Argo CD in k's argocd namespace: its settings objects,
// then kube-controller-manager, redis, the repo-server and the
// application-controller, each stopped when t ends. k must have been
// started WithArgoCDCRDs. Applications sync from the repositories that
// AddRepository registers; the AppProjects are the test's to create.
func StartArgoCD(t testing.TB, k *Kube, opts ...ArgoCDOption) *ArgoCD {
	t.Helper()
	var o argoCDOptions
	for _, opt := range opts {
		opt(&o)
	}
	a := &ArgoCD{Version: ArgoCDVersion(t), kube: k, t: t}
	dir := t.TempDir()
	kubeconfig := WriteKubeconfig(t, k.Config, ArgoCDNamespace)

	// Argo CD reads only settings labelled as its own.
	part := map[string]string{"app.kubernetes.io/part-of": "argocd"}
	k.Create(t,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: ArgoCDNamespace, Labels: part}, Data: o.settings},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-rbac-cm", Namespace: ArgoCDNamespace, Labels: part}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: ArgoCDNamespace, Labels: part},
			StringData: map[string]string{"server.secretkey": randomString(t, 24)}},
	)

	k.StartControllerManager(t)

	redisPort := FreePort(t)
	a.redis = loopback(redisPort)
	redis := startProcess(t, "redis", exec.Command("redis-server", "--port", fmt.Sprint(redisPort), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", dir))
	if err := redis.waitFor(30*time.Second, func() error { return dial(a.redis) }); err != nil {
		t.Fatal(err)
	}

	// The repo-server runs kustomize, helm and "argocd" (as GIT_ASKPASS)
	// from PATH. Argo CD's data folders default to /app/config; each gets
	// an empty folder of this run's, and the askpass socket its own path
	// (the default is one fixed path that a second repo-server on the
	// machine would take over).
	config := filepath.Join(dir, "app-config")
	a.pluginsDir = filepath.Join(config, "plugins")
	for _, d := range []string{"tls", "ssh", "gpg/keys", "gpg/source", "plugins", "home", "tmp"} {
		if err := os.MkdirAll(filepath.Join(config, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	a.env = append(os.Environ(),
		"PATH="+assetsDir(t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+filepath.Join(config, "home"),
		"TMPDIR="+filepath.Join(config, "tmp"),
		"ARGOCD_GPG_ENABLED=false",
		"ARGOCD_APP_CONFIG_PATH="+config,
		"ARGOCD_TLS_DATA_PATH="+filepath.Join(config, "tls"),
		"ARGOCD_SSH_DATA_PATH="+filepath.Join(config, "ssh"),
		"ARGOCD_GNUPGHOME="+filepath.Join(config, "gpg/keys"),
		"ARGOCD_GPG_DATA_PATH="+filepath.Join(config, "gpg/source"),
		"ARGOCD_PLUGINSOCKFILEPATH="+a.pluginsDir,
		"ARGOCD_ASK_PASS_SOCK="+filepath.Join(dir, "askpass.sock"),
	)
	a.repoAddr = loopback(FreePort(t))
	a.StartRepoServer(t)

	a.controllerMetrics = loopback(FreePort(t))
	a.controllerArgs = []string{"--kubeconfig", kubeconfig, "--namespace", ArgoCDNamespace,
		"--repo-server", a.repoAddr, "--repo-server-plaintext", "--redis", a.redis,
		"--metrics-port", strings.TrimPrefix(a.controllerMetrics, "127.0.0.1:"), "--loglevel", "info"}
	if len(o.appNamespaces) > 0 {
		a.controllerArgs = append(a.controllerArgs, "--application-namespaces", strings.Join(o.appNamespaces, ","))
	}
	// "in-cluster" (https://kubernetes.default.svc) is this API server.
	a.controllerEnv = slices.Concat(a.env, []string{"KUBECONFIG=" + kubeconfig, "ARGOCD_FAKE_IN_CLUSTER=true"}, o.controllerEnv)
	a.StartController(t)
	return a
}

// StartController starts the application-controller, as it was before
// when StopController stopped it, and waits until it serves /healthz.
func (a *ArgoCD) StartController(t testing.TB) {
	t.Helper()
	cmd := exec.Command(binary(t, "argocd-application-controller"), a.controllerArgs...)
	cmd.Env = a.controllerEnv
	a.controller = startProcess(a.t, "argocd-application-controller", cmd)
	if err := a.controller.waitFor(time.Minute, func() error { return httpOK("http://" + a.controllerMetrics + "/healthz") }); err != nil {
		t.Fatal(err)
	}
}

// StartNotifications starts Argo CD's notifications controller for the
// Applications of the argocd namespace, with config as its
// argocd-notifications-cm (triggers, templates, services) and secret as
// its argocd-notifications-secret, and waits until it serves its metrics.
// Stopped when t ends.
func (a *ArgoCD) StartNotifications(t testing.TB, config, secret map[string]string) {
	t.Helper()
	part := map[string]string{"app.kubernetes.io/part-of": "argocd"}
	a.kube.Create(t,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-notifications-cm", Namespace: ArgoCDNamespace, Labels: part}, Data: config},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-notifications-secret", Namespace: ArgoCDNamespace, Labels: part}, StringData: secret},
	)
	metrics := FreePort(t)
	cmd := exec.Command(binary(t, "argocd-notifications"),
		"--kubeconfig", WriteKubeconfig(t, a.kube.Config, ArgoCDNamespace), "--namespace", ArgoCDNamespace,
		"--argocd-repo-server", a.repoAddr, "--argocd-repo-server-plaintext",
		"--metrics-port", fmt.Sprint(metrics), "--loglevel", "info", "--logformat", "text")
	cmd.Env = a.env
	p := startProcess(t, "argocd-notifications", cmd)
	if err := p.waitFor(time.Minute, func() error { return httpOK("http://" + loopback(metrics) + "/metrics") }); err != nil {
		t.Fatal(err)
	}
}

// StartApplicationSets starts Argo CD's ApplicationSet controller for the
// ApplicationSets of the argocd namespace, with policy sync (it creates,
// updates and deletes the Applications it renders), and waits until it
// serves its metrics. Stopped when t ends.
func (a *ArgoCD) StartApplicationSets(t testing.TB) {
	t.Helper()
	kubeconfig := WriteKubeconfig(t, a.kube.Config, ArgoCDNamespace)
	metrics := loopback(FreePort(t))
	// The probe server (it registers no checks, so it answers 404) and
	// the webhook server always start; their defaults (:8081, :7000 on
	// every interface) would clash with another run's.
	cmd := exec.Command(binary(t, "argocd-applicationset-controller"),
		"--kubeconfig", kubeconfig, "--namespace", ArgoCDNamespace,
		"--argocd-repo-server", a.repoAddr, "--repo-server-plaintext",
		"--metrics-addr", metrics, "--probe-addr", loopback(FreePort(t)), "--webhook-addr", loopback(FreePort(t)),
		"--enable-leader-election=false", "--policy", "sync", "--loglevel", "info", "--logformat", "text")
	// Its controller-runtime manager takes its client from KUBECONFIG: the
	// command does not parse controller-runtime's own --kubeconfig flag.
	cmd.Env = append(slices.Clone(a.env), "KUBECONFIG="+kubeconfig)
	p := startProcess(t, "argocd-applicationset-controller", cmd)
	if err := p.waitFor(time.Minute, func() error { return httpOK("http://" + metrics + "/metrics") }); err != nil {
		t.Fatal(err)
	}
}

// StopController stops the application-controller, as a rollout or a
// crash would: the Applications' status stays what it last wrote.
func (a *ArgoCD) StopController() { a.controller.stop() }

// StartControllerManager runs the kube-controller-manager's Deployment,
// ReplicaSet and garbage collector controllers against k, so that
// Deployments get ReplicaSets and Pods, from which Argo CD takes the
// images it lists in status.summary.images.
func (k *Kube) StartControllerManager(t testing.TB) {
	t.Helper()
	startProcess(t, "kube-controller-manager", exec.Command(binary(t, "kube-controller-manager"),
		"--kubeconfig="+WriteKubeconfig(t, k.Config, "default"), "--leader-elect=false", "--secure-port=0",
		"--controllers=deployment-controller,replicaset-controller,garbage-collector-controller",
		"--use-service-account-credentials=false"))
}

// StartRepoServer starts the repo-server, on the address it had before
// when StopRepoServer stopped it.
func (a *ArgoCD) StartRepoServer(t testing.TB) {
	t.Helper()
	cmd := exec.Command(binary(t, "argocd-repo-server"),
		"--address", "127.0.0.1", "--port", strings.TrimPrefix(a.repoAddr, "127.0.0.1:"),
		"--metrics-address", "127.0.0.1", "--metrics-port", fmt.Sprint(FreePort(t)),
		"--disable-tls", "--redis", a.redis, "--loglevel", "info")
	cmd.Env = a.env
	a.repoServer = startProcess(a.t, "argocd-repo-server", cmd)
	if err := a.repoServer.waitFor(time.Minute, func() error { return dial(a.repoAddr) }); err != nil {
		t.Fatal(err)
	}
}

// StopRepoServer stops the repo-server, as a crash or a rollout would.
func (a *ArgoCD) StopRepoServer() { a.repoServer.stop() }

// StartPlugin runs a config management plugin as the repo-server's sidecar
// would: Argo CD's plugin server with config (a ConfigManagementPlugin, as
// plugin.yaml holds it) in its configuration folder, listening on a socket
// in the folder the repo-server finds plugins in. Stopped when t ends.
func (a *ArgoCD) StartPlugin(t testing.TB, config string) {
	t.Helper()
	var plugin struct {
		Metadata struct{ Name string }
		Spec     struct{ Version string }
	}
	if err := yaml.Unmarshal([]byte(config), &plugin); err != nil || plugin.Metadata.Name == "" {
		t.Fatalf("plugin configuration without metadata.name (%v):\n%s", err, config)
	}
	socket := plugin.Metadata.Name + ".sock"
	if plugin.Spec.Version != "" {
		socket = plugin.Metadata.Name + "-" + plugin.Spec.Version + ".sock"
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "plugin.yaml"), config)
	cmd := exec.Command(binary(t, "argocd-cmp-server"), "--config-dir-path", dir, "--loglevel", "info")
	cmd.Env = a.env
	p := startProcess(t, "argocd-cmp-server "+plugin.Metadata.Name, cmd)
	path := filepath.Join(a.pluginsDir, socket)
	if err := p.waitFor(time.Minute, func() error { _, err := os.Stat(path); return err }); err != nil {
		t.Fatal(err)
	}
}

// AddRepository registers a git repository with its credentials as Argo CD
// keeps them: a Secret labelled as a repository in the argocd namespace,
// which the updater's git write-back reads too.
func (a *ArgoCD) AddRepository(t testing.TB, name, url, username, password string) {
	t.Helper()
	a.kube.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ArgoCDNamespace,
			Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
		StringData: map[string]string{"type": "git", "url": url, "username": username, "password": password},
	})
}

// AddCluster registers another API server as an external cluster named
// name, as Argo CD keeps one: a Secret labelled as a cluster, with the
// client certificate envtest made for that API server, or the bearer
// token of other's Config when it has one (a ServiceAccount's, through a
// proxy that does not pass client certificates on). It returns the
// server URL that Applications name as their destination.
func (a *ArgoCD) AddCluster(t testing.TB, name string, other *Kube) string {
	t.Helper()
	creds := map[string]any{"tlsClientConfig": map[string]any{
		"insecure": true,
		"certData": base64.StdEncoding.EncodeToString(other.Config.CertData),
		"keyData":  base64.StdEncoding.EncodeToString(other.Config.KeyData),
	}}
	if other.Config.BearerToken != "" {
		creds = map[string]any{"bearerToken": other.Config.BearerToken, "tlsClientConfig": map[string]any{"insecure": true}}
	}
	config, err := json.Marshal(creds)
	if err != nil {
		t.Fatal(err)
	}
	// Argo CD matches destinations to clusters by the exact string.
	server := strings.TrimSuffix(other.Config.Host, "/")
	if !strings.HasPrefix(server, "https://") {
		server = "https://" + server
	}
	a.kube.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-" + name, Namespace: ArgoCDNamespace,
			Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster"}},
		StringData: map[string]string{"name": name, "server": server, "config": string(config)},
	})
	return server
}

// SyncedApplication is an Application of the default project in the argocd
// namespace that Argo CD syncs automatically (pruning, healing) into the
// namespace of its name on the cluster whose API server is server. sources
// holds spec.source or spec.sources; annotations are set as given.
func SyncedApplication(name, server string, sources map[string]any, annotations map[string]string) *unstructured.Unstructured {
	spec := map[string]any{
		"project":     "default",
		"destination": map[string]any{"server": server, "namespace": name},
		"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}},
	}
	maps.Copy(spec, sources)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": ArgoCDNamespace},
		"spec":     spec,
	}}
	obj.SetAnnotations(annotations)
	return obj
}

// InCluster is the server of Argo CD's own cluster.
const InCluster = "https://kubernetes.default.svc"

// DeploymentImages are the images of a Deployment's containers, in order;
// nil while it does not exist.
func DeploymentImages(ctx context.Context, cs kubernetes.Interface, namespace, name string) []string {
	d, err := cs.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return containerImages(d)
}

func containerImages(d *appsv1.Deployment) []string {
	var images []string
	for _, c := range d.Spec.Template.Spec.Containers {
		images = append(images, c.Image)
	}
	return images
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

func httpOK(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// OddMinorHealth is a resource health customization of Deployments
// (resource.customizations.health.apps_Deployment, with useOpenLibs for
// Lua's string library), for tests where no kubelet runs Pods: a
// container whose image ends in before + ":<major>.<minor>.<patch>" with
// an odd minor (1.1.0, 1.3.0) "crashes on start", which makes the
// Deployment, and so its Application, Degraded; any other is Healthy.
// before is a Lua pattern ("/shop"), "" for any image.
func OddMinorHealth(before string) string {
	return `hs = {status = "Healthy", message = "every container starts"}
if obj.spec ~= nil and obj.spec.template ~= nil and obj.spec.template.spec ~= nil and obj.spec.template.spec.containers ~= nil then
  for _, c in ipairs(obj.spec.template.spec.containers) do
    local minor = string.match(c.image, "` + before + `:%d+%.(%d+)%.%d+$")
    if minor ~= nil and tonumber(minor) % 2 == 1 then
      hs.status = "Degraded"
      hs.message = "container " .. c.name .. " (" .. c.image .. ") crashes on start"
      return hs
    end
  end
end
return hs
`
}
