package cycle

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/strategy"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// HealthGate follows the versions written for images with a health gate
// (settings.ImageSpec.HealthGate), and writes back, through Revert, one
// that broke its Application. The cycle asks it which versions it skips,
// and tells it what was written.
type HealthGate interface {
	// Skipped says which versions of the image (by its
	// settings.ImageSpec Key) are not to be written for app, which holds
	// current of it now (see Skips).
	Skipped(ctx context.Context, app *application.Application, image string, current imageref.Version) Skips
	// Record is the writeback.Change's Record of a write to app: the
	// record kept of the write, set in the same request; nil for none.
	Record(app *application.Application) func(writeback.Result) (annotation, value string)
	// Written is told of each write that persisted new versions, with the
	// Application as the cycle read it.
	Written(ctx context.Context, app *application.Application, res writeback.Result)
	// Verified is the version of the image that the gate last wrote for
	// app and verified, for the Applications promoted from app; false
	// when none is.
	Verified(app *application.Application, image string) (Verified, bool)
	// Flush persists what Written and Skipped changed since the last
	// Flush: the cycle calls it once after each batch of writes, and at
	// the end of each pass.
	Flush(ctx context.Context)
}

// Verified is a version the health gate verified, and when Argo CD was
// first seen running it.
type Verified struct {
	Version    imageref.Version
	DeployedAt time.Time
}

// Skips is what the health gate says of one image of an Application.
type Skips struct {
	// Versions are not to be written.
	Versions []imageref.Version
	// HeldFrom is set while the image is held after a person rolled back
	// a version the updater wrote: that version, which is among Versions;
	// no version older than it is written either.
	HeldFrom imageref.Version
	// HoldAt is the version the person rolled the image back to, when it
	// is to be written where the Application's write-back keeps the
	// image, should that hold another: after Argo CD's rollback, which
	// leaves the spec holding the version rolled back from, so that a sync
	// of the spec (automated sync turned on again) does not deploy it.
	// The cycle takes it as the current version and writes only what the
	// target lacks.
	HoldAt imageref.Version
}

// WithHealthGate has the cycle pass over the versions g skips and tell g
// what it wrote; nil follows nothing.
func WithHealthGate(g HealthGate) Option { return func(u *Updater) { u.gate = g } }

// chooseGated is chooseOne without the versions the health gate skips for
// the job's image: skipped tags are not candidates, nor, while the image
// is held after a rollback, semantic versions not newer than the one
// rolled back from; a skipped digest chosen (the digest strategy follows
// one tag) is not an update. An image the gate holds at a version its
// target does not hold is written there (see Skips.HoldAt).
func (u *Updater) chooseGated(ctx context.Context, j *job, tr tagResult, memo *passMemo, keys map[keyID]loadedKey) outcome {
	if u.gate == nil {
		return u.chooseOne(ctx, j, tr, memo, keys)
	}
	sk := u.gate.Skipped(ctx, j.app, j.spec.Key(), j.current)
	if !sk.HoldAt.IsZero() {
		at := *j
		at.current, at.askTarget = sk.HoldAt, true
		j = &at
	}
	skipped := sk.Versions
	if len(skipped) == 0 {
		return u.chooseOne(ctx, j, tr, memo, keys)
	}
	held := sk.HeldFrom.Tag
	var passed []string
	tr.tags = slices.DeleteFunc(slices.Clone(tr.tags), func(tag string) bool {
		if slices.Contains(skipped, imageref.Version{Tag: tag}) || held != "" && tag != j.current.Tag && notNewer(tag, held) {
			passed = append(passed, tag)
			return true
		}
		return false
	})
	o := u.chooseOne(ctx, j, tr, memo, keys)
	writingBack := sk.HoldAt.IsZero() && slices.ContainsFunc(skipped, func(v imageref.Version) bool { return v.Tag == j.current.Tag })
	if v := j.newVersion(o.result); o.result.Update && slices.Contains(skipped, v) {
		// Not handed to the write-back either when its target is asked
		// (askTarget, a hold's HoldAt): the version in place is.
		o.result.Update, o.result.Tag, o.result.Digest = false, j.current.Tag, j.current.Digest
		o.result.Reason = fmt.Sprintf("version %s is skipped: the health gate wrote it back", v)
	} else if o.result.Update && writingBack && notNewer(o.result.Tag, j.current.Tag) {
		// The version in place is skipped: the gate writes back the one
		// before it, which this choice must not race with an older one.
		o.result.Update = false
		o.result.Reason = fmt.Sprintf("version %s is skipped and the health gate writes back the version before it; %s is not newer", j.current, o.result.Tag)
	} else if !o.result.Update && len(passed) > 0 {
		o.result.Reason += fmt.Sprintf("; passed over what the health gate skips: %s", strings.Join(passed, ", "))
	}
	return o
}

// notNewer tells whether tag and held are semantic versions, tag not
// newer than held.
func notNewer(tag, held string) bool {
	c, ok := strategy.CompareTags(tag, held)
	return ok && c <= 0
}

// gateWritten tells the health gate of a write that persisted versions
// the cycle chose; its own reverts are not followed.
func (u *Updater) gateWritten(ctx context.Context, au *appUpdate, res writeback.Result) {
	if u.gate == nil || au.revert || !res.Written || len(res.Changed) == 0 {
		return
	}
	_ = u.guard("recording the versions written for the health gate", func() error {
		u.gate.Written(ctx, au.app, res)
		return nil
	})
}

// gateRecord is the Record of a write of au: the health gate's record of
// the write, in the same request; nil without a gate, and for the gate's
// own reverts, which it does not follow.
func (u *Updater) gateRecord(au *appUpdate) func(writeback.Result) (string, string) {
	if u.gate == nil || au.revert {
		return nil
	}
	return u.gate.Record(au.app)
}

// gateFlush has the health gate persist what it was told of a batch.
func (u *Updater) gateFlush(ctx context.Context) {
	if u.gate == nil {
		return
	}
	_ = u.guard("saving the health gate's records", func() error {
		u.gate.Flush(ctx)
		return nil
	})
}

// Revert is a version the health gate writes back: To in place of From,
// for one image (by its settings.ImageSpec Key) of the Application
// Namespace/Name.
type Revert struct {
	Namespace, Name string
	Image           string
	From, To        imageref.Version
}

// RevertResult is what became of one Revert.
type RevertResult struct {
	// Done is true when To is in place: written now (Written), or found
	// there already.
	Done, Written bool
	// Commit is the git commit that wrote it, PullRequest the request it
	// was proposed in.
	Commit, PullRequest string
	// Superseded tells that the Application no longer holds From: another
	// version was written since, or the image is no longer managed.
	// Nothing was written.
	Superseded bool
	// Err is why it was not written; a later Revert may succeed.
	Err error
}

// Revert writes each revert's To back by its Application's write-back
// method (a patch, a commit, a pull request), in batches as a cycle
// writes: one push per repository and branch, touching only these
// Applications. It waits for a cycle under way, and a cycle waits for it.
// A revert whose Application holds neither From nor To is superseded and
// not written; a git Application is written whatever it runs, as its
// repository may hold From where a failed sync left To running.
func (u *Updater) Revert(ctx context.Context, reverts []Revert) []RevertResult {
	u.running.Lock()
	defer u.running.Unlock()
	out := make([]RevertResult, len(reverts))
	if len(reverts) == 0 {
		return out
	}
	cfg := u.config()
	apps := map[string]*application.Application{}
	for _, app := range u.apps.Applications(cfg.ReferenceOptions()...) {
		apps[app.Key()] = app
	}
	plan := newPlanner(u.controllerNamespace, u.defaultPlatforms)
	byWrite := map[string]*appUpdate{}
	index := map[*appUpdate][]int{}
	for i, r := range reverts {
		app := apps[r.Namespace+"/"+r.Name]
		if app == nil {
			out[i].Superseded = true
			continue
		}
		at := slices.IndexFunc(app.Settings.Images, func(s settings.ImageSpec) bool { return s.Key() == r.Image })
		if at < 0 {
			out[i].Superseded = true
			continue
		}
		j, skip, err := plan.image(app, &app.Settings.Images[at])
		switch {
		case err != nil:
			out[i].Err = fmt.Errorf("image %s: %w", r.Image, err)
			continue
		case skip != noSkip:
			out[i].Err = fmt.Errorf("image %s: %s", r.Image, skip)
			continue
		}
		git := app.Settings.WriteBack.Method == settings.WriteBackGit
		switch {
		case j.current == r.To && !git:
			out[i].Done = true
			continue
		case j.current != r.From && j.current != r.To:
			out[i].Superseded = true
			continue
		}
		key := app.Key()
		if !git {
			key += "\x00" + strconv.Itoa(j.source.Index)
		}
		au := byWrite[key]
		if au == nil {
			au = &appUpdate{app: app, source: j.source, revert: true}
			byWrite[key] = au
		}
		au.changes = append(au.changes, writeback.ImageUpdate{ImageSpec: *j.spec, New: r.To, Old: j.current})
		index[au] = append(index[au], i)
	}
	keys := make([]string, 0, len(byWrite))
	for k := range byWrite {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var viaArgoCD, viaGit []*appUpdate
	for _, k := range keys {
		au := byWrite[k]
		u.logChanges(au)
		if au.app.Settings.WriteBack.Method == settings.WriteBackGit {
			viaGit = append(viaGit, au)
		} else {
			viaArgoCD = append(viaArgoCD, au)
		}
	}
	// Not a cycle: it reports no summary, nor to the observer.
	r := u.newRun(scope{why: "a health gate revert"})
	for _, batch := range []struct {
		method  settings.WriteBackMethod
		w       writeback.Writer
		updates []*appUpdate
	}{{settings.WriteBackArgoCD, u.argocd, viaArgoCD}, {settings.WriteBackGit, u.git, viaGit}} {
		for n, res := range r.writeWith(ctx, batch.method, batch.w, batch.updates) {
			for _, i := range index[batch.updates[n]] {
				out[i] = RevertResult{Done: res.Err == nil, Written: res.Written && len(res.Changed) > 0,
					Commit: res.Commit, PullRequest: res.PullRequest, Err: res.Err}
			}
		}
	}
	return out
}
