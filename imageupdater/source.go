package imageupdater

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
)

// Applications is the watched Applications: those annotated for the
// updater, and all of a namespace for ImageUpdaters to select from
// (appwatch.Watcher with appwatch.KeepUnannotated).
type Applications interface {
	Applications(opts ...imageref.Option) []*application.Application
	InNamespace(namespace string) []*application.Snapshot
}

// Source gives the update cycle the Applications that ImageUpdater
// resources select, with the settings the resources give them, beside the
// annotated Applications. Each Application is handled once:
//   - of the ImageUpdaters of its namespace that select it, by the first
//     by name, and of that resource's applicationRefs by the most
//     specific (see specificity), the first in the list among equals;
//   - an ImageUpdater wins over the Application's own image-list
//     annotation, unless it reads that annotation (useAnnotations).
//
// Either case is a Warning on the Application naming both.
type Source struct {
	client     dynamic.Interface
	apps       Applications
	namespaces []string
	logger     *slog.Logger
	informers  []cache.SharedIndexInformer
	// release removes V1Finalizer from ImageUpdaters being deleted.
	release bool

	mu sync.Mutex
	// last is what the last call to Applications read: the resources and
	// the error of each that could not be used at all.
	last []resource
	// changed are the resources created or whose spec changed since the
	// last TakeChanged; wake tells that there are some.
	changed map[types.NamespacedName]bool
	wake    chan struct{}
	// parsed keeps the settings read from each resource.
	parsed *parsedSettings
}

// parsedSettings are the settings each ImageUpdater's applicationRefs give,
// read once per generation of the resource and reference options, so that
// a cycle compiles no policy of a resource whose spec did not change.
type parsedSettings struct {
	mu    sync.Mutex
	byUID map[types.UID]*resourceSettings
}

type resourceSettings struct {
	generation int64
	options    string
	refs       []*settings.Settings
}

// of is what applicationRef i of iu gives its Applications. A nil
// parsedSettings, or a resource that did not come from the API server (no
// UID or generation), is read anew.
func (p *parsedSettings) of(iu *api.ImageUpdater, i int, options string, opts []imageref.Option) *settings.Settings {
	if p == nil || iu.UID == "" || iu.Generation == 0 {
		c := settings.ParseImageUpdater(iu, i, opts...)
		return &c
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.byUID[iu.UID]
	if r == nil || r.generation != iu.Generation || r.options != options || len(r.refs) != len(iu.Spec.ApplicationRefs) {
		r = &resourceSettings{generation: iu.Generation, options: options, refs: make([]*settings.Settings, len(iu.Spec.ApplicationRefs))}
		p.byUID[iu.UID] = r
	}
	if r.refs[i] == nil {
		c := settings.ParseImageUpdater(iu, i, opts...)
		r.refs[i] = &c
	}
	return r.refs[i]
}

// keep forgets the resources not among those listed.
func (p *parsedSettings) keep(listed []resource) {
	if p == nil {
		return
	}
	uids := make(map[types.UID]bool, len(listed))
	for _, r := range listed {
		uids[r.obj.UID] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid := range p.byUID {
		if !uids[uid] {
			delete(p.byUID, uid)
		}
	}
}

// resource is one ImageUpdater as a cycle read it.
type resource struct {
	obj *api.ImageUpdater
	err error // the resource could not be used: bad pattern or selector
}

// Option configures a Source.
type Option func(*Source)

// Namespaces watches ImageUpdaters in these namespaces; "" or "*" watches
// all. Use the namespaces the Applications are watched in.
func Namespaces(ns ...string) Option { return func(s *Source) { s.namespaces = ns } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(s *Source) { s.logger = l } }

// V1Finalizer is the finalizer the v1.x line puts on every ImageUpdater
// and removes once the resource is deleted. Nothing here needs it; left
// on a resource, it keeps the resource's deletion waiting for ever.
const V1Finalizer = "resources-finalizer.argocd-image-updater.argoproj.io"

// WithFinalizerRelease makes the Source remove V1Finalizer from each
// ImageUpdater being deleted, as the v1.x line would have, so that
// resources it created can be deleted after the switch. It adds the
// finalizer to nothing.
func WithFinalizerRelease(on bool) Option { return func(s *Source) { s.release = on } }

// NewSource reads ImageUpdaters through client and selects among apps.
func NewSource(client dynamic.Interface, apps Applications, opts ...Option) *Source {
	s := &Source{client: client, apps: apps, logger: slog.New(slog.DiscardHandler), wake: make(chan struct{}, 1),
		parsed: &parsedSettings{byUID: map[types.UID]*resourceSettings{}}}
	for _, opt := range opts {
		opt(s)
	}
	if len(s.namespaces) == 0 {
		s.namespaces = []string{metav1.NamespaceAll}
	}
	return s
}

// Start starts watching ImageUpdaters and waits until they are listed.
func (s *Source) Start(ctx context.Context) error {
	informers, err := appwatch.InformerSet{
		Client:   s.client,
		Resource: api.Resource(),
		Kind:     "ImageUpdaters",
		Hint:     "check that the ImageUpdater CRD is installed and the RBAC rules for imageupdaters.argocd-image-updater.argoproj.io (list, watch), or run with --imageupdaters=false",
		Logger:   s.logger,
	}.Start(ctx, s.namespaces)
	s.informers = informers
	if err != nil {
		return err
	}
	for _, inf := range informers {
		// Those listed at the start are the first cycle's; a later add is
		// a new resource. An update counts when the spec changed (the
		// generation), not for a status the controller wrote.
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if !initial {
					s.markChanged(obj)
				}
			},
			UpdateFunc: func(old, obj any) {
				o, ok1 := old.(*unstructured.Unstructured)
				n, ok2 := obj.(*unstructured.Unstructured)
				if ok1 && ok2 && o.GetGeneration() != n.GetGeneration() {
					s.markChanged(obj)
				}
			},
		}); err != nil {
			return err
		}
	}
	if !s.release {
		return nil
	}
	for _, inf := range informers {
		// Each deletion is seen as an update that sets deletionTimestamp;
		// a resource already deleting when the controller starts, as an add.
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.releaseFinalizer(ctx, obj) },
			UpdateFunc: func(_, obj any) { s.releaseFinalizer(ctx, obj) },
		}); err != nil {
			return err
		}
	}
	return nil
}

func (s *Source) markChanged(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetDeletionTimestamp() != nil {
		return
	}
	s.mu.Lock()
	if s.changed == nil {
		s.changed = map[types.NamespacedName]bool{}
	}
	s.changed[types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}] = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Changed receives when an ImageUpdater was created, or its spec changed,
// after the resources were first listed; TakeChanged says which.
func (s *Source) Changed() <-chan struct{} { return s.wake }

// TakeChanged returns the resources created or changed since it was last
// called, sorted, and forgets them.
func (s *Source) TakeChanged() []types.NamespacedName {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]types.NamespacedName, 0, len(s.changed))
	for n := range s.changed {
		names = append(names, n)
	}
	s.changed = nil
	slices.SortFunc(names, func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return names
}

// releaseFinalizer removes V1Finalizer from an ImageUpdater being deleted.
// The patch tests that the entry it removes is the finalizer, so a
// concurrent change of the list fails it rather than removing another;
// the update that change makes brings the resource here again.
func (s *Source) releaseFinalizer(ctx context.Context, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetDeletionTimestamp() == nil {
		return
	}
	i := slices.Index(u.GetFinalizers(), V1Finalizer)
	if i < 0 {
		return
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	patch := fmt.Sprintf(`[{"op":"test","path":%q,"value":%q},{"op":"remove","path":%q}]`, path, V1Finalizer, path)
	_, err := s.client.Resource(api.Resource()).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	key := u.GetNamespace() + "/" + u.GetName()
	if err != nil && !apierrors.IsNotFound(err) {
		s.logger.Warn("cannot remove the v1.x finalizer of a deleted ImageUpdater; its deletion waits", "imageUpdater", key, "error", err)
		return
	}
	s.logger.Info("removed the v1.x finalizer of a deleted ImageUpdater", "imageUpdater", key)
}

// Applications returns the annotated Applications and those the
// ImageUpdaters select, each once, sorted by namespace and name.
func (s *Source) Applications(opts ...imageref.Option) []*application.Application {
	resources := s.list()
	s.parsed.keep(resources)
	apps := selectApps(resources, s.apps, s.parsed, s.logger, opts)
	s.mu.Lock()
	s.last = resources
	s.mu.Unlock()
	return apps
}

// Select is what a Source gives the cycle, for resources and apps given
// here rather than watched: the Applications each handled once (see
// Source), and for each resource that cannot be used at all, why.
func Select(resources []*api.ImageUpdater, apps Applications, opts ...imageref.Option) ([]*application.Application, []error) {
	rs := make([]resource, len(resources))
	for i, iu := range resources {
		rs[i] = resource{obj: iu}
	}
	selected := selectApps(rs, apps, nil, slog.New(slog.DiscardHandler), opts)
	var errs []error
	for _, r := range rs {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("ImageUpdater %s/%s: %w", r.obj.Namespace, r.obj.Name, r.err))
		}
	}
	return selected, errs
}

// selectApps applies the rules of Source to resources, in order, and
// records in each why it could not be used.
func selectApps(resources []resource, source Applications, parsed *parsedSettings, logger *slog.Logger, opts []imageref.Option) []*application.Application {
	claimed := map[string]*application.Application{}
	options := imageref.OptionsKey(opts...)
	for i := range resources {
		r := &resources[i]
		r.err = claim(r.obj, source, claimed, func(i int) *settings.Settings { return parsed.of(r.obj, i, options, opts) }, logger, opts)
	}
	apps := source.Applications(opts...)
	for i, app := range apps {
		c, ok := claimed[app.Key()]
		if !ok {
			continue
		}
		if !c.Settings.FromAnnotations {
			c.Settings.Problems = append(c.Settings.Problems, settings.Problem{
				Origin: settings.AnnotationOrigin(settings.KeyImageList), Warning: true,
				Message: fmt.Sprintf("ignored: ImageUpdater %s selects this Application and configures its images (set useAnnotations: true there to use the annotations)", c.ImageUpdater),
			})
		}
		apps[i] = c
		delete(claimed, app.Key())
	}
	for _, c := range claimed {
		apps = append(apps, c)
	}
	sort.Slice(apps, func(i, j int) bool { return apps[i].Key() < apps[j].Key() })
	return apps
}

// claim adds to claimed the Applications iu selects that no resource
// before it did; refSettings gives what each of its applicationRefs
// configures.
func claim(iu *api.ImageUpdater, source Applications, claimed map[string]*application.Application, refSettings func(int) *settings.Settings, logger *slog.Logger, opts []imageref.Option) error {
	name := types.NamespacedName{Namespace: iu.Namespace, Name: iu.Name}
	// The CRD refuses more; one stored before it had the bound is
	// refused here, before any ref is matched.
	if n := len(iu.Spec.ApplicationRefs); n > api.MaxApplicationRefs {
		return fmt.Errorf("spec.applicationRefs: %d refs, more than the %d an ImageUpdater may have", n, api.MaxApplicationRefs)
	}
	type selector struct {
		pattern  string
		selector labels.Selector
	}
	sels := make([]selector, len(iu.Spec.ApplicationRefs))
	for i, ref := range iu.Spec.ApplicationRefs {
		if _, err := path.Match(ref.NamePattern, ""); err != nil {
			return fmt.Errorf("spec.applicationRefs[%d].namePattern: invalid application name pattern %q: %w", i, ref.NamePattern, err)
		}
		sel := labels.Everything()
		if ref.LabelSelectors != nil {
			var err error
			if sel, err = metav1.LabelSelectorAsSelector(ref.LabelSelectors); err != nil {
				return fmt.Errorf("spec.applicationRefs[%d].labelSelectors: %w", i, err)
			}
		}
		sels[i] = selector{pattern: ref.NamePattern, selector: sel}
	}
	order := make([]int, len(sels))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(specificity(iu.Spec.ApplicationRefs[b]), specificity(iu.Spec.ApplicationRefs[a]))
	})
	configs := make([]*settings.Settings, len(sels))
	for _, obj := range source.InNamespace(iu.Namespace) {
		for _, i := range order {
			sel := sels[i]
			if ok, _ := path.Match(sel.pattern, obj.Name()); !ok || !sel.selector.Matches(obj.Labels()) {
				continue
			}
			key := obj.Namespace() + "/" + obj.Name()
			if prev, ok := claimed[key]; ok {
				if prev.ImageUpdater != name {
					prev.Settings.Problems = append(prev.Settings.Problems, settings.Problem{
						Origin: settings.FieldOrigin(name, fmt.Sprintf("spec.applicationRefs[%d]", i)), Warning: true,
						Message: fmt.Sprintf("also selects this Application, which ImageUpdater %s handles (of several ImageUpdaters, the first by name does)", prev.ImageUpdater),
					})
				}
				break
			}
			app, err := obj.Application(opts...)
			if err != nil {
				logger.Warn("cannot read Application", "application", key, "imageUpdater", name, "error", err)
				break
			}
			app.ImageUpdater = name
			if ref := iu.Spec.ApplicationRefs[i]; ref.UseAnnotations != nil && *ref.UseAnnotations {
				app.Settings.FromAnnotations = true
				if !obj.Managed() {
					// As v1.3.0: an error of the resource, not silence. An
					// empty annotation is the annotation's own problem.
					app.Settings.Problems = append(app.Settings.Problems, settings.Problem{
						Origin:  settings.FieldOrigin(name, fmt.Sprintf("spec.applicationRefs[%d].useAnnotations", i)),
						Message: "the Application has no " + settings.AnnotationPrefix + settings.KeyImageList + " annotation to read its images from",
					})
				}
			} else {
				// The settings depend on the ref alone: read once, shared
				// by its Applications (their Images are never modified;
				// Problems are appended to copies).
				if configs[i] == nil {
					configs[i] = refSettings(i)
				}
				app.Settings = *configs[i]
				app.Settings.Problems = slices.Clip(app.Settings.Problems)
			}
			claimed[key] = app
			break
		}
	}
	return nil
}

// specificity ranks an applicationRef as v1.3.0 does, so that of several
// refs selecting an Application the same one handles it: a name without
// wildcards first, then a label selector (the more labels and expressions
// the better), then the longer the literal part of the name pattern.
func specificity(ref api.ApplicationRef) int {
	score := 0
	if !strings.ContainsAny(ref.NamePattern, "*?[]") {
		score += 1_000_000
	}
	literal := characterClass.ReplaceAllString(ref.NamePattern, "")
	score += len(strings.NewReplacer("*", "", "?", "").Replace(literal))
	if s := ref.LabelSelectors; s != nil {
		score += 10_000 + 100*(len(s.MatchLabels)+len(s.MatchExpressions))
	}
	return score
}

// characterClass is a "[...]" of a name pattern.
var characterClass = regexp.MustCompile(`\[.*?]`)

// list returns the ImageUpdaters sorted by namespace and name. One that
// cannot be read is logged and left out.
func (s *Source) list() []resource {
	var out []resource
	for _, inf := range s.informers {
		for _, item := range inf.GetStore().List() {
			u, ok := item.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			iu := &api.ImageUpdater{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, iu); err != nil {
				s.logger.Warn("cannot read ImageUpdater", "imageUpdater", u.GetNamespace()+"/"+u.GetName(), "error", err)
				continue
			}
			out = append(out, resource{obj: iu})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].obj, out[j].obj
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

// Resources returns the ImageUpdaters watched, sorted by namespace and
// name.
func (s *Source) Resources() []*api.ImageUpdater {
	rs := s.list()
	out := make([]*api.ImageUpdater, len(rs))
	for i, r := range rs {
		out[i] = r.obj
	}
	return out
}

// resources returns what the last call to Applications read.
func (s *Source) resources() []resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}
