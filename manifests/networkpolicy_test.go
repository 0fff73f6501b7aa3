package manifests

import (
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// TestNetworkPolicies: v1.x's allow-metrics-traffic and
// allow-webhook-traffic, as the v1-names install and the network-policy
// component ship them, select the controller's Pods and admit its metrics
// and webhook ports from the namespaces v1.x admits them from, and
// nothing else.
func TestNetworkPolicies(t *testing.T) {
	for _, dir := range []string{"v1-names", "testdata/network-policy"} {
		t.Run(dir, func(t *testing.T) {
			objs := objects(t, kustomize(t, dir))
			var dep *appsv1.Deployment
			var policies []networkingv1.NetworkPolicy
			for _, o := range objs {
				switch o.GetKind() {
				case "Deployment":
					dep = convert[appsv1.Deployment](t, o)
				case "NetworkPolicy":
					policies = append(policies, *convert[networkingv1.NetworkPolicy](t, o))
				}
			}
			if dep == nil {
				t.Fatal("no Deployment")
			}
			got := map[string][]string{}
			for _, p := range policies {
				got[p.Name] = testenv.Admitted(t, p, dep.Spec.Template)
			}
			want := map[string][]string{
				"allow-metrics-traffic": {"metrics from namespaces metrics=enabled"},
				"allow-webhook-traffic": {"webhook from namespaces webhooks=enabled"},
			}
			if !maps.EqualFunc(got, want, slices.Equal) {
				t.Errorf("what the policies admit to the controller's Pods:\n got %v\nwant %v", got, want)
			}
		})
	}
	// The plain install has none: v0.18's had none, and a policy would cut
	// off the scrapers of namespaces nobody labelled.
	for _, o := range objects(t, kustomize(t, "base")) {
		if o.GetKind() == "NetworkPolicy" {
			t.Errorf("the base install has NetworkPolicy %s", o.GetName())
		}
	}
}
