package cycle

import (
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/tenant"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// job is one image of one Application, ready to be checked.
type job struct {
	app *application.Application
	// spec is the image's entry in app.Settings, which jobs only read: a
	// pass holds one job per image of every Application, and a copy of
	// the entry is most of a job's size.
	spec      *settings.ImageSpec
	ref       imageref.Reference
	creds     credref.Ref
	policy    *strategy.Policy
	platforms []v1.Platform
	source    application.Source
	current   imageref.Version
	// askTarget hands the chosen version to the write-back even when it
	// is current, which then writes only what its target lacks: the
	// running images disagree (a rollout in progress, for git), or the
	// Kustomize override does not yet name the image as
	// kustomize.image-name has it.
	askTarget bool
	// sigKey names the key new versions must be signed with, its
	// namespace filled in; zero when none.
	sigKey settings.SignatureKey
	// stage is the Application the image is promoted from, or stageErr
	// why the one it names cannot be.
	stage    *stage
	stageErr error
}

// repoKey identifies one tag listing: the same repository read with the
// same credentials. Different credentials may see different tags.
func (j *job) repoKey() string { return j.ref.Name() + "\x00" + j.creds.String() }

// skip is an image left alone this cycle for a reason that is not an error.
type skip struct {
	image  string
	reason skipReason
	// repo is the image's repository.
	repo imageref.Reference
}

// skipReason is why an image is left alone without an error.
type skipReason int

const (
	noSkip skipReason = iota
	// skipAppInvalid: the Application's own settings stop its write-back.
	skipAppInvalid
	// skipNotRunning: the Application does not run the image, which may
	// be for a moment only: while Argo CD rolls out another version, its
	// status may list none of the image's.
	skipNotRunning
)

func (r skipReason) String() string {
	switch r {
	case skipAppInvalid:
		return "the Application's write-back settings are invalid"
	case skipNotRunning:
		return "not running in the Application (set force-update to update it anyway)"
	}
	return ""
}

// configError is a setting the user must fix: reported once as an
// InvalidConfiguration event, not retried differently next cycle.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// planner turns one cycle's Applications into jobs. It parses nothing:
// each image's policy and credential reference were read with its
// settings, once per Application version or ImageUpdater generation.
type planner struct {
	controllerNamespace string
	defaultPlatforms    []v1.Platform
	// defaulted is each shared policy with the default platforms, made
	// once per cycle for the images that name no platforms.
	defaulted map[*strategy.Policy]*strategy.Policy
}

func newPlanner(controllerNamespace string, defaultPlatforms []v1.Platform) *planner {
	return &planner{controllerNamespace: controllerNamespace, defaultPlatforms: defaultPlatforms, defaulted: map[*strategy.Policy]*strategy.Policy{}}
}

// application turns an Application into jobs. Problems with one image
// are returned as errors for that image and do not affect the others; an
// Application-level error (a bad write-back setting) stops the whole
// Application, since writing somewhere it did not ask for is worse than
// not writing.
func (pl *planner) application(app *application.Application) (jobs []*job, skips []skip, problems []error) {
	appProblems := app.Settings.Problems
	if p, bad := writeBackProblem(app); bad {
		appProblems = append(appProblems[:len(appProblems):len(appProblems)], p)
	}
	if app.ApplicationSet != "" && app.Settings.WriteBack.Method == settings.WriteBackArgoCD {
		p := settings.Problem{Warning: true, Origin: app.Settings.WriteBack.MethodOrigin.Or(settings.AnnotationOrigin(settings.KeyWriteBackMethod))}
		p.Message = fmt.Sprintf("the ApplicationSet %s generates this Application and puts back the images the argocd write-back method sets, unless its ignoreApplicationDifferences lists them (/spec/source/kustomize/images or /spec/source/helm/parameters); write-back-method git with write-back-target applicationset writes them where the ApplicationSet takes them from", app.ApplicationSet)
		appProblems = append(appProblems[:len(appProblems):len(appProblems)], p)
	}
	for _, p := range appProblems {
		problems = append(problems, p)
	}
	if applicationBroken(app) {
		for _, spec := range app.Settings.Images {
			skips = append(skips, skip{image: spec.Key(), reason: skipAppInvalid, repo: spec.Image})
		}
		return nil, skips, problems
	}
	for i := range app.Settings.Images {
		spec := &app.Settings.Images[i]
		j, sk, err := pl.image(app, spec)
		var annotationProblem settings.Problem
		switch {
		case errors.As(err, &annotationProblem):
			problems = append(problems, annotationProblem)
		case err != nil:
			problems = append(problems, configError{fmt.Errorf("image %s: %w", spec.Key(), err)})
		case sk != noSkip:
			skips = append(skips, skip{image: spec.Key(), reason: sk, repo: spec.Image})
		default:
			jobs = append(jobs, j)
		}
	}
	return jobs, skips, problems
}

// policy is spec's policy, with the default platforms when it names none.
func (pl *planner) policy(spec settings.ImageSpec) (*strategy.Policy, []v1.Platform) {
	if len(spec.Platforms) > 0 || len(pl.defaultPlatforms) == 0 {
		return spec.Policy, spec.Platforms
	}
	p, ok := pl.defaulted[spec.Policy]
	if !ok {
		p = spec.Policy.WithPlatforms(pl.defaultPlatforms)
		pl.defaulted[spec.Policy] = p
	}
	return p, pl.defaultPlatforms
}

// image plans the job of entry, one of app.Settings.Images, which the job
// points at.
func (pl *planner) image(app *application.Application, entry *settings.ImageSpec) (*job, skipReason, error) {
	spec := *entry
	if spec.Policy == nil {
		// Settings always carry one; a value made another way has none.
		return nil, noSkip, errors.New("the image's settings were not read: no update policy")
	}
	creds := spec.PullSecret
	if !creds.IsZero() {
		if err := creds.TenantMay(app.Namespace, pl.controllerNamespace); err != nil {
			return nil, noSkip, settings.Problem{Image: spec.Key(), Origin: spec.PullSecretOrigin, Message: err.Error()}
		}
	}
	sigKey := spec.SignatureKey
	if sigKey.Name != "" {
		if sigKey.Namespace == "" {
			sigKey.Namespace = app.Namespace
		}
		if err := tenant.MayNameSecret(sigKey.String(), sigKey.Namespace, app.Namespace); err != nil {
			return nil, noSkip, settings.Problem{Image: spec.Key(), Origin: sigKey.Origin, Message: err.Error()}
		}
	}
	policy, platforms := pl.policy(spec)

	var source application.Source
	if len(app.Sources) == 1 && app.Sources[0].Dry && app.Settings.WriteBack.Method == settings.WriteBackArgoCD {
		// Argo CD's dry source holds no overrides: what the hydrator
		// renders is what the repository holds.
		return nil, noSkip, errors.New("a Source Hydrator Application is written back to its dry source in git: set write-back-method git (the argocd method has nowhere to write)")
	}
	if app.Settings.WriteBack.Method == settings.WriteBackArgoCD {
		var ok bool
		if source, ok = app.TargetSource(spec); !ok {
			if spec.PluginTarget() {
				return nil, noSkip, fmt.Errorf("no config management plugin source to hold the image's plugin environment (source types: %s)", sourceTypes(app))
			}
			if len(app.Sources) == 1 && app.Sources[0].Type == application.SourceDirectory {
				return nil, noSkip, errors.New("a plain-manifest (Directory) source holds no override: set write-back-method git and mark the image's value in the manifests with # {\"$imageupdater\": \"<alias>\"}")
			}
			return nil, noSkip, fmt.Errorf("no Kustomize or Helm source to hold the override (write-back-method argocd needs one; source types: %s)", sourceTypes(app))
		}
	} else if spec.PluginTarget() {
		var ok bool
		if source, ok = app.TargetSource(spec); !ok {
			return nil, noSkip, fmt.Errorf("no config management plugin source to hold the image's plugin environment (source types: %s)", sourceTypes(app))
		}
		if k := app.Settings.WriteBack.Target.Kind; k != settings.TargetSourceOverrides && k != settings.TargetOverrideFile {
			return nil, noSkip, fmt.Errorf("a plugin target is written to the .argocd-source file, not to the write-back target %s", app.Settings.WriteBack.Target)
		}
	} else if len(app.Sources) > 0 {
		source, _ = app.TargetSource(spec)
		if source.RepoURL == "" {
			source = app.Sources[0]
		}
		if k := app.Settings.WriteBack.Target.Kind; source.Dry && !source.Type.Writable() && (k == settings.TargetSourceOverrides || k == settings.TargetOverrideFile) {
			return nil, noSkip, errors.New("the dry source of a Source Hydrator Application does not tell whether it is Kustomize or Helm (Argo CD reports the rendered one): set write-back-target kustomization or helmvalues:<file>")
		}
	}

	// What runs now: the override the Application already holds wins over
	// the running image, so a version written but not yet synced by Argo CD
	// is not written again.
	current, found := source.CurrentVersion(spec)
	// A Kustomize override that does not yet name the image where
	// kustomize.image-name says it now lives is written at once, at the
	// version already there, while the image runs under that name: Argo CD
	// Image Updater decides from what runs, and leaves the override of an
	// image that already runs under its own name until a new version.
	askTarget := false
	if found && source.KustomizeStale(spec) {
		_, _, askTarget = app.RunningVersion(spec)
	}
	if !found {
		var renamed bool
		current, found, renamed = app.RunningVersion(spec)
		askTarget = found && (renamed || app.Settings.WriteBack.Method == settings.WriteBackGit && app.RollingOut(spec))
	}
	if !found && !spec.ForceUpdate {
		return nil, skipNotRunning, nil
	}
	if policy.Name() == strategy.Digest && current.Tag == "" {
		// A running image known by digest alone still follows its tag.
		current.Tag = spec.Constraint
	}
	return &job{app: app, spec: entry, ref: spec.Image, creds: creds, policy: policy, platforms: platforms, source: source, current: current, askTarget: askTarget, sigKey: sigKey}, noSkip, nil
}

func sourceTypes(app *application.Application) string {
	var types []string
	for _, s := range app.Sources {
		t := string(s.Type)
		if t == "" {
			t = "unknown"
		}
		types = append(types, t)
	}
	if len(types) == 0 {
		return "none"
	}
	return strings.Join(types, ", ")
}

// writeBackProblem checks the Secret of write-back-method git:secret:, whose
// credentials go to the repository the annotations name.
func writeBackProblem(app *application.Application) (settings.Problem, bool) {
	s := app.GitSecret()
	if s.Name == "" {
		return settings.Problem{}, false
	}
	err := tenant.MayNameSecret("git:secret:"+s.Namespace+"/"+s.Name, s.Namespace, app.Namespace)
	if err == nil {
		return settings.Problem{}, false
	}
	return settings.Problem{Origin: app.Settings.WriteBack.MethodOrigin.Or(settings.AnnotationOrigin(settings.KeyWriteBackMethod)), Message: err.Error()}, true
}
