package manifests

import (
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// namespacedOnly are the Role's grants the ClusterRole leaves out, because
// the controller uses them in its own namespace only: a resource and its
// verbs, all of the Role's when none are named.
var namespacedOnly = []struct {
	resource string
	verbs    []string
	why      string
}{
	{resource: "coordination.k8s.io/leases", why: "the leader-election Lease"},
	{resource: "/configmaps", why: "Argo CD's argocd-ssh-known-hosts-cm and argocd-tls-certs-cm"},
	{resource: "/secrets", verbs: []string{"list"}, why: "Argo CD's repository Secrets, found by label"},
	{resource: "argoproj.io/appprojects", why: "Argo CD's AppProjects, which live in its namespace"},
}

// grants flattens RBAC rules into group/resource -> sorted verbs.
func grants(t *testing.T, rules []rbacv1.PolicyRule) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range rules {
		// Rules narrowed by name (the ConfigMaps and Leases of the
		// controller's namespace) count by resource and verb.
		if len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v is narrowed by URL: compare it by hand", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := g + "/" + res
				out[key] = append(out[key], r.Verbs...)
				slices.Sort(out[key])
				out[key] = slices.Compact(out[key])
			}
		}
	}
	return out
}

func convert[T any](t *testing.T, obj *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

func TestClusterWide(t *testing.T) {
	objs := objects(t, kustomize(t, "cluster-wide"))
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if o.GetNamespace() != "argocd" {
			t.Errorf("%s %s in namespace %q, want argocd", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}

	// The base's Role is kept as it is.
	baseRole := convert[rbacv1.Role](t, find(t, objects(t, kustomize(t, "base")), "Role", "argocd-image-updater"))
	role := convert[rbacv1.Role](t, find(t, objs, "Role", "argocd-image-updater"))
	roleGrants := grants(t, role.Rules)
	if !maps.EqualFunc(roleGrants, grants(t, baseRole.Rules), slices.Equal) {
		t.Errorf("the Role differs from the base's: %v", roleGrants)
	}

	// The ClusterRole grants what the Role does, apart from what is used
	// in the controller's namespace only: no more, no less.
	want := maps.Clone(roleGrants)
	for _, only := range namespacedOnly {
		verbs, ok := want[only.resource]
		if !ok {
			t.Errorf("the Role no longer grants %s: update namespacedOnly", only.resource)
			continue
		}
		if only.verbs == nil {
			delete(want, only.resource)
			continue
		}
		for _, v := range only.verbs {
			if !slices.Contains(verbs, v) {
				t.Errorf("the Role no longer grants %s on %s: update namespacedOnly", v, only.resource)
			}
		}
		want[only.resource] = slices.DeleteFunc(slices.Clone(verbs), func(v string) bool { return slices.Contains(only.verbs, v) })
	}
	cr := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "argocd-image-updater"))
	got := grants(t, cr.Rules)
	for key, verbs := range got {
		if !slices.Equal(verbs, want[key]) {
			t.Errorf("ClusterRole grants %v on %s, the Role %v", verbs, key, want[key])
		}
	}
	for key, verbs := range want {
		if _, ok := got[key]; !ok {
			t.Errorf("ClusterRole lacks %s %v", key, verbs)
		}
	}

	crb := convert[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "argocd-image-updater"))
	if crb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "argocd-image-updater"}) {
		t.Errorf("roleRef %+v", crb.RoleRef)
	}
	if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "argocd-image-updater", Namespace: "argocd"}}; !slices.Equal(crb.Subjects, want) {
		t.Errorf("subjects %+v, want %+v", crb.Subjects, want)
	}

	dep := convert[appsv1.Deployment](t, find(t, objs, "Deployment", "argocd-image-updater"))
	var value string
	found := false
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "IMAGE_UPDATER_APPLICATION_NAMESPACES" {
			value, found = e.Value, true
		}
	}
	if !found || value != "*" {
		t.Errorf("IMAGE_UPDATER_APPLICATION_NAMESPACES = %q (set: %v), want *", value, found)
	}
	// The patch adds to the base's environment, it does not replace it.
	if n := len(dep.Spec.Template.Spec.Containers[0].Env); n < 2 {
		t.Errorf("%d environment variables", n)
	}
}

// TestClusterWideElsewhere installs the cluster-wide variant in another
// namespace: the ClusterRoleBinding follows.
func TestClusterWideElsewhere(t *testing.T) {
	objs := objects(t, kustomize(t, "testdata/cluster-wide-gitops"))
	crb := convert[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "argocd-image-updater"))
	if len(crb.Subjects) != 1 || crb.Subjects[0].Namespace != "gitops" {
		t.Errorf("subjects %+v, want the ServiceAccount in gitops", crb.Subjects)
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && ns != "gitops" {
			t.Errorf("%s %s in namespace %q", o.GetKind(), o.GetName(), ns)
		}
	}
}
