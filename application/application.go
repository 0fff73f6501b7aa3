// Package application is an Argo CD Application as the updater sees it:
// its sources with the overrides they hold, what runs, the settings read
// for it, and the rules on them (which source an image's version is
// written for, which version runs now). Snapshot is the compact form an
// informer keeps of the object, from which an Application is read. The
// watch (appwatch), the cycle and each write-back method share this one
// model.
package application

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
)

// Resource is Argo CD's Application resource.
func Resource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
}

// SourceType is how Argo CD renders a source.
type SourceType string

const (
	SourceKustomize SourceType = "Kustomize"
	SourceHelm      SourceType = "Helm"
	SourceDirectory SourceType = "Directory"
	SourcePlugin    SourceType = "Plugin"
)

// Writable reports whether the argocd write-back can override images of a
// source of this type.
func (t SourceType) Writable() bool { return t == SourceKustomize || t == SourceHelm }

// Source is one source of an Application, with the overrides it holds.
type Source struct {
	// Index is the position in spec.sources, or -1 for spec.source (and
	// for a dry source).
	Index int
	// Dry tells that the source is spec.sourceHydrator.drySource: Argo CD's
	// Source Hydrator renders it into another branch, from which the
	// Application syncs.
	Dry            bool
	RepoURL        string
	Path           string
	Chart          string
	TargetRevision string
	Ref            string
	Type           SourceType // "" when neither the spec nor the status tells
	// KustomizeImages are spec.source(s)[i].kustomize.images.
	KustomizeImages []string
	// ChartRepo is where the versions of the source's chart are listed;
	// nil when the source has no chart.
	ChartRepo *ChartRepository
	// helmParameters are spec.source(s)[i].helm.parameters as written
	// (see HelmParameter).
	helmParameters []any
	// pluginEnv is spec.source(s)[i].plugin.env as written (see PluginEnv).
	pluginEnv []any
	// blocks are the tool blocks (kustomize, helm...) the spec has.
	blocks uint8
}

// Destination is an Application's spec.destination.
type Destination struct {
	// Server is the cluster's API server URL, Name its name in Argo CD.
	Server, Name string
	Namespace    string
}

// Application is what the update cycle needs of an Argo CD Application.
type Application struct {
	Namespace, Name string
	// Project is spec.project, the AppProject ("" when unset, which Argo
	// CD reads as "default").
	Project string
	// Destination is spec.destination: where Argo CD deploys, which an
	// AppProject's sync windows are matched against.
	Destination Destination
	Settings    settings.Settings
	Sources     []Source
	// RunningImages are status.summary.images: what runs now.
	RunningImages []string
	// ApplicationSet is the ApplicationSet that generated the Application,
	// which puts back what another client changes in its spec (unless its
	// ignoreApplicationDifferences says otherwise); "" when none did.
	ApplicationSet string
	// ImageUpdater is the ImageUpdater resource that selected the
	// Application, whose settings Settings then hold; the zero value
	// when the Application's own annotations did.
	ImageUpdater types.NamespacedName

	snapshot *Snapshot
}

// Object is the Application as an object, with the fields the updater
// reads (see Snapshot): what a write back is computed from, and what
// events refer to.
func (a *Application) Object() *unstructured.Unstructured {
	if a.snapshot == nil {
		return (&Snapshot{name: a.Name, namespace: a.Namespace}).object()
	}
	return a.snapshot.object()
}

// Key is "namespace/name".
func (a *Application) Key() string { return a.Namespace + "/" + a.Name }

// AnnotationPath is the JSON pointer (RFC 6901) of the annotation key in
// an Application, for JSON patches.
func AnnotationPath(key string) string {
	return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// FromUnstructured reads an Application; image names are read with opts
// (registries.conf's default registry and namespace).
func FromUnstructured(obj *unstructured.Unstructured, opts ...imageref.Option) (*Application, error) {
	return SnapshotOf(obj).Application(opts...)
}

// TargetSource picks the source an image's new version is written for:
//   - a single-source Application: its source;
//   - a multi-source Application: among its Kustomize and Helm sources (of
//     the write-back target's type when the target is a kustomization or a
//     Helm values file), the first in spec.sources order whose overrides
//     already name the image, else the first. Sources that only provide a
//     ref for Helm value files are skipped;
//   - an image with a plugin target (see ImageSpec.PluginTarget): the first
//     config management plugin source, by the same rule.
//
// It returns false when no source can hold an override.
func (a *Application) TargetSource(img settings.ImageSpec) (Source, bool) {
	if img.PluginTarget() {
		return a.targetSource(img, SourcePlugin)
	}
	if len(a.Sources) == 1 {
		s := a.Sources[0]
		return s, s.Type.Writable()
	}
	want := SourceType("")
	switch a.Settings.WriteBack.Target.Kind {
	case settings.TargetKustomization:
		want = SourceKustomize
	case settings.TargetHelmValues:
		want = SourceHelm
	}
	if want != "" {
		if s, ok := a.targetSource(img, want); ok {
			return s, true
		}
	}
	return a.targetSource(img, "")
}

// targetSource applies TargetSource's multi-source rule to the sources of
// type want ("" for both writable types).
func (a *Application) targetSource(img settings.ImageSpec, want SourceType) (Source, bool) {
	var first *Source
	for i := range a.Sources {
		s := &a.Sources[i]
		if !(s.Type.Writable() || want == SourcePlugin) || (want != "" && s.Type != want) || (s.Ref != "" && s.Path == "" && s.Chart == "") {
			continue
		}
		if _, ok := s.CurrentVersion(img); ok {
			return *s, true
		}
		if first == nil {
			first = s
		}
	}
	if first == nil {
		return Source{}, false
	}
	return *first, true
}

// GitSecret is the Secret of write-back-method git:secret:, in the
// Application's namespace when the method named none; zero for Argo CD's
// repository credentials.
func (a *Application) GitSecret() types.NamespacedName {
	s := a.Settings.WriteBack.GitSecret
	if s.Name != "" && s.Namespace == "" {
		s.Namespace = a.Namespace
	}
	return s
}

// CurrentVersion is the version the source's overrides already set for
// the image. Kustomize entries are matched by name as the image matches
// every spelling of itself (imageref.Reference.MatchesName), so
// "docker.io/library/nginx" in the overrides is the image "nginx".
func (s Source) CurrentVersion(img settings.ImageSpec) (imageref.Version, bool) {
	switch s.Type {
	case SourceKustomize:
		if i, _, ok := img.KustomizeEntry(s.KustomizeImages); ok {
			_, _, version := settings.SplitKustomizeImage(s.KustomizeImages[i])
			return version, !version.IsZero()
		}
	case SourceHelm:
		if img.HelmImageSpec != "" {
			v, ok := s.HelmParameter(img.HelmImageSpec)
			if !ok {
				return imageref.Version{}, false
			}
			_, version := imageref.Split(v)
			return version, !version.IsZero()
		}
		_, param := img.HelmParameters()
		v, ok := s.HelmParameter(param)
		version := imageref.ParseVersion(v)
		if img.HelmImageDigest != "" {
			// The digest has its own parameter, the tag parameter the
			// tag alone.
			version.Digest, _ = s.HelmParameter(img.HelmImageDigest)
		}
		return version, ok && v != ""
	case SourcePlugin:
		switch {
		case img.PluginEnvSpec != "":
			if v, ok := s.PluginEnv(img.PluginEnvSpec); ok {
				_, version := imageref.Split(v)
				return version, !version.IsZero()
			}
		case img.PluginEnvTag != "":
			v, ok := s.PluginEnv(img.PluginEnvTag)
			return imageref.ParseVersion(v), ok && v != ""
		}
	}
	return imageref.Version{}, false
}

// SyncedVersion is the version of img that the Application's last sync
// deployed when that sync was a person's and named a source whose
// overrides differ from the spec's: Argo CD's rollback to an earlier
// history entry (argocd app rollback) syncs that entry's source and
// leaves the spec, whose override then no longer says what runs. A
// source that overrides the image nowhere runs what its manifests hold:
// then the version is the running one, once the sync succeeded. started
// is when that sync started.
func (a *Application) SyncedVersion(img settings.ImageSpec) (v imageref.Version, started time.Time, ok bool) {
	op := a.Status().Operation
	if len(op.Sources) == 0 || op.Automated {
		return imageref.Version{}, time.Time{}, false
	}
	target, found := a.TargetSource(img)
	if !found {
		return imageref.Version{}, time.Time{}, false
	}
	for _, s := range op.Sources {
		if s.Index != target.Index {
			continue
		}
		own, _ := target.CurrentVersion(img)
		if v, ok := s.CurrentVersion(img); ok {
			return v, op.StartedAt, v != own
		}
		if op.Phase != "Succeeded" {
			return imageref.Version{}, time.Time{}, false
		}
		if v, ok, _ := a.RunningVersion(img); ok && v != own && !a.RollingOut(img) {
			return v, op.StartedAt, true
		}
	}
	return imageref.Version{}, time.Time{}, false
}

// KustomizeStale tells whether the source's Kustomize override of the
// image must be rewritten whatever its version (see
// settings.ImageSpec.KustomizeEntryStale).
func (s Source) KustomizeStale(img settings.ImageSpec) bool {
	if s.Type != SourceKustomize {
		return false
	}
	i, _, ok := img.KustomizeEntry(s.KustomizeImages)
	return ok && img.KustomizeEntryStale(s.KustomizeImages[i])
}

// RunningVersion is the version of the image among the running images,
// matched by name as CurrentVersion matches overrides: first under the
// name kustomize.image-name gives it, then under its own. When several
// containers run the image, the one running the tag the image follows
// (its constraint, for the digest strategy) is this image's; otherwise the
// first. renamed tells that it runs under its kustomize.image-name, which
// Argo CD Image Updater answers by writing the override at once.
func (a *Application) RunningVersion(img settings.ImageSpec) (v imageref.Version, ok, renamed bool) {
	if img.RenamesInKustomize() {
		if v, ok := a.runningVersion(img.KustomizeImageName, img.Constraint); ok {
			return v, true, true
		}
	}
	v, ok = a.runningVersion(img.Image, img.Constraint)
	return v, ok, false
}

func (a *Application) runningVersion(name imageref.Reference, constraint string) (imageref.Version, bool) {
	var found imageref.Version
	ok := false
	for _, running := range a.RunningImages {
		if !name.MatchesName(running) {
			continue
		}
		_, version := imageref.Split(running)
		if constraint != "" && version.Tag == constraint {
			return version, true
		}
		if !ok {
			found, ok = version, true
		}
	}
	return found, ok
}

// RollingOut reports whether the running images hold more than one
// version of the image: a rollout in progress (or stuck), during which Argo
// CD lists the Pods of the old and the new ReplicaSet alike, so what runs
// does not tell which version is desired.
func (a *Application) RollingOut(img settings.ImageSpec) bool {
	var first string
	for _, running := range a.RunningImages {
		if !img.Image.MatchesName(running) {
			continue
		}
		_, version := imageref.Split(running)
		v := version.String()
		if first == "" {
			first = v
		} else if v != first {
			return true
		}
	}
	return false
}
