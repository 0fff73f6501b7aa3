// Package demo runs the updater end to end, as `make demo` shows it: a
// real API server, registry and git server on this machine with the real
// Argo CD deploying from them, Applications like those of a typical EKS
// setup (two images updated by semver, one written back to the
// Application, one committed to Git, one proposed in a pull request to a
// stand-in of GitHub's API), new tags pushed, and the real binary run once
// against them, until Argo CD deploys what it wrote; then the binary runs
// with the webhook endpoint on and a long interval, and a push the
// registry notifies is running in the Deployments within seconds. Last,
// safe versions: staging takes each version first under its health gate,
// production only what staging ran and verified, and an Application with
// a minimum release age waits.
package demo

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	imageupdaterv1alpha1 "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/healthgate"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"

	"github.com/image-updater/argocd-image-updater/test/poll"
)

// say prints to the demo's output.
func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func TestDemo(t *testing.T) {
	start := time.Now()
	bin := testenv.UpdaterBinary(t)

	say("Starting a Kubernetes API server, Argo CD, a container registry and a git server on this machine...")
	k := testenv.StartKube(t, testenv.WithArgoCDCRDs(t), testenv.WithImageUpdaterCRD(imageupdaterv1alpha1.AddToScheme))
	argo := testenv.StartArgoCD(t, k,
		// No kubelet runs Pods here: the health of the shop's Deployments
		// (the third part) is a resource health customization, in which
		// a version of odd minor (1.1.0) crashes on start.
		testenv.WithArgoCDSettings(map[string]string{
			"resource.customizations.health.apps_Deployment":      shopHealth,
			"resource.customizations.useOpenLibs.apps_Deployment": "true",
		}),
		testenv.WithPersistedResourceHealth())
	// The registry notifies the endpoint the updater serves in the second
	// part, as a Distribution registry's notifications.endpoints does.
	webhookPort := testenv.FreePort(t)
	const webhookSecret = "demo-webhook-secret"
	reg := testenv.StartRegistry(t, testenv.WithNotifications(
		fmt.Sprintf("http://127.0.0.1:%d/webhook?type=distribution", webhookPort),
		map[string]string{"Authorization": "Bearer " + webhookSecret}))
	gitServer := testenv.StartGitServer(t)
	say("  API server %s, Argo CD %s (application-controller, repo-server), registry %s, git %s (%s)",
		k.Config.Host, argo.Version, reg.Host, gitServer.HTTPURL, time.Since(start).Round(100*time.Millisecond))

	app, web := reg.Repo("eks-app"), reg.Repo("eks-web")
	reg.PushImage(t, "eks-app", []string{"v0.0.1"})
	reg.PushImage(t, "eks-web", []string{"v0.0.1"})
	fixture := strings.NewReplacer("REGISTRY", reg.Host)
	front, err := os.ReadFile(filepath.Join("fixture", "main", "base", "front.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gitServer.CreateRepo(t, "deploy", "fixture", map[string]string{"main/base/front.yaml": fixture.Replace(string(front))})
	// A repository whose main branch takes reviewed changes only.
	gitServer.CreateRepo(t, "example/reviewed", "fixture", map[string]string{"main/base/front.yaml": fixture.Replace(string(front))})
	ca := testenv.NewCA(t, "demo CA")
	github := testenv.StartGitHubAPI(t, ca, nil)
	github.AcceptToken(gitServer.Password)
	github.RequireBranches(func(project, branch string) bool { return slices.Contains(gitServer.Branches(t, project), branch) })
	say("  GitHub API stand-in %s", github.URL)

	installRBAC(t, k)
	// Argo CD's default project, which allows every repository.
	k.CreateAppProject(t, testenv.ArgoCDNamespace, "default", []string{"*"}, nil)
	kubeconfig := testenv.WriteKubeconfig(t, k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater"), testenv.ArgoCDNamespace)
	dyn := dynamic.NewForConfigOrDie(k.Config)
	for name, repo := range map[string]string{"repo-deploy": "deploy", "repo-reviewed": "example/reviewed"} {
		k.Create(t, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testenv.ArgoCDNamespace,
				Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
			StringData: map[string]string{"url": gitServer.HTTPRepoURL(repo), "username": gitServer.Username, "password": gitServer.Password},
		})
	}
	// The stand-in's certificate, as Argo CD keeps it.
	k.Create(t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-tls-certs-cm", Namespace: testenv.ArgoCDNamespace},
		Data:       map[string]string{"127.0.0.1": string(ca.PEM)},
	})
	createApp(t, k, dyn, "main", gitServer.HTTPRepoURL("deploy"), map[string]string{
		"image-list":          "app=" + app + ",web=" + web,
		"app.update-strategy": "semver",
		"web.update-strategy": "semver",
		"write-back-method":   "argocd",
	})
	createApp(t, k, dyn, "main-git", gitServer.HTTPRepoURL("deploy"), map[string]string{
		"image-list":          "app=" + app + ",web=" + web,
		"app.update-strategy": "semver",
		"web.update-strategy": "semver",
		"write-back-method":   "git",
		"write-back-target":   "kustomization",
		"git-branch":          "main",
	})
	createApp(t, k, dyn, "main-reviewed", gitServer.HTTPRepoURL("example/reviewed"), map[string]string{
		"image-list":        "app=" + app + ",web=" + web,
		"write-back-method": "git",
		"write-back-target": "kustomization",
		"git-branch":        "main:image-updates",
		"git-pull-request":  "github",
	})

	// The same two images, configured by an ImageUpdater resource instead
	// of annotations.
	createApp(t, k, dyn, "main-resource", gitServer.HTTPRepoURL("deploy"), nil)
	k.Create(t, &imageupdaterv1alpha1.ImageUpdater{
		ObjectMeta: metav1.ObjectMeta{Name: "main-resource", Namespace: testenv.ArgoCDNamespace},
		Spec: imageupdaterv1alpha1.ImageUpdaterSpec{
			CommonUpdateSettings: &imageupdaterv1alpha1.CommonUpdateSettings{UpdateStrategy: ptr.To("semver")},
			ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{
				NamePattern: "main-resource",
				Images: []imageupdaterv1alpha1.ImageConfig{
					{Alias: "app", ImageName: app},
					{Alias: "web", ImageName: web},
				},
			}},
		},
	})
	say("\nApplications: main (annotations, argocd write-back), main-git (annotations, git write-back),")
	say("main-reviewed (annotations, a pull request), main-resource (no annotations: the ImageUpdater")
	say("main-resource configures it). Each deploys the Deployment front into the namespace of its name.")
	cs := kubernetes.NewForConfigOrDie(k.Config)
	deployed := deployments(t, cs, app, web)
	poll.True(t, 90*time.Second, "Argo CD's first sync", func() bool {
		return deployed().all(app+":v0.0.1", web+":v0.0.1") && summariesFilled(t, dyn, 2)
	})
	say("Argo CD synced them:")
	deployed().print()

	say("\nNew images are pushed: eks-app v0.0.2, v0.1.0 (and v1.0.0-rc.1, a pre-release); eks-web v0.0.2, v0.0.3.")
	reg.PushImage(t, "eks-app", []string{"v0.0.2"})
	reg.PushImage(t, "eks-app", []string{"v0.1.0"})
	reg.PushImage(t, "eks-app", []string{"v1.0.0-rc.1"})
	reg.PushImage(t, "eks-web", []string{"v0.0.2"})
	reg.PushImage(t, "eks-web", []string{"v0.0.3"})

	conf := filepath.Join(t.TempDir(), "registries.conf")
	writeFile(t, conf, fmt.Sprintf("registries:\n- name: demo\n  prefix: %s\n  api_url: http://%s\n  credentials: env:REGISTRY_CREDS\n", reg.Host, reg.Host))
	before := versions(t, dyn, gitServer, app, web)

	say("\nRunning: argocd-image-updater run --once (as the ServiceAccount of manifests/install.yaml)")
	cmd := exec.CommandContext(t.Context(), bin, "run", "--once", "--kubeconfig", kubeconfig, "--registries-conf-path", conf,
		"--health-port", "0", "--metrics-port", "0", "--loglevel", "info", "--github-enterprise-api-url", github.URL)
	// The clones go to the test's own folder, not the machine's TMPDIR.
	cmd.Env = append(os.Environ(), "REGISTRY_CREDS="+reg.Username+":"+reg.Password, "IMAGE_UPDATER_GIT_CLONE_DIR="+t.TempDir())
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	runStart := time.Now()
	err = cmd.Run()
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		say("  | %s", line)
	}
	if err != nil {
		t.Fatalf("the updater failed: %v", err)
	}
	say("  (took %s)", time.Since(runStart).Round(10*time.Millisecond))

	after := versions(t, dyn, gitServer, app, web)
	say("\nWhat changed:")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  APPLICATION\tWRITE-BACK\tIMAGE\tBEFORE\tAFTER")
	for _, key := range slices.Sorted(maps.Keys(after)) {
		row := after[key]
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", row.app, row.method, row.image, before[row.key()].tag, row.tag)
	}
	tw.Flush()

	say("\nArgo CD deploys what was written: the patched Applications at once, the commit as soon as the")
	say("updater's refresh of main-git tells Argo CD; main-reviewed waits for its pull request.")
	written := time.Now()
	poll.True(t, 90*time.Second, "Argo CD deploying the new versions", func() bool {
		d := deployed()
		return d.only([]string{"main", "main-git", "main-resource"}, app+":v0.1.0", web+":v0.0.3") && d.only([]string{"main-reviewed"}, app+":v0.0.1", web+":v0.0.1")
	})
	say("  (%s after the updater finished)", time.Since(written).Round(10*time.Millisecond))
	deployed().print()

	iu := &imageupdaterv1alpha1.ImageUpdater{}
	if err := k.Client.Get(t.Context(), client.ObjectKey{Namespace: testenv.ArgoCDNamespace, Name: "main-resource"}, iu); err != nil {
		t.Fatal(err)
	}
	ready := ""
	for _, c := range iu.Status.Conditions {
		if c.Type == "Ready" {
			ready = string(c.Status) + " (" + c.Reason + ")"
		}
	}
	say("\nkubectl get imageupdaters -n %s:", testenv.ArgoCDNamespace)
	tw = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tAPPS\tIMAGES\tREADY\tRECENT UPDATES")
	var recent []string
	for _, u := range iu.Status.RecentUpdates {
		recent = append(recent, u.Alias+" "+u.NewVersion)
	}
	fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\n", iu.Name, iu.Status.ApplicationsMatched, iu.Status.ImagesManaged, ready, strings.Join(recent, ", "))
	tw.Flush()

	log := gitServer.Log(t, "deploy", "main")
	say("\nThe commit pushed to %s (branch main):", gitServer.HTTPRepoURL("deploy"))
	say("  commit %s\n  Author: %s <%s>\n\n    %s\n", log[0].Hash, log[0].Author, log[0].Email, log[0].Subject)
	for _, line := range strings.Split(log[0].Body, "\n") {
		say("    %s", line)
	}
	say("\n  main/overlays/production/kustomization.yaml now reads:")
	for _, line := range strings.Split(strings.TrimRight(gitServer.ReadFile(t, "deploy", "main", "main/overlays/production/kustomization.yaml"), "\n"), "\n") {
		say("    %s", line)
	}
	reviews := github.Reviews("example/reviewed")
	say("\nThe pull request opened on the GitHub stand-in for main-reviewed (%s):", gitServer.HTTPRepoURL("example/reviewed"))
	for _, r := range reviews {
		say("  #%d %s -> %s (%s)\n\n    %s\n", r.Number, r.Head, r.Base, r.State, r.Title)
		for _, line := range strings.Split(r.Body, "\n") {
			say("    %s", line)
		}
	}
	if len(reviews) != 1 || reviews[0].Head != "image-updates" || !strings.Contains(reviews[0].Body, "to 'v0.1.0'") {
		t.Errorf("pull requests %+v, want one from image-updates moving eks-app to v0.1.0", reviews)
	}
	if n := len(gitServer.Log(t, "example/reviewed", "main")); n != 1 {
		t.Errorf("main of the reviewed repository has %d commits, want the initial one only", n)
	}
	// The demo is also a test: the versions must be the ones semver picks.
	if len(after) != 6 {
		t.Errorf("%d images shown, want 6 (two per Application)", len(after))
	}
	if iu.Status.ApplicationsMatched != 1 || len(iu.Status.RecentUpdates) != 2 {
		t.Errorf("ImageUpdater status %+v, want one Application and two updates", iu.Status)
	}
	for _, row := range after {
		want := map[string]string{app: "v0.1.0", web: "v0.0.3"}[row.image]
		if row.tag != want {
			t.Errorf("%s %s is %q after the run, want %q", row.app, row.image, row.tag, want)
		}
	}

	say("\nRunning: argocd-image-updater run --enable-webhook --interval 1h (the registry notifies http://127.0.0.1:%d/webhook?type=distribution)", webhookPort)
	var webhookLogs testenv.SyncBuffer
	controller := exec.CommandContext(t.Context(), bin, "run", "--enable-webhook", "--webhook-port", strconv.Itoa(webhookPort),
		"--interval", "1h", "--kubeconfig", kubeconfig, "--registries-conf-path", conf,
		"--health-port", "0", "--metrics-port", "0", "--loglevel", "info", "--github-enterprise-api-url", github.URL)
	controller.Env = append(os.Environ(), "REGISTRY_CREDS="+reg.Username+":"+reg.Password, "IMAGE_UPDATER_GIT_CLONE_DIR="+t.TempDir(),
		"DISTRIBUTION_WEBHOOK_SECRET="+webhookSecret)
	controller.Stdout, controller.Stderr = &webhookLogs, &webhookLogs
	controller.Cancel = func() error { return controller.Process.Signal(syscall.SIGTERM) }
	controller.WaitDelay = 30 * time.Second
	if err := controller.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = controller.Process.Signal(syscall.SIGTERM)
			_ = controller.Wait()
		}
	}
	t.Cleanup(stop)
	// Ready when the first cycle, which finds nothing new, has run.
	poll.True(t, 60*time.Second, "the first cycle", func() bool { return strings.Contains(webhookLogs.String(), "cycle finished") })

	say("  eks-app v0.2.0 is pushed...")
	reg.PushImage(t, "eks-app", []string{"v0.2.0"})
	pushed := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the updater's output:\n%s", webhookLogs.String())
		}
	})
	poll.True(t, 30*time.Second, "the update after the push", func() bool {
		for _, row := range versions(t, dyn, gitServer, app) {
			if row.image == app && row.tag != "v0.2.0" {
				return false
			}
		}
		return true
	})
	delay := time.Since(pushed)
	poll.True(t, 60*time.Second, "Argo CD deploying v0.2.0", func() bool {
		return deployed().only([]string{"main", "main-git", "main-resource"}, app+":v0.2.0", web+":v0.0.3")
	})
	running := time.Since(pushed)
	stop()
	for _, line := range strings.Split(strings.TrimSpace(webhookLogs.String()), "\n") {
		if strings.Contains(line, "notification") || strings.Contains(line, "wrote back") || strings.Contains(line, "pushed new") {
			say("  | %s", line)
		}
	}
	say("  (The registry kept the notifications of the earlier pushes while nothing listened, and delivers them too;")
	say("  those that arrive while a check runs are checked together by the next.)")
	say("  Every Application of eks-app was written v0.2.0 %s after the push, though the next cycle is an hour away;", delay.Round(10*time.Millisecond))
	say("  Argo CD's Deployments run it %s after the push:", running.Round(10*time.Millisecond))
	deployed().print()

	safeVersions(t, k, dyn, cs, reg, gitServer, kubeconfig, conf, bin)

	say("\nDone in %s; everything the demo started is stopped as it exits.", time.Since(start).Round(100*time.Millisecond))
}

// shopHealth is Argo CD's health of a Deployment in the demo: a
// container of the shop image whose tag has an odd minor version is
// Degraded.
var shopHealth = testenv.OddMinorHealth("/shop")

// safeVersions is the demo's third part: staging takes each new version
// first under its health gate, production takes only what staging ran
// and verified, a version that breaks staging is written back there and
// never reaches production, and an Application with a minimum release
// age waits.
func safeVersions(t *testing.T, k *testenv.Kube, dyn dynamic.Interface, cs kubernetes.Interface, reg *testenv.Registry, gitServer *testenv.GitServer, kubeconfig, conf, bin string) {
	shop := reg.Repo("shop")
	reg.PushImage(t, "shop", []string{"v0.0.1"})
	front, err := os.ReadFile(filepath.Join("fixture", "main", "base", "front.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	oneContainer := strings.Split(string(front), "      - name: web")[0]
	gitServer.CreateRepo(t, "shop", "fixture", map[string]string{"main/base/front.yaml": strings.ReplaceAll(oneContainer, "REGISTRY/eks-app", shop)})
	k.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "repo-shop", Namespace: testenv.ArgoCDNamespace,
			Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
		StringData: map[string]string{"url": gitServer.HTTPRepoURL("shop"), "username": gitServer.Username, "password": gitServer.Password},
	})
	apps := []string{"shop-staging", "shop-production", "shop-weekly"}
	for _, name := range apps {
		annotations := map[string]string{"image-list": "app=" + shop, "write-back-method": "argocd", "health-gate": "10s"}
		switch name {
		case "shop-production":
			annotations["app.promote-from"] = "shop-staging"
		case "shop-weekly":
			annotations["minimum-release-age"] = "7d"
		}
		createApp(t, k, dyn, name, gitServer.HTTPRepoURL("shop"), annotations)
	}
	say("\nSafe versions. shop-staging takes each new version of %s first, under a health gate of 10s;", shop)
	say("shop-production (promote-from: shop-staging) takes only what staging runs and verified;")
	say("shop-weekly (minimum-release-age: 7d) takes a version a week after it first appeared. Here a")
	say("version of odd minor (1.1.0) crashes on start, as Argo CD's health of the Deployment says.")
	running := func() map[string][]string {
		out := map[string][]string{}
		for _, name := range apps {
			out[name] = testenv.DeploymentImages(t.Context(), cs, name, "front")
		}
		return out
	}
	runs := func(want map[string]string) func() bool {
		return func() bool {
			got := running()
			for name, tag := range want {
				if !slices.Equal(got[name], []string{shop + ":" + tag}) {
					return false
				}
			}
			return true
		}
	}
	poll.True(t, 90*time.Second, "Argo CD's first sync of the shop", runs(map[string]string{"shop-staging": "v0.0.1", "shop-production": "v0.0.1", "shop-weekly": "v0.0.1"}))

	var logs testenv.SyncBuffer
	controller := exec.CommandContext(t.Context(), bin, "run", "--interval", "5s", "--kubeconfig", kubeconfig, "--registries-conf-path", conf,
		"--health-port", "0", "--metrics-port", "0", "--loglevel", "info", "--match-application-name", "shop-*")
	controller.Env = append(os.Environ(), "REGISTRY_CREDS="+reg.Username+":"+reg.Password, "IMAGE_UPDATER_GIT_CLONE_DIR="+t.TempDir())
	controller.Stdout, controller.Stderr = &logs, &logs
	controller.Cancel = func() error { return controller.Process.Signal(syscall.SIGTERM) }
	controller.WaitDelay = 30 * time.Second
	say("\nRunning: argocd-image-updater run --interval 5s --match-application-name 'shop-*'")
	if err := controller.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = controller.Process.Signal(syscall.SIGTERM)
		_ = controller.Wait()
		if t.Failed() {
			t.Logf("the updater's output:\n%s", logs.String())
		}
	})
	begin := time.Now()
	shown := map[string]bool{}
	// events prints the updater's events on the shop's Applications not
	// printed yet, oldest first.
	events := func() {
		type line struct {
			rv   int
			text string
		}
		var lines []line
		for _, name := range apps {
			evs, err := cs.CoreV1().Events(testenv.ArgoCDNamespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs.Items {
				if e.Source.Component != "argocd-image-updater" || shown[string(e.UID)] {
					continue
				}
				shown[string(e.UID)] = true
				// In the order they were recorded: the resource versions
				// of one etcd grow.
				rv, _ := strconv.Atoi(e.ResourceVersion)
				lines = append(lines, line{rv, fmt.Sprintf("%s  %-16s %-8s %s: %s", e.FirstTimestamp.Format("15:04:05"), name, e.Type, e.Reason, e.Message)})
			}
		}
		slices.SortFunc(lines, func(a, b line) int { return a.rv - b.rv })
		for _, l := range lines {
			say("  %s", l.text)
		}
	}
	step := func(what string, want map[string]string) {
		poll.True(t, 3*time.Minute, what, runs(want))
		events()
		say("  -> %s (%s in)", what, time.Since(begin).Round(time.Second))
	}

	say("\nshop 1.0.0 is pushed.")
	reg.PushImage(t, "shop", []string{"1.0.0"})
	step("staging verified 1.0.0, production took it after it", map[string]string{"shop-staging": "1.0.0", "shop-production": "1.0.0", "shop-weekly": "v0.0.1"})

	say("\nshop 1.1.0 is pushed; it crashes on start.")
	reg.PushImage(t, "shop", []string{"1.1.0"})
	poll.True(t, 3*time.Minute, "staging's gate writing 1.0.0 back", func() bool {
		obj, err := dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), "shop-staging", metav1.GetOptions{})
		if err != nil {
			return false
		}
		st, err := healthgate.ParseState(obj.GetAnnotations()[healthgate.StateAnnotation])
		return err == nil && slices.ContainsFunc(st.Records, func(r imageupdaterv1alpha1.HealthGateRecord) bool {
			return r.Version == "1.1.0" && r.State == imageupdaterv1alpha1.HealthGateReverted
		})
	})
	step("staging is back on 1.0.0; production never ran 1.1.0", map[string]string{"shop-staging": "1.0.0", "shop-production": "1.0.0"})

	say("\nshop 1.2.0 is pushed.")
	reg.PushImage(t, "shop", []string{"1.2.0"})
	step("staging verified 1.2.0, then production took it; shop-weekly still waits", map[string]string{"shop-staging": "1.2.0", "shop-production": "1.2.0", "shop-weekly": "v0.0.1"})

	say("\n  kubectl get deployment front -n <application> (the images Argo CD deployed)")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, name := range apps {
		fmt.Fprintf(tw, "  %s\t%s\n", name, strings.Join(running()[name], "  "))
	}
	tw.Flush()
	// The demo is also a test of what it shows.
	evs, err := cs.CoreV1().Events(testenv.ArgoCDNamespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=shop-production"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Reason == "ImagesUpdated" && strings.Contains(e.Message, "1.1.0") {
			t.Errorf("production was written 1.1.0: %s", e.Message)
		}
	}
}

type row struct{ app, method, image, tag string }

func (r row) key() string { return r.app + " " + r.image }

// versions reads what each Application sets for each image: the
// Application's own override (argocd) or the kustomization in Git (git),
// falling back to what runs.
func versions(t *testing.T, dyn dynamic.Interface, g *testenv.GitServer, images ...string) map[string]row {
	t.Helper()
	out := map[string]row{}
	kust := g.ReadFile(t, "deploy", "main", "main/overlays/production/kustomization.yaml")
	var k struct {
		Images []struct{ Name, NewTag string } `json:"images"`
	}
	if err := yaml.Unmarshal([]byte(kust), &k); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"main", "main-git", "main-resource"} {
		obj, err := dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := application.FromUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		method := string(a.Settings.WriteBack.Method)
		if name == "main-resource" {
			// Its images are the ImageUpdater's.
			for _, img := range images {
				spec, err := settings.ParseImage(img)
				if err != nil {
					t.Fatal(err)
				}
				a.Settings.Images = append(a.Settings.Images, spec)
			}
			method = "argocd (ImageUpdater)"
		}
		for _, img := range a.Settings.Images {
			r := row{app: name, method: method, image: img.Image.OriginalName()}
			running, _, _ := a.RunningVersion(img)
			r.tag = running.String()
			if v, ok := a.Sources[0].CurrentVersion(img); ok && a.Settings.WriteBack.Method == settings.WriteBackArgoCD {
				r.tag = v.String()
			}
			if a.Settings.WriteBack.Method == settings.WriteBackGit {
				for _, ki := range k.Images {
					if img.Image.MatchesName(ki.Name) {
						r.tag = ki.NewTag
					}
				}
			}
			out[r.key()] = r
		}
	}
	return out
}

// createApp creates an Application Argo CD syncs automatically into the
// namespace of its name.
func createApp(t *testing.T, k *testenv.Kube, dyn dynamic.Interface, name, repoURL string, annotations map[string]string) {
	t.Helper()
	k.CreateNamespace(t, name)
	ann := map[string]string{}
	for k, v := range annotations {
		ann[settings.AnnotationPrefix+k] = v
	}
	obj := testenv.SyncedApplication(name, testenv.InCluster, map[string]any{"source": map[string]any{
		"repoURL": repoURL, "path": "main/overlays/production", "targetRevision": "main", "kustomize": map[string]any{},
	}}, ann)
	if _, err := dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// installRBAC creates the Role and RoleBinding of the install manifests in
// the Argo CD namespace.
func installRBAC(t *testing.T, k *testenv.Kube) {
	t.Helper()
	k.CreateFromFile(t, filepath.Join("..", "..", "manifests", "base", "rbac.yaml"), testenv.ArgoCDNamespace)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// demoApps are the demo's Applications, each deploying front into the
// namespace of its name.
var demoApps = []string{"main", "main-git", "main-reviewed", "main-resource"}

// deployed reads the images of each Application's Deployment.
type deployed map[string][]string

func deployments(t *testing.T, cs kubernetes.Interface, images ...string) func() deployed {
	return func() deployed {
		d := deployed{}
		for _, name := range demoApps {
			d[name] = testenv.DeploymentImages(t.Context(), cs, name, "front")
		}
		return d
	}
}

// all tells whether every Deployment runs exactly these images.
func (d deployed) all(images ...string) bool { return d.only(demoApps, images...) }

// only tells whether the Deployments of these Applications run exactly
// these images.
func (d deployed) only(apps []string, images ...string) bool {
	for _, name := range apps {
		if !slices.Equal(d[name], images) {
			return false
		}
	}
	return true
}

func (d deployed) print() {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  kubectl get deployment front -n <application> (the images Argo CD deployed)")
	for _, name := range demoApps {
		fmt.Fprintf(tw, "  %s\t%s\n", name, strings.Join(d[name], "  "))
	}
	tw.Flush()
}

// summariesFilled tells whether Argo CD lists at least n images in the
// status.summary.images of every Application: what the updater reads as
// running.
func summariesFilled(t *testing.T, dyn dynamic.Interface, n int) bool {
	for _, name := range demoApps {
		obj, err := dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		images, _, _ := unstructured.NestedStringSlice(obj.Object, "status", "summary", "images")
		if len(images) < n {
			return false
		}
	}
	return true
}
