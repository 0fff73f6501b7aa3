package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// argoCD stands in for Argo CD for the Applications with a health gate:
// once the updater wrote a version (in the spec, or in the file at the
// tip of the branch), it reports it running in status.summary.images, as
// Argo CD does once it synced it, with status.health Degraded for a bad
// version and Healthy for a good one, and the time of the comparison in
// status.reconciledAt. No Argo CD runs in this suite.
type argoCD struct {
	stop, done chan struct{}
	patches    atomic.Int64
}

func (w *world) startArgoCD(h *history) *argoCD {
	a := &argoCD{stop: make(chan struct{}), done: make(chan struct{})}
	apps := w.admin.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace)
	reported := map[string]string{}
	go func() {
		defer close(a.done)
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-tick.C:
			}
			for name, v := range w.deployed(h) {
				if i := w.index[name]; !w.gated(i) || v == "" || reported[name] == v {
					continue
				}
				health := "Healthy"
				if w.bad[v] {
					health = "Degraded"
				}
				// reconciledAt, as Argo CD sets it when it compares the
				// Application: a health without it judges nothing.
				patch := fmt.Sprintf(`{"status":{"summary":{"images":[%q]},"health":{"status":%q},"reconciledAt":%q}}`,
					w.reg.Repo("web")+":"+v, health, time.Now().UTC().Format(time.RFC3339))
				if _, err := apps.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
					reported[name] = v
					a.patches.Add(1)
				}
			}
		}
	}()
	return a
}

func (a *argoCD) close() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

// deployed is the version written for each Application: the image's in
// its spec (argocd, as last seen by h), in its file at the tip of main
// (git, by one git grep), its chart's targetRevision.
func (w *world) deployed(h *history) map[string]string {
	out := map[string]string{}
	h.mu.Lock()
	for _, m := range []map[string][]string{h.images, h.charts} {
		for name, seq := range m {
			if len(seq) > 0 {
				out[name] = seq[len(seq)-1]
			}
		}
	}
	h.mu.Unlock()
	cmd := exec.Command("git", "-C", filepath.Join(w.git.Root, "deploy.git"), "grep", "-F", w.reg.Repo("web")+":", "main", "--", "apps")
	text, err := cmd.Output()
	if err != nil {
		return out
	}
	for line := range strings.SplitSeq(string(text), "\n") {
		// main:apps/<app>/.argocd-source-<app>.yaml:  - <image>:<version>
		rest, ok := strings.CutPrefix(line, "main:apps/")
		if !ok {
			continue
		}
		name, rest, _ := strings.Cut(rest, "/")
		if i, ok := w.index[name]; ok && isGit(i) {
			out[name] = w.versionIn(rest)
		}
	}
	return out
}

// imageVersion is the version of the image in an Application's Kustomize
// images, "" when it has none.
func (w *world) imageVersion(obj *unstructured.Unstructured) string {
	images, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "source", "kustomize", "images")
	for _, img := range images {
		if v := w.versionIn(img); v != "" {
			return v
		}
	}
	return ""
}

// versionIn is the version that follows the image's name in s.
func (w *world) versionIn(s string) string {
	_, after, ok := strings.Cut(s, w.reg.Repo("web")+":")
	if !ok {
		return ""
	}
	return strings.TrimSpace(after)
}

// history records, from a watch of the Applications, each version the
// spec of an Application takes in turn: the image's (argocd write-back)
// and the chart's targetRevision. A watch delivers every change of an
// object; gaps counts the watches that ended with an error and had to
// list again, which may have missed a change.
type history struct {
	mu     sync.Mutex
	images map[string][]string
	charts map[string][]string
	// skipped is the versions the health gate skips, by Application.
	skipped map[string]map[string]bool
	gaps    int
	cancel  context.CancelFunc
	done    chan struct{}
}

func (w *world) recordHistory(t *testing.T) *history {
	h := &history{images: map[string][]string{}, charts: map[string][]string{}, skipped: map[string]map[string]bool{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	apps := w.admin.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace)
	relist := func() string {
		list, err := apps.List(ctx, metav1.ListOptions{})
		if err != nil {
			return ""
		}
		for _, obj := range list.Items {
			h.record(w, &obj)
		}
		return list.GetResourceVersion()
	}
	rv := relist()
	if rv == "" {
		t.Fatal("listing the Applications failed")
	}
	go func() {
		defer close(h.done)
		for ctx.Err() == nil {
			rv = h.follow(ctx, w, apps, rv)
			if rv == "" && ctx.Err() == nil {
				h.mu.Lock()
				h.gaps++
				h.mu.Unlock()
				rv = relist()
			}
		}
	}()
	t.Cleanup(h.close)
	return h
}

// follow watches from rv until the watch ends; it returns the last
// version seen, or "" after an error.
func (h *history) follow(ctx context.Context, w *world, apps dynamic.ResourceInterface, rv string) string {
	wi, err := apps.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return ""
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		obj, ok := ev.Object.(*unstructured.Unstructured)
		switch {
		case ev.Type == watch.Error || !ok:
			return ""
		case ev.Type != watch.Bookmark:
			h.record(w, obj)
		}
		rv = obj.GetResourceVersion()
	}
	return rv
}

func (h *history) record(w *world, obj *unstructured.Unstructured) {
	i, ok := w.index[obj.GetName()]
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	appendNew := func(m map[string][]string, v string) {
		if s := m[obj.GetName()]; v != "" && (len(s) == 0 || s[len(s)-1] != v) {
			m[obj.GetName()] = append(s, v)
		}
	}
	switch {
	case i >= w.sh.apps:
		rev, _, _ := unstructured.NestedString(obj.Object, "spec", "source", "targetRevision")
		appendNew(h.charts, rev)
	case !isGit(i):
		appendNew(h.images, w.imageVersion(obj))
	}
	if i < w.sh.apps {
		h.skipped[obj.GetName()], _ = skippedIn(obj)
	}
}

// reverted tells whether every Application with a health gate has
// version skipped and written back: the gate skips it first, then writes
// the version before it.
func (w *world) reverted(h *history, version string) (bool, string) {
	deployed := w.deployed(h)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range w.sh.apps {
		if !w.gated(i) {
			continue
		}
		if name := appName(i); !h.skipped[name][version] || deployed[name] == version {
			return false, fmt.Sprintf("%s at %q, skipping %v", name, deployed[name], h.skipped[name])
		}
	}
	return true, ""
}

func (h *history) close() {
	h.cancel()
	<-h.done
}

// gitHistory is, for each file under apps/, the versions of the image its
// commits on main wrote, oldest first.
func (w *world) gitHistory(t *testing.T) map[string][]string {
	out, err := exec.Command("git", "-C", filepath.Join(w.git.Root, "deploy.git"), "log", "--reverse", "--format=%H", "-p", "main", "--", "apps").Output()
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[string][]string{}
	file := ""
	for line := range strings.SplitSeq(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "+++ b/"); ok {
			file = rest
		}
		if strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "+++") {
			if v := w.versionIn(line); v != "" {
				seqs[file] = append(seqs[file], v)
			}
		}
	}
	return seqs
}

// gateState is the part of the health gate's state annotation the suite
// reads.
type gateState struct {
	Skipped []struct {
		Alias   string `json:"alias"`
		Version string `json:"version"`
	} `json:"skipped"`
}

// skipped is the versions the health gate skips for Application i, read
// from the API server.
func (w *world) skipped(t *testing.T, i int) map[string]bool {
	obj, err := w.admin.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), appName(i), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := skippedIn(obj)
	if err != nil {
		t.Errorf("Application %s: health gate state: %v", appName(i), err)
	}
	return out
}

// skippedIn is the versions the state annotation of the health gate
// skips.
func skippedIn(obj *unstructured.Unstructured) (map[string]bool, error) {
	out := map[string]bool{}
	raw := obj.GetAnnotations()[settings.AnnotationPrefix+"health-gate-state"]
	if raw == "" {
		return out, nil
	}
	var st gateState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return out, err
	}
	for _, s := range st.Skipped {
		out[s.Version] = true
	}
	return out, nil
}

// checkSequence checks the versions written for Application i in turn:
// each newer than the one in place, none written twice, except a revert
// of the health gate: from a bad version the gate skips back to the one
// before it. A gated Application has every bad version written reverted,
// and only bad versions skipped; an Application without a gate, none. It
// returns the number of reverts.
func (w *world) checkSequence(t *testing.T, i int, seq []string, skipped map[string]bool) int {
	name := appName(i)
	inPlace := []string{initialVersion}
	written := map[string]bool{}
	reverted := map[string]bool{}
	for _, v := range seq {
		cur := inPlace[len(inPlace)-1]
		switch {
		case v == cur:
			t.Errorf("Application %s: %s written twice in a row (history %v)", name, v, seq)
		case rank(v) < rank(cur):
			if !w.gated(i) || !w.bad[cur] || !skipped[cur] || len(inPlace) < 2 || inPlace[len(inPlace)-2] != v {
				t.Errorf("Application %s: %s written after %s, and not by the health gate's revert of a bad version (history %v)", name, v, cur, seq)
			}
			reverted[cur] = true
			inPlace = inPlace[:len(inPlace)-1]
			continue
		case written[v]:
			t.Errorf("Application %s: %s written twice (history %v)", name, v, seq)
		}
		written[v] = true
		inPlace = append(inPlace, v)
	}
	for v := range skipped {
		if !w.gated(i) || !w.bad[v] {
			t.Errorf("Application %s: the health gate skips %s, a good version or an Application without a gate", name, v)
		}
	}
	if w.gated(i) {
		for v := range written {
			if w.bad[v] && (!reverted[v] || !skipped[v]) {
				t.Errorf("Application %s: bad version %s written and not reverted and skipped (history %v)", name, v, seq)
			}
		}
	}
	return len(reverted)
}

// checkCharts checks the chart versions written for each chart
// Application in turn: each newer than the one before and within the
// constraint, the last the newest published within it.
func (w *world) checkCharts(t *testing.T, h *history) {
	allowed, _ := semver.NewConstraint(chartConstraint)
	h.mu.Lock()
	defer h.mu.Unlock()
	final := chartVersion(w.sh.rounds)
	for i := w.sh.apps; i < w.sh.apps+w.sh.charts; i++ {
		name := w.name(i)
		seq := h.charts[name]
		for k, v := range seq {
			sv, err := semver.NewVersion(v)
			if err != nil || !allowed.Check(sv) {
				t.Errorf("Application %s: chart version %q written, outside %s (history %v)", name, v, chartConstraint, seq)
				continue
			}
			if k > 0 {
				if prev, err := semver.NewVersion(seq[k-1]); err == nil && !sv.GreaterThan(prev) {
					t.Errorf("Application %s: chart version %s written after %s (history %v)", name, v, seq[k-1], seq)
				}
			}
		}
		if len(seq) == 0 || seq[len(seq)-1] != final {
			t.Errorf("Application %s: chart at %v, want %s", name, seq, final)
		}
	}
}
