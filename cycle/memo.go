package cycle

import (
	"fmt"
	"sync"

	"github.com/image-updater/argocd-image-updater/strategy"
)

// metadataMemo remembers, for one cycle, the metadata of each tag asked
// for, so that images sharing a repository (newest-build over the same
// tags, digest following the same tag) ask the registry once per cycle. A
// tag can move between cycles, so nothing outlives the cycle.
type metadataMemo struct {
	mu    sync.Mutex
	calls map[string]*metadataCall
}

type metadataCall struct {
	done chan struct{}
	info strategy.TagInfo
	err  error
}

func newMetadataMemo() *metadataMemo { return &metadataMemo{calls: map[string]*metadataCall{}} }

// get returns the remembered answer for key, or fetches it; concurrent
// callers of one key wait for the first.
func (m *metadataMemo) get(key string, fetch func() (strategy.TagInfo, error)) (strategy.TagInfo, error) {
	m.mu.Lock()
	if c, ok := m.calls[key]; ok {
		m.mu.Unlock()
		<-c.done
		return c.info, c.err
	}
	c := &metadataCall{done: make(chan struct{})}
	m.calls[key] = c
	m.mu.Unlock()
	c.info, c.err = fetch()
	close(c.done)
	return c.info, c.err
}

// metadataKey identifies a tag's metadata as this job sees it: the same
// repository and credentials, and the same platforms.
func (j *job) metadataKey(tag string) string {
	return fmt.Sprintf("%s\x00%s\x00%v", j.repoKey(), tag, j.platforms)
}
