package credentials

import (
	"context"
	"sync"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// cycleKey is the context key of a cycle's reuse scope.
type cycleKey struct{}

// cycleScope remembers what Resolve found during one update cycle.
type cycleScope struct {
	flight coalesce.Group[Credential]
	mu     sync.Mutex
	done   map[string]cycleResult
}

type cycleResult struct {
	cred Credential
	err  error
}

// WithCycle returns a context for one update cycle (or one run of the test
// command). Resolve called with it, or with a context derived from it,
// resolves each reference once per registry and gives the same answer to
// every later call: an image-level ext: script then runs once per cycle
// instead of once per registry request, and a failing or hanging one costs
// its time once. Nothing outlives the context, so the next cycle runs the
// script again and a rotated credential is picked up at the latest then.
// ResolveCached, which keeps results across cycles on its own terms, is
// not affected.
func WithCycle(ctx context.Context) context.Context {
	return context.WithValue(ctx, cycleKey{}, &cycleScope{done: map[string]cycleResult{}})
}

func cycleOf(ctx context.Context) *cycleScope {
	s, _ := ctx.Value(cycleKey{}).(*cycleScope)
	return s
}

// cycleResultKey identifies what a reference gives for a target. Only pull
// secrets tell repositories of a registry apart; other sources give the
// whole registry one credential.
func cycleResultKey(ref credref.Ref, t Target) string {
	k := ref.String() + "\x00" + imageref.CanonicalHost(t.Host)
	if ref.Kind == credref.KindPullSecret {
		k += "\x00" + t.Repository
	}
	return k
}

// resolve returns the remembered answer for key or runs fetch once for all
// concurrent callers. A failure is remembered as well, unless it is the
// caller's own context ending, which says nothing about the source.
func (s *cycleScope) resolve(ctx context.Context, key string, fetch func(context.Context) (Credential, error)) (Credential, error) {
	s.mu.Lock()
	r, ok := s.done[key]
	s.mu.Unlock()
	if ok {
		return r.cred, r.err
	}
	return s.flight.Do(ctx, key, nil, func(fctx context.Context) (Credential, error) {
		c, err := fetch(fctx)
		if fctx.Err() == nil {
			s.mu.Lock()
			s.done[key] = cycleResult{cred: c, err: err}
			s.mu.Unlock()
		}
		return c, err
	})
}
