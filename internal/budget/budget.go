// Package budget counts in bytes what is held from hosts others choose
// (tag lists, chart indexes, manifests, answers): a Budget for what one
// cycle holds while it works, an LRU for what is kept between cycles. A
// count of entries bounds nothing when each entry's size is another's
// choice; bytes do.
package budget

import (
	"container/list"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
)

// ErrExceeded is what a Take past the limit fails with.
var ErrExceeded = errors.New("byte budget exceeded")

// Budget counts the bytes held against a limit. It is safe for
// concurrent use.
type Budget struct {
	limit int64
	used  atomic.Int64
}

// New returns a budget of limit bytes.
func New(limit int64) *Budget { return &Budget{limit: limit} }

// Take counts n bytes more, or fails, counting nothing, when that would
// pass the limit: the caller then holds nothing of what it was reading.
func (b *Budget) Take(n int64) error {
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return fmt.Errorf("%w: %s more would pass %s", ErrExceeded, Format(n), Format(b.limit))
		}
		if b.used.CompareAndSwap(used, used+n) {
			return nil
		}
	}
}

// Release gives back n bytes taken.
func (b *Budget) Release(n int64) { b.used.Add(-n) }

// Used is the bytes held.
func (b *Budget) Used() int64 { return b.used.Load() }

// Limit is the most bytes held.
func (b *Budget) Limit() int64 { return b.limit }

// Sized is what an LRU keeps: a value that tells its size in bytes.
type Sized interface{ Bytes() int64 }

// LRU keeps values within a limit of bytes, dropping the least recently
// used first. A value's size is asked once, when it is put; one that grows
// later is counted by Grow. It is safe
// for concurrent use; a holder of several kinds of values can share one
// by keying them apart (an LRU[string, Sized]).
type LRU[K comparable, V Sized] struct {
	mu    sync.Mutex
	limit int64
	used  int64
	items map[K]*list.Element
	order list.List // of *entry[K, V], most recently used first
}

type entry[K comparable, V Sized] struct {
	key   K
	value V
	bytes int64
}

// NewLRU returns an LRU of limit bytes.
func NewLRU[K comparable, V Sized](limit int64) *LRU[K, V] {
	return &LRU[K, V]{limit: limit, items: map[K]*list.Element{}}
}

// Get is the value of key, which becomes the most recently used.
func (c *LRU[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry[K, V]).value, true
}

// Put keeps value under key, most recently used, in place of what key
// held, and drops the least recently used beyond the limit. A value
// larger than the limit by itself is not kept (false), and what key
// held is forgotten.
func (c *LRU[K, V]) Put(key K, value V) bool {
	n := value.Bytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(key)
	if n > c.limit {
		return false
	}
	c.items[key] = c.order.PushFront(&entry[K, V]{key: key, value: value, bytes: n})
	c.used += n
	for c.used > c.limit {
		c.remove(c.order.Back().Value.(*entry[K, V]).key)
	}
	return true
}

// Grow counts n more bytes for the value of key, for a value that grows
// after it was put, and drops the least recently used others beyond the
// limit. A value that outgrows the limit by itself is forgotten (false),
// as is a key that is not kept.
func (c *LRU[K, V]) Grow(key K, n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return false
	}
	ent := e.Value.(*entry[K, V])
	ent.bytes += n
	c.used += n
	if ent.bytes > c.limit {
		c.remove(key)
		return false
	}
	for c.used > c.limit {
		back := c.order.Back()
		if back == e {
			back = back.Prev()
		}
		c.remove(back.Value.(*entry[K, V]).key)
	}
	return true
}

// Remove forgets key.
func (c *LRU[K, V]) Remove(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(key)
}

func (c *LRU[K, V]) remove(key K) {
	e, ok := c.items[key]
	if !ok {
		return
	}
	delete(c.items, key)
	c.used -= c.order.Remove(e).(*entry[K, V]).bytes
}

// All is what is kept when it is called, most recently used first, for
// a holder that writes its values out; it marks none of them used.
func (c *LRU[K, V]) All() iter.Seq2[K, V] {
	c.mu.Lock()
	kept := make([]*entry[K, V], 0, len(c.items))
	for e := c.order.Front(); e != nil; e = e.Next() {
		kept = append(kept, e.Value.(*entry[K, V]))
	}
	c.mu.Unlock()
	return func(yield func(K, V) bool) {
		for _, e := range kept {
			if !yield(e.key, e.value) {
				return
			}
		}
	}
}

// Used is the bytes of the values kept.
func (c *LRU[K, V]) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Len is the number of values kept.
func (c *LRU[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// Sizes of what Go allocates, approximated from above: a string header is
// 16 bytes, a slice header 24, and the heap hands out at least 8 bytes at
// a time.
const (
	StringHeader = 16
	SliceHeader  = 24
	// MapHeader is a map's header with its first bucket, as small maps take.
	MapHeader = 48
)

// MapEntry is what one entry of a map takes besides the data its key and
// value point to, for a key and value of these sizes: twice them, a
// bucket being at most about half full, and a byte of hash.
func MapEntry(key, value int64) int64 { return 2*(key+value) + 8 }

// Data is the heap n bytes of string or slice data take: n rounded up to
// 8 (the heap's smallest size classes), or to 16 past 32 bytes.
func Data(n int) int64 {
	switch {
	case n == 0:
		return 0
	case n <= 32:
		return int64((n + 7) &^ 7)
	}
	return int64((n + 15) &^ 15)
}

// String is what a string held by a value takes: its header and data.
func String(s string) int64 { return StringHeader + Data(len(s)) }

// Format writes n bytes for messages: "64 MiB", "512 KiB", "100 B".
func Format(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
