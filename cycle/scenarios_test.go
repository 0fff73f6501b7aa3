package cycle

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/firstseen"
	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback/git"
)

func TestCycle(t *testing.T) {
	k := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	repo := func(name string) string { return reg.Repo(name) }
	reg.PushImage(t, "eks-app", []string{"v0.0.1"})
	reg.PushImage(t, "eks-app", []string{"v0.0.2"})
	reg.PushImage(t, "eks-app", []string{"v0.1.0", "latest"})
	reg.PushImage(t, "eks-app", []string{"v1.0.0-rc.1"})
	reg.PushImage(t, "eks-web", []string{"v0.0.1"})
	reg.PushImage(t, "eks-web", []string{"v0.0.3"})
	reg.PushImage(t, "chart-app", []string{"1.0.0", "1.1.0", "2.0.0"})

	t.Run("seed 003: two images with semver, argocd write-back", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "seed003*"})
		w.create(t, appObject("seed003", map[string]string{
			"write-back-method":   "argocd",
			"image-list":          "app=" + repo("eks-app") + ",web=" + repo("eks-web"),
			"app.update-strategy": "semver",
			"web.update-strategy": "semver",
		}, nil, repo("eks-app")+":v0.0.1", repo("eks-web")+":v0.0.1"))

		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 2 || sum.Errors != 0 || sum.TagListings != 2 {
			t.Fatalf("summary %+v", sum)
		}
		want := []string{repo("eks-app") + ":v0.1.0", repo("eks-web") + ":v0.0.3"}
		got := testenv.KustomizeImages(t, w.get(t, "seed003"))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("kustomize images %v, want %v", got, want)
		}
		evs := w.events(t, "seed003")
		poll.True(t, 15*time.Second, "an event on the Application seed003", func() bool { evs = w.events(t, "seed003"); return len(evs) > 0 })
		if evs[0].Reason != ReasonImagesUpdated || evs[0].Type != "Normal" || !strings.Contains(evs[0].Message, "v0.1.0") {
			t.Errorf("event %s %s %q", evs[0].Type, evs[0].Reason, evs[0].Message)
		}
		// The annotations alerting on the old tool's events reads, one set
		// per image in image-list order.
		wantAnnotations := map[string]string{
			"argocd-image-updater.image-0/full-image-name": repo("eks-app"),
			"argocd-image-updater.image-0/image-name":      "eks-app",
			"argocd-image-updater.image-0/old-tag":         "v0.0.1",
			"argocd-image-updater.image-0/new-tag":         "v0.1.0",
			"argocd-image-updater.image-1/full-image-name": repo("eks-web"),
			"argocd-image-updater.image-1/image-name":      "eks-web",
			"argocd-image-updater.image-1/old-tag":         "v0.0.1",
			"argocd-image-updater.image-1/new-tag":         "v0.0.3",
		}
		if diff := cmp.Diff(wantAnnotations, evs[0].Annotations); diff != "" {
			t.Errorf("event annotations (-want +got):\n%s", diff)
		}
		if got := testutil.ToFloat64(w.metrics.imagesUpdatedVec.WithLabelValues("argocd/seed003", "", "")); got != 2 {
			t.Errorf("images updated metric %v", got)
		}

		// Argo CD has not synced yet: status still shows v0.0.1, but the
		// override already names the chosen versions, so nothing is written.
		w.syncWatcher(t, "seed003")
		before := w.get(t, "seed003").GetResourceVersion()
		sum = w.updater.RunOnce(t.Context())
		if sum.Updated != 0 || sum.Errors != 0 {
			t.Errorf("second cycle %+v", sum)
		}
		if after := w.get(t, "seed003").GetResourceVersion(); after != before {
			t.Errorf("second cycle wrote the Application (resourceVersion %s -> %s)", before, after)
		}
		if testutil.ToFloat64(w.metrics.kubeRequests) == 0 {
			t.Error("kubernetes API requests not counted")
		}
	})

	// Argo CD Image Updater's answer on its own test input: an image moved
	// to another registry through kustomize.image-name is written at once,
	// at the version that runs, not at the next new tag.
	t.Run("kustomize.image-name moving an image to another registry", func(t *testing.T) {
		reg.PushImage(t, "jannfis/foobar", []string{"1.0.1"})
		w := newWorld(t, k, reg, worldOptions{names: "moved-*"})
		w.create(t,
			appObject("moved-running", map[string]string{
				"image-list":                  "foobar=" + repo("jannfis/foobar") + ":>=1.0.1",
				"foobar.kustomize.image-name": "jannfis/foobar",
			}, nil, "jannfis/foobar:1.0.1"),
			appObject("moved-override", map[string]string{
				"image-list":                  "foobar=" + repo("jannfis/foobar") + ":>=1.0.1",
				"foobar.kustomize.image-name": "jannfis/foobar",
			}, map[string]any{"source": map[string]any{
				"repoURL": "https://git.example.com/deploy.git", "path": "main/overlays/production", "targetRevision": "main",
				"kustomize": map[string]any{"images": []any{"jannfis/foobar:1.0.1"}},
			}}, "jannfis/foobar:1.0.1"),
			// The override under the Kustomize name alone of an image that
			// already runs, under its own name, the newest version is left
			// until a new version comes, as upstream leaves it.
			appObject("moved-runs-own-name", map[string]string{
				"image-list":                  "foobar=" + repo("jannfis/foobar") + ":>=1.0.1",
				"foobar.kustomize.image-name": "jannfis/foobar",
			}, map[string]any{"source": map[string]any{
				"repoURL": "https://git.example.com/deploy.git", "path": "main/overlays/production", "targetRevision": "main",
				"kustomize": map[string]any{"images": []any{"jannfis/foobar:1.0.1"}},
			}}, repo("jannfis/foobar")+":1.0.1"))
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 2 || sum.Errors != 0 {
			t.Fatalf("summary %+v", sum)
		}
		want := []string{"jannfis/foobar=" + repo("jannfis/foobar") + ":1.0.1"}
		for _, name := range []string{"moved-running", "moved-override"} {
			if got := testenv.KustomizeImages(t, w.get(t, name)); !slices.Equal(got, want) {
				t.Errorf("%s: kustomize images %v, want %v", name, got, want)
			}
		}
		if got := testenv.KustomizeImages(t, w.get(t, "moved-runs-own-name")); !slices.Equal(got, []string{"jannfis/foobar:1.0.1"}) {
			t.Errorf("moved-runs-own-name: kustomize images %v, want the override left as it was", got)
		}
		// Written once: the override now names the image where it lives.
		w.syncWatcher(t, "moved-running")
		w.syncWatcher(t, "moved-override")
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 0 || sum.Errors != 0 {
			t.Errorf("second cycle %+v", sum)
		}
	})

	t.Run("helm parameters: default, custom names and image-spec", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "helm*"})
		helmSpec := map[string]any{"source": map[string]any{
			"repoURL": "https://charts.example.com", "chart": "app", "targetRevision": "1.0.0",
			"helm": map[string]any{"parameters": []any{map[string]any{"name": "replicaCount", "value": "2"}}},
		}}
		w.create(t,
			appObject("helm-default", map[string]string{"image-list": "app=" + repo("chart-app") + ":~1"},
				deepCopy(helmSpec), repo("chart-app")+":1.0.0"),
			appObject("helm-custom", map[string]string{
				"image-list":          "app=" + repo("chart-app") + ":^1",
				"app.helm.image-name": "app.image.repository",
				"app.helm.image-tag":  "app.image.tag",
			}, deepCopy(helmSpec), repo("chart-app")+":1.0.0"),
			appObject("helm-spec", map[string]string{
				"image-list":          "app=" + repo("chart-app"),
				"app.helm.image-spec": "images[1].image",
			}, deepCopy(helmSpec), repo("chart-app")+":1.0.0"),
			// Only the tag's name given: the image name goes to image.name.
			appObject("helm-tag-only", map[string]string{
				"image-list":         "app=" + repo("chart-app") + ":~1",
				"app.helm.image-tag": "app.version",
			}, deepCopy(helmSpec), repo("chart-app")+":1.0.0"),
		)
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 4 || sum.Errors != 0 || sum.TagListings != 1 {
			t.Fatalf("summary %+v", sum)
		}
		params := func(name string) map[string]string {
			raw, _, _ := unstructured.NestedSlice(w.get(t, name).Object, "spec", "source", "helm", "parameters")
			out := map[string]string{}
			for _, p := range raw {
				m := p.(map[string]any)
				out[m["name"].(string)] = fmt.Sprintf("%v/%v", m["value"], m["forceString"])
			}
			return out
		}
		for name, want := range map[string]map[string]string{
			"helm-default":  {"replicaCount": "2/<nil>", "image.name": repo("chart-app") + "/true", "image.tag": "1.1.0/true"},
			"helm-custom":   {"replicaCount": "2/<nil>", "app.image.repository": repo("chart-app") + "/true", "app.image.tag": "1.1.0/true"},
			"helm-spec":     {"replicaCount": "2/<nil>", "images[1].image": repo("chart-app") + ":2.0.0/true"},
			"helm-tag-only": {"replicaCount": "2/<nil>", "image.name": repo("chart-app") + "/true", "app.version": "1.1.0/true"},
		} {
			if got := params(name); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s parameters %v, want %v", name, got, want)
			}
		}
	})

	t.Run("digests pinned: the index's digest kept or pinned again when the tag moves", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "pin-*"})
		platforms := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
		reg.PushImage(t, "pin-app", []string{"1.0.0"})
		first := reg.PushIndex(t, "pin-app", "1.1.0", platforms).String()
		helmSpec := map[string]any{"source": map[string]any{"repoURL": "https://charts.example.com", "chart": "app", "targetRevision": "1.0.0", "helm": map[string]any{}}}
		w.create(t,
			appObject("pin-once", map[string]string{"image-list": "app=" + repo("pin-app"), "app.pin-digest": "if-not-present"}, nil, repo("pin-app")+":1.0.0"),
			appObject("pin-always", map[string]string{"image-list": "app=" + repo("pin-app"), "pin-digest": "Always"}, nil, repo("pin-app")+":1.0.0"),
			appObject("pin-helm", map[string]string{"image-list": "app=" + repo("pin-app"), "pin-digest": "always", "app.helm.image-digest": "image.digest"},
				helmSpec, repo("pin-app")+":1.0.0"),
			appObject("pin-bad", map[string]string{"image-list": "app=" + repo("pin-app"), "app.pin-digest": "sometimes"}, nil, repo("pin-app")+":1.0.0"),
		)
		helm := func() string {
			raw, _, _ := unstructured.NestedSlice(w.get(t, "pin-helm").Object, "spec", "source", "helm", "parameters")
			return fmt.Sprint(raw)
		}
		check := func(once, always string) {
			t.Helper()
			for name, want := range map[string]string{"pin-once": once, "pin-always": always} {
				if got := testenv.KustomizeImages(t, w.get(t, name)); !slices.Equal(got, []string{repo("pin-app") + ":1.1.0@" + want}) {
					t.Errorf("%s: kustomize images %v, want 1.1.0@%s", name, got, want)
				}
			}
			want := fmt.Sprint([]any{
				map[string]any{"name": "image.name", "value": repo("pin-app"), "forceString": true},
				map[string]any{"name": "image.tag", "value": "1.1.0", "forceString": true},
				map[string]any{"name": "image.digest", "value": always, "forceString": true},
			})
			if got := helm(); got != want {
				t.Errorf("pin-helm: parameters %s, want %s", got, want)
			}
		}
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 3 || sum.Errors != 1 {
			t.Fatalf("summary %+v", sum)
		}
		check(first, first)
		if got := testenv.KustomizeImages(t, w.get(t, "pin-bad")); len(got) != 0 {
			t.Errorf("pin-bad: written %v with a pin-digest it does not understand", got)
		}

		// The tag pushed again: kept by if-not-present, followed by always.
		moved := reg.PushIndex(t, "pin-app", "1.1.0", platforms, testenv.Labels(map[string]string{"build": "2"})).String()
		if moved == first {
			t.Fatal("the second index has the first one's digest")
		}
		sum = w.updater.RunOnce(t.Context())
		if sum.Updated != 2 || sum.Errors != 1 {
			t.Fatalf("summary after the tag moved %+v", sum)
		}
		check(first, moved)

		// Nothing moved: nothing written.
		if sum = w.updater.RunOnce(t.Context()); sum.Updated != 0 {
			t.Fatalf("summary with nothing moved %+v", sum)
		}
	})

	t.Run("a minimum release age: a version too young waits, then is taken; its first-seen time survives a restart", func(t *testing.T) {
		now := time.Now()
		clock := func() time.Time { return now }
		backend := firstseen.ConfigMap{ConfigMaps: kubernetes.NewForConfigOrDie(k.Config).CoreV1().ConfigMaps(testenv.ArgoCDNamespace), Name: firstseen.DefaultConfigMap}
		started := func() *world {
			store := firstseen.New(backend, firstseen.WithClock(clock))
			if err := store.Load(t.Context()); err != nil {
				t.Fatal(err)
			}
			return newWorld(t, k, reg, worldOptions{names: "age-*", updater: []Option{WithFirstSeen(store), withClock(clock), WithMinReleaseAge(7 * 24 * time.Hour)}})
		}
		w := started()
		reg.PushImage(t, "age-app", []string{"1.0.0"})
		w.create(t,
			appObject("age-default", map[string]string{"image-list": "app=" + repo("age-app")}, nil, repo("age-app")+":1.0.0"),
			appObject("age-own", map[string]string{"image-list": "app=" + repo("age-app"), "app.minimum-release-age": "1h"}, nil, repo("age-app")+":1.0.0"),
			appObject("age-none", map[string]string{"image-list": "app=" + repo("age-app"), "minimum-release-age": "0"}, nil, repo("age-app")+":1.0.0"),
			appObject("age-bad", map[string]string{"image-list": "app=" + repo("age-app"), "minimum-release-age": "a week"}, nil, repo("age-app")+":1.0.0"),
		)
		written := func(w *world, name string) string {
			t.Helper()
			got := testenv.KustomizeImages(t, w.get(t, name))
			if len(got) == 0 {
				return ""
			}
			return strings.TrimPrefix(got[0], repo("age-app")+":")
		}
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 0 || sum.Errors != 1 {
			t.Fatalf("first cycle %+v", sum)
		}
		reg.PushImage(t, "age-app", []string{"1.1.0"})
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 1 || written(w, "age-none") != "1.1.0" {
			t.Fatalf("the cycle after the push: %+v, age-none at %q", sum, written(w, "age-none"))
		}
		if !strings.Contains(w.logs.String(), "version 1.1.0 waits for its minimum release age (168h0m0s) until") {
			t.Errorf("no log of the wait:\n%s", w.logs.String())
		}
		now = now.Add(2 * time.Hour)
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 1 || written(w, "age-own") != "1.1.0" || written(w, "age-default") != "" {
			t.Fatalf("two hours later: %+v, age-own at %q, age-default at %q", sum, written(w, "age-own"), written(w, "age-default"))
		}

		// A new process a week later reads when 1.1.0 was first seen: it
		// is old enough now, which it would not be if it looked new.
		now = now.Add(7 * 24 * time.Hour)
		w = started()
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 1 || written(w, "age-default") != "1.1.0" {
			t.Fatalf("a week later, after a restart: %+v, age-default at %q", sum, written(w, "age-default"))
		}
		if got := testenv.KustomizeImages(t, w.get(t, "age-bad")); len(got) != 0 {
			t.Errorf("age-bad written %v with an age it does not understand", got)
		}
	})

	t.Run("a minimum release age from the registry's push times: an old push taken at first sight, a young one waits from its push", func(t *testing.T) {
		api := testenv.StartPushTimes(t, "harbor", reg.Host)
		api.Credentials(reg.Username, reg.Password)
		pushed := time.Now().Add(-time.Hour)
		api.Push("pushed/app", "1.1.0", time.Now().Add(-10*24*time.Hour))
		api.Push("pushed/app", "1.2.0", pushed)
		entry := fmt.Sprintf("- name: harbor\n  prefix: %s/pushed\n  api_url: http://%s\n  credentials: env:REGISTRY_CREDS\n  pushtimes: harbor\n  pushtimes_url: %s\n", reg.Host, reg.Host, api.URL)
		w := newWorld(t, k, reg, worldOptions{names: "pushed-*", registries: entry, updater: []Option{WithFirstSeen(firstseen.New(nil)), WithMinReleaseAge(7 * 24 * time.Hour)}})
		reg.PushImage(t, "pushed/app", []string{"1.0.0", "1.1.0", "1.2.0"})
		w.create(t,
			appObject("pushed-a", map[string]string{"image-list": "app=" + repo("pushed/app")}, nil, repo("pushed/app")+":1.0.0"),
			appObject("pushed-b", map[string]string{"image-list": "app=" + repo("pushed/app")}, nil, repo("pushed/app")+":1.0.0"),
		)
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 2 || sum.Waiting != 2 || sum.Errors != 0 {
			t.Fatalf("summary %+v", sum)
		}
		for _, name := range []string{"pushed-a", "pushed-b"} {
			if got := testenv.KustomizeImages(t, w.get(t, name)); !slices.Equal(got, []string{repo("pushed/app") + ":1.1.0"}) {
				t.Errorf("%s: %v, want 1.1.0, pushed ten days ago", name, got)
			}
		}
		wait := "image app: version 1.2.0 waits for its minimum release age (168h0m0s) until " + pushed.Add(7*24*time.Hour).UTC().Format("2006-01-02T15:04")
		poll.True(t, 15*time.Second, "a VersionWaiting event from 1.2.0's push: "+wait, func() bool {
			for _, e := range w.events(t, "pushed-a") {
				if e.Reason == ReasonVersionWaiting && strings.HasPrefix(e.Message, wait) {
					return true
				}
			}
			return false
		})
		if n := len(api.Requests()); n != 1 {
			t.Errorf("%d requests for push times, want one for both Applications: %q", n, api.Requests())
		}
		if p := api.Problems(); len(p) > 0 {
			t.Errorf("requests Harbor would refuse: %q", p)
		}
	})

	t.Run("update windows: a change waits outside them and is written as one opens", func(t *testing.T) {
		now := time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC) // a Wednesday, 14:00 in Berlin
		w := newWorld(t, k, reg, worldOptions{names: "win-*", updater: []Option{withClock(func() time.Time { return now })}})
		reg.PushImage(t, "win-app", []string{"1.0.0", "1.1.0"})
		w.create(t,
			appObject("win-deny", map[string]string{"image-list": "app=" + repo("win-app"), "update-windows": "deny 0 12 * * * 2h"}, nil, repo("win-app")+":1.0.0"),
			appObject("win-allow", map[string]string{"image-list": "app=" + repo("win-app"), "update-windows": "allow 0 9 * * 1-5 8h Europe/Berlin; deny 0 0 24 12 * 48h"}, nil, repo("win-app")+":1.0.0"),
			appObject("win-bad", map[string]string{"image-list": "app=" + repo("win-app"), "update-windows": "allow 0 9 * * * forever"}, nil, repo("win-app")+":1.0.0"),
			appObject("win-project", map[string]string{"image-list": "app=" + repo("win-app"), "use-sync-windows": "true"}, nil, repo("win-app")+":1.0.0"),
		)
		written := func(name string) []string { return testenv.KustomizeImages(t, w.get(t, name)) }
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 1 || sum.WaitingWindow != 2 || sum.Errors != 1 {
			t.Fatalf("summary %+v", sum)
		}
		if want := time.Date(2026, 12, 2, 14, 0, 1, 0, time.UTC); !sum.NextWindow.Equal(want) {
			t.Errorf("next window %v, want %v", sum.NextWindow, want)
		}
		if got := written("win-allow"); !slices.Equal(got, []string{repo("win-app") + ":1.1.0"}) {
			t.Errorf("win-allow, inside its window: %v", got)
		}
		for _, name := range []string{"win-deny", "win-bad", "win-project"} {
			if got := written(name); len(got) != 0 {
				t.Errorf("%s written outside its windows: %v", name, got)
			}
		}
		waitMsg := "image app: version 1.1.0 waits: the Application is outside its update windows until 2026-12-02T14:00:01Z"
		poll.True(t, 15*time.Second, "a VersionWaiting event on win-deny", func() bool {
			for _, e := range w.events(t, "win-deny") {
				if e.Reason == ReasonVersionWaiting && e.Message == waitMsg {
					return true
				}
			}
			return false
		})
		if got := testutil.ToFloat64(w.metrics.versionsWaiting.WithLabelValues("update-window")); got != 2 {
			t.Errorf("versions waiting for a window: %v, want 2", got)
		}

		now = time.Date(2026, 12, 2, 14, 0, 1, 0, time.UTC)
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 1 || !slices.Equal(written("win-deny"), []string{repo("win-app") + ":1.1.0"}) {
			t.Fatalf("as the window opens: %+v, win-deny at %v", sum, written("win-deny"))
		}
	})

	t.Run("promotion: production takes only what staging runs and its gate verified, after its soak", func(t *testing.T) {
		now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
		gate := &skipGate{verified: map[string]Verified{}}
		w := newWorld(t, k, reg, worldOptions{names: "promo-*", updater: []Option{withClock(func() time.Time { return now }), WithHealthGate(gate)}})
		reg.PushImage(t, "promo-app", []string{"1.0.0", "1.1.0", "1.2.0"})
		app := repo("promo-app")
		prod := map[string]string{"image-list": "app=" + app, "app.promote-from": "promo-staging", "app.promote-soak": "1h"}
		w.create(t,
			appObject("promo-staging", map[string]string{"image-list": "app=" + app}, nil, app+":1.1.0"),
			appObject("promo-prod", prod, nil, app+":1.0.0"),
			appObject("promo-elsewhere", map[string]string{"image-list": "app=" + app, "app.promote-from": "team-b/promo-staging"}, nil, app+":1.0.0"),
			appObject("promo-nowhere", map[string]string{"image-list": "app=" + app, "app.promote-from": "promo-missing"}, nil, app+":1.0.0"),
		)
		written := func(name string) []string { return testenv.KustomizeImages(t, w.get(t, name)) }

		// Nothing verified in staging yet: production waits, and staging
		// (no stage of its own) takes 1.2.0.
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 1 || sum.WaitingPromotion != 1 || sum.Errors != 2 || len(written("promo-prod")) != 0 {
			t.Fatalf("first cycle %+v, promo-prod at %v", sum, written("promo-prod"))
		}
		for _, want := range []string{
			"app.promote-from: stage team-b/promo-staging is in another namespace: an image is promoted only from an Application of its own namespace (argocd)",
			"app.promote-from: stage argocd/promo-missing is no Application this controller updates",
			"nothing to promote: no version of " + app + " is verified in argocd/promo-staging yet",
		} {
			if !strings.Contains(w.logs.String(), want) {
				t.Errorf("no log of %q", want)
			}
		}

		// Staging verified 1.1.0, which it runs (Argo CD says so), 30
		// minutes ago: it soaks.
		gate.mu.Lock()
		gate.verified["argocd/promo-staging/app"] = Verified{Version: imageref.Version{Tag: "1.1.0"}, DeployedAt: now.Add(-30 * time.Minute)}
		gate.mu.Unlock()
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 0 || sum.WaitingPromotion != 1 {
			t.Fatalf("while it soaks: %+v", sum)
		}
		poll.True(t, 15*time.Second, "a VersionWaiting event on promo-prod", func() bool {
			for _, e := range w.events(t, "promo-prod") {
				if e.Reason == ReasonVersionWaiting && strings.Contains(e.Message, "version 1.1.0 waits: it soaks in argocd/promo-staging for 1h0m0s until 2026-12-02T12:30:00Z") {
					return true
				}
			}
			return false
		})

		// Soaked: production takes 1.1.0, not the newer 1.2.0 staging has
		// not verified.
		now = now.Add(31 * time.Minute)
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 1 || !slices.Equal(written("promo-prod"), []string{app + ":1.1.0"}) {
			t.Fatalf("after the soak: %+v, promo-prod at %v", sum, written("promo-prod"))
		}
	})

	t.Run("multi-source: the source naming the image changes", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "multi*"})
		w.create(t, appObject("multi", map[string]string{"image-list": "web=" + repo("eks-web")}, map[string]any{"sources": []any{
			map[string]any{"repoURL": "https://git.example.com/values.git", "ref": "values", "targetRevision": "main"},
			map[string]any{"repoURL": "https://charts.example.com", "chart": "other", "targetRevision": "1.0.0", "helm": map[string]any{}},
			map[string]any{"repoURL": "https://git.example.com/deploy.git", "path": "web", "targetRevision": "main",
				"kustomize": map[string]any{"images": []any{repo("eks-web") + ":v0.0.1"}}},
		}}, repo("eks-web")+":v0.0.1"))
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 1 || sum.Errors != 0 {
			t.Fatalf("summary %+v", sum)
		}
		obj := w.get(t, "multi")
		sources, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
		images, _, _ := unstructured.NestedStringSlice(sources[2].(map[string]any), "kustomize", "images")
		if !slices.Equal(images, []string{repo("eks-web") + ":v0.0.3"}) {
			t.Errorf("kustomize source images %v", images)
		}
		if _, found, _ := unstructured.NestedSlice(sources[1].(map[string]any), "helm", "parameters"); found {
			t.Error("the helm source was changed too")
		}
	})

	t.Run("not running is skipped unless force-update; ignore-tags * pauses", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "skip*"})
		w.create(t,
			appObject("skip-not-running", map[string]string{"image-list": "app=" + repo("eks-app")}, nil),
			appObject("skip-forced", map[string]string{"image-list": "app=" + repo("eks-app"), "app.force-update": "true"}, nil),
			appObject("skip-paused", map[string]string{"image-list": "app=" + repo("eks-app"), "app.ignore-tags": "*"}, nil, repo("eks-app")+":v0.0.1"),
		)
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 1 || sum.Skipped != 1 || sum.Errors != 0 {
			t.Fatalf("summary %+v", sum)
		}
		if got := testenv.KustomizeImages(t, w.get(t, "skip-forced")); !slices.Equal(got, []string{repo("eks-app") + ":v0.1.0"}) {
			t.Errorf("forced image %v", got)
		}
		for _, name := range []string{"skip-not-running", "skip-paused"} {
			if got := testenv.KustomizeImages(t, w.get(t, name)); len(got) != 0 {
				t.Errorf("%s was written: %v", name, got)
			}
		}
	})

	t.Run("a bad annotation affects only its image", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "bad*"})
		w.create(t, appObject("bad-one", map[string]string{
			"image-list":          "app=" + repo("eks-app") + ",web=" + repo("eks-web"),
			"app.update-strategy": "newest",
			"web.allow-tags":      "regexp:^v0\\.0\\.",
		}, nil, repo("eks-app")+":v0.0.1", repo("eks-web")+":v0.0.1"))
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 1 || sum.Errors != 1 {
			t.Fatalf("summary %+v", sum)
		}
		if got := testenv.KustomizeImages(t, w.get(t, "bad-one")); !slices.Equal(got, []string{repo("eks-web") + ":v0.0.3"}) {
			t.Errorf("images %v", got)
		}
		var warning, reason string
		poll.True(t, 15*time.Second, "a warning event on the Application bad-one", func() bool {
			for _, e := range w.events(t, "bad-one") {
				if e.Type == "Warning" {
					warning, reason = e.Message, e.Reason
					return true
				}
			}
			return false
		})
		if !strings.Contains(warning, `"newest"`) || !strings.Contains(warning, "app") || reason != ReasonInvalidConfig {
			t.Errorf("warning event %s %q does not name the image and the bad value", reason, warning)
		}
		// The same problem next cycle is not reported again.
		w.syncWatcher(t, "bad-one")
		w.updater.RunOnce(t.Context())
		n := 0
		for _, e := range w.events(t, "bad-one") {
			if e.Type == "Warning" {
				n += int(e.Count)
			}
		}
		if n != 1 {
			t.Errorf("%d warning events, want 1", n)
		}
	})

	t.Run("a bad write-back setting stops the whole Application", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "badwb*"})
		w.create(t, appObject("badwb", map[string]string{
			"image-list": "app=" + repo("eks-app"), "write-back-method": "svn",
		}, nil, repo("eks-app")+":v0.0.1"))
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 0 || sum.Errors != 1 || sum.Skipped != 1 {
			t.Fatalf("summary %+v", sum)
		}
		if got := testenv.KustomizeImages(t, w.get(t, "badwb")); len(got) != 0 {
			t.Errorf("written despite the bad write-back method: %v", got)
		}
	})

	t.Run("dry-run writes nothing", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "dry*", dryRun: true})
		w.create(t, appObject("dry", map[string]string{"image-list": "app=" + repo("eks-app")}, nil, repo("eks-app")+":v0.0.1"))
		before := w.get(t, "dry").GetResourceVersion()
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 1 {
			t.Fatalf("summary %+v", sum)
		}
		if after := w.get(t, "dry").GetResourceVersion(); after != before {
			t.Error("dry-run wrote the Application")
		}
	})

	t.Run("an image's ext: script runs once per cycle", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "extonce*", dryRun: true})
		dir := t.TempDir()
		log := filepath.Join(dir, "runs")
		script := filepath.Join(dir, "login.sh")
		body := fmt.Sprintf("#!/bin/sh\necho run >> %s\necho '%s:%s'\n", log, reg.Username, reg.Password)
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		// newest-build reads the metadata of every tag: one tag listing
		// and five metadata requests, each with the image's credentials.
		w.create(t, appObject("extonce", map[string]string{
			"image-list":          "app=" + repo("eks-app"),
			"app.update-strategy": "newest-build",
			"app.pull-secret":     "ext:" + script,
		}, nil, repo("eks-app")+":v0.0.1"))
		runs := func() int {
			b, _ := os.ReadFile(log)
			return strings.Count(string(b), "run")
		}
		for cycle := 1; cycle <= 2; cycle++ {
			if sum := w.updater.RunOnce(t.Context()); sum.Errors != 0 || sum.Images != 1 {
				t.Fatalf("cycle %d: summary %+v", cycle, sum)
			}
			if n := runs(); n != cycle {
				t.Errorf("after cycle %d the script ran %d times, want once per cycle", cycle, n)
			}
		}
	})

	t.Run("50 Applications sharing 5 images: 5 tag listings", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "fleet-*"})
		for i := range 5 {
			reg.PushTags(t, fmt.Sprintf("fleet/img-%d", i), []string{"v0.0.1", "v0.0.2"})
		}
		var apps []*unstructured.Unstructured
		for i := range 50 {
			img := repo(fmt.Sprintf("fleet/img-%d", i%5))
			apps = append(apps, appObject(fmt.Sprintf("fleet-%02d", i), map[string]string{"image-list": "x=" + img}, nil, img+":v0.0.1"))
		}
		w.create(t, apps...)
		w.requests.tagLists.Store(0)
		sum := w.updater.RunOnce(t.Context())
		if sum.Applications != 50 || sum.Updated != 50 || sum.Errors != 0 {
			t.Fatalf("summary %+v", sum)
		}
		if got := w.requests.tagLists.Load(); got != 5 || sum.TagListings != 5 {
			t.Errorf("%d tag-list requests (%d listings planned), want 5", got, sum.TagListings)
		}
	})

	t.Run("series of a deleted Application are removed", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "gone*"})
		w.create(t,
			appObject("gone-one", map[string]string{"image-list": "app=" + repo("eks-app")}, nil, repo("eks-app")+":v0.0.1"),
			appObject("gone-two", map[string]string{"image-list": "app=" + repo("eks-app")}, nil, repo("eks-app")+":v0.0.1"))
		w.updater.RunOnce(t.Context())
		count := func() int {
			return testutil.CollectAndCount(w.metrics.imagesUpdatedVec) + testutil.CollectAndCount(w.metrics.imagesWatchedVec)
		}
		if got := count(); got != 4 {
			t.Fatalf("%d series, want updated and watched for both", got)
		}
		if err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Delete(t.Context(), "gone-one", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.True(t, 15*time.Second, "the watcher to drop the deleted Application gone-one", func() bool { return len(w.watcher.Applications()) == 1 })
		w.updater.RunOnce(t.Context())
		if got := count(); got != 2 {
			t.Errorf("%d series after the deletion, want those of gone-two only", got)
		}
		if got := testutil.ToFloat64(w.metrics.imagesUpdatedVec.WithLabelValues("argocd/gone-two", "", "")); got != 1 {
			t.Errorf("gone-two's updated count %v, want it kept", got)
		}
	})

	// A registry that stops sending holds its images only for the image
	// timeout: the cycle ends and the other images are updated.
	for _, stallOn := range []string{"tags", "manifest"} {
		t.Run("a registry stalling in its "+stallOn+" fails its image only", func(t *testing.T) {
			stalled := startStallingRegistry(t, stallOn)
			const timeout = 2 * time.Second
			w := newWorld(t, k, reg, worldOptions{
				names:      "stall-" + stallOn + "-*",
				registries: fmt.Sprintf("- name: stalled\n  prefix: %[1]s\n  api_url: http://%[1]s\n", stalled),
				updater:    []Option{WithImageTimeout(timeout)},
			})
			w.create(t,
				appObject("stall-"+stallOn+"-good", map[string]string{"image-list": "app=" + repo("eks-app")}, nil, repo("eks-app")+":v0.0.1"),
				appObject("stall-"+stallOn+"-stalled", map[string]string{
					"image-list":          "app=" + stalled + "/app:latest",
					"app.update-strategy": "digest",
				}, nil, stalled+"/app:latest"))

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan Summary, 1)
			go func() { done <- w.updater.RunOnce(ctx) }()
			var sum Summary
			select {
			case sum = <-done:
			case <-time.After(time.Minute): // a safety net only: the cycle must end by itself
				cancel()
				<-done
				t.Fatal("the cycle did not end while a registry stalled")
			}
			if sum.Updated != 1 || sum.Errors != 1 {
				t.Fatalf("summary %+v, want the good image updated and one error", sum)
			}
			if got := testenv.KustomizeImages(t, w.get(t, "stall-"+stallOn+"-good")); !slices.Equal(got, []string{repo("eks-app") + ":v0.1.0"}) {
				t.Errorf("the good image was not written: %v", got)
			}
			var msg string
			poll.True(t, 15*time.Second, "an UpdateFailed event on the Application stall-"+stallOn+"-stalled", func() bool {
				for _, e := range w.events(t, "stall-"+stallOn+"-stalled") {
					if e.Reason == ReasonUpdateFailed {
						msg = e.Message
						return true
					}
				}
				return false
			})
			if !strings.Contains(msg, "gave up on "+stalled+"/app after 2s, the time allowed for one image") {
				t.Errorf("the stalled image's event does not say it timed out: %q", msg)
			}
		})
	}

	// Fair share: an Application whose 30 images are on a registry that
	// accepts connections and never answers holds its own images only:
	// another team's image is written while that registry still holds
	// the hostile Application's connections, and the hostile images fail
	// together at the Application's timeout.
	t.Run("a hostile Application on a registry that never answers delays its own images only", func(t *testing.T) {
		silent := startSilentListener(t)
		const appTimeout = 6 * time.Second
		w := newWorld(t, k, reg, worldOptions{
			names:      "hostile-*",
			registries: fmt.Sprintf("- name: silent\n  prefix: %[1]s\n  api_url: http://%[1]s\n", silent.host),
			updater:    []Option{WithMaxConcurrency(3), WithImageTimeout(time.Minute), WithApplicationTimeout(appTimeout)},
		})
		var list, running []string
		for i := range 30 {
			list = append(list, fmt.Sprintf("i%d=%s/img-%02d", i, silent.host, i))
			running = append(running, fmt.Sprintf("%s/img-%02d:v0.0.1", silent.host, i))
		}
		w.create(t,
			appObject("hostile-hog", map[string]string{"image-list": strings.Join(list, ",")}, nil, running...),
			appObject("hostile-team", map[string]string{"image-list": "app=" + repo("eks-app")}, nil, repo("eks-app")+":v0.0.1"))

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a safety net only
		defer cancel()
		done := make(chan Summary, 1)
		go func() { done <- w.updater.RunOnce(ctx) }()
		var held int32
		poll.True(t, 45*time.Second, "hostile-team's image to be written", func() bool {
			if got := testenv.KustomizeImages(t, w.get(t, "hostile-team")); len(got) == 0 {
				return false
			}
			held = silent.open.Load()
			return true
		})
		select {
		case sum := <-done:
			t.Fatalf("hostile-team was written only once the cycle ended (%+v)", sum)
		default:
		}
		if held == 0 {
			t.Error("hostile-team was written after the silent registry let go of every connection")
		}
		sum := <-done
		if sum.Updated != 1 || sum.Errors != 30 {
			t.Errorf("summary %+v, want hostile-team's image updated and the 30 hostile images failed", sum)
		}
		var msg string
		poll.True(t, 15*time.Second, "an UpdateFailed event on hostile-hog", func() bool {
			for _, e := range w.events(t, "hostile-hog") {
				if e.Reason == ReasonUpdateFailed {
					msg = e.Message
					return true
				}
			}
			return false
		})
		if want := "gave up after 6s, the time allowed for the registry and chart repository requests of one Application: 30 of its 30 images"; !strings.Contains(msg, want) {
			t.Errorf("hostile-hog's event %q, want it to say %q", msg, want)
		}
	})

	t.Run("a panic while handling one image fails that image only", func(t *testing.T) {
		// The same registry under another name, whose credentials' lookup
		// panics: inside the registry client, on a goroutine that the
		// client's coalesced credential resolution started.
		other := strings.Replace(reg.Host, "127.0.0.1", "localhost", 1)
		w := newWorld(t, k, reg, worldOptions{names: "panic*", registries: fmt.Sprintf(`- name: panicking
  prefix: %s
  api_url: http://%s
  credentials: env:%s
`, other, reg.Host, panicEnv)})
		w.create(t, appObject("panic-one", map[string]string{
			"image-list": "app=" + repo("eks-app") + ",web=" + other + "/eks-web",
		}, nil, repo("eks-app")+":v0.0.1", other+"/eks-web:v0.0.1"))
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 1 || sum.Errors != 1 {
			t.Fatalf("summary %+v, want the good image updated and one error", sum)
		}
		got := testenv.KustomizeImages(t, w.get(t, "panic-one"))
		if !slices.Equal(got, []string{repo("eks-app") + ":v0.1.0"}) {
			t.Errorf("kustomize images %v", got)
		}
		var evs []corev1.Event
		poll.True(t, 15*time.Second, "an UpdateFailed event naming the internal error on the Application panic-one", func() bool {
			evs = w.events(t, "panic-one")
			for _, e := range evs {
				if e.Reason == ReasonUpdateFailed && strings.Contains(e.Message, "internal error") {
					return true
				}
			}
			return false
		})
	})

	t.Run("git write-back refused or failing: events and logs without credentials", func(t *testing.T) {
		const secret = "url-secret-4711"
		badGateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}))
		t.Cleanup(badGateway.Close)
		withCreds := strings.Replace(badGateway.URL, "://", "://user:"+secret+"@", 1) + "/repo.git"
		k.CreateAppProject(t, testenv.ArgoCDNamespace, "default", []string{"*"}, nil)
		// Port 1 of the loopback address: nothing may be sent there, and
		// nothing answers.
		const nowhere = "http://127.0.0.1:1"
		k.CreateAppProject(t, testenv.ArgoCDNamespace, "gitwb-restricted", []string{nowhere + "/allowed/*"}, nil)
		tests := []struct {
			name, project, repository, method string
			wantReason, wantMessage           string
		}{
			{name: "gitwb-502", project: "default", repository: withCreds, method: "git",
				wantReason: ReasonUpdateFailed, wantMessage: "status code: 502"},
			{name: "gitwb-not-in-project", project: "gitwb-restricted", repository: nowhere + "/other/repo.git", method: "git",
				wantReason: ReasonInvalidConfig, wantMessage: "repository " + nowhere + "/other/repo.git is not permitted by AppProject gitwb-restricted (spec.sourceRepos)"},
			{name: "gitwb-missing-project", project: "gitwb-missing", repository: nowhere + "/allowed/repo.git", method: "git",
				wantReason: ReasonInvalidConfig, wantMessage: "AppProject argocd/gitwb-missing does not exist"},
			{name: "gitwb-foreign-secret", project: "default", repository: nowhere + "/allowed/repo.git", method: "git:secret:kube-system/creds",
				wantReason: ReasonInvalidConfig, wantMessage: "git:secret:kube-system/creds names a Secret in namespace kube-system; an Application's annotations may name only Secrets in the Application's own namespace, argocd"},
		}
		w := newWorld(t, k, reg, worldOptions{names: "gitwb-*", git: true})
		for _, tt := range tests {
			app := appObject(tt.name, map[string]string{
				"image-list":        "app=" + repo("eks-app"),
				"write-back-method": tt.method,
				"git-repository":    tt.repository,
				"git-branch":        "main",
			}, nil, repo("eks-app")+":v0.0.1")
			app.Object["spec"].(map[string]any)["project"] = tt.project
			w.create(t, app)
		}
		sum := w.updater.RunOnce(t.Context())
		if sum.Errors != len(tests) {
			t.Errorf("summary %+v, want %d errors", sum, len(tests))
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var ev corev1.Event
				poll.True(t, 15*time.Second, "a warning event on the Application "+tt.name, func() bool {
					for _, e := range w.events(t, tt.name) {
						if e.Type == corev1.EventTypeWarning {
							ev = e
							return true
						}
					}
					return false
				})
				if ev.Reason != tt.wantReason || !strings.Contains(ev.Message, tt.wantMessage) {
					t.Errorf("event %s %q, want %s containing %q", ev.Reason, ev.Message, tt.wantReason, tt.wantMessage)
				}
				if strings.Contains(ev.Message, secret) {
					t.Errorf("the event shows the secret: %q", ev.Message)
				}
			})
		}
		logs := w.logs.String()
		if !strings.Contains(logs, "status code: 502") {
			t.Errorf("the 502 is not in the log:\n%s", logs)
		}
		if strings.Contains(logs, secret) {
			t.Errorf("the log shows the secret:\n%s", logs)
		}
	})
	t.Run("pull requests: opened, and refusals as UpdateFailed without the token", func(t *testing.T) {
		gitSrv := testenv.StartGitServer(t)
		ca := testenv.NewCA(t, "GitHub CA")
		gh := testenv.StartGitHubAPI(t, ca, nil)
		// The password the URL carries is an access token for the API too.
		gh.AcceptToken(gitSrv.Password)
		hosts, err := forge.NewHosts([]string{gh.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		k.Create(t, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ArgoCDNamespace, Name: "argocd-tls-certs-cm"},
			Data:       map[string]string{"127.0.0.1": string(ca.PEM)},
		})
		k.CreateAppProject(t, testenv.ArgoCDNamespace, "prwb", []string{"*"}, nil)
		for _, tt := range []struct {
			name   string
			status int
		}{{name: "prwb-open"}, {name: "prwb-401", status: http.StatusUnauthorized}, {name: "prwb-422", status: http.StatusUnprocessableEntity}} {
			t.Run(tt.name, func(t *testing.T) {
				gitSrv.CreateRepo(t, "example/"+tt.name, "", map[string]string{"main/overlays/production/kustomization.yaml": "resources: []\n"})
				url := strings.Replace(gitSrv.HTTPRepoURL("example/"+tt.name), "://", "://"+gitSrv.Username+":"+gitSrv.Password+"@", 1)
				gh.FailReviewsWith(tt.status)
				t.Cleanup(func() { gh.FailReviewsWith(0) })
				w := newWorld(t, k, reg, worldOptions{names: tt.name, git: true, gitOptions: []git.Option{git.WithForgeHosts(hosts)}})
				app := appObject(tt.name, map[string]string{
					"image-list":        "app=" + repo("eks-app"),
					"write-back-method": "git",
					"git-repository":    url,
					"git-branch":        "main:image-updates",
					"git-pull-request":  "github",
				}, nil, repo("eks-app")+":v0.0.1")
				app.Object["spec"].(map[string]any)["project"] = "prwb"
				w.create(t, app)
				sum := w.updater.RunOnce(t.Context())
				wantReason := ReasonImagesUpdated
				if tt.status != 0 {
					wantReason = ReasonUpdateFailed
				}
				var ev corev1.Event
				poll.True(t, 15*time.Second, "a "+wantReason+" event on the Application "+tt.name, func() bool {
					for _, e := range w.events(t, tt.name) {
						if e.Reason == wantReason {
							ev = e
							return true
						}
					}
					return false
				})
				reviews := gh.Reviews("example/" + tt.name)
				if tt.status == 0 {
					if sum.Errors != 0 || len(reviews) != 1 || !strings.Contains(reviews[0].Body, tt.name+":") || !strings.Contains(reviews[0].Body, "to 'v0.1.0'") {
						t.Errorf("summary %+v, requests %+v", sum, reviews)
					}
					return
				}
				want := fmt.Sprintf("%d %s", tt.status, http.StatusText(tt.status))
				if sum.Errors != 1 || len(reviews) != 0 || !strings.Contains(ev.Message, want) || !strings.Contains(ev.Message, "github pull request from image-updates into main") {
					t.Errorf("summary %+v, requests %+v, event %q, want it to contain %q", sum, reviews, ev.Message, want)
				}
				if strings.Contains(ev.Message, gitSrv.Password) || strings.Contains(w.logs.String(), gitSrv.Password) {
					t.Errorf("the token shows in the event or the log: %q", ev.Message)
				}
				if !strings.Contains(w.logs.String(), want) {
					t.Errorf("the refusal is not in the log:\n%s", w.logs.String())
				}
			})
		}
	})
	t.Run("commit messages show the new version's image labels", func(t *testing.T) {
		built := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		reg.PushImage(t, "labelled", []string{"1.0.0"}, testenv.Created(built), testenv.Labels(map[string]string{"org.opencontainers.image.revision": "aaa111"}))
		reg.PushImage(t, "labelled", []string{"1.1.0"}, testenv.Created(built.Add(time.Hour)), testenv.Labels(map[string]string{"org.opencontainers.image.revision": "bbb222"}))
		gitSrv := testenv.StartGitServer(t)
		gitSrv.CreateRepo(t, "example/labels", "", map[string]string{"main/overlays/production/kustomization.yaml": "resources: []\n"})
		url := strings.Replace(gitSrv.HTTPRepoURL("example/labels"), "://", "://"+gitSrv.Username+":"+gitSrv.Password+"@", 1)
		k.CreateAppProject(t, testenv.ArgoCDNamespace, "labels", []string{"*"}, nil)
		tmpl, err := git.ParseCommitMessageTemplate(`{{ range .AppChanges }}{{ .NewTag }} from {{ index .Labels "org.opencontainers.image.revision" }}{{ end }}`)
		if err != nil {
			t.Fatal(err)
		}
		w := newWorld(t, k, reg, worldOptions{names: "labels", git: true, gitOptions: []git.Option{git.WithCommitMessageTemplate(tmpl)}})
		app := appObject("labels", map[string]string{
			"image-list":          "app=" + repo("labelled"),
			"app.update-strategy": "newest-build",
			"write-back-method":   "git",
			"git-repository":      url,
		}, nil, repo("labelled")+":1.0.0")
		app.Object["spec"].(map[string]any)["project"] = "labels"
		w.create(t, app)
		if sum := w.updater.RunOnce(t.Context()); sum.Updated != 1 || sum.Errors != 0 {
			t.Fatalf("summary %+v", sum)
		}
		if log := gitSrv.Log(t, "example/labels", "main"); len(log) != 2 || log[0].Subject != "1.1.0 from bbb222" {
			t.Errorf("commits %+v, want the newest subject %q", log, "1.1.0 from bbb222")
		}
	})
	t.Run("config management plugin targets: argocd and git write-back", func(t *testing.T) {
		gitSrv := testenv.StartGitServer(t)
		gitSrv.CreateRepo(t, "example/cmp", "", map[string]string{"cmp/app/main.jsonnet": "{}\n"})
		url := strings.Replace(gitSrv.HTTPRepoURL("example/cmp"), "://", "://"+gitSrv.Username+":"+gitSrv.Password+"@", 1)
		k.CreateAppProject(t, testenv.ArgoCDNamespace, "cmp", []string{"*"}, nil)
		plugin := func(repoURL string) map[string]any {
			return map[string]any{"source": map[string]any{
				"repoURL": repoURL, "path": "cmp/app", "targetRevision": "main",
				"plugin": map[string]any{"name": "tanka", "env": []any{
					map[string]any{"name": "OTHER", "value": "kept"},
					map[string]any{"name": "APP_TAG", "value": "1.0.0"},
				}},
			}}
		}
		w := newWorld(t, k, reg, worldOptions{names: "cmp-*", git: true})
		viaGit := appObject("cmp-git", map[string]string{
			"image-list":            "app=" + repo("chart-app") + ":~1",
			"app.plugin.image-name": "APP_IMAGE",
			"app.plugin.image-tag":  "APP_TAG",
			"write-back-method":     "git",
		}, plugin(url), repo("chart-app")+":1.0.0")
		viaGit.Object["spec"].(map[string]any)["project"] = "cmp"
		w.create(t,
			appObject("cmp-argocd", map[string]string{
				"image-list":            "app=" + repo("chart-app") + ":~1,web=" + repo("eks-web"),
				"app.plugin.image-name": "APP_IMAGE",
				"app.plugin.image-tag":  "APP_TAG",
				"web.plugin.image-spec": "WEB",
			}, plugin("https://git.example.com/cmp.git"), repo("chart-app")+":1.0.0", repo("eks-web")+":v0.0.1"),
			// Without a plugin target, the argocd method has nowhere to write.
			appObject("cmp-untargeted", map[string]string{"image-list": "app=" + repo("chart-app")},
				plugin("https://git.example.com/cmp.git"), repo("chart-app")+":1.0.0"),
			viaGit,
		)
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 3 || sum.Errors != 1 {
			t.Fatalf("summary %+v, want 3 images updated and 1 error", sum)
		}
		// The argocd method patches the plugin's environment only: its
		// name and the other variable stay.
		got, _, _ := unstructured.NestedMap(w.get(t, "cmp-argocd").Object, "spec", "source", "plugin")
		want := map[string]any{"name": "tanka", "env": []any{
			map[string]any{"name": "OTHER", "value": "kept"},
			map[string]any{"name": "APP_TAG", "value": "1.1.0"},
			map[string]any{"name": "APP_IMAGE", "value": repo("chart-app")},
			map[string]any{"name": "WEB", "value": repo("eks-web") + ":v0.0.3"},
		}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("spec.source.plugin (-want +got):\n%s", diff)
		}
		evs := w.events(t, "cmp-untargeted")
		poll.True(t, 15*time.Second, "an event on the Application cmp-untargeted", func() bool { evs = w.events(t, "cmp-untargeted"); return len(evs) > 0 })
		if !strings.Contains(evs[0].Message, "no Kustomize or Helm source to hold the override") {
			t.Errorf("event %q", evs[0].Message)
		}
		// The git method writes the variables into .argocd-source, which
		// Argo CD merges into the source.
		wantFile := "plugin:\n  env:\n  - name: APP_IMAGE\n    value: " + repo("chart-app") + "\n  - name: APP_TAG\n    value: 1.1.0\n"
		if got := gitSrv.ReadFile(t, "example/cmp", "main", "cmp/app/.argocd-source-cmp-git.yaml"); got != wantFile {
			t.Errorf(".argocd-source-cmp-git.yaml:\n%s\nwant:\n%s", got, wantFile)
		}
	})
	t.Run("Source Hydrator: written back to the dry source", func(t *testing.T) {
		gitSrv := testenv.StartGitServer(t)
		gitSrv.CreateRepo(t, "example/dry", "", map[string]string{"dry/app/kustomization.yaml": "resources: []\n"})
		url := strings.Replace(gitSrv.HTTPRepoURL("example/dry"), "://", "://"+gitSrv.Username+":"+gitSrv.Password+"@", 1)
		k.CreateAppProject(t, testenv.ArgoCDNamespace, "hydrated", []string{"*"}, nil)
		hydrated := func(name string, annotations map[string]string) *unstructured.Unstructured {
			app := appObject(name, annotations, map[string]any{"sourceHydrator": map[string]any{
				"drySource":  map[string]any{"repoURL": url, "path": "dry/app", "targetRevision": "main"},
				"syncSource": map[string]any{"targetBranch": "environments/prod", "path": "app"},
			}}, repo("chart-app")+":1.0.0")
			app.Object["spec"].(map[string]any)["project"] = "hydrated"
			app.Object["status"].(map[string]any)["sourceType"] = "Directory"
			return app
		}
		w := newWorld(t, k, reg, worldOptions{names: "hydrated-*", git: true})
		w.create(t,
			hydrated("hydrated-git", map[string]string{
				"image-list": "app=" + repo("chart-app") + ":~1", "write-back-method": "git", "write-back-target": "kustomization",
			}),
			hydrated("hydrated-argocd", map[string]string{"image-list": "app=" + repo("chart-app") + ":~1"}),
			hydrated("hydrated-default-target", map[string]string{"image-list": "app=" + repo("chart-app") + ":~1", "write-back-method": "git"}),
		)
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 1 || sum.Errors != 2 {
			t.Fatalf("summary %+v, want 1 image updated and 2 errors", sum)
		}
		want := "resources: []\nimages:\n- name: " + repo("chart-app") + "\n  newTag: 1.1.0\n"
		if got := gitSrv.ReadFile(t, "example/dry", "main", "dry/app/kustomization.yaml"); got != want {
			t.Errorf("dry source's kustomization.yaml:\n%s\nwant:\n%s", got, want)
		}
		for name, msg := range map[string]string{
			"hydrated-argocd":         "set write-back-method git",
			"hydrated-default-target": "set write-back-target kustomization or helmvalues:<file>",
		} {
			evs := w.events(t, name)
			poll.True(t, 15*time.Second, "an event on the Application "+name, func() bool { evs = w.events(t, name); return len(evs) > 0 })
			if !strings.Contains(evs[0].Message, msg) {
				t.Errorf("%s: event %q, want it to say %q", name, evs[0].Message, msg)
			}
		}
	})
	t.Run("an Application an ApplicationSet generates: the argocd method warns, git does not", func(t *testing.T) {
		w := newWorld(t, k, reg, worldOptions{names: "appset-*"})
		yes := true
		generated := func(name, method string) *unstructured.Unstructured {
			app := appObject(name, map[string]string{"image-list": "app=" + repo("eks-app") + ":~0.1", "write-back-method": method},
				nil, repo("eks-app")+":v0.1.0")
			app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "team-apps",
				UID: "7d1c3a51-0000-4000-8000-000000000001", Controller: &yes, BlockOwnerDeletion: &yes}})
			return app
		}
		w.create(t, generated("appset-argocd", "argocd"), generated("appset-git", "git"))
		if sum := w.updater.RunOnce(t.Context()); sum.Errors != 0 {
			t.Fatalf("summary %+v", sum)
		}
		evs := w.events(t, "appset-argocd")
		poll.True(t, 15*time.Second, "an event on the Application appset-argocd", func() bool { evs = w.events(t, "appset-argocd"); return len(evs) > 0 })
		if evs[0].Type != "Warning" || !strings.Contains(evs[0].Message, "the ApplicationSet team-apps generates this Application") ||
			!strings.Contains(evs[0].Message, "annotation "+prefix+"write-back-method") {
			t.Errorf("event %s %q", evs[0].Type, evs[0].Message)
		}
		if evs := w.events(t, "appset-git"); len(evs) != 0 {
			t.Errorf("events of the git Application: %v", evs)
		}
	})
	t.Run("plain manifests: marked values written in place", func(t *testing.T) {
		gitSrv := testenv.StartGitServer(t)
		deployment := "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n" +
			"      - name: app\n        image: " + repo("chart-app") + ":1.0.0 # {\"$imageupdater\": \"app\"}\n"
		env := "apiVersion: v1\nkind: ConfigMap\ndata:\n  # the version shown in the footer\n  VERSION: \"1.0.0\" # {\"$imageupdater\": \"app:tag\"}\n"
		gitSrv.CreateRepo(t, "example/plain", "", map[string]string{
			"plain/app/deployment.yaml":   deployment,
			"plain/app/config/env.yaml":   env,
			"plain/app/service.yaml":      "apiVersion: v1\nkind: Service\n",
			"plain/other/deployment.yaml": strings.ReplaceAll(deployment, "app\"}", "app\"} # not this Application's folder"),
		})
		url := strings.Replace(gitSrv.HTTPRepoURL("example/plain"), "://", "://"+gitSrv.Username+":"+gitSrv.Password+"@", 1)
		k.CreateAppProject(t, testenv.ArgoCDNamespace, "plain", []string{"*"}, nil)
		plain := func(name string, annotations map[string]string) *unstructured.Unstructured {
			app := appObject(name, annotations, map[string]any{"source": map[string]any{
				"repoURL": url, "path": "plain/app", "targetRevision": "main", "directory": map[string]any{"recurse": true},
			}}, repo("chart-app")+":1.0.0", repo("eks-web")+":v0.0.1")
			app.Object["spec"].(map[string]any)["project"] = "plain"
			return app
		}
		w := newWorld(t, k, reg, worldOptions{names: "plain-*", git: true})
		w.create(t,
			plain("plain-git", map[string]string{"image-list": "app=" + repo("chart-app") + ":~1", "write-back-method": "git"}),
			plain("plain-argocd", map[string]string{"image-list": "app=" + repo("chart-app") + ":~1"}),
		)
		sum := w.updater.RunOnce(t.Context())
		if sum.Updated != 1 || sum.Errors != 1 {
			t.Fatalf("summary %+v, want 1 image updated and 1 error", sum)
		}
		for file, want := range map[string]string{
			"plain/app/deployment.yaml":   strings.Replace(deployment, ":1.0.0 #", ":1.1.0 #", 1),
			"plain/app/config/env.yaml":   strings.Replace(env, `"1.0.0"`, `"1.1.0"`, 1),
			"plain/other/deployment.yaml": strings.ReplaceAll(deployment, "app\"}", "app\"} # not this Application's folder"),
		} {
			if got := gitSrv.ReadFile(t, "example/plain", "main", file); got != want {
				t.Errorf("%s:\n%s\nwant:\n%s", file, got, want)
			}
		}
		if log := gitSrv.Log(t, "example/plain", "main"); len(log) != 2 {
			t.Errorf("commits %+v, want one for the Application", log)
		}
		evs := w.events(t, "plain-argocd")
		poll.True(t, 15*time.Second, "an event on the Application plain-argocd", func() bool { evs = w.events(t, "plain-argocd"); return len(evs) > 0 })
		if !strings.Contains(evs[0].Message, "set write-back-method git and mark the image's value") {
			t.Errorf("event %q", evs[0].Message)
		}

		// An image no file marks is an error naming it.
		w.create(t, plain("plain-unmarked", map[string]string{"image-list": "web=" + repo("eks-web"), "write-back-method": "git"}))
		w.updater.RunOnce(t.Context())
		evs = w.events(t, "plain-unmarked")
		poll.True(t, 15*time.Second, "an event on the Application plain-unmarked", func() bool { evs = w.events(t, "plain-unmarked"); return len(evs) > 0 })
		if !strings.Contains(evs[0].Message, "no YAML file under plain/app marks the image web") {
			t.Errorf("event %q", evs[0].Message)
		}
	})
	t.Run("a stopped cycle starts no write and reports no problem", func(t *testing.T) {
		tests := []struct {
			name string
			// whileListing stops the cycle during the tag listing, else
			// right after it, before the write.
			whileListing bool
		}{
			{name: "stopped while listing tags", whileListing: true},
			{name: "stopped before writing"},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				name := fmt.Sprintf("stopped%d", i)
				ctx, stop := context.WithCancel(t.Context())
				defer stop()
				w := newWorld(t, k, reg, worldOptions{names: name, wrap: func(r Registry) Registry {
					return stoppingRegistry{Registry: r, stop: stop, whileListing: tt.whileListing}
				}})
				w.create(t, appObject(name, map[string]string{
					"write-back-method": "argocd",
					"image-list":        "app=" + repo("eks-app"),
				}, nil, repo("eks-app")+":v0.0.1"))
				sum := w.updater.RunOnce(ctx)
				if sum.Updated != 0 || sum.Errors != 0 {
					t.Errorf("summary %+v, want nothing updated and no error", sum)
				}
				if got := testenv.KustomizeImages(t, w.get(t, name)); got != nil {
					t.Errorf("written after the stop: %v", got)
				}
				if got := testutil.ToFloat64(w.metrics.imagesErrorsVec.WithLabelValues("argocd/"+name, "", "")); got != 0 {
					t.Errorf("image errors metric %v", got)
				}
			})
		}
	})
}

// stoppingRegistry stops the cycle (cancels its context) while or right
// after listing tags, as SIGTERM or a lost Lease would.
type stoppingRegistry struct {
	Registry
	stop         context.CancelFunc
	whileListing bool
}

func (s stoppingRegistry) Tags(ctx context.Context, ref imageref.Reference, creds credref.Ref) ([]string, error) {
	if s.whileListing {
		s.stop()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	tags, err := s.Registry.Tags(ctx, ref, creds)
	s.stop()
	return tags, err
}

func deepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
