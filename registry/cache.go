package registry

import (
	"container/list"
	"context"
	"sync"
)

// lru is a bounded map that forgets the least recently used entry when
// full. It is safe for concurrent use.
type lru[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recently used; elements hold *lruEntry
	items map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key K
	val V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: make(map[K]*list.Element)}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

func (c *lru[K, V]) add(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		e.Value.(*lruEntry[K, V]).val = v
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry[K, V]).key)
	}
}

func (c *lru[K, V]) remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.Remove(e)
		delete(c.items, k)
	}
}

func (c *lru[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

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
