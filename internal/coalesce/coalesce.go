// Package coalesce runs one call per key for all the callers that ask for
// that key while it runs: one tag listing, manifest fetch or credential
// resolution for a burst of identical requests.
//
// It is written here rather than taken from golang.org/x/sync/singleflight
// for three things singleflight does not do. The call does not run under
// the first caller's context, so that caller's deadline or cancellation
// cannot fail the others that joined it; each caller stops waiting when
// its own context ends, and a call nobody waits for any more is cancelled
// (unless the Group is Detached); and a caller learns at once whether it
// joined a call under way, which the registry metrics count.
package coalesce

import (
	"context"
	"sync"

	"github.com/image-updater/argocd-image-updater/internal/safe"
)

// Group coalesces calls by key. The zero Group is ready to use.
type Group[T any] struct {
	// Detached keeps a call running when every caller has stopped
	// waiting for it, and lets later callers join it: for calls whose
	// result fills a cache, such as a credential script.
	Detached bool

	mu    sync.Mutex
	calls map[string]*call[T]
}

type call[T any] struct {
	done    chan struct{}
	val     T
	err     error
	waiters int
	cancel  context.CancelFunc
}

// Do returns fn's result for key, running fn only if no call for key is
// under way. joined, if not nil, is told at once whether the caller joined
// a call another caller started. The context fn gets keeps the first
// caller's values; it ends when the last waiting caller gives up (never,
// for a Detached group). A caller whose ctx ends gets ctx's error at once.
func (g *Group[T]) Do(ctx context.Context, key string, joined func(shared bool), fn func(context.Context) (T, error)) (T, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = make(map[string]*call[T])
	}
	c, shared := g.calls[key]
	if !shared {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &call[T]{done: make(chan struct{}), cancel: cancel}
		g.calls[key] = c
		go func() {
			// A panic here would stop the controller: no caller's recover
			// sees this goroutine. It becomes every waiting caller's error.
			v, err := safe.Value(func() (T, error) { return fn(cctx) })
			g.mu.Lock()
			c.val, c.err = v, err
			if g.calls[key] == c {
				delete(g.calls, key)
			}
			g.mu.Unlock()
			cancel()
			close(c.done)
		}()
	}
	c.waiters++
	g.mu.Unlock()
	if joined != nil {
		joined(shared)
	}

	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		g.mu.Lock()
		c.waiters--
		if c.waiters == 0 && !g.Detached {
			// Nobody wants the answer any more: stop the work, and let the
			// next caller start afresh rather than join a cancelled call.
			c.cancel()
			if g.calls[key] == c {
				delete(g.calls, key)
			}
		}
		g.mu.Unlock()
		var zero T
		return zero, ctx.Err()
	}
}

// Forget makes the next Do for key start a new call even if one is under
// way, for example because what that call is using was found stale. The
// running call still answers the callers already waiting for it.
func (g *Group[T]) Forget(key string) {
	g.mu.Lock()
	delete(g.calls, key)
	g.mu.Unlock()
}
