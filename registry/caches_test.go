package registry

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// inProcessRegistry answers the version check and the tag list of every
// repository, in this process: a registry with as many repositories as a
// test needs, at no cost of connections.
type inProcessRegistry struct{}

func (inProcessRegistry) RoundTrip(r *http.Request) (*http.Response, error) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: r, Body: http.NoBody}
	switch repo, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v2/"), "/tags/list"); {
	case r.URL.Path == "/v2/":
	case ok:
		body := fmt.Sprintf(`{"name":%q,"tags":["1.0"]}`, repo)
		resp.Header.Set("Content-Type", "application/json")
		resp.ContentLength = int64(len(body))
		resp.Body = io.NopCloser(strings.NewReader(body))
	default:
		resp.StatusCode = http.StatusNotFound
	}
	return resp, nil
}

// The sessions a client keeps are bounded by their count, and the tag
// digests it knows by their bytes, however many repositories the images
// name and however many tags they list: the least recently used are
// dropped.
func TestClientCachesAreBounded(t *testing.T) {
	t.Run("known digests", func(t *testing.T) {
		// 200 repositories of 500 long tags, a digest learnt for each (as
		// newest-build learns them): some 40 MiB if all were kept.
		const limit = 1 << 20
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		k := newTagKnowledge(limit)
		long := strings.Repeat("t", 100)
		for i := range 200 {
			repo := fmt.Sprintf("registry.test/r%d", i)
			tags := make([]string, 500)
			for j := range tags {
				tags[j] = fmt.Sprintf("%s-%d", long, j)
			}
			k.listed(repo, "", tags)
			known := k.of(repo, "")
			for _, tag := range tags {
				if known != nil {
					known.set(tag, fmt.Sprintf("sha256:%064d", tagNumber(tag)))
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if used := k.repos.Used(); used > limit {
			t.Errorf("%d bytes of tag digests counted, want at most %d", used, limit)
		}
		if k.repos.Len() == 0 {
			t.Error("nothing kept")
		}
		if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4*limit {
			t.Errorf("the heap grew by %d MiB for a limit of %d MiB", grew>>20, limit>>20)
		}
		runtime.KeepAlive(k)
	})
	t.Run("sessions", func(t *testing.T) {
		if testing.Short() {
			t.Skip("sets up 8,202 sessions through the client's layers, some seconds (more under the race detector)")
		}
		const host = "registry.test"
		c := NewClient(WithConfig(testConfig(t, host)), withBaseTransport(inProcessRegistry{}))
		n := sessionCacheSize + 10
		refs := make([]imageref.Reference, n)
		for i := range refs {
			refs[i] = imageRef(t, fmt.Sprintf("%s/r%d", host, i))
		}
		var wg sync.WaitGroup
		const workers = 4
		for w := range workers {
			wg.Go(func() {
				for i := w; i < n; i += workers {
					if _, err := c.Tags(t.Context(), refs[i], credref.Ref{}); err != nil {
						t.Errorf("%s: %v", refs[i], err)
						return
					}
				}
			})
		}
		wg.Wait()
		if got := c.sessions.Len(); got > sessionCacheSize {
			t.Errorf("%d sessions kept for %d repositories, want at most %d", got, n, sessionCacheSize)
		}
		// The listings went to the client's known digests, bounded too.
		if got := c.known.repos.Used(); got > knownBytes {
			t.Errorf("%d bytes of tag digests kept, want at most %d", got, knownBytes)
		}
	})
}

// tagNumber is a tag's number, for a digest of its own.
func tagNumber(tag string) int {
	n, _ := strconv.Atoi(tag[strings.LastIndexByte(tag, '-')+1:])
	return n
}
