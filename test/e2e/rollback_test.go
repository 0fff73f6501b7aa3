package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/healthgate"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// TestRollback: a version the updater wrote that a person rolls back (the
// Application's override set back, Argo CD's rollback to an earlier
// history entry, or the updater's commit reverted) is not written again; the image is held there, which an event and the
// state say, until a newer version appears.
func TestRollback(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(reg *testenv.Registry) map[string]string {
		files := map[string]string{}
		for _, name := range []string{"rb-argocd", "rb-undo", "rb-git", "rb-off"} {
			for path, content := range overlay(name, reg) {
				files[path] = content
			}
		}
		return files
	})

	// The scenarios run side by side: each has Applications of its own,
	// its own controller over them (--match-application-name), and only
	// one of them commits to the repository.
	t.Run("argocd: the override set back to the version before is held", func(t *testing.T) {
		t.Parallel()
		app, web, c := w.rolledForward(t, "rb-argocd")

		// 1.1.0 is broken: a person sets the override back to 1.0.0, as
		// `argocd app set --kustomize-image` does.
		w.setKustomizeImages(t, "rb-argocd", app+":1.0.0")
		w.waitGate(t, "rb-argocd", "app", "1.1.0", api.HealthGateRolledBack)
		w.waitEvent(t, "rb-argocd", healthgate.ReasonHeld, corev1.EventTypeWarning, "version 1.1.0", "rolled back to 1.0.0", "the image is held")
		if st := w.gateState(t, "rb-argocd"); len(st.Skipped) != 1 || st.Skipped[0].Version != "1.1.0" || !strings.Contains(st.Skipped[0].Reason, "rolled back to 1.0.0") {
			t.Errorf("skipped %+v", st.Skipped)
		}
		// Two more cycles later, it still holds what the person chose, even
		// with a version between pushed.
		w.push(t, "rb-argocd-app", "1.0.5")
		w.waitCycles(t, c, 2)
		if got := w.kustomizeImages(t, "rb-argocd"); !slices.Equal(got, []string{app + ":1.0.0"}) {
			t.Fatalf("override %v after the hold, want %s:1.0.0", got, app)
		}
		w.waitDeployed(t, "rb-argocd", "front", app+":1.0.0", web)

		// A newer version is written.
		w.push(t, "rb-argocd-app", "1.2.0")
		w.waitDeployed(t, "rb-argocd", "front", app+":1.2.0", web)
	})

	t.Run("argocd: Argo CD's rollback to an earlier history entry is held, and written into the spec", func(t *testing.T) {
		t.Parallel()
		app, web, c := w.rolledForward(t, "rb-undo")

		// 1.1.0 is broken: a person runs `argocd app rollback` to the
		// history entry that deployed 1.0.0. Argo CD's server refuses it
		// while automated sync is on, then sets the Application's
		// operation: a sync of that entry's revision and source, which
		// leaves the spec (and its override of 1.1.0) as it is.
		w.setAutomated(t, "rb-undo", false)
		entry := w.historyEntry(t, "rb-undo", app+":1.0.0")
		w.setOperation(t, "rb-undo", map[string]any{
			"sync": map[string]any{
				"revision":     entry["revision"],
				"source":       entry["source"],
				"syncStrategy": map[string]any{"apply": map[string]any{}},
			},
			"initiatedBy": map[string]any{"username": "admin"},
		})
		w.waitDeployed(t, "rb-undo", "front", app+":1.0.0", web)
		w.waitGate(t, "rb-undo", "app", "1.1.0", api.HealthGateRolledBack)
		w.waitEvent(t, "rb-undo", healthgate.ReasonHeld, corev1.EventTypeWarning, "version 1.1.0", "rolled back to 1.0.0 by Argo CD's rollback", "the image is held")
		// The updater writes the version held into the spec, so that a
		// sync of the spec does not deploy 1.1.0 again.
		testenv.WaitFor(t, time.Minute, "the override of rb-undo set to 1.0.0", func() (bool, string) {
			got := w.kustomizeImages(t, "rb-undo")
			return slices.Equal(got, []string{app + ":1.0.0"}), fmt.Sprint(got)
		})
		if st := w.gateState(t, "rb-undo"); len(st.Skipped) != 1 || st.Skipped[0].Version != "1.1.0" || !strings.Contains(st.Skipped[0].Reason, "rolled back to 1.0.0") {
			t.Errorf("skipped %+v", st.Skipped)
		}

		// The person turns automated sync on again; with a version between
		// pushed, two cycles later it still runs 1.0.0.
		w.setAutomated(t, "rb-undo", true)
		w.push(t, "rb-undo-app", "1.0.5")
		w.waitCycles(t, c, 2)
		if got := w.kustomizeImages(t, "rb-undo"); !slices.Equal(got, []string{app + ":1.0.0"}) {
			t.Fatalf("override %v after the hold, want %s:1.0.0", got, app)
		}
		w.waitDeployed(t, "rb-undo", "front", app+":1.0.0", web)
		if rec := gateRecord(t, w.gateState(t, "rb-undo"), "app"); rec.State != api.HealthGateRolledBack || rec.Version != "1.1.0" {
			t.Errorf("record %+v", rec)
		}

		// A newer version is written and deployed.
		w.push(t, "rb-undo-app", "1.2.0")
		w.waitDeployed(t, "rb-undo", "front", app+":1.2.0", web)
	})

	t.Run("git: a revert of the updater's commit is held, in the ImageUpdater's status", func(t *testing.T) {
		t.Parallel()
		app, web := w.push(t, "rb-git-app", "1.0.0"), w.reg.Repo("rb-git-web")+":v0.0.1"
		w.createApp(t, "rb-git", "rb-git/overlays/production", nil, nil)
		w.waitDeployed(t, "rb-git", "front", app+":v0.0.1", web)
		w.k.Create(t, &api.ImageUpdater{
			ObjectMeta: metav1.ObjectMeta{Name: "rb-git", Namespace: testenv.ArgoCDNamespace},
			Spec: api.ImageUpdaterSpec{
				CommonUpdateSettings: &api.CommonUpdateSettings{UpdateStrategy: ptr.To("semver")},
				WriteBackConfig: &api.WriteBackConfig{Method: ptr.To("git"), GitConfig: &api.GitConfig{
					Branch: ptr.To("main"), WriteBackTarget: ptr.To("kustomization")}},
				ApplicationRefs: []api.ApplicationRef{{NamePattern: "rb-git", Images: []api.ImageConfig{{Alias: "app", ImageName: app}}}},
			},
		})
		c := w.startController(t, "rb-git")
		w.waitDeployed(t, "rb-git", "front", app+":1.0.0", web)
		w.push(t, "rb-git-app", "1.1.0")
		w.waitDeployed(t, "rb-git", "front", app+":1.1.0", web)
		// The updater has seen its commit deployed.
		testenv.WaitFor(t, time.Minute, "1.1.0 seen in rb-git", func() (bool, string) {
			records, _ := w.iuGate(t, "rb-git")
			return len(records) == 1 && records[0].Version == "1.1.0" && records[0].DeployedAt != nil, fmt.Sprintf("%+v", records)
		})
		records, _ := w.iuGate(t, "rb-git")
		written := records[0].Commit
		if written == "" || w.git.Log(t, "deploy", "main")[0].Hash != written {
			t.Fatalf("record %+v, log %+v", records[0], w.git.Log(t, "deploy", "main")[0])
		}

		// A person reverts the updater's commit.
		w.git.Revert(t, "deploy", "main", written)
		w.refresh(t, "rb-git")
		w.waitDeployed(t, "rb-git", "front", app+":1.0.0", web)
		rec := w.waitIUGate(t, "rb-git", "rb-git", "1.1.0", api.HealthGateRolledBack)
		if !strings.Contains(rec.Message, "rolled back to 1.0.0") {
			t.Errorf("record %+v", rec)
		}
		_, skipped := w.iuGate(t, "rb-git")
		if len(skipped) != 1 || skipped[0].Application != "rb-git" || skipped[0].Alias != "app" || skipped[0].Version != "1.1.0" || !strings.Contains(skipped[0].Reason, "rolled back to 1.0.0") {
			t.Errorf("skippedVersions %+v", skipped)
		}
		w.waitEvent(t, "rb-git", healthgate.ReasonHeld, corev1.EventTypeWarning, "version 1.1.0", "rolled back to 1.0.0")
		head := w.git.Log(t, "deploy", "main")[0].Hash
		w.waitCycles(t, c, 2)
		if got := w.git.Log(t, "deploy", "main")[0].Hash; got != head {
			t.Fatalf("a commit after the revert: %s", got)
		}

		w.push(t, "rb-git-app", "1.2.0")
		w.waitDeployed(t, "rb-git", "front", app+":1.2.0", web)
	})

	t.Run("rollback-hold false: the version rolled back is written again", func(t *testing.T) {
		t.Parallel()
		app, web := w.push(t, "rb-off-app", "1.0.0"), w.reg.Repo("rb-off-web")+":v0.0.1"
		w.push(t, "rb-off-app", "1.1.0")
		w.createApp(t, "rb-off", "rb-off/overlays/production", nil, map[string]string{
			"image-list":          "app=" + app,
			"app.update-strategy": "semver",
			"write-back-method":   "argocd",
			"rollback-hold":       "false",
		})
		w.waitDeployed(t, "rb-off", "front", app+":v0.0.1", web)
		c := w.startController(t, "rb-off")
		w.waitDeployed(t, "rb-off", "front", app+":1.1.0", web)
		w.setKustomizeImages(t, "rb-off", app+":1.0.0")
		w.waitCycles(t, c, 2)
		if got := w.kustomizeImages(t, "rb-off"); !slices.Equal(got, []string{app + ":1.1.0"}) {
			t.Fatalf("override %v, want %s:1.1.0 written again", got, app)
		}
		w.waitDeployed(t, "rb-off", "front", app+":1.1.0", web)
		if rec := gateRecord(t, w.gateState(t, "rb-off"), "app"); rec.State != api.HealthGateWritten {
			t.Errorf("record %+v", rec)
		}
		if slices.Contains(w.eventReasons(t, "rb-off"), healthgate.ReasonHeld) {
			t.Errorf("events %v", w.eventReasons(t, "rb-off"))
		}
	})
}

// setKustomizeImages sets an Application's Kustomize image overrides, as
// a person does.
func (w *world) setKustomizeImages(t testing.TB, name string, images ...string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"source": map[string]any{"kustomize": map[string]any{"images": images}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kustomizeImages are an Application's Kustomize image overrides.
func (w *world) kustomizeImages(t testing.TB, name string) []string {
	t.Helper()
	images, _, _ := unstructured.NestedStringSlice(w.application(t, name).Object, "spec", "source", "kustomize", "images")
	return images
}

// waitCycles waits until the controller finished n more cycles.
func (w *world) waitCycles(t testing.TB, c *runningController, n int) {
	t.Helper()
	start := strings.Count(c.logs.String(), "cycle finished")
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("%d more cycles", n), func() (bool, string) {
		return strings.Count(c.logs.String(), "cycle finished") >= start+n, ""
	})
}

// setAutomated turns an Application's automated sync on or off, as a
// person does before `argocd app rollback`, which Argo CD refuses while
// it is on.
func (w *world) setAutomated(t testing.TB, name string, on bool) {
	t.Helper()
	var automated any
	if on {
		automated = map[string]any{"prune": true, "selfHeal": true}
	}
	w.patchApp(t, name, map[string]any{"spec": map[string]any{"syncPolicy": map[string]any{"automated": automated}}})
}

// setOperation sets an Application's operation as Argo CD's server does
// for a sync or a rollback (argo.SetAppOperation): refused while another
// operation is in progress (here: waited for), the last operation's state
// removed, the whole object updated, again on a conflict.
func (w *world) setOperation(t testing.TB, name string, op map[string]any) {
	t.Helper()
	apps := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace)
	testenv.WaitFor(t, deployTimeout, "the operation of "+name+" set", func() (bool, string) {
		obj := w.application(t, name)
		if cur, ok := obj.Object["operation"]; ok && cur != nil {
			return false, "another operation is in progress"
		}
		obj.Object["operation"] = op
		unstructured.RemoveNestedField(obj.Object, "status", "operationState")
		_, err := apps.Update(t.Context(), obj, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		return true, ""
	})
}

func (w *world) patchApp(t testing.TB, name string, patch map[string]any) {
	t.Helper()
	body, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Patch(t.Context(), name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// historyEntry is the latest entry of an Application's status.history
// whose source overrides an image as image (name:tag), as `argocd app
// history` lists them for a rollback.
func (w *world) historyEntry(t testing.TB, name, image string) map[string]any {
	t.Helper()
	history, _, _ := unstructured.NestedSlice(w.application(t, name).Object, "status", "history")
	for i := len(history) - 1; i >= 0; i-- {
		entry, _ := history[i].(map[string]any)
		images, _, _ := unstructured.NestedStringSlice(entry, "source", "kustomize", "images")
		if slices.Contains(images, image) {
			return entry
		}
	}
	t.Fatalf("no history entry of %s deploys %s: %v", name, image, history)
	return nil
}

// rolledForward creates the automatically synced Application name, with
// the argocd method and semver, and starts a controller for it, which
// deploys 1.0.0 and then 1.1.0: the version a person then rolls back.
func (w *world) rolledForward(t *testing.T, name string) (app, web string, c *runningController) {
	t.Helper()
	app, web = w.push(t, name+"-app", "1.0.0"), w.reg.Repo(name+"-web")+":v0.0.1"
	w.createApp(t, name, name+"/overlays/production", nil, map[string]string{
		"image-list":          "app=" + app,
		"app.update-strategy": "semver",
		"write-back-method":   "argocd",
	})
	w.waitDeployed(t, name, "front", app+":v0.0.1", web)
	c = w.startController(t, name)
	w.waitDeployed(t, name, "front", app+":1.0.0", web)
	w.push(t, name+"-app", "1.1.0")
	w.waitDeployed(t, name, "front", app+":1.1.0", web)
	return app, web, c
}
