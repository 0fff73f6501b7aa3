package git

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/application"
)

// Parent is the Application whose manifests define another one (app of
// apps), as far as writing that definition needs it.
type Parent struct {
	Namespace, Name string
	// Project is the parent's AppProject, which must permit RepoURL.
	Project string
	// RepoURL, TargetRevision and Path are the parent's git source.
	RepoURL, TargetRevision, Path string
	// DestinationNamespace is where the parent creates the Applications
	// whose documents name no namespace.
	DestinationNamespace string
}

func (p Parent) key() string { return p.Namespace + "/" + p.Name }

// Parents finds the parent of an Application.
type Parents interface {
	// Parent is the Application that created namespace/name from its
	// manifests.
	Parent(ctx context.Context, namespace, name string) (Parent, error)
}

// Tracking of Argo CD: the annotation it sets on each resource an
// Application manages (<app>:<group>/<kind>:<namespace>/<name>, the
// default since Argo CD 3.0) and the label of the older label tracking.
const (
	trackingAnnotation = "argocd.argoproj.io/tracking-id"
	instanceLabel      = "app.kubernetes.io/instance"
)

// KubeParents reads parents through the Kubernetes API. Argo CD's
// tracking on the child names the parent; the parent's status must list
// the child among the resources it manages, which only Argo CD writes, so
// an Application cannot name as its parent one that does not manage it.
type KubeParents struct {
	dyn dynamic.Interface
	// namespace is Argo CD's: where an Application named without one is.
	namespace string
}

// NewKubeParents reads Applications with dyn; argoCDNamespace is Argo CD's
// namespace.
func NewKubeParents(dyn dynamic.Interface, argoCDNamespace string) *KubeParents {
	return &KubeParents{dyn: dyn, namespace: argoCDNamespace}
}

// Parent implements Parents.
func (k *KubeParents) Parent(ctx context.Context, namespace, name string) (Parent, error) {
	apps := k.dyn.Resource(application.Resource())
	child, err := apps.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Parent{}, fmt.Errorf("read Application %s/%s: %w", namespace, name, err)
	}
	return k.parentOf(ctx, child, "Application")
}

// parentOf is the Application whose manifests define obj, of kind: the
// one Argo CD's tracking on obj names, which lists obj among its
// resources.
func (k *KubeParents) parentOf(ctx context.Context, obj *unstructured.Unstructured, kind string) (Parent, error) {
	apps := k.dyn.Resource(application.Resource())
	namespace, name := obj.GetNamespace(), obj.GetName()
	pns, pname, ok := k.trackedBy(obj)
	if !ok {
		return Parent{}, fmt.Errorf("%s %s/%s is not managed by an Application: Argo CD's %s annotation and %s label name none", kind, namespace, name, trackingAnnotation, instanceLabel)
	}
	parent, err := apps.Namespace(pns).Get(ctx, pname, metav1.GetOptions{})
	if err != nil {
		return Parent{}, fmt.Errorf("read Application %s/%s, which Argo CD's tracking names as the parent of %s %s/%s: %w", pns, pname, kind, namespace, name, err)
	}
	if !manages(parent, kind, namespace, name) {
		return Parent{}, fmt.Errorf("Application %s/%s, which Argo CD's tracking names as the parent of %s %s/%s, does not list it among its resources", pns, pname, kind, namespace, name)
	}
	p := Parent{Namespace: pns, Name: pname}
	p.Project, _, _ = unstructured.NestedString(parent.Object, "spec", "project")
	p.DestinationNamespace, _, _ = unstructured.NestedString(parent.Object, "spec", "destination", "namespace")
	source, err := gitSource(parent)
	if err != nil {
		return Parent{}, fmt.Errorf("Application %s/%s, the parent of %s %s/%s: %w", pns, pname, kind, namespace, name, err)
	}
	p.RepoURL, _ = source["repoURL"].(string)
	p.TargetRevision, _ = source["targetRevision"].(string)
	p.Path, _ = source["path"].(string)
	return p, nil
}

// trackedBy is the parent Argo CD's tracking names on an Application.
func (k *KubeParents) trackedBy(child *unstructured.Unstructured) (namespace, name string, ok bool) {
	app, _, _ := strings.Cut(child.GetAnnotations()[trackingAnnotation], ":")
	if app == "" {
		app = child.GetLabels()[instanceLabel]
	}
	if app == "" {
		return "", "", false
	}
	// An Application outside Argo CD's namespace is named
	// <namespace>_<name>, which no Kubernetes name can be otherwise.
	if ns, n, found := strings.Cut(app, "_"); found {
		return ns, n, ns != "" && n != ""
	}
	return k.namespace, app, true
}

// manages tells whether an Application's status lists the resource of
// kind (in argoproj.io) namespace/name among its resources.
func manages(parent *unstructured.Unstructured, kind, namespace, name string) bool {
	resources, _, _ := unstructured.NestedSlice(parent.Object, "status", "resources")
	for _, r := range resources {
		m, ok := r.(map[string]any)
		if ok && m["group"] == "argoproj.io" && m["kind"] == kind && m["namespace"] == namespace && m["name"] == name {
			return true
		}
	}
	return false
}

// gitSource is the parent's source holding its manifests: spec.source, or
// the first of spec.sources with a path and no chart.
func gitSource(app *unstructured.Unstructured) (map[string]any, error) {
	if s, ok, _ := unstructured.NestedMap(app.Object, "spec", "source"); ok {
		if chart, _ := s["chart"].(string); chart != "" {
			return nil, fmt.Errorf("its source is the Helm chart %s, not manifests in git", chart)
		}
		return s, nil
	}
	sources, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources")
	for _, e := range sources {
		s, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if chart, _ := s["chart"].(string); chart == "" && s["path"] != nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no source of it holds manifests in git")
}
