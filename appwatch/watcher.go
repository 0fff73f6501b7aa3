package appwatch

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"sort"

	"github.com/image-updater/argocd-image-updater/imageref"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// ApplicationsResource is Argo CD's Application resource.
func ApplicationsResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
}

// Watcher keeps an up-to-date view of the managed Applications through
// informers: one list and a watch per namespace at start, not a list per
// update cycle.
type Watcher struct {
	client     dynamic.Interface
	namespaces []string
	nameGlobs  []string
	selector   labels.Selector
	logger     *slog.Logger
	informers  []cache.SharedIndexInformer
	// keepAll keeps the spec of Applications without the image-list
	// annotation, which ImageUpdater resources may select.
	keepAll bool
	// strings is shared by the informers' transforms.
	strings *interner
}

// Option configures a Watcher.
type Option func(*Watcher) error

// Namespaces limits the watch to these namespaces; "" or "*" watches all.
func Namespaces(ns ...string) Option {
	return func(w *Watcher) error { w.namespaces = ns; return nil }
}

// MatchNames keeps Applications whose name matches one of the globs
// (path.Match syntax).
func MatchNames(globs ...string) Option {
	return func(w *Watcher) error {
		for _, g := range globs {
			if _, err := path.Match(g, ""); err != nil {
				return fmt.Errorf("application name pattern %q: %w", g, err)
			}
		}
		w.nameGlobs = globs
		return nil
	}
}

// MatchLabels keeps Applications matching a label selector
// ("team=a,tier!=test"). The API server applies it, so others are never
// transferred.
func MatchLabels(selector string) Option {
	return func(w *Watcher) error {
		s, err := labels.Parse(selector)
		if err != nil {
			return fmt.Errorf("application label selector %q: %w", selector, err)
		}
		w.selector = s
		return nil
	}
}

// KeepUnannotated keeps the spec of every Application in the cache, not
// only of those with the image-list annotation: ImageUpdater resources
// select Applications by name and labels alone (see InNamespace).
func KeepUnannotated() Option {
	return func(w *Watcher) error { w.keepAll = true; return nil }
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option {
	return func(w *Watcher) error { w.logger = l; return nil }
}

// NewWatcher validates the options; Start begins watching.
func NewWatcher(client dynamic.Interface, opts ...Option) (*Watcher, error) {
	w := &Watcher{client: client, selector: labels.Everything(), logger: slog.New(slog.DiscardHandler), strings: newInterner()}
	for _, opt := range opts {
		if err := opt(w); err != nil {
			return nil, err
		}
	}
	if len(w.namespaces) == 0 {
		w.namespaces = []string{metav1.NamespaceAll}
	}
	return w, nil
}

// Start starts the informers and waits until their caches are filled.
func (w *Watcher) Start(ctx context.Context) error {
	selector := w.selector.String()
	informers, err := InformerSet{
		Client:    w.client,
		Resource:  ApplicationsResource(),
		Kind:      "Applications",
		Hint:      "check the API server and the RBAC rules for applications.argoproj.io (list, watch)",
		Tweak:     func(o *metav1.ListOptions) { o.LabelSelector = selector },
		Transform: w.transform,
		Logger:    w.logger,
	}.Start(ctx, w.namespaces)
	w.informers = informers
	return err
}

// Applications returns the managed Applications, sorted by namespace and
// name, with image names read with opts (see FromUnstructured). Their
// Object fields are shared with the informer and must not be modified.
func (w *Watcher) Applications(opts ...imageref.Option) []*Application {
	var apps []*Application
	for _, inf := range w.informers {
		for _, item := range inf.GetStore().List() {
			obj, ok := item.(*unstructured.Unstructured)
			if !ok || !Managed(obj.GetAnnotations()) || !w.nameMatches(obj.GetName()) {
				continue
			}
			app, err := FromUnstructured(obj, opts...)
			if err != nil {
				w.logger.Warn("cannot read Application", "application", obj.GetNamespace()+"/"+obj.GetName(), "error", err)
				continue
			}
			apps = append(apps, app)
		}
	}
	sort.Slice(apps, func(i, j int) bool { return apps[i].Key() < apps[j].Key() })
	return apps
}

// InNamespace returns the Applications of a namespace whose names the
// watcher's name patterns match, whatever their annotations, sorted by
// name. They are shared with the informer and must not be modified.
func (w *Watcher) InNamespace(namespace string) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for _, inf := range w.informers {
		items, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
		if err != nil {
			continue
		}
		for _, item := range items {
			if obj, ok := item.(*unstructured.Unstructured); ok && w.nameMatches(obj.GetName()) {
				objs = append(objs, obj)
			}
		}
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	return slices.CompactFunc(objs, func(a, b *unstructured.Unstructured) bool { return a.GetName() == b.GetName() })
}

func (w *Watcher) nameMatches(name string) bool {
	if len(w.nameGlobs) == 0 {
		return true
	}
	for _, g := range w.nameGlobs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// transform trims an Application before it enters the cache and shares the
// strings it repeats with the Applications already there.
func (w *Watcher) transform(obj any) (any, error) {
	trim := trimApplication
	if w.keepAll {
		trim = trimStatus
	}
	obj, err := trim(obj)
	if err != nil {
		return nil, err
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.Object = w.strings.value(u.Object).(map[string]any)
	}
	return obj, nil
}

// trimApplication drops what the updater never reads before an object
// enters the cache: managed fields and most of the status (resource
// trees, history and operation state can be most of an Application's
// size). Unmanaged Applications keep only their metadata.
func trimApplication(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	if !Managed(u.GetAnnotations()) {
		u.SetManagedFields(nil)
		delete(u.Object, "spec")
		delete(u.Object, "status")
		return u, nil
	}
	return trimStatus(u)
}

// trimStatus is trimApplication for every Application, annotated or not.
func trimStatus(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	u.SetManagedFields(nil)
	status, ok := u.Object["status"].(map[string]any)
	if !ok {
		return u, nil
	}
	kept := map[string]any{}
	for _, k := range []string{"sourceType", "sourceTypes"} {
		if v, ok := status[k]; ok {
			kept[k] = v
		}
	}
	if summary, ok := status["summary"].(map[string]any); ok {
		if images, ok := summary["images"]; ok {
			kept["summary"] = map[string]any{"images": images}
		}
	}
	u.Object["status"] = kept
	return u, nil
}
