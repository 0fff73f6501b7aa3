package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/registry/transport"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// Against the real registry, with an entry that sets no limit: nothing
// waits for a rate, but no more requests than the host's window wait for
// an answer at once, however many listings are asked for together.
func TestRequestsInFlightBoundedWithoutLimit(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithoutAuth())
	const repos = 12
	for i := range repos {
		reg.PushTags(t, fmt.Sprintf("app%d", i), []string{"v1"})
	}
	var inFlight, peak atomic.Int32
	// The first requests are held until the window is full, so that a
	// window that let more through would show it.
	full := make(chan struct{})
	var fullOnce sync.Once
	rec := newRecorder()
	rec.setHold(func(r *http.Request) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if n >= 3 {
			fullOnce.Do(func() { close(full) })
		}
		select {
		case <-full:
		case <-time.After(10 * time.Second):
		}
		inFlight.Add(-1)
	})
	c := NewClient(WithConfig(testConfig(t, reg.Host)), withBaseTransport(rec), WithMaxInFlight(3))
	var wg sync.WaitGroup
	for i := range repos {
		wg.Go(func() {
			if _, err := c.Tags(t.Context(), imageRef(t, fmt.Sprintf("%s/app%d", reg.Host, i)), credref.Ref{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p != 3 {
		t.Errorf("at most %d requests in flight, want 3", p)
	}
}

// A registry that answers 429 with a Retry-After is left alone until then,
// by the calls of later cycles too: they fail at once, naming the pause,
// when their own deadline comes first, and the registry does not see them.
func TestRetryAfterRememberedAcrossCalls(t *testing.T) {
	var listings atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/tags/list") {
			listings.Add(1)
			w.Header().Set("Retry-After", "600")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK) // the API version check
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	// One attempt per call, so that the first call ends with the 429; the
	// request timeout (60 s) is the deadline the pause is weighed against.
	c := NewClient(WithConfig(testConfig(t, host)), withRetry(1, 0, 0))
	ref := imageRef(t, host+"/app")
	call := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := c.Tags(ctx, ref, credref.Ref{})
		return err
	}

	err := call()
	var e *Error
	if !errors.As(err, &e) || e.StatusCode() != http.StatusTooManyRequests {
		t.Fatalf("first listing: %v, want the registry's 429", err)
	}
	err = call()
	if !errors.Is(err, transport.ErrRegistryPaused) {
		t.Fatalf("next listing: %v, want ErrRegistryPaused", err)
	}
	for _, want := range []string{"list tags of " + host + "/app", "Retry-After until"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if n := listings.Load(); n != 1 {
		t.Errorf("the registry saw %d listings, want 1", n)
	}
}
