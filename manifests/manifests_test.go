// Package manifests holds the install manifests; its tests check that they
// build, are rendered, and are accepted by an API server.
package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/image-updater/argocd-image-updater/testenv"
)

func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	out, err := exec.Command("kubectl", "kustomize", dir).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return out
}

func TestInstallYAMLIsRendered(t *testing.T) {
	want := kustomize(t, "base")
	got, err := os.ReadFile("install.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("manifests/install.yaml is stale: run `make manifests`")
	}
}

func objects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
	}
	return objs
}

func TestInstallYAMLServerSideDryRun(t *testing.T) {
	k := testenv.StartKube(t)
	data, err := os.ReadFile("install.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(k.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn := dynamic.NewForConfigOrDie(k.Config)
	kinds := map[string]bool{}
	for _, obj := range objects(t, data) {
		gvk := obj.GroupVersionKind()
		kinds[gvk.Kind+"/"+obj.GetName()] = true
		mapping, err := mapper.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		_, err = dyn.Resource(mapping.Resource).Namespace(testenv.ArgoCDNamespace).
			Apply(t.Context(), obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "test", DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Errorf("server-side dry run of %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
	}
	// The names existing overlays patch.
	for _, want := range []string{
		"ServiceAccount/argocd-image-updater", "Role/argocd-image-updater", "RoleBinding/argocd-image-updater",
		"ConfigMap/argocd-image-updater-config", "ConfigMap/argocd-image-updater-ssh-config",
		"Secret/argocd-image-updater-secret", "Deployment/argocd-image-updater",
	} {
		if !kinds[want] {
			t.Errorf("install.yaml has no %s", want)
		}
	}
}
