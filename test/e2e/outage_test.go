package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// TestHealthGateOutage: inside a version's window, Argo CD's
// application-controller restarts, and loses its connection to the
// Application's cluster (a proxy in front of that cluster's API server,
// which Argo CD's cluster Secret names, fails every request): neither
// reverts the good version, which is verified once Argo CD reports again;
// a bad version written during the outage is written back once Argo CD,
// back, deploys it and finds it Degraded.
func TestHealthGateOutage(t *testing.T) {
	t.Parallel()
	const name = "outage"
	w := newGateWorld(t, func(reg *testenv.Registry) map[string]string { return overlay(name, reg) })
	// Argo CD reaches the cluster as a ServiceAccount bound to
	// cluster-admin, by its token, which the proxy passes on.
	sa := w.external.ServiceAccountConfig(t, "kube-system", "argocd-manager")
	w.external.Create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: "argocd-manager"}},
	})
	proxy, through := testenv.StartKubeFaultProxy(t, sa)
	server := w.argo.AddCluster(t, name, &testenv.Kube{Config: through})
	w.external.CreateNamespace(t, name)
	ocs := kubernetes.NewForConfigOrDie(w.external.Config)
	cut := func() {
		proxy.InjectRate(func(*http.Request) bool { return true }, 1, 1, testenv.FaultReset)
	}

	app, web := w.push(t, name+"-app", "1.0.0"), w.reg.Repo(name+"-web")+":v0.0.1"
	// The window is long enough for each outage to begin inside it.
	const window = 20 * time.Second
	w.createAppTo(t, name, name+"/overlays/production", server, nil, map[string]string{
		"image-list":          "app=" + app,
		"app.update-strategy": "semver",
		"app.health-gate":     window.String(),
		"write-back-method":   "argocd",
	})
	w.waitImages(t, ocs, name, "front", app+":v0.0.1", web)
	w.startController(t, name)
	w.waitGate(t, name, "app", "1.0.0", api.HealthGateVerified)

	t.Run("the application-controller restarts inside the window", func(t *testing.T) {
		w.push(t, name+"-app", "1.2.0")
		deployed := w.waitDeployedAt(t, name, "1.2.0")
		w.argo.StopController()
		w.argo.StartController(t)
		back := time.Now()
		if end := deployed.Add(window); back.After(end) {
			t.Fatalf("Argo CD back at %v, after the window's end %v", back, end)
		}
		rec := w.waitJudged(t, name, "1.2.0", api.HealthGateVerified)
		if !strings.Contains(rec.Message, "Healthy at the end of its") {
			t.Errorf("record %+v", rec)
		}
		w.waitImages(t, ocs, name, "front", app+":1.2.0", web)
		// The next version is written once Argo CD, restarted, has compared
		// the Application with its AppProjects loaded: a sync it refuses
		// before that is its own state, which the gate follows past. A
		// comparison is asked for: reconciledAt moves only with one.
		w.refresh(t, name)
		testenv.WaitFor(t, deployTimeout, "Argo CD reconciled the Application since its restart", func() (bool, string) {
			return w.reconciledSince(t, name, back) && !w.hasCondition(t, name, "InvalidSpecError"), w.appState(t, name)
		})
	})

	t.Run("Argo CD cut from the cluster inside the window: followed past it, verified once back", func(t *testing.T) {
		w.push(t, name+"-app", "1.4.0")
		w.waitDeployedAt(t, name, "1.4.0")
		// Cut, and restarted: its cache of the cluster, which kept what it
		// last saw, is gone, and a refresh reads the cluster anew.
		cut()
		w.argo.StopController()
		w.argo.StartController(t)
		w.waitCannotCompare(t, name, true)
		testenv.WaitFor(t, gateTimeout, "the window over, the version followed while Argo CD cannot compare", func() (bool, string) {
			rec := gateRecord(t, w.gateState(t, name), "app")
			if rec.State != api.HealthGatePending {
				t.Fatalf("judged while Argo CD cannot reach the cluster: %+v; Application %s", rec, w.appState(t, name))
			}
			return strings.Contains(rec.Message, "window is over, but Argo CD cannot compare the Application with its cluster"), rec.Message
		})
		t.Logf("while cut: Application %s", w.appState(t, name))
		proxy.Clear()
		w.waitCannotCompare(t, name, false)
		w.waitJudged(t, name, "1.4.0", api.HealthGateVerified)
		w.waitImages(t, ocs, name, "front", app+":1.4.0", web)
	})

	t.Run("a version written while Argo CD is cut from the cluster, Degraded once deployed: written back", func(t *testing.T) {
		cut()
		w.argo.StopController()
		w.argo.StartController(t)
		w.waitCannotCompare(t, name, true)
		w.push(t, name+"-app", "1.5.0")
		testenv.WaitFor(t, gateTimeout, "1.5.0 written", func() (bool, string) {
			rec := gateRecord(t, w.gateState(t, name), "app")
			return rec.Version == "1.5.0", fmt.Sprintf("%+v", rec)
		})
		// Argo CD compares the Application since the write, and cannot.
		testenv.WaitFor(t, gateTimeout, "Argo CD reconciled the written spec", func() (bool, string) {
			obj := w.application(t, name)
			images, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "source", "kustomize", "images")
			return slices.ContainsFunc(images, func(s string) bool { return strings.HasSuffix(s, ":1.5.0") }) && w.reconciledSince(t, name, gateRecord(t, w.gateState(t, name), "app").WrittenAt.Time), w.appState(t, name)
		})
		if rec := gateRecord(t, w.gateState(t, name), "app"); rec.State != api.HealthGatePending {
			t.Fatalf("judged while Argo CD cannot reach the cluster: %+v", rec)
		}
		proxy.Clear()
		w.waitCannotCompare(t, name, false)
		rec := w.waitGate(t, name, "app", "1.5.0", api.HealthGateReverted)
		if !strings.Contains(rec.Message, "crashes on start") {
			t.Errorf("record %+v", rec)
		}
		w.waitImages(t, ocs, name, "front", app+":1.4.0", web)
	})
}

// waitDeployedAt waits until the gate saw version running in app, and
// returns when.
func (w *world) waitDeployedAt(t testing.TB, app, version string) time.Time {
	t.Helper()
	var at time.Time
	testenv.WaitFor(t, gateTimeout, app+": "+version+" seen running", func() (bool, string) {
		rec := gateRecord(t, w.gateState(t, app), "app")
		if rec.Version == version && rec.DeployedAt != nil {
			at = rec.DeployedAt.Time
			return true, ""
		}
		return false, fmt.Sprintf("%+v; Application %s", rec, w.appState(t, app))
	})
	return at
}

// waitJudged waits until the gate's record of version is in state, and
// fails as soon as it is written back or skipped.
func (w *world) waitJudged(t testing.TB, app, version string, state api.HealthGateState) api.HealthGateRecord {
	t.Helper()
	var rec api.HealthGateRecord
	testenv.WaitFor(t, gateTimeout, fmt.Sprintf("%s: %s %s", app, version, state), func() (bool, string) {
		st := w.gateState(t, app)
		rec = gateRecord(t, st, "app")
		if len(st.Skipped) > 0 || rec.Version != version {
			t.Fatalf("%s written back: %+v, skipped %+v; Application %s", version, rec, st.Skipped, w.appState(t, app))
		}
		return rec.State == state, fmt.Sprintf("%+v; Application %s", rec, w.appState(t, app))
	})
	return rec
}

// waitCannotCompare asks Argo CD to refresh the Application until it says
// (or no longer says) it could not compare it with its cluster: Argo CD
// tries a cluster it failed to read again only after a while, and
// compares again only when asked or at its periodic reconciliation.
func (w *world) waitCannotCompare(t testing.TB, app string, want bool) {
	t.Helper()
	var asked time.Time
	testenv.WaitFor(t, deployTimeout, fmt.Sprintf("%s: a ComparisonError %v", app, want), func() (bool, string) {
		obj := w.application(t, app)
		if _, refreshing := obj.GetAnnotations()["argocd.argoproj.io/refresh"]; refreshing {
			return false, "refresh under way"
		}
		conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		got := slices.ContainsFunc(conditions, func(c any) bool {
			m, _ := c.(map[string]any)
			return m["type"] == "ComparisonError" || m["type"] == "UnknownError"
		})
		if asked.IsZero() || got != want && time.Since(asked) > 2*time.Second {
			w.refresh(t, app)
			asked = time.Now()
		}
		return got == want && !asked.IsZero(), w.appState(t, app)
	})
}

// hasCondition tells whether the Application's status has a condition of
// type kind.
func (w *world) hasCondition(t testing.TB, app, kind string) bool {
	t.Helper()
	conditions, _, _ := unstructured.NestedSlice(w.application(t, app).Object, "status", "conditions")
	return slices.ContainsFunc(conditions, func(c any) bool {
		m, _ := c.(map[string]any)
		return m["type"] == kind
	})
}

// reconciledSince tells whether Argo CD compared the Application at or
// after since, to the second.
func (w *world) reconciledSince(t testing.TB, app string, since time.Time) bool {
	t.Helper()
	s, _, _ := unstructured.NestedString(w.application(t, app).Object, "status", "reconciledAt")
	at, err := time.Parse(time.RFC3339, s)
	return err == nil && !at.Before(since.Truncate(time.Second))
}
