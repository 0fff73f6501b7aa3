package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// DecodeYAML returns the objects of a multi-document YAML stream, such as
// the output of kubectl kustomize or helm template. Documents holding only
// comments are skipped.
func DecodeYAML(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("split YAML documents: %v", err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("decode YAML document: %v\n%s", err, doc)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// DryRunApply sends each object to the API server as a server-side apply
// with dry run, as `kubectl apply --server-side --dry-run=server` would: the
// server validates and defaults it and stores nothing. Namespaced objects
// without a namespace go to namespace. It returns one error per rejected
// object, naming it.
func (k *Kube) DryRunApply(t testing.TB, namespace string, objs []*unstructured.Unstructured) []error {
	t.Helper()
	return k.apply(t, namespace, objs, metav1.ApplyOptions{FieldManager: "test", DryRun: []string{metav1.DryRunAll}})
}

// Apply applies each object as `kubectl apply --server-side
// --force-conflicts` does, as field manager (kubectl's is "kubectl"),
// failing the test on a refusal. Namespaced objects without a namespace
// go to namespace.
func (k *Kube) Apply(t testing.TB, manager, namespace string, objs []*unstructured.Unstructured) {
	t.Helper()
	if errs := k.apply(t, namespace, objs, metav1.ApplyOptions{FieldManager: manager, Force: true}); len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
}

func (k *Kube) apply(t testing.TB, namespace string, objs []*unstructured.Unstructured, opts metav1.ApplyOptions) []error {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err))
			continue
		}
		var client dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = namespace
			}
			client = dyn.Resource(mapping.Resource).Namespace(ns)
		}
		if _, err = client.Apply(t.Context(), obj.GetName(), obj, opts); err != nil {
			errs = append(errs, fmt.Errorf("server-side apply of %s %s: %w", gvk.Kind, obj.GetName(), err))
		}
	}
	return errs
}
