package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/healthgate"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// healthLua is Argo CD's health of a Deployment in these tests: a
// version of odd minor (1.1.0, 1.3.0) crashes on start.
var healthLua = testenv.OddMinorHealth("")

// gateTimeout bounds how long a version takes to be judged: Argo CD's
// sync, its health, and the window of these tests.
const gateTimeout = 2 * time.Minute

// newGateWorld is a world whose Argo CD judges Deployments by healthLua,
// and keeps each resource's health message in its Application.
func newGateWorld(t testing.TB, files func(reg *testenv.Registry) map[string]string) *world {
	t.Helper()
	return newArgoWorld(t, files, []testenv.ArgoCDOption{
		// The script reads the tag with Lua's string library, which
		// Argo CD opens when asked.
		testenv.WithArgoCDSettings(map[string]string{
			"resource.customizations.health.apps_Deployment":      healthLua,
			"resource.customizations.useOpenLibs.apps_Deployment": "true",
		}),
		testenv.WithPersistedResourceHealth(),
	})
}

func TestHealthGate(t *testing.T) {
	t.Parallel()
	w := newGateWorld(t, func(reg *testenv.Registry) map[string]string {
		files := map[string]string{}
		for _, name := range []string{"gate-patch", "gate-git-a", "gate-git-b", "gate-restart"} {
			for path, content := range overlay(name, reg) {
				files[path] = content
			}
		}
		for path, content := range labelledChart("gate-degraded", reg) {
			files[path] = content
		}
		files["win-e2e/kustomization.yaml"] = "resources:\n- front.yaml\n"
		files["win-e2e/front.yaml"] = deployment("front", fmt.Sprintf("      - name: app\n        image: %s:v0.0.1\n", reg.Repo("win-e2e-app")))
		// Staging and production of one image.
		for _, name := range []string{"promo-staging", "promo-prod"} {
			files[name+"/kustomization.yaml"] = "resources:\n- front.yaml\n"
			files[name+"/front.yaml"] = deployment("front", fmt.Sprintf("      - name: app\n        image: %s:v0.0.1\n", reg.Repo("promo-app")))
		}
		return files
	})

	// The scenarios run side by side: each has Applications of its own,
	// its own controller over them (--match-application-name), and only
	// one of them commits to the repository.
	t.Run("update windows: a change waits for its window and is written as it opens, not an interval later", func(t *testing.T) {
		t.Parallel()
		app := w.push(t, "win-e2e-app", "v0.0.1")
		w.push(t, "win-e2e-app", "1.0.0")
		w.createApp(t, "win-e2e", "win-e2e", nil, map[string]string{"image-list": "app=" + app, "write-back-method": "argocd"})
		w.waitDeployed(t, "win-e2e", "front", app+":v0.0.1")
		// The window opens at a minute's start at least 20 seconds after
		// the controller starts, however long Argo CD took to deploy.
		opens := time.Now().UTC().Add(20 * time.Second).Truncate(time.Minute).Add(time.Minute)
		w.patchApp(t, "win-e2e", map[string]any{"metadata": map[string]any{"annotations": prefixed(map[string]string{
			"update-windows": fmt.Sprintf("allow %d %d * * * 1h", opens.Minute(), opens.Hour()),
		})}})
		w.startController(t, "win-e2e", "--interval", "1h")
		if got := testenv.KustomizeImages(t, w.application(t, "win-e2e")); len(got) != 0 && time.Now().Before(opens) {
			t.Fatalf("written before the window opened: %v", got)
		}
		w.waitEvent(t, "win-e2e", "VersionWaiting", corev1.EventTypeNormal, "version 1.0.0 waits: the Application is outside its update windows until "+opens.Add(time.Second).Format(time.RFC3339))
		w.waitDeployed(t, "win-e2e", "front", app+":1.0.0")
		if now := time.Now(); now.Before(opens) {
			t.Errorf("deployed at %v, before the window opened at %v", now, opens)
		}
	})

	t.Run("promotion: production takes what staging ran and verified; a version that broke staging never reaches it", func(t *testing.T) {
		t.Parallel()
		app := w.push(t, "promo-app", "v0.0.1")
		w.push(t, "promo-app", "1.0.0")
		for _, name := range []string{"promo-staging", "promo-prod"} {
			annotations := map[string]string{"image-list": "app=" + app, "app.update-strategy": "semver", "app.health-gate": "10s", "write-back-method": "argocd"}
			if name == "promo-prod" {
				annotations["app.promote-from"] = "promo-staging"
			}
			w.createApp(t, name, name, nil, annotations)
			w.waitDeployed(t, name, "front", app+":v0.0.1")
		}
		c := w.startController(t, "promo-*")
		w.waitGate(t, "promo-staging", "app", "1.0.0", api.HealthGateVerified)
		w.waitGate(t, "promo-prod", "app", "1.0.0", api.HealthGateVerified)
		w.waitDeployed(t, "promo-prod", "front", app+":1.0.0")

		// 1.1.0 breaks staging: written back there, and never verified,
		// so production stays where it is.
		w.push(t, "promo-app", "1.1.0")
		w.waitGate(t, "promo-staging", "app", "1.1.0", api.HealthGateReverted)
		w.waitDeployed(t, "promo-staging", "front", app+":1.0.0")
		testenv.WaitFor(t, time.Minute, "a cycle with nothing to promote to production", func() (bool, string) {
			return strings.Contains(c.logs.String(), "nothing to promote: no version of "+app+" is verified in argocd/promo-staging yet"), ""
		})

		// 1.2.0 is good: staging verifies it, then production takes it.
		w.push(t, "promo-app", "1.2.0")
		staging := w.waitGate(t, "promo-staging", "app", "1.2.0", api.HealthGateVerified)
		prod := w.waitGate(t, "promo-prod", "app", "1.2.0", api.HealthGateVerified)
		w.waitDeployed(t, "promo-prod", "front", app+":1.2.0")
		if !prod.WrittenAt.After(staging.VerifiedAt.Time) && !prod.WrittenAt.Equal(staging.VerifiedAt) {
			t.Errorf("production written at %v, before staging verified at %v", prod.WrittenAt, staging.VerifiedAt)
		}
		evs, err := w.cs.CoreV1().Events(testenv.ArgoCDNamespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=promo-prod"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == "ImagesUpdated" && strings.Contains(e.Message, "1.1.0") {
				t.Errorf("production was written 1.1.0: %s", e.Message)
			}
		}
	})

	t.Run("a bad version is written back and skipped; the next good one is written and verified", func(t *testing.T) {
		t.Parallel()
		app, web := w.push(t, "gate-patch-app", "1.0.0"), w.reg.Repo("gate-patch-web")
		w.push(t, "gate-patch-web", "v0.0.1")
		w.createApp(t, "gate-patch", "gate-patch/overlays/production", nil, map[string]string{
			"image-list":          "app=" + app,
			"app.update-strategy": "semver",
			"app.health-gate":     "10s",
			"write-back-method":   "argocd",
		})
		w.waitDeployed(t, "gate-patch", "front", app+":v0.0.1", web+":v0.0.1")
		c := w.startController(t, "gate-patch")
		w.waitGate(t, "gate-patch", "app", "1.0.0", api.HealthGateVerified)

		w.push(t, "gate-patch-app", "1.1.0")
		rec := w.waitGate(t, "gate-patch", "app", "1.1.0", api.HealthGateReverted)
		if rec.PreviousVersion != "1.0.0" || rec.HealthBefore != "Healthy" || rec.RevertedAt == nil || !strings.Contains(rec.Message, "crashes on start") {
			t.Errorf("record %+v", rec)
		}
		w.waitDeployed(t, "gate-patch", "front", app+":1.0.0", web+":v0.0.1")
		if st := w.gateState(t, "gate-patch"); len(st.Skipped) != 1 || st.Skipped[0].Version != "1.1.0" || st.Skipped[0].Alias != "app" {
			t.Errorf("skipped %+v", st.Skipped)
		}
		w.waitEvent(t, "gate-patch", healthgate.ReasonReverted, corev1.EventTypeWarning,
			"version 1.1.0 broke the Application", "Degraded", "container app ("+app+":1.1.0) crashes on start", "wrote back 1.0.0 and skipped 1.1.0")
		// The cycles after pass the skipped version over.
		testenv.WaitFor(t, time.Minute, "a cycle passing 1.1.0 over", func() (bool, string) {
			return strings.Contains(c.logs.String(), "passed over what the health gate skips: 1.1.0"), ""
		})

		w.push(t, "gate-patch-app", "1.2.0")
		rec = w.waitGate(t, "gate-patch", "app", "1.2.0", api.HealthGateVerified)
		if rec.VerifiedAt == nil || rec.DeployedAt == nil || rec.VerifiedAt.Sub(rec.DeployedAt.Time) < 10*time.Second {
			t.Errorf("verified before its window's end: %+v", rec)
		}
		w.waitDeployed(t, "gate-patch", "front", app+":1.2.0", web+":v0.0.1")
		w.waitEvent(t, "gate-patch", healthgate.ReasonVerified, corev1.EventTypeNormal, "version 1.2.0 verified")
		// A person clears the skip; the annotation is removed once read.
		patch := []byte(`{"metadata":{"annotations":{"` + healthgate.ClearAnnotation + `":"app:1.1.0"}}}`)
		if _, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Patch(t.Context(), "gate-patch", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 30*time.Second, "the skip of 1.1.0 cleared", func() (bool, string) {
			obj := w.application(t, "gate-patch")
			_, clearing := obj.GetAnnotations()[healthgate.ClearAnnotation]
			st := w.gateState(t, "gate-patch")
			return !clearing && len(st.Skipped) == 0, fmt.Sprintf("clear annotation still there: %v, skipped %+v", clearing, st.Skipped)
		})
		w.waitEvent(t, "gate-patch", healthgate.ReasonCleared, corev1.EventTypeNormal, "cleared skipped version(s) app:1.1.0")
		for series, want := range map[string]float64{
			`argocd_image_updater_health_gate_reverts_total{cause="degraded"}`: 1,
			`argocd_image_updater_health_gate_verified_total`:                  2,
			`argocd_image_updater_health_gate_write_to_verified_seconds_count`: 2,
		} {
			if got := c.metric(t, series); got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
		}
	})

	t.Run("git, through an ImageUpdater: the revert commit touches only the Application that broke", func(t *testing.T) {
		t.Parallel()
		a, b := w.push(t, "gate-git-a-app", "1.0.0"), w.push(t, "gate-git-b-app", "1.0.0")
		for _, name := range []string{"gate-git-a", "gate-git-b"} {
			w.createApp(t, name, name+"/overlays/production", nil, nil)
			w.waitDeployed(t, name, "front", w.reg.Repo(name+"-app")+":v0.0.1", w.reg.Repo(name+"-web")+":v0.0.1")
		}
		w.k.Create(t, &api.ImageUpdater{
			ObjectMeta: metav1.ObjectMeta{Name: "gate-git", Namespace: testenv.ArgoCDNamespace},
			Spec: api.ImageUpdaterSpec{
				CommonUpdateSettings: &api.CommonUpdateSettings{UpdateStrategy: ptr.To("semver")},
				WriteBackConfig: &api.WriteBackConfig{Method: ptr.To("git"), GitConfig: &api.GitConfig{
					Branch: ptr.To("main"), WriteBackTarget: ptr.To("kustomization")}},
				HealthGate: &api.HealthGate{Window: ptr.To("10s")},
				ApplicationRefs: []api.ApplicationRef{
					{NamePattern: "gate-git-a", Images: []api.ImageConfig{{Alias: "app", ImageName: a}}},
					{NamePattern: "gate-git-b", Images: []api.ImageConfig{{Alias: "app", ImageName: b}}},
				},
			},
		})
		w.runOnce(t, "gate-git-*")
		w.waitDeployed(t, "gate-git-a", "front", a+":1.0.0", w.reg.Repo("gate-git-a-web")+":v0.0.1")
		w.waitDeployed(t, "gate-git-b", "front", b+":1.0.0", w.reg.Repo("gate-git-b-web")+":v0.0.1")

		// One cycle writes both in one commit: a bad version for a, a good
		// one for b.
		w.push(t, "gate-git-a-app", "1.1.0")
		w.push(t, "gate-git-b-app", "1.2.0")
		w.startController(t, "gate-git-*", "--interval", "1h")
		ra := w.waitIUGate(t, "gate-git", "gate-git-a", "1.1.0", api.HealthGateReverted)
		rb := w.waitIUGate(t, "gate-git", "gate-git-b", "1.2.0", api.HealthGateVerified)
		w.waitDeployed(t, "gate-git-a", "front", a+":1.0.0", w.reg.Repo("gate-git-a-web")+":v0.0.1")
		w.waitDeployed(t, "gate-git-b", "front", b+":1.2.0", w.reg.Repo("gate-git-b-web")+":v0.0.1")

		// One push carried a commit per Application; the revert is one
		// more commit, of a's file alone.
		log := w.git.Log(t, "deploy", "main")
		kustomization := func(name string) string { return name + "/overlays/production/kustomization.yaml" }
		for commit, want := range map[string]string{log[0].Hash: "gate-git-a", ra.Commit: "gate-git-a", rb.Commit: "gate-git-b"} {
			if got := w.git.ChangedFiles(t, "deploy", commit); !slices.Equal(got, []string{kustomization(want)}) {
				t.Errorf("commit %s changed %v, want %s's kustomization alone", commit, got, want)
			}
		}
		if !slices.Equal([]string{log[1].Hash, log[2].Hash}, []string{rb.Commit, ra.Commit}) || !strings.Contains(ra.Message, "wrote back 1.0.0 in commit "+log[0].Hash[:12]) {
			t.Errorf("records %+v\n%+v\nlog %+v", ra, rb, log[:3])
		}
		if got := w.git.ReadFile(t, "deploy", "main", kustomization("gate-git-b")); !strings.Contains(got, "newTag: 1.2.0") {
			t.Errorf("b's kustomization after the revert:\n%s", got)
		}
		_, skipped := w.iuGate(t, "gate-git")
		if len(skipped) != 1 || skipped[0].Application != "gate-git-a" || skipped[0].Alias != "app" || skipped[0].Version != "1.1.0" {
			t.Errorf("skippedVersions %+v", skipped)
		}
		w.waitEvent(t, "gate-git-a", healthgate.ReasonReverted, corev1.EventTypeWarning, "version 1.1.0 broke the Application", "in commit "+log[0].Hash[:12])
	})

	t.Run("a restart resumes what the gate followed", func(t *testing.T) {
		t.Parallel()
		app, web := w.push(t, "gate-restart-app", "1.0.0"), w.reg.Repo("gate-restart-web")+":v0.0.1"
		w.createApp(t, "gate-restart", "gate-restart/overlays/production", nil, map[string]string{
			"image-list":          "app=" + app,
			"app.update-strategy": "semver",
			"app.health-gate":     "30s",
			"write-back-method":   "argocd",
		})
		w.waitDeployed(t, "gate-restart", "front", app+":v0.0.1", web)
		w.runOnce(t, "gate-restart")
		w.waitDeployed(t, "gate-restart", "front", app+":1.0.0", web)

		// A bad version written by one process breaks the Application while
		// none runs; the next one reads what was followed and writes the
		// version before back, before its cycle passes the bad one over.
		w.push(t, "gate-restart-app", "1.1.0")
		w.runOnce(t, "gate-restart")
		if rec := gateRecord(t, w.gateState(t, "gate-restart"), "app"); rec.Version != "1.1.0" || rec.State != api.HealthGatePending {
			t.Fatalf("record after the write %+v", rec)
		}
		testenv.WaitFor(t, deployTimeout, "gate-restart Degraded, running 1.1.0", func() (bool, string) {
			obj := w.application(t, "gate-restart").Object
			health := w.appState(t, "gate-restart")
			return strings.Contains(health, "health Degraded") && slices.Contains(w.summaryImages(t, "gate-restart"), app+":1.1.0"), fmt.Sprint(health, obj["status"] != nil)
		})
		out := w.runOnce(t, "gate-restart")
		if rec := gateRecord(t, w.gateState(t, "gate-restart"), "app"); rec.State != api.HealthGateReverted {
			t.Errorf("record after the next run %+v", rec)
		}
		if !strings.Contains(out, "passed over what the health gate skips: 1.1.0") {
			t.Errorf("the run's cycle did not pass 1.1.0 over:\n%s", out)
		}
		w.waitDeployed(t, "gate-restart", "front", app+":1.0.0", web)

		// A good version's window spans a restart: it ends when it would
		// have, counted from when the first process saw the version run.
		w.push(t, "gate-restart-app", "1.2.0")
		first := w.startController(t, "gate-restart", "--interval", "1h")
		var deployed *metav1.Time
		testenv.WaitFor(t, gateTimeout, "1.2.0 seen running", func() (bool, string) {
			rec := gateRecord(t, w.gateState(t, "gate-restart"), "app")
			deployed = rec.DeployedAt
			return rec.Version == "1.2.0" && deployed != nil, fmt.Sprintf("%+v", rec)
		})
		first.stop(t)
		if rec := gateRecord(t, w.gateState(t, "gate-restart"), "app"); rec.State != api.HealthGatePending {
			t.Fatalf("judged before the restart: %+v", rec)
		}
		second := w.startController(t, "gate-restart", "--interval", "1h")
		rec := w.waitGate(t, "gate-restart", "app", "1.2.0", api.HealthGateVerified)
		if !rec.DeployedAt.Equal(deployed) || rec.VerifiedAt.Sub(deployed.Time) < 30*time.Second {
			t.Errorf("record %+v: deployed at %v before the restart", rec, deployed)
		}
		if !strings.Contains(second.logs.String(), "health gate state read") {
			t.Errorf("the second controller did not read the state:\n%s", second.logs.String())
		}
	})

	t.Run("an Application already Degraded: not judged by health, a failed sync still written back", func(t *testing.T) {
		t.Parallel()
		app := w.push(t, "gate-degraded-app", "1.0.0")
		w.createApp(t, "gate-degraded", "gate-degraded", map[string]any{"helm": map[string]any{}}, map[string]string{
			"image-list":          "app=" + app,
			"app.update-strategy": "alphabetical",
			"app.helm.image-name": "image.repository",
			"app.helm.image-tag":  "image.tag",
			"app.health-gate":     "10s",
			"write-back-method":   "argocd",
		})
		bad := w.reg.Repo("gate-degraded-web") + ":1.1.0"
		w.waitDeployed(t, "gate-degraded", "front", app+":0.9.0", bad)
		c := w.startController(t, "gate-degraded")
		rec := w.waitGate(t, "gate-degraded", "app", "1.0.0", api.HealthGateUnverified)
		if rec.HealthBefore != "Degraded" || !strings.Contains(rec.Message, "was Degraded before the write") {
			t.Errorf("record %+v", rec)
		}
		w.waitEvent(t, "gate-degraded", healthgate.ReasonUnverified, corev1.EventTypeNormal, "version 1.0.0 kept, not verified")

		// A tag too long for the label the chart puts it in: the API server
		// refuses the Deployment, and the sync fails.
		long := "1.2.0-" + strings.Repeat("x", 60)
		w.push(t, "gate-degraded-app", long)
		rec = w.waitGate(t, "gate-degraded", "app", long, api.HealthGateReverted)
		if !strings.Contains(rec.Message, "the sync of "+long+" failed") {
			t.Errorf("record %+v", rec)
		}
		w.waitEvent(t, "gate-degraded", healthgate.ReasonReverted, corev1.EventTypeWarning, "the sync of "+long+" failed", "wrote back 1.0.0")
		w.waitDeployed(t, "gate-degraded", "front", app+":1.0.0", bad)
		if got := c.metric(t, `argocd_image_updater_health_gate_reverts_total{cause="sync_failed"}`); got != 1 {
			t.Errorf("reverts for failed syncs: %v", got)
		}
	})
}

// labelledChart is a Helm chart under name/ whose Deployment carries the
// app image's tag in a label, beside a web container at a version that
// crashes (see healthLua): its Application is Degraded from the start.
func labelledChart(name string, reg *testenv.Registry) map[string]string {
	d := deployment("front", "      - name: app\n        image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n"+
		"      - name: web\n        image: "+reg.Repo(name+"-web")+":1.1.0\n")
	d = strings.Replace(d, "metadata:\n  name: front\n", "metadata:\n  name: front\n  labels:\n    version: \"{{ .Values.image.tag }}\"\n", 1)
	return map[string]string{
		name + "/Chart.yaml":                "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n",
		name + "/values.yaml":               fmt.Sprintf("image:\n  repository: %s\n  tag: 0.9.0\n", reg.Repo(name+"-app")),
		name + "/templates/deployment.yaml": d,
	}
}

// runningController is the updater's binary running as a controller.
type runningController struct {
	cmd     *exec.Cmd
	logs    *testenv.SyncBuffer
	metrics string
	stopped bool
}

// startController runs the updater as a controller over the Applications
// whose names match, a cycle every 5 seconds unless flags say otherwise,
// and waits for its first cycle; it is stopped when t ends.
func (w *world) startController(t testing.TB, names string, flags ...string) *runningController {
	t.Helper()
	port := testenv.FreePort(t)
	c := &runningController{logs: &testenv.SyncBuffer{}, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", port)}
	c.cmd = exec.CommandContext(t.Context(), w.bin, append([]string{"run", "--interval", "5s", "--kubeconfig", w.kubeconfig,
		"--registries-conf-path", w.conf, "--health-port", "0", "--metrics-port", strconv.Itoa(port), "--leader-election=false",
		"--match-application-name", names, "--loglevel", "debug"}, flags...)...)
	c.cmd.Env = append(os.Environ(), "REGISTRY_CREDS="+w.reg.Username+":"+w.reg.Password, "IMAGE_UPDATER_GIT_CLONE_DIR="+t.TempDir())
	c.cmd.Stdout, c.cmd.Stderr = c.logs, c.logs
	c.cmd.Cancel = func() error { return c.cmd.Process.Signal(syscall.SIGTERM) }
	c.cmd.WaitDelay = 30 * time.Second
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.stop(t)
		if t.Failed() {
			t.Logf("the controller's output:\n%s", c.logs.String())
		}
	})
	testenv.WaitFor(t, time.Minute, "the controller's first cycle", func() (bool, string) {
		return strings.Contains(c.logs.String(), "cycle finished"), ""
	})
	return c
}

// stop stops the controller as Kubernetes does, and waits for it.
func (c *runningController) stop(t testing.TB) {
	t.Helper()
	if c.stopped {
		return
	}
	c.stopped = true
	_ = c.cmd.Cancel()
	_ = c.cmd.Wait()
}

// metric is the value of one series the controller serves; 0 when it
// serves none.
func (c *runningController) metric(t testing.TB, series string) float64 {
	t.Helper()
	resp, err := http.Get(c.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f
		}
	}
	return 0
}

// gateState is the health gate's state annotation of an Application.
func (w *world) gateState(t testing.TB, app string) healthgate.State {
	t.Helper()
	st, err := healthgate.ParseState(w.application(t, app).GetAnnotations()[healthgate.StateAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// gateRecord is the record of image in st, zero when there is none.
func gateRecord(t testing.TB, st healthgate.State, image string) api.HealthGateRecord {
	t.Helper()
	for _, r := range st.Records {
		if r.Alias == image {
			return r
		}
	}
	return api.HealthGateRecord{}
}

// waitGate waits until the gate's record of image of an annotated
// Application names version in state.
func (w *world) waitGate(t testing.TB, app, image, version string, state api.HealthGateState) api.HealthGateRecord {
	t.Helper()
	var rec api.HealthGateRecord
	testenv.WaitFor(t, gateTimeout, fmt.Sprintf("%s: %s %s %s", app, image, version, state), func() (bool, string) {
		rec = gateRecord(t, w.gateState(t, app), image)
		return rec.Version == version && rec.State == state, fmt.Sprintf("%+v; Application %s", rec, w.appState(t, app))
	})
	return rec
}

// iuGate is the health gate's lists of an ImageUpdater's status.
func (w *world) iuGate(t testing.TB, name string) ([]api.HealthGateRecord, []api.SkippedVersion) {
	t.Helper()
	obj, err := w.dyn.Resource(api.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var iu api.ImageUpdater
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &iu); err != nil {
		t.Fatal(err)
	}
	return iu.Status.HealthGate, iu.Status.SkippedVersions
}

// waitIUGate waits until the record of an Application in an ImageUpdater's
// status names version in state.
func (w *world) waitIUGate(t testing.TB, iu, app, version string, state api.HealthGateState) api.HealthGateRecord {
	t.Helper()
	var rec api.HealthGateRecord
	testenv.WaitFor(t, gateTimeout, fmt.Sprintf("ImageUpdater %s: %s %s %s", iu, app, version, state), func() (bool, string) {
		records, _ := w.iuGate(t, iu)
		for _, r := range records {
			if r.Application == app {
				rec = r
			}
		}
		return rec.Version == version && rec.State == state, fmt.Sprintf("%+v; Application %s", rec, w.appState(t, app))
	})
	return rec
}

// waitEvent waits for an event of an Application with this type and
// reason whose message holds each of parts.
func (w *world) waitEvent(t testing.TB, app, reason, kind string, parts ...string) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("a %s event %s on %s", kind, reason, app), func() (bool, string) {
		evs, err := w.cs.CoreV1().Events(testenv.ArgoCDNamespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + app})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason != reason || e.Type != kind {
				seen = append(seen, e.Reason)
				continue
			}
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(e.Message, p) }) {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, "; ")
	})
}
