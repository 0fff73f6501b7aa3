package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// TestUpgradeFromV1Chart: a release of a chart laid out as argo-helm's
// 1.x chart (the CRD among its templates, kept or not by crds.keep, an
// older schema) upgraded to this chart keeps the CRD and every
// ImageUpdater, and gets this chart's CRD, with a real helm against a real
// API server.
func TestUpgradeFromV1Chart(t *testing.T) {
	for _, keep := range []bool{true, false} {
		name := map[bool]string{true: "keep", false: "no-keep"}[keep]
		t.Run(map[bool]string{true: "crds.keep=true", false: "crds.keep=false"}[keep], func(t *testing.T) {
			// The CRD is cluster-wide: one API server each.
			k := testenv.StartKube(t)
			kubeconfig := testenv.WriteKubeconfig(t, k.Config, namespace)
			dyn := dynamic.NewForConfigOrDie(k.Config)
			crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
			updaters := dyn.Resource(schema.GroupVersionResource{Group: "argocd-image-updater.argoproj.io", Version: "v1alpha1", Resource: "imageupdaters"}).Namespace(namespace)
			release := "iu-" + name
			if _, err := helm(t, "install", release, v1LikeChart(t), "--namespace", namespace, "--kubeconfig", kubeconfig,
				"--set", "crds.keep="+map[bool]string{true: "true", false: "false"}[keep], "--wait=false"); err != nil {
				t.Fatal(err)
			}
			iu := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "argocd-image-updater.argoproj.io/v1alpha1", "kind": "ImageUpdater",
				"metadata": map[string]any{"name": "web-" + name, "namespace": namespace},
				"spec":     map[string]any{"applicationRefs": []any{map[string]any{"namePattern": "web-*", "images": []any{map[string]any{"alias": "web", "imageName": "nginx"}}}}},
			}}
			// The CRD the release installed is served once it is established.
			testenv.WaitFor(t, 30*time.Second, "the ImageUpdater created", func() (bool, string) {
				_, err := updaters.Create(t.Context(), iu, metav1.CreateOptions{})
				return err == nil, fmt.Sprint(err)
			})
			if _, err := helm(t, "upgrade", release, chartDir, "--namespace", namespace, "--kubeconfig", kubeconfig,
				"--set", "crds.keep="+map[bool]string{true: "true", false: "false"}[keep], "--wait=false"); err != nil {
				t.Fatal(err)
			}
			if _, err := updaters.Get(t.Context(), "web-"+name, metav1.GetOptions{}); err != nil {
				t.Errorf("the ImageUpdater is gone after the upgrade: %v", err)
			}
			crd, err := crds.Get(t.Context(), "imageupdaters.argocd-image-updater.argoproj.io", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the CRD is gone after the upgrade: %v", err)
			}
			if !hasLabelsField(crd) {
				t.Error("the CRD was not upgraded: no pullRequest.labels in its schema")
			}
		})
	}
}

// v1LikeChart writes a chart named as argo-helm's, whose only template is
// this module's CRD as an older release had it (no pullRequest.labels),
// rendered as that chart renders it: under crds.install, with
// helm.sh/resource-policy: keep under crds.keep.
func v1LikeChart(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "files", "argocd-image-updater.argoproj.io_imageupdaters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := map[string]any{}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	dropLabelsField(crd)
	delete(crd["metadata"].(map[string]any), "annotations")
	body, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: argocd-image-updater\nversion: 1.2.4\nappVersion: v1.2.2\n",
		"values.yaml": "crds:\n  install: true\n  keep: true\n",
		"templates/crd.yaml": "{{- if .Values.crds.install }}\n" +
			strings.Replace(string(body), "metadata:\n", "metadata:\n  annotations:\n    {{- if .Values.crds.keep }}\n    helm.sh/resource-policy: keep\n    {{- end }}\n    origin: v1-like\n", 1) +
			"{{- end }}\n",
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// pullRequestProps are the pullRequest properties of a CRD's writeBackConfig.
func pullRequestProps(crd map[string]any) map[string]any {
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	if len(versions) == 0 {
		return nil
	}
	pr, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties",
		"writeBackConfig", "properties", "gitConfig", "properties", "pullRequest", "properties")
	return pr
}

func hasLabelsField(crd *unstructured.Unstructured) bool {
	_, ok := pullRequestProps(crd.Object)["labels"]
	return ok
}

func dropLabelsField(crd map[string]any) {
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	v := versions[0].(map[string]any)
	unstructured.RemoveNestedField(v, "schema", "openAPIV3Schema", "properties", "spec", "properties",
		"writeBackConfig", "properties", "gitConfig", "properties", "pullRequest", "properties", "labels")
	versions[0] = v
	_ = unstructured.SetNestedSlice(crd, versions, "spec", "versions")
}
