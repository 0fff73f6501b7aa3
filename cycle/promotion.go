package cycle

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// stage is the Application an image is promoted from, and the stage's
// image of the same repository.
type stage struct {
	app  *application.Application
	spec settings.ImageSpec
	soak time.Duration
}

// stageOf finds the stage j's image names among the Applications the
// updater manages: one of j's own namespace that manages the same
// repository.
func stageOf(j *job, all map[string]*application.Application) (*stage, error) {
	st := j.spec.PromoteFrom
	ns := cmp.Or(st.Namespace, j.app.Namespace)
	if ns != j.app.Namespace {
		return nil, configError{fmt.Errorf("%s: stage %s/%s is in another namespace: an image is promoted only from an Application of its own namespace (%s)", st.Origin, ns, st.Name, j.app.Namespace)}
	}
	a, ok := all[ns+"/"+st.Name]
	if !ok {
		return nil, configError{fmt.Errorf("%s: stage %s/%s is no Application this controller updates", st.Origin, ns, st.Name)}
	}
	i := slices.IndexFunc(a.Settings.Images, func(s settings.ImageSpec) bool { return s.Image.SameName(j.spec.Image) })
	if i < 0 {
		return nil, configError{fmt.Errorf("%s: stage %s/%s does not update %s", st.Origin, ns, st.Name, j.spec.Image.Name())}
	}
	return &stage{app: a, spec: a.Settings.Images[i], soak: st.Soak}, nil
}

// promotable is the version j may take from its stage: the one the stage
// runs, verified by its health gate, and run there for the soak time.
// Otherwise it says why nothing may be taken, and until when if known.
func (u *Updater) promotable(s *stage) (imageref.Version, *Waiting) {
	name := s.app.Key()
	if u.gate == nil {
		return imageref.Version{}, &Waiting{Why: fmt.Sprintf("nothing is verified in %s: this controller runs no health gate", name)}
	}
	v, ok := u.gate.Verified(s.app, s.spec.Key())
	if !ok {
		return imageref.Version{}, &Waiting{Why: fmt.Sprintf("no version of %s is verified in %s yet", s.spec.Image.Name(), name)}
	}
	running, ok, _ := s.app.RunningVersion(s.spec)
	if !ok || running.Tag != v.Version.Tag || running.Digest != "" && v.Version.Digest != "" && running.Digest != v.Version.Digest {
		return imageref.Version{}, &Waiting{Version: v.Version, Why: fmt.Sprintf("%s no longer runs %s, which its health gate verified", name, v.Version)}
	}
	if until := v.DeployedAt.Add(s.soak); until.After(u.now()) {
		return imageref.Version{}, &Waiting{Version: v.Version, Until: until, Why: fmt.Sprintf("it soaks in %s for %s", name, s.soak)}
	}
	return v.Version, nil
}

// promotion is what a promoted image's choice may take: version, or
// nothing while wait says why.
type promotion struct {
	version imageref.Version
	wait    *Waiting
}

// only keeps of tags the stage's version and the running one.
func (p *promotion) only(tags []string, current imageref.Version) []string {
	return slices.DeleteFunc(slices.Clone(tags), func(t string) bool { return t != p.version.Tag && t != current.Tag })
}

// digest gives res the stage's digest when it chose the stage's tag and
// the stage runs it pinned: what was verified there is what is written.
func (p *promotion) digest(res strategy.Result, current imageref.Version) strategy.Result {
	if res.Tag != p.version.Tag || p.version.Digest == "" {
		return res
	}
	res.Digest = p.version.Digest
	if res.Tag == current.Tag {
		res.Update = current.Digest != p.version.Digest
	}
	return res
}
