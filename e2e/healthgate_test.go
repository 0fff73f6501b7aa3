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

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/healthgate"
	"github.com/image-updater/argocd-image-updater/internal/testenv"
)

// healthLua is Argo CD's health of a Deployment in these tests, where no
// kubelet runs Pods, as a resource health customization: a container
// whose image's tag has an odd minor version (1.1.0, 1.3.0) "crashes on
// start", which makes the Deployment, and so its Application, Degraded;
// any other is Healthy.
const healthLua = `hs = {status = "Healthy", message = "every container starts"}
if obj.spec ~= nil and obj.spec.template ~= nil and obj.spec.template.spec ~= nil and obj.spec.template.spec.containers ~= nil then
  for _, c in ipairs(obj.spec.template.spec.containers) do
    local minor = string.match(c.image, ":%d+%.(%d+)%.%d+$")
    if minor ~= nil and tonumber(minor) % 2 == 1 then
      hs.status = "Degraded"
      hs.message = "container " .. c.name .. " (" .. c.image .. ") crashes on start"
      return hs
    end
  end
end
return hs
`

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
		return files
	})

	t.Run("a bad version is written back and skipped; the next good one is written and verified", func(t *testing.T) {
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
		for series, want := range map[string]float64{
			`argocd_image_updater_health_gate_reverts_total{cause="degraded"}`:  1,
			`argocd_image_updater_health_gate_verified_total`:                   2,
			`argocd_image_updater_health_gate_write_to_verified_seconds_count`: 2,
		} {
			if got := c.metric(t, series); got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
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
	c.cmd.Env = append(os.Environ(), "REGISTRY_CREDS="+w.reg.Username+":"+w.reg.Password, "IMAGE_UPDATER_GIT_CLONE_DIR="+w.cloneDir)
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
