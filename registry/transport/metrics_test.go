package transport

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestMetricsFailures(t *testing.T) {
	for _, tc := range []struct {
		name       string
		authorized bool  // the request carries an Authorization header
		status     int   // the answer, when err is nil
		err        error // the next layer's error
		failed     bool
	}{
		{name: "200", status: 200},
		{name: "challenge before authentication", status: 401},
		{name: "401 to credentials", authorized: true, status: 401, failed: true},
		{name: "404", status: 404, failed: true},
		{name: "503", status: 503, failed: true},
		{name: "network error", err: errors.New("connection refused"), failed: true},
		{name: "cancelled by the caller", err: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var failed bool
			rt := NewMetrics(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if tc.err != nil {
					return nil, tc.err
				}
				return statusResponse(r, tc.status), nil
			}), func(_ time.Duration, f bool) { calls++; failed = f })
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://registry.test/v2/", nil)
			if tc.authorized {
				req.Header.Set("Authorization", "Bearer token")
			}
			_, _ = rt.RoundTrip(req)
			if calls != 1 || failed != tc.failed {
				t.Errorf("recorded %d times, failed=%v; want once, failed=%v", calls, failed, tc.failed)
			}
		})
	}
}
