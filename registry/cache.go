package registry

import (
	"context"
	"sync"

	k8slru "k8s.io/utils/lru"
)

// lru is a bounded map that forgets the least recently used entry when
// full. It is safe for concurrent use. It only adds types to
// k8s.io/utils/lru, whose keys and values are untyped.
type lru[K comparable, V any] struct {
	c *k8slru.Cache
}

// newLRU keeps at most size entries, and at least one: the library takes
// 0 to mean no bound.
func newLRU[K comparable, V any](size int) *lru[K, V] {
	return &lru[K, V]{c: k8slru.New(max(size, 1))}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	v, ok := c.c.Get(k)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

func (c *lru[K, V]) add(k K, v V) { c.c.Add(k, v) }

func (c *lru[K, V]) remove(k K) { c.c.Remove(k) }

func (c *lru[K, V]) len() int { return c.c.Len() }

// sharedCalls runs one call per key for all callers that ask for that key
// while it runs. Unlike a plain singleflight, the call's context is not
// the first caller's: it ends only when every waiting caller has given up,
// so one caller's cancellation or deadline does not fail the others.
type sharedCalls[T any] struct {
	mu    sync.Mutex
	calls map[string]*sharedCall[T]
}

type sharedCall[T any] struct {
	done    chan struct{}
	val     T
	err     error
	waiters int
	cancel  context.CancelFunc
}

// do returns fn's result for key. note, if not nil, is told at once
// whether the caller joined a call already under way. The context passed
// to fn keeps the first caller's values.
func (g *sharedCalls[T]) do(ctx context.Context, key string, note func(shared bool), fn func(context.Context) (T, error)) (T, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = make(map[string]*sharedCall[T])
	}
	c, shared := g.calls[key]
	if !shared {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &sharedCall[T]{done: make(chan struct{}), cancel: cancel}
		g.calls[key] = c
		go func() {
			v, err := fn(cctx)
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
	if note != nil {
		note(shared)
	}

	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		g.mu.Lock()
		c.waiters--
		if c.waiters == 0 {
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
