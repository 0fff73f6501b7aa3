package transport

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

var errStopped = errors.New("stopped by the scan")

func TestBodyLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limit    Limit
		bodies   []string // answered in turn, one request each
		announce bool     // with Content-Length
		wantErr  string   // of the last body; "": all read whole
	}{
		{name: "at the limit", limit: Limit{What: "manifest", Bytes: 4}, bodies: []string{"1234"}},
		{name: "one byte over", limit: Limit{What: "manifest", Bytes: 4}, bodies: []string{"12345"},
			wantErr: "GET http://registry.test/v2/app/manifests/1.0: the manifest is larger than 4 bytes, the most the client reads"},
		{name: "announced over", limit: Limit{What: "manifest", Bytes: 1 << 20}, bodies: []string{strings.Repeat("x", 1<<20+1)}, announce: true,
			wantErr: "the manifest is larger than 1 MiB, the most the client reads"},
		{name: "budget shared by bodies", limit: Limit{What: "tag list", Bytes: 4, Budget: NewBudget(6)}, bodies: []string{"1234", "1234"},
			wantErr: "GET http://registry.test/v2/app/manifests/1.0: the tag list is larger than 6 bytes in all, the most the client reads"},
		{name: "no limit", bodies: []string{strings.Repeat("x", 1<<20)}},
		{name: "scanned", limit: Limit{Scan: func(b []byte) error {
			if strings.Contains(string(b), "!") {
				return errStopped
			}
			return nil
		}}, bodies: []string{"ok", "not !ok"}, wantErr: errStopped.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			rt := NewBodyLimit(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp := statusResponse(r, 200)
				resp.Body = io.NopCloser(strings.NewReader(tc.bodies[i]))
				resp.ContentLength = -1
				if tc.announce {
					resp.ContentLength = int64(len(tc.bodies[i]))
				}
				i++
				return resp, nil
			}), func(*http.Request) Limit { return tc.limit })
			var err error
			for range tc.bodies {
				var resp *http.Response
				resp, err = rt.RoundTrip(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://registry.test/v2/app/manifests/1.0", nil))
				if err != nil {
					break
				}
				var b []byte
				b, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					if tc.limit.Bytes > 0 && int64(len(b)) > tc.limit.Bytes {
						t.Errorf("read %d bytes past the limit", len(b))
					}
					break
				}
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if tc.limit.Scan != nil {
				if err != errStopped {
					t.Errorf("got %v, want the scan's error", err)
				}
				return
			}
			var tl *BodyTooLargeError
			if !errors.As(err, &tl) || !errors.Is(err, ErrBodyTooLarge) || err.Error() != tc.wantErr {
				t.Errorf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// A redirected request keeps the limit of the request that started the
// chain: a blob sent from a storage host is still a blob.
func TestBodyLimitFollowsRedirects(t *testing.T) {
	var asked string
	rt := NewBodyLimit(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return statusResponse(r, 200), nil
	}), func(r *http.Request) Limit { asked = r.URL.String(); return Limit{} })
	first := httptest.NewRequest(http.MethodGet, "https://registry.test/v2/app/blobs/sha256:abc", nil)
	second := httptest.NewRequest(http.MethodGet, "https://storage.test/signed/abc", nil)
	second.Response = &http.Response{StatusCode: http.StatusTemporaryRedirect, Request: first}
	if _, err := rt.RoundTrip(second); err != nil {
		t.Fatal(err)
	}
	if asked != first.URL.String() {
		t.Errorf("the limit was asked for %s, want the first request %s", asked, first.URL)
	}
}
