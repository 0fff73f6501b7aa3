package transport

import (
	"fmt"
	"net/http"

	"golang.org/x/time/rate"
)

// NewRateLimit holds each request until limiter allows it, or the
// request's context ends. Requests that share the limiter share its rate.
func NewRateLimit(next http.RoundTripper, limiter *rate.Limiter) http.RoundTripper {
	return &rateLimit{next: next, limiter: limiter}
}

type rateLimit struct {
	next    http.RoundTripper
	limiter *rate.Limiter
}

func (t *rateLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.limiter.Wait(req.Context()); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("waiting for the rate limit of %s: %w", req.URL.Host, err)
	}
	return t.next.RoundTrip(req)
}
