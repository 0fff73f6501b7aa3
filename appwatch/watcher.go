// Package appwatch keeps the managed Applications through informers: one
// list and a watch per namespace, each Application kept as an
// application.Snapshot, its strings shared (interner).
package appwatch

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
)

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
	// onUpdate are told of each Application added or changed.
	onUpdate []func(*application.Snapshot)
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
		Resource:  application.Resource(),
		Kind:      "Applications",
		Hint:      "check the API server and the RBAC rules for applications.argoproj.io (list, watch)",
		Tweak:     func(o *metav1.ListOptions) { o.LabelSelector = selector },
		Transform: w.transform,
		Logger:    w.logger,
	}.Start(ctx, w.namespaces)
	w.informers = informers
	if err != nil {
		return err
	}
	for _, inf := range informers {
		for _, f := range w.onUpdate {
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { notify(f, obj) },
				UpdateFunc: func(_, obj any) { notify(f, obj) },
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// OnUpdate has f told of every Application added or changed once Start
// runs, on the informers' goroutine: f must return at once.
func (w *Watcher) OnUpdate(f func(*application.Snapshot)) { w.onUpdate = append(w.onUpdate, f) }

func notify(f func(*application.Snapshot), obj any) {
	if s, ok := obj.(*application.Snapshot); ok {
		f(s)
	}
}

// Get is the Application namespace/name as last seen, whether managed or
// not; false when it is not watched.
func (w *Watcher) Get(namespace, name string) (*application.Snapshot, bool) {
	for _, inf := range w.informers {
		item, ok, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
		if err != nil || !ok {
			continue
		}
		if s, ok := item.(*application.Snapshot); ok && w.nameMatches(s.Name()) {
			return s, true
		}
	}
	return nil, false
}

// Applications returns the managed Applications, sorted by namespace and
// name, with image names read with opts (see application.Snapshot.Application).
func (w *Watcher) Applications(opts ...imageref.Option) []*application.Application {
	var apps []*application.Application
	for _, inf := range w.informers {
		for _, item := range inf.GetStore().List() {
			s, ok := item.(*application.Snapshot)
			if !ok || !s.Managed() || !w.nameMatches(s.Name()) {
				continue
			}
			app, err := s.Application(opts...)
			if err != nil {
				w.logger.Warn("cannot read Application", "application", s.Namespace()+"/"+s.Name(), "error", err)
				continue
			}
			apps = append(apps, app)
		}
	}
	slices.SortFunc(apps, func(a, b *application.Application) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return apps
}

// InNamespace returns the Applications of a namespace whose names the
// watcher's name patterns match, whatever their annotations, sorted by
// name.
func (w *Watcher) InNamespace(namespace string) []*application.Snapshot {
	var snaps []*application.Snapshot
	for _, inf := range w.informers {
		items, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
		if err != nil {
			continue
		}
		for _, item := range items {
			if s, ok := item.(*application.Snapshot); ok && w.nameMatches(s.Name()) {
				snaps = append(snaps, s)
			}
		}
	}
	slices.SortFunc(snaps, func(a, b *application.Snapshot) int { return cmp.Compare(a.Name(), b.Name()) })
	return slices.CompactFunc(snaps, func(a, b *application.Snapshot) bool { return a.Name() == b.Name() })
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

// transform keeps a Snapshot of an Application instead of the object
// (see application.Snapshot), sharing the strings Applications repeat. It
// may be given what it returned before.
func (w *Watcher) transform(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	return application.SnapshotOf(u, application.KeepSpec(w.keepAll), application.InternStrings(w.strings.str)), nil
}
