package cycle

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// Age is the minimum release age of an image: a version is chosen only
// once it was released at least Min ago. It was released when the
// registry says its tag was pushed, where the registry's API says so,
// else when the updater first saw it. The zero Age takes any.
type Age struct {
	Min time.Duration
	// FirstSeen gives when each version was first seen, seeing those
	// never seen before now (firstseen.Store.Times of the repository).
	FirstSeen func(versions []string) map[string]time.Time
	// Pushed, when not nil, gives when the registry says tags were
	// pushed; those it does not know are missing. It is asked only of
	// versions too young by their first sighting: a push comes before
	// the updater sees it, so for the others the answer changes nothing
	// but a tag pushed again.
	Pushed func(ctx context.Context, tags []string) map[string]time.Time
	Now    func() time.Time
}

// released is when each of versions was released: seen's times, those
// younger than a.Min replaced by their push times where the registry
// gives them.
func (a Age) released(ctx context.Context, seen map[string]time.Time, now time.Time) map[string]time.Time {
	var young []string
	for v, t := range seen {
		if t.Add(a.Min).After(now) {
			young = append(young, v)
		}
	}
	if len(young) == 0 || a.Pushed == nil {
		return seen
	}
	slices.Sort(young)
	out := maps.Clone(seen)
	for v, t := range a.Pushed(ctx, young) {
		if _, ok := out[v]; ok {
			out[v] = t
		}
	}
	return out
}

// Waiting is a newer version not taken yet, and when it may be (zero:
// not known): for its minimum release age (Min), or, when Why says so,
// for its stage (promotion).
type Waiting struct {
	Version imageref.Version
	Min     time.Duration
	Until   time.Time
	Why     string
}

// reason is the metric's label of the wait.
func (w *Waiting) reason() string {
	if w.Why != "" {
		return waitingPromotion
	}
	return waitingMinReleaseAge
}

// apply holds back a choice younger than a.Min: the strategy chooses
// again among the versions old enough (the running one always is), and
// the reason says which version waits and until when. The digest
// strategy's version is its tag's digest, whose age is its own.
func (a Age) apply(ctx context.Context, policy *strategy.Policy, tags []string, current imageref.Version, meta strategy.MetadataFunc, res strategy.Result) (strategy.Result, *Waiting, error) {
	if a.Min <= 0 {
		return res, nil, nil
	}
	now := a.Now()
	if policy.Name() == strategy.Digest {
		if !res.Update {
			return res, nil, nil
		}
		v := res.Version().String()
		seen := a.FirstSeen([]string{v})
		if seen[v].Add(a.Min).After(now) && a.Pushed != nil {
			// The digest is the tag's: when the tag last moved.
			if at, ok := a.Pushed(ctx, []string{current.Tag})[current.Tag]; ok {
				seen[v] = at
			}
		}
		if until := seen[v].Add(a.Min); until.After(now) {
			w := &Waiting{Version: res.Version(), Min: a.Min, Until: until}
			return strategy.Result{Seen: res.Seen, Considered: res.Considered, Tag: current.Tag, Digest: current.Digest, Reason: w.String()}, w, nil
		}
		return res, nil, nil
	}
	// Every candidate is seen, whether or not it is chosen now: its age
	// counts from its first listing.
	seen := a.FirstSeen(policy.Candidates(tags))
	if !res.Update || !seen[res.Tag].Add(a.Min).After(now) {
		return res, nil, nil
	}
	seen = a.released(ctx, seen, now)
	until := seen[res.Tag].Add(a.Min)
	if !until.After(now) {
		return res, nil, nil
	}
	w := &Waiting{Version: imageref.Version{Tag: res.Tag}, Min: a.Min, Until: until}
	old := slices.DeleteFunc(slices.Clone(tags), func(t string) bool {
		first, ok := seen[t]
		return t != current.Tag && (!ok || first.Add(a.Min).After(now))
	})
	again, err := policy.Choose(ctx, old, current, meta)
	if err != nil {
		return strategy.Result{}, nil, err
	}
	again.Seen, again.Considered = res.Seen, res.Considered
	if again.Reason != "" {
		again.Reason = w.String() + "; " + again.Reason
	}
	return again, w, nil
}

func (w *Waiting) String() string {
	if w.Why == "" {
		return fmt.Sprintf("version %s waits for its minimum release age (%s) until %s", w.Version, w.Min, w.Until.UTC().Format(time.RFC3339))
	}
	s := "nothing to promote: " + w.Why
	if !w.Version.IsZero() {
		s = fmt.Sprintf("version %s waits: %s", w.Version, w.Why)
	}
	if !w.Until.IsZero() {
		s += " until " + w.Until.UTC().Format(time.RFC3339)
	}
	return s
}
