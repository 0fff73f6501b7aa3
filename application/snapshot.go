package application

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
)

// Snapshot is what the updater keeps of an Application between two of its
// changes: identity, labels, the updater's own annotations, the sources
// with their override lists as written, and what runs. The informers keep
// one per Application instead of the decoded object, whose maps cost
// several times as much (BenchmarkCachedApplications), and the settings
// read from its annotations are kept with it, so a cycle parses only the
// Applications that changed.
//
// A Snapshot is never modified once the informer holds it, except for its
// parsed settings, which are replaced whole.
type Snapshot struct {
	name, namespace string
	uid             types.UID
	resourceVersion string
	labels          pairs
	// annotations are those under settings.AnnotationPrefix.
	annotations pairs
	// applicationSet is the ApplicationSet that generated the Application
	// (its controller owner), if any.
	applicationSet string
	// spec tells whether the spec was kept (see KeepSpec).
	spec        bool
	project     string
	destination Destination
	sources     []Source
	// multiSource: the sources are spec.sources rather than spec.source.
	multiSource bool
	statusType  string
	statusTypes []string
	running     []string
	// status is what Argo CD says of the sync and health; nil when
	// nothing.
	status *Status
	// err is why the spec could not be read; Application returns it.
	err error

	parsed atomic.Pointer[parsedSettings]
}

// parsedSettings are the annotations read with one set of reference
// options (registries.conf's default registry and namespace).
type parsedSettings struct {
	options  string
	settings settings.Settings
}

// SnapshotOption configures how SnapshotOf reads an object.
type SnapshotOption func(*snapshotOptions)

type snapshotOptions struct {
	unmanagedSpec bool
	intern        func(string) string
}

// KeepSpec tells whether an Application without the image-list annotation
// keeps its spec and status (default true); without, it keeps only its
// identity and labels. ImageUpdater resources may select such
// Applications, by name and labels alone.
func KeepSpec(keep bool) SnapshotOption {
	return func(o *snapshotOptions) { o.unmanagedSpec = keep }
}

// InternStrings reads the strings that Applications repeat (annotations,
// image names, namespaces, repositories) through intern, which gives their
// shared copy: the JSON decoder gives every object its own.
func InternStrings(intern func(string) string) SnapshotOption {
	return func(o *snapshotOptions) {
		if intern != nil {
			o.intern = intern
		}
	}
}

// SnapshotOf keeps what the updater reads of obj.
func SnapshotOf(obj *unstructured.Unstructured, opts ...SnapshotOption) *Snapshot {
	o := snapshotOptions{unmanagedSpec: true, intern: sameString}
	for _, opt := range opts {
		opt(&o)
	}
	keepSpec, str := o.unmanagedSpec, o.intern
	s := &Snapshot{
		name:            obj.GetName(),
		namespace:       str(obj.GetNamespace()),
		uid:             obj.GetUID(),
		resourceVersion: obj.GetResourceVersion(),
	}
	if m, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "labels"); m != nil {
		s.labels = newPairs(m, func(string) bool { return true }, str)
	}
	if m, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "annotations"); m != nil {
		s.annotations = newPairs(m, func(k string) bool { return strings.HasPrefix(k, settings.AnnotationPrefix) }, str)
	}
	for _, o := range obj.GetOwnerReferences() {
		if o.Kind == "ApplicationSet" && strings.HasPrefix(o.APIVersion, "argoproj.io/") && o.Controller != nil && *o.Controller {
			s.applicationSet = o.Name
		}
	}
	if !keepSpec && !s.Managed() {
		return s
	}
	s.spec = true
	s.project = str(stringAt(obj.Object, "spec", "project"))
	s.destination = Destination{
		Server:    str(stringAt(obj.Object, "spec", "destination", "server")),
		Name:      str(stringAt(obj.Object, "spec", "destination", "name")),
		Namespace: str(stringAt(obj.Object, "spec", "destination", "namespace")),
	}
	// Status is Argo CD's to write; a part we cannot read only costs us
	// what runs now.
	s.running = stringsAt(obj.Object, str, "status", "summary", "images")
	s.status = readStatus(obj.Object, str)
	s.statusType = str(stringAt(obj.Object, "status", "sourceType"))
	s.statusTypes = stringsAt(obj.Object, str, "status", "sourceTypes")
	s.readSources(obj, str)
	if s.status != nil && s.err == nil {
		s.status.Operation.Sources = syncedSources(obj.Object, s.sources, s.multiSource, str)
	}
	return s
}

// readSources reads the spec's sources.
func (s *Snapshot) readSources(obj *unstructured.Unstructured, str func(string) string) {
	if raw, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "sources"); raw != nil {
		if list, ok := raw.([]any); ok && len(list) > 0 {
			s.multiSource = true
			for i, e := range list {
				m, ok := e.(map[string]any)
				if !ok {
					s.err = fmt.Errorf("application %s/%s: spec.sources[%d] is not an object", s.namespace, s.name, i)
					s.sources = nil
					return
				}
				t := ""
				if i < len(s.statusTypes) {
					t = s.statusTypes[i]
				}
				s.sources = append(s.sources, newSource(i, m, t, str))
			}
			return
		}
	}
	if m, ok := mapAt(obj.Object, "spec", "source"); ok {
		s.sources = []Source{newSource(-1, m, s.statusType, str)}
		return
	}
	if m, ok := mapAt(obj.Object, "spec", "sourceHydrator", "drySource"); ok {
		// The status describes the rendered sync source (a directory),
		// not the dry source: its type is what the dry source says.
		src := newSource(-1, m, "", str)
		src.Dry = true
		s.sources = []Source{src}
	}
}

// GetObjectMeta makes a Snapshot an object to the informer's store and
// indexes, which key it by namespace and name.
func (s *Snapshot) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: s.name, Namespace: s.namespace, UID: s.uid, ResourceVersion: s.resourceVersion}
}

// Name is the Application's name.
func (s *Snapshot) Name() string { return s.name }

// Namespace is the Application's namespace.
func (s *Snapshot) Namespace() string { return s.namespace }

// Labels are the Application's labels, for label selectors.
func (s *Snapshot) Labels() labels.Labels { return s.labels }

// Annotation is the value of one of the updater's annotations.
func (s *Snapshot) Annotation(key string) string { return s.annotations.Get(key) }

// Managed reports whether the Application has the image-list, chart-list
// or git-tag-list annotation.
func (s *Snapshot) Managed() bool {
	for _, key := range settings.ListAnnotations() {
		if s.annotations.Has(key) {
			return true
		}
	}
	return false
}

// Application is the Application with its annotations read with opts
// (registries.conf's default registry and namespace). The settings are
// read once per Snapshot and options; the Application returned is the
// caller's own, but shares its lists with the Snapshot: do not modify
// them (appending to Problems is safe).
func (s *Snapshot) Application(opts ...imageref.Option) (*Application, error) {
	if s.err != nil {
		return nil, s.err
	}
	key := imageref.OptionsKey(opts...)
	p := s.parsed.Load()
	if p == nil || p.options != key {
		p = &parsedSettings{options: key, settings: settings.ParseAnnotations(s.annotations.Map(), opts...)}
		s.parsed.Store(p)
	}
	app := &Application{
		Namespace:      s.namespace,
		Name:           s.name,
		Project:        s.project,
		Destination:    s.destination,
		Settings:       p.settings,
		Sources:        s.sources,
		RunningImages:  s.running,
		ApplicationSet: s.applicationSet,
		snapshot:       s,
	}
	app.Settings.Problems = slices.Clip(app.Settings.Problems)
	return app, nil
}

// object is the Snapshot as an Application object: what it keeps, in
// place, so that a write computed from it patches the fields it read and
// an event refers to the right object.
func (s *Snapshot) object() *unstructured.Unstructured {
	meta := map[string]any{"name": s.name, "namespace": s.namespace}
	if s.uid != "" {
		meta["uid"] = string(s.uid)
	}
	if s.resourceVersion != "" {
		meta["resourceVersion"] = s.resourceVersion
	}
	if len(s.labels) > 0 {
		meta["labels"] = s.labels.anyMap()
	}
	if len(s.annotations) > 0 {
		meta["annotations"] = s.annotations.anyMap()
	}
	obj := map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": meta}
	if !s.spec {
		return &unstructured.Unstructured{Object: obj}
	}
	spec := map[string]any{}
	if s.project != "" {
		spec["project"] = s.project
	}
	if d := s.destination.object(); d != nil {
		spec["destination"] = d
	}
	sources := make([]any, len(s.sources))
	for i, src := range s.sources {
		sources[i] = src.object()
	}
	switch {
	case s.multiSource:
		spec["sources"] = sources
	case len(sources) == 1 && s.sources[0].Dry:
		spec["sourceHydrator"] = map[string]any{"drySource": sources[0]}
	case len(sources) == 1:
		spec["source"] = sources[0]
	}
	obj["spec"] = spec
	status := map[string]any{}
	if s.statusType != "" {
		status["sourceType"] = s.statusType
	}
	if s.statusTypes != nil {
		status["sourceTypes"] = anyList(s.statusTypes)
	}
	if s.running != nil {
		status["summary"] = map[string]any{"images": anyList(s.running)}
	}
	obj["status"] = status
	return &unstructured.Unstructured{Object: obj}
}

// Source blocks kept as present in the spec (see Source.blocks).
const (
	blockKustomize uint8 = 1 << iota
	blockHelm
	blockPlugin
	blockDirectory
)

var blocks = []struct {
	name string
	bit  uint8
}{{"kustomize", blockKustomize}, {"helm", blockHelm}, {"plugin", blockPlugin}, {"directory", blockDirectory}}

func newSource(index int, s map[string]any, statusType string, str func(string) string) Source {
	src := Source{
		Index:          index,
		RepoURL:        str(stringAt(s, "repoURL")),
		Path:           stringAt(s, "path"),
		Chart:          str(stringAt(s, "chart")),
		TargetRevision: str(stringAt(s, "targetRevision")),
		Ref:            str(stringAt(s, "ref")),
		Type:           SourceType(statusType),
	}
	for _, b := range blocks {
		if v, ok := s[b.name]; ok && v != nil {
			src.blocks |= b.bit
		}
	}
	// The spec tells when the user configured the tool explicitly; the
	// status tells what Argo CD detected. Explicit configuration wins.
	switch {
	case src.blocks&blockKustomize != 0:
		src.Type = SourceKustomize
	case src.blocks&blockHelm != 0 || src.Chart != "":
		src.Type = SourceHelm
	case src.blocks&blockPlugin != 0:
		src.Type = SourcePlugin
	case src.blocks&blockDirectory != 0 && src.Type == "":
		src.Type = SourceDirectory
	}
	if src.Chart != "" {
		src.ChartRepo = chartRepository(src.RepoURL, src.Chart, src.TargetRevision)
	}
	src.KustomizeImages = stringsAt(s, str, "kustomize", "images")
	if raw, _, _ := unstructured.NestedFieldNoCopy(s, "helm", "parameters"); raw != nil {
		if list, ok := raw.([]any); ok && len(list) > 0 {
			// Kept as written: a write replaces the list, and must keep
			// the fields of each entry that it does not read.
			src.helmParameters = copyList(list, str)
		}
	}
	if raw, _, _ := unstructured.NestedFieldNoCopy(s, "plugin", "env"); raw != nil {
		if list, ok := raw.([]any); ok && len(list) > 0 {
			src.pluginEnv = copyList(list, str)
		}
	}
	return src
}

// object is the source as the spec holds it, with only what was kept.
func (src Source) object() map[string]any {
	m := map[string]any{}
	for _, f := range []struct{ k, v string }{{"repoURL", src.RepoURL}, {"path", src.Path}, {"chart", src.Chart}, {"targetRevision", src.TargetRevision}, {"ref", src.Ref}} {
		if f.v != "" {
			m[f.k] = f.v
		}
	}
	if src.blocks&blockKustomize != 0 {
		k := map[string]any{}
		if src.KustomizeImages != nil {
			k["images"] = anyList(src.KustomizeImages)
		}
		m["kustomize"] = k
	}
	if src.blocks&blockHelm != 0 {
		h := map[string]any{}
		if src.helmParameters != nil {
			h["parameters"] = copyList(src.helmParameters, sameString)
		}
		m["helm"] = h
	}
	if src.blocks&blockPlugin != 0 {
		p := map[string]any{}
		if src.pluginEnv != nil {
			p["env"] = copyList(src.pluginEnv, sameString)
		}
		m["plugin"] = p
	}
	if src.blocks&blockDirectory != 0 {
		m["directory"] = map[string]any{}
	}
	return m
}

// HelmParameter is the value of the source's Helm parameter name.
func (src Source) HelmParameter(name string) (string, bool) { return valueOf(src.helmParameters, name) }

// PluginEnv is the value of the source's plugin environment variable name.
func (src Source) PluginEnv(name string) (string, bool) { return valueOf(src.pluginEnv, name) }

// valueOf finds the entry of a list of {name, value} objects.
func valueOf(list []any, name string) (string, bool) {
	for _, p := range list {
		if m, ok := p.(map[string]any); ok && m["name"] == name {
			v, _ := m["value"].(string)
			return v, true
		}
	}
	return "", false
}

// pairs is a small string map kept as a sorted list: a Go map of a few
// entries costs several hundred bytes, a list of them a few dozen.
type pairs []pair

type pair struct{ key, value string }

func newPairs(raw any, keep func(string) bool, str func(string) string) pairs {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil
	}
	var p pairs
	for k, v := range m {
		if s, ok := v.(string); ok && keep(k) {
			p = append(p, pair{str(k), str(s)})
		}
	}
	slices.SortFunc(p, func(a, b pair) int { return cmp.Compare(a.key, b.key) })
	return slices.Clip(p)
}

func (p pairs) find(key string) (int, bool) {
	return slices.BinarySearchFunc(p, key, func(e pair, k string) int { return cmp.Compare(e.key, k) })
}

// Has reports whether key is there.
func (p pairs) Has(key string) bool { _, ok := p.find(key); return ok }

// Get is the value of key, or "".
func (p pairs) Get(key string) string {
	v, _ := p.Lookup(key)
	return v
}

// Lookup is the value of key and whether key is there.
func (p pairs) Lookup(key string) (string, bool) {
	if i, ok := p.find(key); ok {
		return p[i].value, true
	}
	return "", false
}

// Map is the pairs as a map.
func (p pairs) Map() map[string]string {
	m := make(map[string]string, len(p))
	for _, e := range p {
		m[e.key] = e.value
	}
	return m
}

func (p pairs) anyMap() map[string]any {
	m := make(map[string]any, len(p))
	for _, e := range p {
		m[e.key] = e.value
	}
	return m
}

func stringAt(m map[string]any, fields ...string) string {
	v, _, _ := unstructured.NestedFieldNoCopy(m, fields...)
	s, _ := v.(string)
	return s
}

func mapAt(m map[string]any, fields ...string) (map[string]any, bool) {
	v, _, _ := unstructured.NestedFieldNoCopy(m, fields...)
	out, ok := v.(map[string]any)
	return out, ok
}

// stringsAt is a list of strings, or nil when the field is not one.
func stringsAt(m map[string]any, str func(string) string, fields ...string) []string {
	v, _, _ := unstructured.NestedFieldNoCopy(m, fields...)
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil
		}
		out[i] = str(s)
	}
	return out
}

func anyList(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

// sameString shares nothing: each string is its own copy.
func sameString(s string) string { return s }

// copyList copies a JSON list, its strings through str.
func copyList(list []any, str func(string) string) []any {
	return copyJSON(list, str).([]any)
}

func copyJSON(v any, str func(string) string) any {
	switch t := v.(type) {
	case string:
		return str(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[str(k)] = copyJSON(e, str)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = copyJSON(e, str)
		}
		return out
	}
	return v
}

// object is the destination as spec.destination holds it; nil when empty.
func (d Destination) object() map[string]any {
	m := map[string]any{}
	for k, v := range map[string]string{"server": d.Server, "name": d.Name, "namespace": d.Namespace} {
		if v != "" {
			m[k] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}
