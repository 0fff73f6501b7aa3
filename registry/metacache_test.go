package registry

import (
	"fmt"
	"testing"

	"github.com/image-updater/argocd-image-updater/registry/credentials"
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

// TestPingsAreBounded: the kept answers of registries' pings are bounded
// by their count, however many registries and credentials images name.
func TestPingsAreBounded(t *testing.T) {
	c := NewClient()
	st := &endpointStack{host: "registry.test"}
	for i := range hostCacheSize + 10 {
		c.pingFor(st, credentials.Credential{Username: "u", Password: fmt.Sprint(i)})
	}
	if got := c.pings.Len(); got != hostCacheSize {
		t.Errorf("%d pings kept, want %d", got, hostCacheSize)
	}
}
