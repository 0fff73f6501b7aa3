package registry

import (
	"fmt"
	"testing"
)

// The client keeps the metadata results of at most metadataCacheSize
// digests, the least recently used dropped.
func TestMetadataCacheIsBounded(t *testing.T) {
	c := NewClient()
	first := metaKey{host: "registry.test", repo: "r", digest: "sha256:0"}
	for i := range metadataCacheSize + 10 {
		c.meta.Add(metaKey{host: "registry.test", repo: "r", digest: fmt.Sprintf("sha256:%d", i)}, metaEntry{})
	}
	if got := c.meta.Len(); got != metadataCacheSize {
		t.Errorf("the metadata of %d digests kept, want %d", got, metadataCacheSize)
	}
	if _, ok := c.meta.Get(first); ok {
		t.Error("the least recently used result was kept")
	}
}
