package transport

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// NewMetrics calls record after each request with the time it took and
// whether it failed: a network error (other than the caller cancelling),
// or a status of 400 or more, except a 401 to a request without an
// Authorization header, which is the challenge that starts every
// authenticated session.
func NewMetrics(next http.RoundTripper, record func(elapsed time.Duration, failed bool)) http.RoundTripper {
	return &metrics{next: next, record: record}
}

type metrics struct {
	next   http.RoundTripper
	record func(time.Duration, bool)
}

func (t *metrics) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	var failed bool
	switch {
	case err != nil:
		// A request abandoned by its caller (the losing half of ggcr's
		// http/https ping race, a cancelled cycle) says nothing about the
		// registry.
		failed = !errors.Is(err, context.Canceled)
	case resp.StatusCode == http.StatusUnauthorized:
		failed = req.Header.Get("Authorization") != ""
	default:
		failed = resp.StatusCode >= 400
	}
	t.record(time.Since(start), failed)
	return resp, err
}
