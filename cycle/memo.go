package cycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// passMemo remembers, for one cycle, what images sharing a repository ask
// the registry alike: the metadata of each tag (newest-build over the same
// tags, digest following the same tag), and push times. A tag can move
// between cycles, so nothing outlives the cycle.
type passMemo struct {
	meta   memo[strategy.TagInfo]
	pushed memo[map[string]time.Time]
}

func newPassMemo() *passMemo {
	return &passMemo{meta: memo[strategy.TagInfo]{done: map[string]memoEntry[strategy.TagInfo]{}}, pushed: memo[map[string]time.Time]{done: map[string]memoEntry[map[string]time.Time]{}}}
}

// memo is one kind of answer, by key.
type memo[T any] struct {
	calls coalesce.Group[T]
	mu    sync.Mutex
	done  map[string]memoEntry[T]
}

type memoEntry[T any] struct {
	info T
	err  error
}

// get returns the remembered answer for key, or fetches it; concurrent
// callers of one key share one fetch. A failure is remembered too, so a
// failing registry is not asked again by every image of the cycle; but not
// a fetch cancelled because every image waiting for it gave up (their
// time ran out), which says nothing about the tag.
func (m *memo[T]) get(ctx context.Context, key string, fetch func(context.Context) (T, error)) (T, error) {
	m.mu.Lock()
	e, ok := m.done[key]
	m.mu.Unlock()
	if ok {
		return e.info, e.err
	}
	info, err := m.calls.Do(ctx, key, nil, fetch)
	// Only a caller still waiting receives the fetch's own answer; one
	// whose time ran out receives its context's error.
	if ctx.Err() == nil {
		m.mu.Lock()
		m.done[key] = memoEntry[T]{info, err}
		m.mu.Unlock()
	}
	return info, err
}

// known returns the remembered answer for key without fetching it.
func (m *memo[T]) known(key string) (T, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.done[key]
	return e.info, ok && e.err == nil
}

// metadataKey identifies a tag's metadata as this job sees it: the same
// repository and credentials, and the same platforms.
func (j *job) metadataKey(tag string) string {
	return fmt.Sprintf("%s\x00%s\x00%v", j.repoKey(), tag, j.platforms)
}
