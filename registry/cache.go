package registry

import k8slru "k8s.io/utils/lru"

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
