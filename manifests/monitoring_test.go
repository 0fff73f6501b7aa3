package manifests

import (
	"os"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// TestMonitoringWiring checks that the monitoring examples reach the
// install: the Service selects the controller's pods and its metrics port,
// the ServiceMonitor selects the Service and one of its ports, and the
// dashboard ConfigMap carries the dashboard file. That their queries name
// served metrics is checked in cmd/argocd-image-updater.
func TestMonitoringWiring(t *testing.T) {
	objs := objects(t, kustomize(t, "monitoring"))
	install := objects(t, kustomize(t, "base"))
	dep := convert[appsv1.Deployment](t, find(t, install, "Deployment", "argocd-image-updater"))
	svc := convert[corev1.Service](t, find(t, objs, "Service", "argocd-image-updater-metrics"))

	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("the Service's selector %v does not select the pods (labels %v)", svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	var metricsPort int32
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	if metricsPort == 0 {
		t.Fatal("the container has no port named metrics")
	}
	svcPorts := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		svcPorts[p.Name] = true
		if p.TargetPort.StrVal != "metrics" && p.TargetPort.IntVal != metricsPort {
			t.Errorf("Service port %s targets %s, not the container's metrics port %d", p.Name, p.TargetPort.String(), metricsPort)
		}
	}

	sm := find(t, objs, "ServiceMonitor", "argocd-image-updater")
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(svc.Labels)) {
		t.Errorf("the ServiceMonitor's selector %v does not select the Service (labels %v)", sel, svc.Labels)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) == 0 {
		t.Fatal("the ServiceMonitor has no endpoint")
	}
	for _, e := range endpoints {
		if port, _ := e.(map[string]any)["port"].(string); !svcPorts[port] {
			t.Errorf("the ServiceMonitor scrapes port %q, which the Service does not name", port)
		}
	}

	cm := convert[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "argocd-image-updater-dashboard"))
	want, err := os.ReadFile("monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["argocd-image-updater.json"] != string(want) {
		t.Error("the dashboard ConfigMap does not hold monitoring/dashboard.json")
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap lacks the label Grafana's sidecar looks for: %v", cm.Labels)
	}
	for _, o := range objs {
		if o.GetNamespace() != "argocd" {
			t.Errorf("%s %s in namespace %q, want argocd", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
}
