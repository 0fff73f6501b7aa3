package cycle

import (
	"context"
	"fmt"
	"sync"

	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// metadataMemo remembers, for one cycle, the metadata of each tag asked
// for, so that images sharing a repository (newest-build over the same
// tags, digest following the same tag) ask the registry once per cycle. A
// tag can move between cycles, so nothing outlives the cycle.
type metadataMemo struct {
	calls coalesce.Group[strategy.TagInfo]
	mu    sync.Mutex
	done  map[string]memoEntry
}

type memoEntry struct {
	info strategy.TagInfo
	err  error
}

func newMetadataMemo() *metadataMemo { return &metadataMemo{done: map[string]memoEntry{}} }

// get returns the remembered answer for key, or fetches it; concurrent
// callers of one key share one fetch. A failure is remembered too, so a
// failing registry is not asked again by every image of the cycle; but not
// a fetch cancelled because every image waiting for it gave up (their
// time ran out), which says nothing about the tag.
func (m *metadataMemo) get(ctx context.Context, key string, fetch func(context.Context) (strategy.TagInfo, error)) (strategy.TagInfo, error) {
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
		m.done[key] = memoEntry{info, err}
		m.mu.Unlock()
	}
	return info, err
}

// known returns the remembered answer for key without fetching it.
func (m *metadataMemo) known(key string) (strategy.TagInfo, bool) {
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
