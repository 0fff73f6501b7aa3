package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// webhookResult is what the push notifications measured: for each, the
// time from posting it to the controller until the API server received the
// last patch of the Applications it changes, and the registry requests
// its check sent.
type webhookResult struct {
	Latencies   []time.Duration
	RegRequests []int64
	Patched     []int // Applications patched per notification
	Interval    time.Duration
}

// p returns the q-quantile of the latencies (nearest rank).
func (r *webhookResult) p(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.Latencies)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

const webhookSecret = "bench-webhook-secret"

// measureWebhook starts the controller again with the webhook endpoint and
// an interval long enough that no cycle runs after the first, then, one at
// a time, pushes a new tag to a repository that argocd Applications use
// and posts the registry's notification of it, as the Distribution registry
// sends it.
func measureWebhook(t *testing.T, n int, w *workload, st *storage, rp *registryProxy, kp *kubeProxy, o controllerOptions) *webhookResult {
	t.Helper()
	port := freePort(t)
	o.interval = time.Hour
	o.tmp = filepath.Join(o.tmp, "webhook")
	o.args = append([]string{"--enable-webhook", "--webhook-port", strconv.Itoa(port)}, o.args...)
	o.env = append(slices.Clone(o.env), "DISTRIBUTION_WEBHOOK_SECRET="+webhookSecret)
	ctl := startController(t, o)
	defer ctl.stop()
	if err := ctl.waitMetrics(time.Minute); err != nil {
		t.Fatalf("the controller's metrics: %v", err)
	}
	if _, err := ctl.nextCycle(20 * time.Minute); err != nil {
		t.Fatalf("first cycle of the webhook controller: %v", err)
	}
	res := &webhookResult{Interval: o.interval}
	url := fmt.Sprintf("http://127.0.0.1:%d/webhook?type=distribution", port)
	patches := func() int64 { return kp.count.snapshot()["patch applications"] }
	regTotal := func() (n int64) {
		for _, v := range rp.count.snapshot() {
			n += v
		}
		return n
	}
	for _, r := range w.repos {
		if len(res.Latencies) == n {
			break
		}
		if r.Kind != kindSemver || r.Big {
			continue
		}
		cs := &changeSet{Repos: []*repo{r}, Tags: map[*repo]string{r: r.nextTag()}}
		if _, err := w.apply(cs); err != nil {
			t.Fatal(err)
		}
		if err := st.fill(w, cs.Repos, cs.Tags); err != nil {
			t.Fatalf("push %s:%s: %v", r.Name, cs.Tags[r], err)
		}
		if err := w.settle(); err != nil {
			t.Fatal(err)
		}
		if cs.Patched == 0 || cs.GitChanged > 0 {
			continue // nothing to time, or a push to wait for too
		}
		body := fmt.Sprintf(`{"events":[{"id":"bench-%d","timestamp":%q,"action":"push",`+
			`"target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":%q,"tag":%q},`+
			`"request":{"id":"r","addr":"127.0.0.1:1","host":%q,"method":"PUT","useragent":"bench"}}]}`,
			len(res.Latencies), time.Now().UTC().Format(time.RFC3339), r.Name, cs.Tags[r], w.host)
		before, regBefore := patches(), regTotal()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/vnd.docker.distribution.events.v2+json")
		req.Header.Set("Authorization", "Bearer "+webhookSecret)
		sent := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("post the notification: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("the webhook answered %s", resp.Status)
		}
		deadline := sent.Add(time.Minute)
		for patches()-before < int64(cs.Patched) {
			if time.Now().After(deadline) {
				t.Fatalf("notification for %s: %d of %d patches after a minute", r.Name, patches()-before, cs.Patched)
			}
			time.Sleep(5 * time.Millisecond)
		}
		res.Latencies = append(res.Latencies, time.Since(sent))
		// The check's last registry requests come before its patches.
		res.RegRequests = append(res.RegRequests, regTotal()-regBefore)
		res.Patched = append(res.Patched, cs.Patched)
		// Let the events of the check go out before the next one.
		quietFor(kp, time.Now().Add(3*time.Second), 300*time.Millisecond)
	}
	if len(res.Latencies) < n {
		t.Errorf("%d notifications timed, want %d", len(res.Latencies), n)
	}
	return res
}
