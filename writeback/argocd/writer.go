// Package argocd writes new image versions into the Application itself
// (write-back method "argocd"), patching only the list it changes.
package argocd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/manifest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// FieldManager is the field manager our patches are recorded under in the
// Application's managedFields.
const FieldManager = "argocd-image-updater"

// DefaultConflictRetries is how often a write is recomputed and sent again
// after another client changed the Application in between.
const DefaultConflictRetries = 5

// DefaultMaxConcurrency bounds the patches one Write has in flight.
const DefaultMaxConcurrency = 10

// Writer writes new image versions into Applications themselves
// (write-back method "argocd"). It patches only the one list it changes,
// Kustomize images or Helm parameters of one source, built from the live
// object's raw entries, so fields that Argo CD's Go types in this module do
// not know (a newer Argo CD's) are never lost.
//
// Every patch is a JSON patch: a merge patch can only replace spec.sources
// whole, which would overwrite concurrent edits of the other sources. Its
// first operation sets metadata.resourceVersion to the version the change
// was computed from, so the API server rejects it with 409 Conflict when
// the object changed since; the write is then recomputed from a fresh read.
type Writer struct {
	client      dynamic.Interface
	retries     int
	log         *slog.Logger
	dryRun      bool
	concurrency int
	gate        func() error
}

// Option configures an Writer.
type Option func(*Writer)

// WithConflictRetries sets how often a write rejected by a conflicting
// change is retried (default DefaultConflictRetries; 0 = never).
func WithConflictRetries(n int) Option {
	return func(w *Writer) { w.retries = max(n, 0) }
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(w *Writer) {
		if l != nil {
			w.log = l
		}
	}
}

// WithDryRun makes Write compute and return the patch without sending it.
func WithDryRun(dryRun bool) Option {
	return func(w *Writer) { w.dryRun = dryRun }
}

// WithMaxConcurrency bounds the patches one Write has in flight (default
// DefaultMaxConcurrency).
func WithMaxConcurrency(n int) Option {
	return func(w *Writer) { w.concurrency = max(n, 1) }
}

// WithWriteGate is asked before each Application's patch: an error keeps
// the patch from starting, and the change gets that error wrapped in
// writeback.ErrWriteNotStarted. The controller refuses writes once it is
// stopping or no longer holds the leader Lease.
func WithWriteGate(gate func() error) Option {
	return func(w *Writer) { w.gate = gate }
}

// NewWriter returns a writer using client, which needs get and patch
// on argoproj.io applications.
func NewWriter(client dynamic.Interface, opts ...Option) *Writer {
	w := &Writer{
		client:      client,
		retries:     DefaultConflictRetries,
		log:         slog.New(slog.DiscardHandler),
		concurrency: DefaultMaxConcurrency,
	}
	for _, opt := range opts {
		opt(w)
	}
	return w
}

// update is what one patch writes to one Application.
type update struct {
	Namespace, Name string
	// SourceIndex indexes spec.sources; -1 means spec.source.
	SourceIndex int
	// SourceType is Kustomize, Helm, or Plugin for images with a plugin
	// target (written into spec.source(s)[i].plugin.env).
	SourceType application.SourceType
	Images     []writeback.ImageUpdate
	// Charts are new versions of the source's chart: its targetRevision.
	Charts []writeback.ChartUpdate
	// Record is the Change's: annotations set in the same patch.
	Record func(writeback.Result) map[string]string
}

func (u update) key() string { return u.Namespace + "/" + u.Name }

func (u update) validate() error {
	var errs []error
	if u.Namespace == "" || u.Name == "" {
		errs = append(errs, errors.New("namespace and name are required"))
	}
	if u.SourceIndex < -1 {
		errs = append(errs, fmt.Errorf("invalid source index %d", u.SourceIndex))
	}
	if u.SourceType == application.SourcePlugin {
		for _, img := range u.Images {
			if !img.PluginTarget() {
				errs = append(errs, fmt.Errorf("image %s: a config management plugin source takes only images with a plugin target (the environment variables receiving them)", img.Key()))
			}
		}
	} else if !u.SourceType.Writable() && (len(u.Images) > 0 || len(u.Charts) == 0) {
		errs = append(errs, fmt.Errorf("source type %q cannot be written (want %s, %s or %s)", u.SourceType, application.SourceKustomize, application.SourceHelm, application.SourcePlugin))
	}
	errs = append(errs, writeback.ValidateImages(u.Images)...)
	errs = append(errs, writeback.ValidateCharts(u.Charts)...)
	return errors.Join(errs...)
}

// Write patches each change's Application, concurrently: one JSON patch
// per change, computed from the Application as the change's App last saw
// it (application.Application.Object) and recomputed from a fresh read
// when another client changed it in between.
func (w *Writer) Write(ctx context.Context, changes []writeback.Change) []writeback.Result {
	results := make([]writeback.Result, len(changes))
	var g errgroup.Group
	g.SetLimit(w.concurrency)
	for i, c := range changes {
		results[i] = writeback.Result{Namespace: c.App.Namespace, Name: c.App.Name}
		g.Go(func() error {
			if err := w.mayWrite(ctx); err != nil {
				results[i].Err = err
				return nil
			}
			u := update{Namespace: c.App.Namespace, Name: c.App.Name, SourceIndex: c.Source.Index, SourceType: c.Source.Type, Images: c.Images, Charts: c.Charts}
			if !w.dryRun {
				// A dry run keeps no record of what it did not write.
				u.Record = c.Record
			}
			// An Application's lists must not be able to stop the
			// controller: a panic fails this change alone.
			res, err := safe.Value(func() (writeback.Result, error) { return w.writeOne(ctx, c.App.Object(), u) })
			safe.Log(w.log, "writing Application "+u.key(), err)
			if p := (*safe.PanicError)(nil); errors.As(err, &p) {
				err = fmt.Errorf("write back to Application %s: %w", u.key(), err)
			}
			res.Namespace, res.Name, res.Err = u.Namespace, u.Name, err
			results[i] = res
			return nil
		})
	}
	_ = g.Wait()
	return results
}

// mayWrite tells whether a patch may start: not once ctx has ended, nor
// when the write gate refuses.
func (w *Writer) mayWrite(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", writeback.ErrWriteNotStarted, context.Cause(ctx))
	}
	if w.gate == nil {
		return nil
	}
	if err := w.gate(); err != nil {
		return fmt.Errorf("%w: %w", writeback.ErrWriteNotStarted, err)
	}
	return nil
}

// writeOne applies u to its Application. cached is the Application as last
// seen (from an informer, for example) and is not modified; nil means the
// Application is read first. When the overrides already hold every
// version, no request is sent and the Result is not Written.
func (w *Writer) writeOne(ctx context.Context, cached *unstructured.Unstructured, u update) (writeback.Result, error) {
	if err := u.validate(); err != nil {
		return writeback.Result{}, fmt.Errorf("write back to Application %s: %w", u.key(), err)
	}
	if len(u.Images) == 0 && len(u.Charts) == 0 {
		return writeback.Result{}, nil
	}
	apps := w.client.Resource(application.Resource()).Namespace(u.Namespace)
	obj := cached
	if obj != nil && (obj.GetNamespace() != u.Namespace || obj.GetName() != u.Name) {
		return writeback.Result{}, fmt.Errorf("write back to Application %s: the object given is %s/%s", u.key(), obj.GetNamespace(), obj.GetName())
	}
	if obj != nil && obj.GetResourceVersion() == "" {
		// Without a version the optimistic lock has nothing to compare.
		obj = nil
	}
	var firstSource string
	var readAnnotations map[string]string
	for attempt := 0; ; attempt++ {
		if obj == nil {
			var err error
			if obj, err = apps.Get(ctx, u.Name, metav1.GetOptions{}); err != nil {
				return writeback.Result{}, fmt.Errorf("write back to Application %s: read it: %w", u.key(), err)
			}
		}
		if attempt == 0 {
			readAnnotations = ownAnnotations(obj)
		} else if !maps.Equal(readAnnotations, ownAnnotations(obj)) {
			// Whoever changed the Application meanwhile may have paused
			// or removed an image: its annotations as they are now decide.
			u.Images, u.Charts = stillWanted(obj, u.Images, u.Charts)
			if len(u.Images) == 0 && len(u.Charts) == 0 {
				w.log.Info("not writing back: the Application's annotations no longer ask for these updates", "application", u.key())
				return writeback.Result{}, nil
			}
		}
		p, err := planWrite(obj, u)
		if err != nil {
			return writeback.Result{}, fmt.Errorf("write back to Application %s: %w", u.key(), err)
		}
		// A retry must write into the source the update was computed for;
		// if spec.sources was reordered meanwhile, the index means another one.
		if attempt == 0 {
			firstSource = p.source
		} else if p.source != firstSource {
			return writeback.Result{}, fmt.Errorf("write back to Application %s: source %d changed while writing (was %s, now %s)", u.key(), u.SourceIndex, firstSource, p.source)
		}
		if len(p.changed) == 0 && len(p.charts) == 0 {
			return writeback.Result{}, nil
		}
		log := w.log.With("application", u.key(), "resourceVersion", obj.GetResourceVersion())
		if w.dryRun {
			log.Info("dry run: not writing back", "images", writeback.ImageList(p.changed), "charts", chartList(p.charts), "patch", string(p.patch))
			return writeback.Result{Changed: p.changed, ChangedCharts: p.charts, Patch: p.patch}, nil
		}
		_, err = apps.Patch(ctx, u.Name, types.JSONPatchType, p.patch, metav1.PatchOptions{FieldManager: FieldManager})
		if err == nil {
			log.Info("wrote back new versions", "images", writeback.ImageList(p.changed), "charts", chartList(p.charts))
			return writeback.Result{Changed: p.changed, ChangedCharts: p.charts, Written: true, Patch: p.patch, Recorded: p.recorded}, nil
		}
		fresh, conflict, checkErr := w.conflicting(ctx, apps, obj, err)
		if checkErr != nil {
			return writeback.Result{}, fmt.Errorf("write back to Application %s: patch: %w (then reading it failed: %v)", u.key(), err, checkErr)
		}
		if !conflict {
			return writeback.Result{}, fmt.Errorf("write back to Application %s: patch: %w", u.key(), err)
		}
		if attempt >= w.retries {
			return writeback.Result{}, fmt.Errorf("write back to Application %s: still conflicting with other changes after %d retries: %w", u.key(), w.retries, err)
		}
		log.Debug("Application changed while writing back; retrying", "attempt", attempt+1, "error", err)
		obj = fresh
	}
}

// ownAnnotations are the annotations the updater reads: an object given
// as cached may hold only those.
func ownAnnotations(obj *unstructured.Unstructured) map[string]string {
	own := map[string]string{}
	for k, v := range obj.GetAnnotations() {
		if strings.HasPrefix(k, settings.AnnotationPrefix) {
			own[k] = v
		}
	}
	return own
}

// stillWanted keeps the updates that obj's annotations still ask the
// argocd write-back for: the image or chart is still listed (by alias,
// else by name), not paused with ignore-tags "*", and the method is still
// argocd.
func stillWanted(obj *unstructured.Unstructured, images []writeback.ImageUpdate, charts []writeback.ChartUpdate) ([]writeback.ImageUpdate, []writeback.ChartUpdate) {
	now := settings.ParseAnnotations(obj.GetAnnotations())
	if now.WriteBack.Method != settings.WriteBackArgoCD {
		return nil, nil
	}
	var keepCharts []writeback.ChartUpdate
	for _, c := range charts {
		for _, spec := range now.Charts {
			if spec.Key() == c.Key() && spec.Chart == c.Chart && spec.GitTag == c.GitTag && !spec.Paused() {
				keepCharts = append(keepCharts, c)
				break
			}
		}
	}
	var keep []writeback.ImageUpdate
	for _, img := range images {
		for _, spec := range now.Images {
			if spec.Key() == img.Key() && !spec.Paused() {
				keep = append(keep, img)
				break
			}
		}
	}
	return keep, keepCharts
}

// chartList lists charts with their new versions, for logs.
func chartList(charts []writeback.ChartUpdate) []string {
	out := make([]string, len(charts))
	for i, c := range charts {
		out[i] = c.Chart + ":" + c.New
	}
	return out
}

// conflicting tells whether a rejected patch lost a race with another
// writer. 409 says so. 422 is what the API server answers when a JSON patch
// operation cannot apply, which happens when the object changed under us
// (a source removed, say) before the version check is reached; it is a
// conflict only if the object's version moved. fresh is the object read to
// decide, or nil when it must still be read.
func (w *Writer) conflicting(ctx context.Context, apps dynamic.ResourceInterface, sent *unstructured.Unstructured, err error) (fresh *unstructured.Unstructured, conflict bool, _ error) {
	if apierrors.IsConflict(err) {
		return nil, true, nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != http.StatusUnprocessableEntity {
		return nil, false, nil
	}
	fresh, getErr := apps.Get(ctx, sent.GetName(), metav1.GetOptions{})
	if getErr != nil {
		return nil, false, getErr
	}
	return fresh, fresh.GetResourceVersion() != sent.GetResourceVersion(), nil
}

// writePlan is one computed write.
type writePlan struct {
	changed []writeback.ImageUpdate
	charts  []writeback.ChartUpdate
	patch   []byte
	// recorded holds the annotations of the update's Record the patch
	// sets.
	recorded map[string]string
	// source identifies the source written to, to detect reordering.
	source string
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// planWrite computes the new list for the update's source and its new
// targetRevision, and the JSON patch that writes them, or no patch when
// the source already holds every version.
func planWrite(obj *unstructured.Unstructured, u update) (writePlan, error) {
	source, path, pointer, err := findSource(obj, u.SourceIndex)
	if err != nil {
		return writePlan{}, err
	}
	p := writePlan{source: sourceIdentity(source)}
	ops := []jsonPatchOp{{Op: "replace", Path: "/metadata/resourceVersion", Value: obj.GetResourceVersion()}}
	if len(u.Images) > 0 {
		op, changed, err := planList(source, path, pointer, u)
		if err != nil {
			return writePlan{}, err
		}
		p.changed = changed
		if len(changed) > 0 {
			ops = append(ops, op)
		}
	}
	for _, c := range u.Charts {
		// The chart or repository is the source's: a source that now
		// deploys another (spec.sources edited meanwhile) is not written.
		chart, _ := source["chart"].(string)
		if c.GitTag {
			if repo, _ := source["repoURL"].(string); chart != "" || !repourl.SameRepository(repo, c.Chart) {
				return writePlan{}, fmt.Errorf("git source %s: %s is not a git source of repository %s", c.Key(), path, repourl.RedactURL(c.Chart))
			}
		} else if chart != c.Chart {
			return writePlan{}, fmt.Errorf("chart %s: %s deploys chart %q", c.Key(), path, chart)
		}
		if rev, _ := source["targetRevision"].(string); rev == c.New {
			continue
		}
		// "add" sets the member whether or not it exists.
		ops = append(ops, jsonPatchOp{Op: "add", Path: pointer + "/targetRevision", Value: c.New})
		p.charts = append(p.charts, c)
		// One source has one chart.
		break
	}
	if len(p.changed) == 0 && len(p.charts) == 0 {
		return p, nil
	}
	if u.Record != nil {
		// Without annotations, obj may be a cached copy that leaves out
		// those of others: an op adding the map would drop them. The
		// record is then saved on its own.
		record := u.Record(writeback.Result{Namespace: u.Namespace, Name: u.Name, Changed: p.changed, ChangedCharts: p.charts, Written: true})
		if obj.GetAnnotations() != nil {
			for _, key := range slices.Sorted(maps.Keys(record)) {
				if value := record[key]; value != "" {
					ops = append(ops, jsonPatchOp{Op: "add", Path: application.AnnotationPath(key), Value: value})
					if p.recorded == nil {
						p.recorded = map[string]string{}
					}
					p.recorded[key] = value
				}
			}
		}
	}
	if p.patch, err = json.Marshal(ops); err != nil {
		return writePlan{}, fmt.Errorf("encode patch: %w", err)
	}
	return p, nil
}

// planList computes the new override list of the update's images, and the
// patch operation that writes it.
func planList(source map[string]any, path, pointer string, u update) (jsonPatchOp, []writeback.ImageUpdate, error) {
	block, field, update := "kustomize", "images", manifest.UpdateKustomizeImages
	switch u.SourceType {
	case application.SourceHelm:
		block, field, update = "helm", "parameters", manifest.UpdateHelmParameters
	case application.SourcePlugin:
		block, field, update = "plugin", "env", manifest.UpdatePluginEnv
	}
	var settings map[string]any
	if raw, ok := source[block]; ok && raw != nil {
		if settings, ok = raw.(map[string]any); !ok {
			return jsonPatchOp{}, nil, fmt.Errorf("%s.%s is a %T, not an object", path, block, raw)
		}
	}
	var current []any
	if raw, ok := settings[field]; ok && raw != nil {
		if current, ok = raw.([]any); !ok {
			return jsonPatchOp{}, nil, fmt.Errorf("%s.%s.%s is a %T, not a list", path, block, field, raw)
		}
	}
	next, changed := update(current, u.Images)
	if settings == nil {
		return jsonPatchOp{Op: "add", Path: pointer + "/" + block, Value: map[string]any{field: next}}, changed, nil
	}
	// "add" on an existing member replaces it, so it serves both cases.
	return jsonPatchOp{Op: "add", Path: pointer + "/" + block + "/" + field, Value: next}, changed, nil
}

// findSource returns the source an index designates, its field path for
// messages and its JSON pointer for the patch.
func findSource(obj *unstructured.Unstructured, index int) (source map[string]any, path, pointer string, _ error) {
	if index < 0 {
		raw, found, err := unstructured.NestedFieldNoCopy(obj.Object, "spec", "source")
		if err != nil || !found || raw == nil {
			return nil, "", "", errors.New("it has no spec.source")
		}
		source, ok := raw.(map[string]any)
		if !ok {
			return nil, "", "", fmt.Errorf("spec.source is a %T, not an object", raw)
		}
		return source, "spec.source", "/spec/source", nil
	}
	raw, found, err := unstructured.NestedFieldNoCopy(obj.Object, "spec", "sources")
	if err != nil || !found || raw == nil {
		return nil, "", "", errors.New("it has no spec.sources")
	}
	sources, ok := raw.([]any)
	if !ok {
		return nil, "", "", fmt.Errorf("spec.sources is a %T, not a list", raw)
	}
	if index >= len(sources) {
		return nil, "", "", fmt.Errorf("spec.sources has %d entries, no index %d", len(sources), index)
	}
	path = fmt.Sprintf("spec.sources[%d]", index)
	source, ok = sources[index].(map[string]any)
	if !ok {
		return nil, "", "", fmt.Errorf("%s is a %T, not an object", path, sources[index])
	}
	return source, path, "/spec/sources/" + strconv.Itoa(index), nil
}

// sourceIdentity names a source by what it deploys.
func sourceIdentity(source map[string]any) string {
	s := func(key string) string { v, _ := source[key].(string); return v }
	id := s("repoURL")
	if chart := s("chart"); chart != "" {
		id += " chart " + chart
	}
	if path := s("path"); path != "" {
		id += " path " + path
	}
	return id
}

// RefreshAnnotation is Argo CD's annotation that makes its controller read
// an Application's sources again now, rather than at its next poll.
const RefreshAnnotation = "argocd.argoproj.io/refresh"

// Refresh asks Argo CD to read the Application's sources again now: after
// a git write-back landed, Argo CD would otherwise see the commit only at
// its next poll (3 minutes by default). It sets the annotation, which Argo
// CD removes once it has refreshed, and those of also in the same request
// (the record kept of the write).
func (w *Writer) Refresh(ctx context.Context, namespace, name string, also map[string]string) error {
	annotations := map[string]string{RefreshAnnotation: "normal"}
	maps.Copy(annotations, also)
	if err := w.Annotate(ctx, namespace, name, annotations); err != nil {
		return fmt.Errorf("refresh %w", err)
	}
	return nil
}

// Annotate sets annotations of the Application, in one merge patch that
// leaves its other annotations as they are; nothing in dry-run mode.
func (w *Writer) Annotate(ctx context.Context, namespace, name string, annotations map[string]string) error {
	if w.dryRun {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return fmt.Errorf("Application %s/%s: %w", namespace, name, err)
	}
	_, err = w.client.Resource(application.Resource()).Namespace(namespace).
		Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("Application %s/%s: %w", namespace, name, err)
	}
	return nil
}
