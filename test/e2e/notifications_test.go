package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// webhookReceiver is the webhook service of Argo CD Notifications: it
// keeps the body of every request it is sent.
type webhookReceiver struct {
	mu     sync.Mutex
	bodies []string
}

func (r *webhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, string(body))
	r.mu.Unlock()
}

func (r *webhookReceiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// notification is the body of the catalog's webhook templates.
type notification struct {
	Event       string `json:"event"`
	Application string `json:"application"`
	Namespace   string `json:"namespace"`
	Notice      struct {
		At     string `json:"at"`
		Images []struct {
			Alias, Image, From, To string
		} `json:"images"`
		Message string `json:"message"`
	} `json:"notice"`
}

// startNotifications runs Argo CD's notifications controller with the
// catalog of manifests/notifications and a webhook service image-updater
// that sends to the receiver it returns.
func (w *world) startNotifications(t *testing.T) *webhookReceiver {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "notifications", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var catalog struct{ Data map[string]string }
	if err := yaml.Unmarshal(data, &catalog); err != nil || len(catalog.Data) == 0 {
		t.Fatalf("the catalog holds no ConfigMap data (%v)", err)
	}
	recv := &webhookReceiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	catalog.Data["service.webhook.image-updater"] = "url: " + srv.URL + "\nheaders:\n- name: Content-Type\n  value: application/json\n"
	w.argo.StartNotifications(t, catalog.Data, nil)
	return recv
}

// notificationsScenario: the updater keeps what it did on the Application;
// Argo CD's notifications controller, with the catalog's triggers and
// templates, tells a webhook once per event (an update, a failure, a
// wait), with the Application, the image and its old and new versions,
// and no secret.
func (w *world) notificationsScenario(t *testing.T) {
	recv := w.startNotifications(t)
	app, web := w.push(t, "notify-app", "v0.0.1"), w.push(t, "notify-web", "v0.0.1")
	w.createApp(t, "notify", "notify/overlays/production", nil, map[string]string{
		"image-list":          "app=" + app + ",web=" + web,
		"app.update-strategy": "semver",
		// A Secret that does not exist: the web image fails, every cycle,
		// with the same error.
		"web.pull-secret":   "pullsecret:argocd/notify-missing",
		"write-back-method": "argocd",
	})
	subscribe := map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		"notifications.argoproj.io/subscribe.on-image-updated.image-updater":       "",
		"notifications.argoproj.io/subscribe.on-image-update-failed.image-updater": "",
	}}}
	patch, _ := json.Marshal(subscribe)
	if _, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Patch(t.Context(), "notify", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitDeployed(t, "notify", "front", app+":v0.0.1", web+":v0.0.1")
	// Another Application, whose new versions wait a week.
	slow, slowWeb := w.push(t, "notifywait-app", "v0.0.1"), w.push(t, "notifywait-web", "v0.0.1")
	w.createApp(t, "notify-wait", "notifywait/overlays/production", nil, map[string]string{
		"image-list":          "app=" + slow,
		"minimum-release-age": "7d",
		"write-back-method":   "argocd",
	})
	patch, _ = json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		"notifications.argoproj.io/subscribe.on-image-waiting.image-updater": "",
	}}})
	if _, err := w.dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Patch(t.Context(), "notify-wait", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitDeployed(t, "notify-wait", "front", slow+":v0.0.1", slowWeb+":v0.0.1")

	w.push(t, "notify-app", "v0.1.0")
	w.push(t, "notifywait-app", "v0.1.0")
	w.runOnce(t, "notify*", "--notifications")
	w.waitDeployed(t, "notify", "front", app+":v0.1.0", web+":v0.0.1")
	// Nothing new: nothing is told again, the failure and the wait
	// included.
	w.runOnce(t, "notify*", "--notifications")
	w.push(t, "notify-app", "v0.2.0")
	w.runOnce(t, "notify*", "--notifications")

	var got []notification
	testenv.WaitFor(t, deployTimeout, "the notifications of v0.2.0 and of the wait", func() (bool, string) {
		got = got[:0]
		for _, body := range recv.received() {
			var n notification
			if err := json.Unmarshal([]byte(body), &n); err != nil {
				t.Fatalf("a notification that is not the template's JSON: %v\n%s", err, body)
			}
			got = append(got, n)
		}
		last, waited := false, false
		for _, n := range got {
			last = last || n.Event == "updated" && len(n.Notice.Images) == 1 && n.Notice.Images[0].To == "v0.2.0"
			waited = waited || n.Event == "waiting"
		}
		return last && waited, fmt.Sprint(recv.received())
	})
	t.Logf("notifications received:\n%s", strings.Join(recv.received(), "\n"))
	var updated []string
	failed, waiting := 0, 0
	for _, n := range got {
		if n.Namespace != testenv.ArgoCDNamespace {
			t.Errorf("a notification of Application %s/%s, want namespace argocd", n.Namespace, n.Application)
		}
		if n.Application == "notify-wait" {
			waiting++
			if n.Event != "waiting" || len(n.Notice.Images) != 1 || n.Notice.Images[0].To != "v0.1.0" || !strings.Contains(n.Notice.Message, "minimum release age") {
				t.Errorf("notify-wait told %s of %+v, want v0.1.0 waiting for its age", n.Event, n.Notice)
			}
			continue
		}
		switch n.Event {
		case "updated":
			for _, img := range n.Notice.Images {
				updated = append(updated, fmt.Sprintf("%s=%s %s->%s", img.Alias, img.Image, img.From, img.To))
			}
		case "failed":
			failed++
			if !strings.Contains(n.Notice.Message, "argocd/notify-missing") {
				t.Errorf("the failure's message %q does not name the Secret", n.Notice.Message)
			}
		default:
			t.Errorf("a notification of event %q", n.Event)
		}
	}
	want := []string{"app=" + app + " v0.0.1->v0.1.0", "app=" + app + " v0.1.0->v0.2.0"}
	if strings.Join(updated, "\n") != strings.Join(want, "\n") {
		t.Errorf("updates told:\n%s\nwant, once each:\n%s", strings.Join(updated, "\n"), strings.Join(want, "\n"))
	}
	if failed != 1 {
		t.Errorf("the failure told %d times, want once: %v", failed, recv.received())
	}
	if waiting != 1 {
		t.Errorf("the wait told %d times, want once: %v", waiting, recv.received())
	}
	for _, body := range recv.received() {
		for _, secret := range []string{w.reg.Password, w.git.Password} {
			if strings.Contains(body, secret) {
				t.Errorf("a notification holds a password:\n%s", body)
			}
		}
	}
}
