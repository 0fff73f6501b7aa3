package manifests

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// TestSwitching follows docs/configuration.md's steps from each line of
// Argo CD Image Updater, on an API server holding what that line installs
// (testdata/installed), and checks what remains.
func TestSwitching(t *testing.T) {
	steps := switchingSteps(t)
	tests := []struct {
		from, install string
		deployment    string
		serviceAcct   string
	}{
		{from: "v0.18", install: "install.yaml", deployment: "argocd-image-updater", serviceAcct: "argocd-image-updater"},
		{from: "v1.3.0", install: "v1-names", deployment: "argocd-image-updater-controller", serviceAcct: "argocd-image-updater-controller"},
	}
	for _, tt := range tests {
		t.Run("from "+tt.from, func(t *testing.T) {
			k := testenv.StartKube(t, testenv.WithCRDs("base/crd/argocd-image-updater.argoproj.io_imageupdaters.yaml"))
			dyn := dynamic.NewForConfigOrDie(k.Config)
			data, err := os.ReadFile("testdata/installed/" + tt.from + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			installed := objects(t, data)
			// Installed by another hand than the switch.
			k.Apply(t, "kubectl-client-side-apply", "argocd", installed)
			before := map[string]*unstructured.Unstructured{}
			for _, o := range installed {
				if o.GetKind() == "ImageUpdater" {
					before[o.GetName()] = get(t, dyn, o)
				}
			}

			// The documented commands.
			var ours []*unstructured.Unstructured
			if tt.install == "install.yaml" {
				data, err := os.ReadFile("install.yaml")
				if err != nil {
					t.Fatal(err)
				}
				ours = objects(t, data)
			} else {
				ours = objects(t, kustomize(t, tt.install))
				if !slices.Contains(steps.applied, tt.install) {
					t.Fatalf("the documented steps do not apply %s: %v", tt.install, steps.applied)
				}
				for _, ref := range steps.deleted {
					deleteObject(t, dyn, ref)
				}
			}
			k.Apply(t, "kubectl", "argocd", ours)

			// One controller, ours, with our ServiceAccount.
			deps := list(t, dyn, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"})
			if len(deps) != 1 || deps[0].GetName() != tt.deployment {
				t.Fatalf("Deployments %v, want %s alone", names(deps), tt.deployment)
			}
			image, _, _ := unstructured.NestedSlice(deps[0].Object, "spec", "template", "spec", "containers")
			if len(image) != 1 || !strings.HasPrefix(image[0].(map[string]any)["image"].(string), "ghcr.io/image-updater/") {
				t.Errorf("containers %v, want ours alone", image)
			}
			if sa, _, _ := unstructured.NestedString(deps[0].Object, "spec", "template", "spec", "serviceAccountName"); sa != tt.serviceAcct {
				t.Errorf("ServiceAccount %q, want %s", sa, tt.serviceAcct)
			}
			// The ServiceAccount is bound to this install's Role only.
			var bound []string
			for _, gvr := range []schema.GroupVersionResource{
				{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
				{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
			} {
				for _, b := range list(t, dyn, gvr) {
					subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
					for _, s := range subjects {
						if s.(map[string]any)["name"] == tt.serviceAcct {
							role, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
							bound = append(bound, b.GetKind()+"/"+b.GetName()+"->"+role)
						}
					}
				}
			}
			if want := []string{"RoleBinding/argocd-image-updater->argocd-image-updater"}; !slices.Equal(bound, want) {
				t.Errorf("bindings of %s: %v, want %v", tt.serviceAcct, bound, want)
			}
			// v1.x's NetworkPolicies, updated by the apply, admit this
			// controller's metrics and webhook ports.
			dep := convert[appsv1.Deployment](t, &deps[0])
			got := map[string][]string{}
			for _, o := range list(t, dyn, resources["networkpolicy"]) {
				got[o.GetName()] = testenv.Admitted(t, *convert[networkingv1.NetworkPolicy](t, &o), dep.Spec.Template)
			}
			want := map[string][]string{}
			if tt.from == "v1.3.0" {
				want = map[string][]string{
					"allow-metrics-traffic": {"metrics from namespaces metrics=enabled"},
					"allow-webhook-traffic": {"webhook from namespaces webhooks=enabled"},
				}
			}
			if !maps.EqualFunc(got, want, slices.Equal) {
				t.Errorf("what the NetworkPolicies admit to the controller's Pods:\n got %v\nwant %v", got, want)
			}
			// The user's settings stay.
			cm := get(t, dyn, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "argocd-image-updater-config", "namespace": "argocd"}}})
			if conf, _, _ := unstructured.NestedString(cm.Object, "data", "registries.conf"); !strings.Contains(conf, "ext:/app/scripts/ecr-login.sh") {
				t.Errorf("registries.conf lost: %q", conf)
			}
			// v1.x's Lease and resources stay as they were.
			for _, o := range installed {
				switch o.GetKind() {
				case "Lease":
					get(t, dyn, o)
				case "ImageUpdater":
					after := get(t, dyn, o)
					if !equality.Semantic.DeepEqual(before[o.GetName()].Object["spec"], after.Object["spec"]) ||
						!slices.Equal(before[o.GetName()].GetFinalizers(), after.GetFinalizers()) {
						t.Errorf("ImageUpdater %s changed:\n%v\n%v", o.GetName(), before[o.GetName()].Object, after.Object)
					}
				}
			}
		})
	}
}

// switchingSteps are the commands of docs/configuration.md's switch from
// v1.x: what kubectl applies (-k) and deletes (kind/name).
type steps struct{ applied, deleted []string }

func switchingSteps(t *testing.T) steps {
	t.Helper()
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ := strings.Cut(string(doc)[strings.Index(string(doc), "**From v1.x**"):], "### ")
	var s steps
	for _, line := range strings.Split(section, "\n") {
		words := strings.Fields(line)
		switch {
		case len(words) > 2 && words[0] == "kubectl" && slices.Contains(words, "apply"):
			if i := slices.Index(words, "-k"); i >= 0 && i+1 < len(words) {
				s.applied = append(s.applied, strings.TrimPrefix(words[i+1], "manifests/"))
			}
		case len(words) > 2 && words[0] == "kubectl" && slices.Contains(words, "delete"):
			for _, w := range words {
				if kindName.MatchString(w) {
					s.deleted = append(s.deleted, w)
				}
			}
		}
	}
	if len(s.applied) != 1 || len(s.deleted) < 9 {
		t.Fatalf("the switch from v1.x in docs/configuration.md was misread: %+v", s)
	}
	return s
}

var kindName = regexp.MustCompile(`^[a-z]+/[a-z0-9.-]+$`)

var resources = map[string]schema.GroupVersionResource{
	"role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"rolebinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"clusterrole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"clusterrolebinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"service":            {Version: "v1", Resource: "services"},
	"networkpolicy":      {Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
}

func deleteObject(t *testing.T, dyn dynamic.Interface, ref string) {
	t.Helper()
	kind, name, _ := strings.Cut(ref, "/")
	gvr, ok := resources[kind]
	if !ok {
		t.Fatalf("%s: unknown kind", ref)
	}
	var r dynamic.ResourceInterface = dyn.Resource(gvr).Namespace("argocd")
	if strings.HasPrefix(kind, "cluster") {
		r = dyn.Resource(gvr)
	}
	if err := r.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete %s: %v", ref, err)
	}
}

func get(t *testing.T, dyn dynamic.Interface, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	gv, _ := schema.ParseGroupVersion(o.GetAPIVersion())
	plural := strings.ToLower(o.GetKind()) + "s"
	got, err := dyn.Resource(gv.WithResource(plural)).Namespace("argocd").Get(t.Context(), o.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return got
}

func list(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource) []unstructured.Unstructured {
	t.Helper()
	l, err := dyn.Resource(gvr).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func names(objs []unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}
