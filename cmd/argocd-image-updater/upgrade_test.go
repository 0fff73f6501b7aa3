package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	imageupdaterv1alpha1 "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/imageupdater"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// v130Status is the ImageUpdater status as Argo CD Image Updater v1.3.0
// declares it (api/v1alpha1 of its tag): the shape a rollback reads.
type v130Status struct {
	ObservedGeneration  int64              `json:"observedGeneration,omitempty"`
	LastCheckedAt       *metav1.Time       `json:"lastCheckedAt,omitempty"`
	LastUpdatedAt       *metav1.Time       `json:"lastUpdatedAt,omitempty"`
	ApplicationsMatched int32              `json:"applicationsMatched"`
	ImagesManaged       int32              `json:"imagesManaged"`
	RecentUpdates       []v130RecentUpdate `json:"recentUpdates,omitempty"`
	Conditions          []metav1.Condition `json:"conditions,omitempty"`
}

type v130RecentUpdate struct {
	Alias               string      `json:"alias"`
	Image               string      `json:"image"`
	NewVersion          string      `json:"newVersion"`
	ApplicationsUpdated int32       `json:"applicationsUpdated"`
	UpdatedAt           metav1.Time `json:"updatedAt"`
	Message             string      `json:"message,omitempty"`
}

// decodeV130Status reads obj's status as v1.3.0 does, refusing any field
// its types do not have.
func decodeV130Status(obj *unstructured.Unstructured) (*v130Status, error) {
	raw, err := json.Marshal(obj.Object["status"])
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var st v130Status
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestUpgradeFromV1 plays a rolling update from Argo CD Image Updater
// v1.3.0 and back. v1.3.0 leads (client-go's elector on its Lease) and
// has written an ImageUpdater's status, stopped in the middle of a
// reconcile (Reconciling True); this controller's binary starts as
// v1.3.0's Deployment runs it once its image is swapped: as /manager,
// with argocd-operator's arguments (run, --tlsminversion, --tlsciphers)
// and the bind addresses of v1.3.0's install. It waits, serving its
// probes; v1.3.0's Pod stops, releasing its Lease; this controller writes
// the update within one Lease duration, and the status keeps what v1.3.0
// wrote that this cycle did not change. Then the rollback: this
// controller stops, v1.3.0 leads at its first try, and under v1.3.0's
// CRD the status reads as v1.3.0's types, field for field, and takes
// v1.3.0's next write.
func TestUpgradeFromV1(t *testing.T) {
	t.Parallel()
	bin := testenv.UpdaterBinary(t)
	manager := filepath.Join(t.TempDir(), v1Program)
	if err := os.Symlink(bin, manager); err != nil {
		t.Fatal(err)
	}
	w := newControllerWorldOn(t, testenv.StartKube(t, testenv.WithImageUpdaterCRD(imageupdaterv1alpha1.AddToScheme)))
	cs := kubernetes.NewForConfigOrDie(w.k.Config)
	repo := w.reg.Repo("eks-app")
	ius := w.dyn.Resource(imageupdaterv1alpha1.Resource()).Namespace(testenv.ArgoCDNamespace)

	w.createWebApp(t, repo)
	w.k.Create(t, &imageupdaterv1alpha1.ImageUpdater{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ArgoCDNamespace, Name: "web", Finalizers: []string{imageupdater.V1Finalizer}},
		Spec: imageupdaterv1alpha1.ImageUpdaterSpec{ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{
			NamePattern: "web",
			Images:      []imageupdaterv1alpha1.ImageConfig{{Alias: "app", ImageName: repo}},
		}}},
	})

	// v1.3.0's status: its last cycle updated the image to v0.0.1, its
	// next one had started (Reconciling True, as v1.3.0 sets it first).
	// Another party's condition sits beside v1.3.0's.
	before := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: 1, LastTransitionTime: before}
	}
	written := v130Status{
		ObservedGeneration: 1, LastCheckedAt: &before, LastUpdatedAt: &before, ApplicationsMatched: 1, ImagesManaged: 1,
		RecentUpdates: []v130RecentUpdate{{Alias: "app", Image: repo, NewVersion: "v0.0.1", ApplicationsUpdated: 1, UpdatedAt: before,
			Message: "Updated from v0.0.0 to v0.0.1."}},
		Conditions: []metav1.Condition{
			cond("Reconciling", metav1.ConditionTrue, "Reconciling", "Image update check in progress."),
			cond("Error", metav1.ConditionFalse, "NoErrors", "No errors during last reconciliation."),
			cond("Ready", metav1.ConditionTrue, "ReconcileSucceeded", "Reconciled 1 applications, 1 images updated."),
			cond("example.com/Audited", metav1.ConditionTrue, "Audited", "Checked by the audit."),
		},
	}
	setStatus(t, ius, "web", written)

	v1 := startV1Elector(t, cs)
	testenv.WaitFor(t, 30*time.Second, "v1.3.0 to lead", v1.leads)

	healthPort, metricsPort := testenv.FreePort(t), testenv.FreePort(t)
	const ciphers = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
	cmd := exec.Command(manager, "run", "--tlsminversion", "1.2", "--tlsciphers", ciphers,
		"--metrics-bind-address=:"+strconv.Itoa(metricsPort), "--health-probe-bind-address=:"+strconv.Itoa(healthPort),
		// Outside a Pod: the API server and registries.conf of the test.
		"--kubeconfig", w.kubeconfig, "--registries-conf-path", w.conf, "--listen-address", "127.0.0.1")
	cmd.Env = os.Environ()
	for k, v := range w.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", out.String())
		}
	})
	testenv.WaitFor(t, 60*time.Second, "this controller to wait for v1.3.0's Lease", func() (bool, string) {
		return strings.Contains(out.String(), "another controller holds a leader Lease; waiting"), out.String()
	})
	// The probes of v1.3.0's Deployment pass while it waits.
	testenv.WaitFor(t, 30*time.Second, "the health probe on v1.3.0's port", func() (bool, string) {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(healthPort) + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	// The metrics are served over HTTPS with the operator's TLS profile:
	// a client offering only other suites below TLS 1.3 is refused.
	handshake := func(suites ...uint16) error {
		c, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(metricsPort), &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12, CipherSuites: suites})
		if err == nil {
			c.Close()
		}
		return err
	}
	testenv.WaitFor(t, 30*time.Second, "the metrics server to take a suite of --tlsciphers", func() (bool, string) {
		err := handshake(tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384)
		return err == nil, "handshake"
	})
	if err := handshake(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); err == nil {
		t.Error("the metrics server took a cipher suite --tlsciphers does not name")
	}
	if c, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(metricsPort), &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}); err == nil {
		c.Close()
		t.Error("the metrics server took TLS 1.1 under --tlsminversion 1.2")
	}
	if got := w.images(t, "web"); got != nil {
		t.Fatalf("written while v1.3.0 leads: %v", got)
	}

	// v1.3.0's Pod stops: controller-runtime releases its Lease.
	v1.stop()
	<-v1.done
	ended := time.Now()
	want := []string{repo + ":v0.1.0"}
	testenv.WaitFor(t, leaseDuration, "the update within one Lease duration of v1.3.0's end", w.written(t, "web", want))
	t.Logf("written %v after v1.3.0's end", time.Since(ended).Round(100*time.Millisecond))

	var st imageupdaterv1alpha1.ImageUpdaterStatus
	testenv.WaitFor(t, 30*time.Second, "the status of this controller's cycle", func() (bool, string) {
		st = readStatus(t, w, "web")
		return len(st.RecentUpdates) == 1 && st.RecentUpdates[0].NewVersion == "v0.1.0", "recentUpdates " + jsonString(st.RecentUpdates)
	})
	if ru := st.RecentUpdates[0]; ru.Alias != "app" || ru.Image != repo || ru.ApplicationsUpdated != 1 || ru.Message != "Updated from v0.0.1 to v0.1.0." {
		t.Errorf("recentUpdates %s", jsonString(st.RecentUpdates))
	}
	if st.LastUpdatedAt == nil || !st.LastUpdatedAt.After(before.Time) || st.ApplicationsMatched != 1 || st.ImagesManaged != 1 || st.ObservedGeneration != 1 {
		t.Errorf("status %s", jsonString(st))
	}
	for _, c := range []struct {
		typ, status, reason string
		transitioned        bool
	}{
		{"Reconciling", "False", "Idle", true},
		{"Error", "False", "NoErrors", false},
		{"Ready", "True", "ReconcileSucceeded", false},
		{"example.com/Audited", "True", "Audited", false},
	} {
		got := apimeta.FindStatusCondition(st.Conditions, c.typ)
		switch {
		case got == nil:
			t.Errorf("condition %s dropped: %s", c.typ, jsonString(st.Conditions))
		case string(got.Status) != c.status || got.Reason != c.reason:
			t.Errorf("condition %s: %s %s, want %s %s", c.typ, got.Status, got.Reason, c.status, c.reason)
		case got.LastTransitionTime.Equal(&before) == c.transitioned:
			t.Errorf("condition %s: last transition %v, v1.3.0's %v; transitioned: want %t", c.typ, got.LastTransitionTime, before, c.transitioned)
		}
	}

	// Rollback: this controller's Pod stops; it releases both Leases and
	// v1.3.0 leads at its first try.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("exit: %v", err)
	}
	stopped := time.Now()
	v1 = startV1Elector(t, cs)
	testenv.WaitFor(t, renewDeadline, "v1.3.0 to lead at its first try", v1.leads)
	t.Logf("v1.3.0 led %v after this controller's end", time.Since(stopped).Round(100*time.Millisecond))

	for _, name := range []string{leaseName, v1LeaseName} {
		l, err := cs.CoordinationV1().Leases(testenv.ArgoCDNamespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := l.Spec.HolderIdentity; h != nil && strings.HasPrefix(*h, "argocd-image-updater-controller-") != (name == v1LeaseName) {
			t.Errorf("Lease %s held by %q after the rollback", name, *h)
		}
	}
	// This controller's own record, which v1.3.0's types do not have.
	if len(readStatus(t, w, "web").HealthGate) == 0 {
		t.Fatal("no health gate record in the status: the rollback below reads nothing v1.3.0 lacks")
	}
	// v1.3.0's CRD: what this controller left reads as v1.3.0's types.
	data, err := os.ReadFile(filepath.Join("testdata", "v1.3.0-imageupdater-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crds := w.dyn.Resource(crdResource)
	v130 := testenv.DecodeYAML(t, data)[0]
	cur, err := crds.Get(t.Context(), v130.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v130.SetResourceVersion(cur.GetResourceVersion())
	if _, err := crds.Update(t.Context(), v130, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("apply v1.3.0's CRD: %v", err)
	}
	var left *v130Status
	testenv.WaitFor(t, 30*time.Second, "the status to read as v1.3.0's", func() (bool, string) {
		obj, err := ius.Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		left, err = decodeV130Status(obj)
		return err == nil, jsonString(obj.Object["status"]) + ": " + errString(err)
	})
	// Under v1.3.0's CRD the API server prunes the fields it lacks as it
	// reads; v1.3.0's first status update drops them from storage.
	if len(left.RecentUpdates) != 1 || left.RecentUpdates[0].NewVersion != "v0.1.0" || left.RecentUpdates[0].Image != repo ||
		left.ApplicationsMatched != 1 || left.ImagesManaged != 1 || len(left.Conditions) != 4 {
		t.Errorf("v1.3.0 reads %s", jsonString(left))
	}
	// v1.3.0's next reconcile writes the status it read back, with its
	// Reconciling condition: the API server takes it.
	apimeta.SetStatusCondition(&left.Conditions, metav1.Condition{Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "Reconciling",
		Message: "Image update check in progress.", ObservedGeneration: 1})
	setStatus(t, ius, "web", *left)
}

// setStatus writes st as the whole status of the ImageUpdater name, as
// v1.3.0's status update does.
func setStatus(t *testing.T, ius dynamic.ResourceInterface, name string, st v130Status) {
	t.Helper()
	obj, err := ius.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	obj.Object["status"] = m
	if _, err := ius.UpdateStatus(t.Context(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("write the status as v1.3.0: %v", err)
	}
}

func readStatus(t *testing.T, w *controllerWorld, name string) imageupdaterv1alpha1.ImageUpdaterStatus {
	t.Helper()
	var iu imageupdaterv1alpha1.ImageUpdater
	if err := w.k.Client.Get(t.Context(), client.ObjectKey{Namespace: testenv.ArgoCDNamespace, Name: name}, &iu); err != nil {
		t.Fatal(err)
	}
	return iu.Status
}

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestUpgradeNetworkPolicies: with v1.3.0's image swapped for this one in
// the Deployment of v1.3.0's install or of argocd-operator, and nothing
// else changed, the NetworkPolicies in front of v1.3.0's Pods admit this
// controller's metrics and webhook ports, from where they admitted
// v1.3.0's: this controller, run as /manager with those arguments,
// listens where v1.3.0 did.
func TestUpgradeNetworkPolicies(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "v1.3.0-networkpolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var policies []networkingv1.NetworkPolicy
	for _, o := range testenv.DecodeYAML(t, data) {
		var p networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &p); err != nil {
			t.Fatal(err)
		}
		policies = append(policies, p)
	}
	const notSelected = "does not select the Pods"
	for _, tc := range []struct {
		name   string
		labels map[string]string
		args   []string
		env    map[string]string
		want   map[string][]string
	}{
		{
			name:   "v1.3.0's install",
			labels: map[string]string{"control-plane": "argocd-image-updater-controller", "app.kubernetes.io/name": "argocd-image-updater"},
			args:   []string{"--metrics-bind-address=:8443"},
			env:    map[string]string{"ENABLE_WEBHOOK": "true"},
			want: map[string][]string{
				"allow-metrics-traffic":               {"metrics from namespaces metrics=enabled"},
				"allow-webhook-traffic":               {"webhook from namespaces webhooks=enabled"},
				"argocd-image-updater-network-policy": {notSelected},
			},
		},
		{
			// The operator passes no bind address: neither line serves
			// metrics there, and its policy's 8443 admits nothing.
			name:   "argocd-operator's Deployment",
			labels: map[string]string{"app.kubernetes.io/name": "argocd-argocd-image-updater-controller"},
			args:   []string{"--tlsminversion", "1.2", "--tlsciphers", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"},
			env:    map[string]string{"ENABLE_WEBHOOK": "true"},
			want: map[string][]string{
				"allow-metrics-traffic":               {notSelected},
				"allow-webhook-traffic":               {notSelected},
				"argocd-image-updater-network-policy": {"a port the container does not declare from namespaces ", "webhook from namespaces "},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &runOptions{}
			cmd := newRunCommandFor(o, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			root := &cobra.Command{Use: v1Program}
			root.AddCommand(cmd)
			preRun(t, cmd, tc.args, "")
			// The Pod's ports: where this controller listens for other Pods.
			var ports []corev1.ContainerPort
			if o.metricsPort > 0 {
				ports = append(ports, corev1.ContainerPort{Name: "metrics", ContainerPort: int32(o.metricsPort)})
			}
			if o.webhook.enable {
				ports = append(ports, corev1.ContainerPort{Name: "webhook", ContainerPort: int32(o.webhook.port)})
			}
			pod := corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: tc.labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "argocd-image-updater-controller", Ports: ports}}},
			}
			got := map[string][]string{}
			for _, p := range policies {
				got[p.Name] = testenv.Admitted(t, p, pod)
			}
			if !maps.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("what the policies admit to this controller's Pods:\n got %q\nwant %q", got, tc.want)
			}
			// And no port it listens on is left out.
			for _, port := range ports {
				if !slices.ContainsFunc(slices.Concat(slices.Collect(maps.Values(got))...), func(a string) bool { return strings.HasPrefix(a, port.Name+" from ") }) {
					t.Errorf("port %s (%d) admitted by no policy", port.Name, port.ContainerPort)
				}
			}
		})
	}
}
