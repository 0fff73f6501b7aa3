package registry

import (
	"fmt"
	"io"
	"net/http"
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

// The sessions and the known tag digests a client keeps are bounded by
// their counts, however many repositories the images name: the least
// recently used are dropped.
func TestClientCachesAreBounded(t *testing.T) {
	t.Run("known digests", func(t *testing.T) {
		k := newTagKnowledge()
		for i := range knownReposSize + 10 {
			k.listed(fmt.Sprintf("registry.test/r%d", i), "", []string{"1.0"})
		}
		if got := k.repos.Len(); got > knownReposSize {
			t.Errorf("the digests of %d repositories kept, want at most %d", got, knownReposSize)
		}
	})
	t.Run("sessions", func(t *testing.T) {
		if testing.Short() {
			t.Skip("sets up 8,202 sessions through the client's layers, some seconds (more under the race detector)")
		}
		const host = "registry.test"
		c := NewClient(WithConfig(testConfig(t, host)), withBaseTransport(inProcessRegistry{}))
		n := max(sessionCacheSize, knownReposSize) + 10
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
		c.known.mu.Lock()
		got := c.known.repos.Len()
		c.known.mu.Unlock()
		if got > knownReposSize {
			t.Errorf("the digests of %d repositories kept, want at most %d", got, knownReposSize)
		}
	})
}
