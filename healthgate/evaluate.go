package healthgate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/safe"
)

// pendingRevert is a broken version to write back.
type pendingRevert struct {
	revert cycle.Revert
	app    *application.Application
}

// Evaluate judges every version followed from what Argo CD says now,
// writes back those found broken (and those whose write-back failed
// before, once their retry is due), applies health-gate-clear, and saves
// what changed. It returns when it wants to look again.
func (g *Gate) Evaluate(ctx context.Context) time.Time {
	now := g.now()
	next := now.Add(g.poll)
	g.mu.Lock()
	// Only what can change: the versions followed, the saves to retry,
	// the clears asked. The records kept only to tell a rollback (one per
	// Application written) are read by the cycle, not here: looking at
	// them at each write would cost writes × Applications written.
	var keys, kept []types.NamespacedName
	sweep := !now.Before(g.swept.Add(g.poll))
	for k, st := range g.states {
		switch {
		case st.dirty || slices.ContainsFunc(st.Records, active) || g.clears[k]:
			keys = append(keys, k)
		case sweep:
			kept = append(kept, k)
		}
	}
	if sweep {
		g.swept = now
		for k, p := range g.prepared {
			if now.Sub(p.at) > g.poll {
				delete(g.prepared, k)
			}
		}
	}
	for k := range g.clears {
		if g.states[k] == nil {
			keys = append(keys, k)
		}
	}
	g.clears = map[types.NamespacedName]bool{}
	g.mu.Unlock()
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})

	// Each ImageUpdater's status is saved once for all of its
	// Applications that changed in this look.
	owners := g.takeUnsaved()
	for _, key := range kept {
		// Deleted: its records go, from the ImageUpdater's status too.
		if _, ok := g.apps.Get(key.Namespace, key.Name); !ok {
			g.forget(key, owners)
		}
	}

	var reverts []pendingRevert
	for _, key := range keys {
		snap, ok := g.apps.Get(key.Namespace, key.Name)
		var app *application.Application
		if ok {
			var err error
			if app, err = snap.Application(g.referenceOptions()...); err != nil {
				ok = false
			}
		}
		if !ok {
			g.forget(key, owners)
			continue
		}
		rs, when, save, clearValue := g.evaluateApp(ctx, key, app, now)
		reverts = append(reverts, rs...)
		if !when.IsZero() && when.Before(next) {
			next = when
		}
		if save {
			g.saveOrQueue(ctx, key, owners)
		}
		if clearValue != "" && g.mayWrite() == nil {
			if err := g.store.removeClear(ctx, key, clearValue); err != nil {
				g.logger.Warn("cannot remove the health-gate-clear annotation", "application", key, "error", err)
			}
		}
	}
	// Before the write-backs: their skips are saved first.
	g.saveOwners(ctx, owners)
	if len(reverts) > 0 {
		g.revert(ctx, reverts, now)
		for _, r := range reverts {
			if t := g.retryTime(keyOf(r.app), r.revert.Image); !t.IsZero() && t.Before(next) {
				next = t
			}
		}
	}
	g.mu.Lock()
	n := g.following()
	if at := g.statusRetryDue(); !at.IsZero() && at.Before(next) {
		next = at
	}
	g.mu.Unlock()
	g.metrics.following(n)
	return next
}

// evaluateApp judges the followed versions of one Application. It
// returns the versions to write back, when to look again (zero: at the
// poll), whether the state changed, and the health-gate-clear value to
// remove.
func (g *Gate) evaluateApp(ctx context.Context, key types.NamespacedName, app *application.Application, now time.Time) (reverts []pendingRevert, next time.Time, changed bool, clearValue string) {
	status := app.Status()
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.states[key]
	clearValue = app.Annotation(ClearAnnotation)
	if clearValue != "" {
		if st != nil {
			if cleared := st.Clear(clearValue); len(cleared) > 0 {
				changed = true
				g.event(app, corev1.EventTypeNormal, ReasonCleared, fmt.Sprintf("cleared skipped version(s) %s (%s): they may be written again", strings.Join(cleared, ", "), ClearAnnotation))
			}
		}
	}
	if st == nil {
		return nil, time.Time{}, false, clearValue
	}
	changed = changed || st.dirty
	for i := range st.Records {
		r := &st.Records[i]
		switch r.State {
		case api.HealthGatePending:
			before := *r
			j := judge(r, status, app.RunningImages, st.pushes[r.Alias], now)
			switch j.verdict {
			case follow:
				r.Message = j.message
				if r.DeployedAt != nil {
					if end := r.DeployedAt.Add(windowOf(*r)); end.After(now) && (next.IsZero() || end.Before(next)) {
						next = end
					}
				}
			case verified, unverified:
				t := metav1.NewTime(now)
				r.Message = j.message
				if j.verdict == verified {
					r.State, r.VerifiedAt = api.HealthGateVerified, &t
					g.metrics.verifiedAfter(now.Sub(r.WrittenAt.Time))
					g.event(app, corev1.EventTypeNormal, ReasonVerified, fmt.Sprintf("image %s: version %s verified: %s", r.Alias, r.Version, j.message))
				} else {
					r.State = api.HealthGateUnverified
					g.event(app, corev1.EventTypeNormal, ReasonUnverified, fmt.Sprintf("image %s: version %s %s", r.Alias, r.Version, j.message))
				}
			case broken:
				t := metav1.NewTime(now)
				r.RevertedAt = &t
				st.skip(r.Alias, r.Version, j.message, now)
				if st.causes == nil {
					st.causes = map[string]string{}
				}
				st.causes[r.Alias] = j.cause
				if r.PreviousVersion == "" {
					// Forced onto an Application that ran no version of it.
					r.State = api.HealthGateSuperseded
					r.Message = j.message + "; skipped; no version ran before it to write back"
					g.metrics.reverted(j.cause)
					g.event(app, corev1.EventTypeWarning, ReasonSkipped, fmt.Sprintf("image %s: version %s broke the Application (%s); it is skipped, and no version ran before it to write back", r.Alias, r.Version, j.message))
					break
				}
				r.State = api.HealthGateReverting
				r.Message = j.message + "; writing back " + r.PreviousVersion
				reverts = append(reverts, g.revertOf(key, app, r))
			}
			changed = changed || !sameRecord(before, *r)
			if r.State != api.HealthGatePending {
				delete(st.pushes, r.Alias)
			}
		case api.HealthGateReverting:
			if at := st.retryAt[r.Alias]; !at.After(now) {
				reverts = append(reverts, g.revertOf(key, app, r))
			} else if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return reverts, next, changed, clearValue
}

func (g *Gate) revertOf(key types.NamespacedName, app *application.Application, r *api.HealthGateRecord) pendingRevert {
	return pendingRevert{app: app, revert: cycle.Revert{Namespace: key.Namespace, Name: key.Name, Image: r.Alias,
		From: imageref.ParseVersion(r.Version), To: imageref.ParseVersion(r.PreviousVersion)}}
}

func sameRecord(a, b api.HealthGateRecord) bool {
	return a.State == b.State && a.Message == b.Message && a.DeployedAt.Equal(b.DeployedAt) && a.VerifiedAt.Equal(b.VerifiedAt) && a.RevertedAt.Equal(b.RevertedAt)
}

// revert writes the broken versions back, once their skips are saved,
// and records what became of each.
func (g *Gate) revert(ctx context.Context, reverts []pendingRevert, now time.Time) {
	list := make([]cycle.Revert, len(reverts))
	for i, r := range reverts {
		list[i] = r.revert
	}
	if err := g.mayWrite(); err != nil {
		g.logger.Info("broken versions not written back now", "versions", len(list), "reason", err)
		return
	}
	var results []cycle.RevertResult
	err := safe.Call(func() error {
		results = g.reverter.Revert(ctx, list)
		if len(results) != len(list) {
			return fmt.Errorf("%d results for %d reverts", len(results), len(list))
		}
		return nil
	})
	if err != nil {
		safe.Log(g.logger, "writing back broken versions", err)
		results = make([]cycle.RevertResult, len(list))
		for i := range results {
			results[i].Err = err
		}
	}
	saved := map[types.NamespacedName]bool{}
	for i, res := range results {
		r := reverts[i]
		key := keyOf(r.app)
		g.mu.Lock()
		st := g.states[key]
		var rec *api.HealthGateRecord
		if st != nil {
			rec = st.record(r.revert.Image)
		}
		if rec == nil || rec.State != api.HealthGateReverting || rec.Version != r.revert.From.String() {
			g.mu.Unlock()
			continue
		}
		cause := st.causes[rec.Alias]
		reason := strings.TrimSuffix(rec.Message, "; writing back "+rec.PreviousVersion)
		switch {
		case res.Done:
			rec.State = api.HealthGateReverted
			where := ""
			switch {
			case res.PullRequest != "":
				where = " in " + res.PullRequest
			case res.Commit != "":
				where = " in commit " + shortCommit(res.Commit)
			}
			rec.Message = reason + "; wrote back " + rec.PreviousVersion + where
			delete(st.retryAt, rec.Alias)
			delete(st.failures, rec.Alias)
			g.metrics.reverted(cmp.Or(cause, causeDegraded))
			g.event(r.app, corev1.EventTypeWarning, ReasonReverted, fmt.Sprintf("image %s: version %s broke the Application (%s); wrote back %s%s and skipped %s", rec.Alias, rec.Version, reason, rec.PreviousVersion, where, rec.Version))
			g.logger.Warn("health gate: broken version written back", "application", key, "image", rec.Alias, "version", rec.Version, "to", rec.PreviousVersion, "reason", reason)
		case res.Superseded:
			rec.State = api.HealthGateSuperseded
			rec.Message = reason + "; skipped; not written back: the Application no longer holds it"
			g.metrics.reverted(cmp.Or(cause, causeDegraded))
			g.event(r.app, corev1.EventTypeWarning, ReasonSkipped, fmt.Sprintf("image %s: version %s broke the Application (%s); it is skipped, and was not written back: the Application no longer holds it", rec.Alias, rec.Version, reason))
		default:
			if st.retryAt == nil {
				st.retryAt, st.failures = map[string]time.Time{}, map[string]int{}
			}
			st.failures[rec.Alias]++
			n := st.failures[rec.Alias]
			st.retryAt[rec.Alias] = now.Add(min(10*time.Second<<min(n-1, 5), 5*time.Minute))
			g.metrics.revertFailed()
			if n == 1 {
				g.event(r.app, corev1.EventTypeWarning, ReasonRevertFailed, fmt.Sprintf("image %s: version %s broke the Application (%s); writing back %s failed, and is tried again: %v", rec.Alias, rec.Version, reason, rec.PreviousVersion, res.Err))
			}
			g.logger.Warn("health gate: writing back a broken version failed; it is tried again", "application", key, "image", rec.Alias, "version", rec.Version, "attempt", n, "error", res.Err)
			g.mu.Unlock()
			continue
		}
		g.mu.Unlock()
		saved[key] = true
	}
	// An ImageUpdater's status holds all of its Applications' records:
	// saved once, however many of them changed.
	owners := map[types.NamespacedName]bool{}
	for key := range saved {
		g.saveOrQueue(ctx, key, owners)
	}
	g.saveOwners(ctx, owners)
}

func shortCommit(c string) string { return c[:min(len(c), 12)] }

// retryTime is when the write-back of image of app is tried again; zero
// when none is due.
func (g *Gate) retryTime(key types.NamespacedName, image string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.states[key]; st != nil {
		return st.retryAt[image]
	}
	return time.Time{}
}
