package transport

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestLimitTransportHonoursContext(t *testing.T) {
	var sent atomic.Int32
	lt := NewRateLimit(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return statusResponse(r, 200), nil
	}), rate.NewLimiter(rate.Every(time.Hour), 1))
	if _, err := lt.RoundTrip(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://registry.test/v2/", nil)); err != nil {
		t.Fatal(err)
	}
	// The bucket is empty for an hour: a cancelled caller must not wait.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := lt.RoundTrip(httptest.NewRequestWithContext(ctx, http.MethodGet, "http://registry.test/v2/", nil))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("want context.Canceled, got %v", err)
	}
	// Nor one whose deadline comes before the next token.
	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := lt.RoundTrip(httptest.NewRequestWithContext(ctx, http.MethodGet, "http://registry.test/v2/", nil)); err == nil {
		t.Error("want an error when the deadline comes before the next token")
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("%d requests went out, want 1", n)
	}
}
