package cycle

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// Age is the minimum release age of an image: a version is chosen only
// once it was first seen at least Min ago. The zero Age takes any.
type Age struct {
	Min time.Duration
	// FirstSeen gives when each version was first seen, seeing those
	// never seen before now (firstseen.Store.Times of the repository).
	FirstSeen func(versions []string) map[string]time.Time
	Now       func() time.Time
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
		if until := a.FirstSeen([]string{v})[v].Add(a.Min); until.After(now) {
			w := &Waiting{Version: res.Version(), Min: a.Min, Until: until}
			return strategy.Result{Seen: res.Seen, Considered: res.Considered, Tag: current.Tag, Digest: current.Digest, Reason: w.String()}, w, nil
		}
		return res, nil, nil
	}
	// Every candidate is seen, whether or not it is chosen now: its age
	// counts from its first listing.
	seen := a.FirstSeen(policy.Candidates(tags))
	if !res.Update {
		return res, nil, nil
	}
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
