package healthgate

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
)

// statusRetry paces the saves of an ImageUpdater's status after the API
// server refused one: the status holds the records of all its
// Applications, and sending it again at every look, whatever refused it,
// would cost a patch of the whole status each time.
type statusRetry struct {
	at       time.Time
	failures int
}

// statusBackoff is the wait before the next save after n refusals in a
// row: 10s, doubling, at most 5m, as a failed write-back.
func statusBackoff(n int) time.Duration {
	return min(10*time.Second<<min(n-1, 5), 5*time.Minute)
}

// saveOrQueue saves the state of the Application key now when its
// annotation keeps it; an ImageUpdater's status is added to owners
// instead, for saveOwners to save once however many of its Applications
// changed.
func (g *Gate) saveOrQueue(ctx context.Context, key types.NamespacedName, owners map[types.NamespacedName]bool) {
	g.mu.Lock()
	var owner types.NamespacedName
	if st := g.states[key]; st != nil {
		owner = st.owner
	}
	g.mu.Unlock()
	if owner.Name != "" {
		owners[owner] = true
		return
	}
	g.saveAnnotation(ctx, key)
}

// saveOwners saves the status of each ImageUpdater of owners once, in a
// stable order.
func (g *Gate) saveOwners(ctx context.Context, owners map[types.NamespacedName]bool) {
	list := make([]types.NamespacedName, 0, len(owners))
	for o := range owners {
		list = append(list, o)
	}
	slices.SortFunc(list, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, o := range list {
		g.saveOwner(ctx, o)
	}
}

// save keeps the state of the Application key where it survives a
// restart, now. A failure is logged and the next evaluation saves again.
func (g *Gate) save(ctx context.Context, key types.NamespacedName) {
	owners := map[types.NamespacedName]bool{}
	g.saveOrQueue(ctx, key, owners)
	g.saveOwners(ctx, owners)
}

// saveAnnotation writes the state of the Application key, which its
// annotation keeps.
func (g *Gate) saveAnnotation(ctx context.Context, key types.NamespacedName) {
	if err := g.mayWrite(); err != nil {
		g.markDirty(key, true)
		return
	}
	g.saveMu.Lock()
	defer g.saveMu.Unlock()
	g.mu.Lock()
	value := ""
	if st := g.states[key]; st != nil {
		st.normalize("")
		value = st.Encode()
	}
	g.mu.Unlock()
	err := g.store.saveAnnotation(ctx, key, value)
	if err != nil {
		g.logger.Warn("cannot save the health gate's state; tried again", "application", key, "error", err)
	}
	g.markDirty(key, err != nil)
}

// saveOwner saves the state of every Application an ImageUpdater
// configures into its status: the records still followed first, then the
// most recent, within the status's bounds. After the API server refused
// it, it is not sent again before its retry is due (statusBackoff): until
// then its Applications stay dirty, and the look when it is due saves
// them.
func (g *Gate) saveOwner(ctx context.Context, owner types.NamespacedName) {
	keepDirty := func() {
		g.mu.Lock()
		for _, st := range g.states {
			if st.owner == owner {
				st.dirty = true
			}
		}
		g.mu.Unlock()
	}
	if err := g.mayWrite(); err != nil {
		// As save does: kept dirty, so that a later evaluation saves it.
		keepDirty()
		return
	}
	now := g.now()
	g.mu.Lock()
	rt, retrying := g.retries[owner]
	g.mu.Unlock()
	if retrying && now.Before(rt.at) {
		keepDirty()
		return
	}
	g.saveMu.Lock()
	defer g.saveMu.Unlock()
	var records []api.HealthGateRecord
	var skipped []api.SkippedVersion
	var keys []types.NamespacedName
	g.mu.Lock()
	for key, st := range g.states {
		if st.owner != owner {
			continue
		}
		keys = append(keys, key)
		st.normalize("")
		for _, r := range st.Records {
			r.Application = key.Name
			records = append(records, r)
		}
		for _, s := range st.Skipped {
			s.Application = key.Name
			skipped = append(skipped, s)
		}
	}
	g.mu.Unlock()
	slices.SortStableFunc(records, func(a, b api.HealthGateRecord) int {
		if active(a) != active(b) {
			if active(a) {
				return -1
			}
			return 1
		}
		return b.WrittenAt.Compare(a.WrittenAt.Time)
	})
	records = records[:min(len(records), maxStatusEntries)]
	slices.SortStableFunc(skipped, func(a, b api.SkippedVersion) int { return b.SkippedAt.Compare(a.SkippedAt.Time) })
	skipped = skipped[:min(len(skipped), maxStatusEntries)]
	slices.SortFunc(records, func(a, b api.HealthGateRecord) int {
		return cmp.Or(cmp.Compare(a.Application, b.Application), cmp.Compare(a.Alias, b.Alias))
	})
	slices.SortStableFunc(skipped, func(a, b api.SkippedVersion) int {
		return cmp.Or(cmp.Compare(a.Application, b.Application), cmp.Compare(a.Alias, b.Alias), a.SkippedAt.Compare(b.SkippedAt.Time))
	})
	err := g.store.saveStatus(ctx, owner, records, skipped)
	g.mu.Lock()
	switch {
	case err != nil:
		rt.failures++
		rt.at = now.Add(statusBackoff(rt.failures))
		g.retries[owner] = rt
	case retrying:
		delete(g.retries, owner)
	}
	for _, key := range keys {
		if st := g.states[key]; st != nil {
			st.dirty = err != nil
		}
	}
	g.mu.Unlock()
	switch {
	case err != nil:
		// Once per attempt, which the backoff spaces: not once per
		// Application, nor at every look.
		g.logger.Warn("cannot save the health gate's state in the ImageUpdater's status; tried again later",
			"imageUpdater", owner, "applications", len(keys), "attempt", rt.failures, "retryAt", rt.at.UTC().Format(time.RFC3339), "error", err)
	case retrying:
		g.logger.Info("the health gate's state saved in the ImageUpdater's status again", "imageUpdater", owner, "applications", len(keys))
	}
}

// statusRetryDue is the earliest retry of a refused status that has
// Applications waiting to be saved, or zero. The caller holds g.mu.
func (g *Gate) statusRetryDue() time.Time {
	var at time.Time
	for _, st := range g.states {
		if !st.dirty || st.owner.Name == "" {
			continue
		}
		if rt, ok := g.retries[st.owner]; ok && (at.IsZero() || rt.at.Before(at)) {
			at = rt.at
		}
	}
	return at
}

// maxStatusEntries bounds each of the status's lists, as the CRD does.
const maxStatusEntries = 1000

func (g *Gate) markDirty(key types.NamespacedName, dirty bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.states[key]; st != nil {
		st.dirty = dirty
	}
}

// saveSoon saves the state of the Application key now when its
// annotation keeps it; an ImageUpdater's status is saved by the next
// Flush or look, which it wakes, once for all the Applications that
// changed meanwhile: the cycle asks Skipped of every image, and a status
// saved at each answer would be written once per Application.
func (g *Gate) saveSoon(ctx context.Context, key types.NamespacedName) {
	g.mu.Lock()
	var owner types.NamespacedName
	if st := g.states[key]; st != nil {
		owner = st.owner
	}
	if owner.Name != "" {
		g.unsaved[owner] = true
	}
	g.mu.Unlock()
	if owner.Name != "" {
		g.poke()
		return
	}
	g.saveAnnotation(ctx, key)
}

// takeUnsaved takes the ImageUpdaters whose status awaits a save.
func (g *Gate) takeUnsaved() map[types.NamespacedName]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	owners := make(map[types.NamespacedName]bool, len(g.unsaved))
	for o := range g.unsaved {
		owners[o] = true
	}
	clear(g.unsaved)
	return owners
}
