package testenv

import (
	"cmp"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Admitted reads a NetworkPolicy as it applies to the Pods of a template:
// each container port it admits, and from where, as "<port name> from
// namespaces k=v" ("anywhere" without peers, "elsewhere" for a peer other
// than a namespace selector), sorted. A policy that does not select the
// Pods answers "does not select the Pods"; a rule's port the containers do
// not declare reads "a port the container does not declare".
func Admitted(t testing.TB, p networkingv1.NetworkPolicy, pod corev1.PodTemplateSpec) []string {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(pod.Labels)) {
		return []string{"does not select the Pods"}
	}
	var ports []corev1.ContainerPort
	for _, c := range pod.Spec.Containers {
		ports = append(ports, c.Ports...)
	}
	var out []string
	for _, rule := range p.Spec.Ingress {
		var from []string
		for _, peer := range rule.From {
			if peer.NamespaceSelector == nil || peer.PodSelector != nil || peer.IPBlock != nil {
				from = append(from, "elsewhere")
				continue
			}
			s, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
			if err != nil {
				t.Fatal(err)
			}
			from = append(from, "namespaces "+s.String())
		}
		if len(from) == 0 {
			from = []string{"anywhere"}
		}
		for _, rp := range rule.Ports {
			name := "a port the container does not declare"
			for _, cp := range ports {
				if rp.Port != nil && (rp.Port.String() == cp.Name || rp.Port.IntValue() == int(cp.ContainerPort)) &&
					(rp.Protocol == nil || *rp.Protocol == cmp.Or(cp.Protocol, corev1.ProtocolTCP)) {
					name = cp.Name
				}
			}
			for _, f := range from {
				out = append(out, name+" from "+f)
			}
		}
	}
	slices.Sort(out)
	return out
}
