package transport

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// TimeoutError is the error of a request that NewDeadline stopped. It
// wraps context.DeadlineExceeded and is a net.Error that timed out, so
// callers and retry policies treat it as any other timeout.
type TimeoutError struct {
	Method string
	URL    string // redacted; "" when RoundTrip returns it, as http.Client's *url.Error names the request
	After  time.Duration
}

func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("no complete answer within %s", e.After)
	if e.URL == "" {
		return msg
	}
	return e.Method + " " + e.URL + ": " + msg
}

func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }
func (e *TimeoutError) Timeout() bool { return true }

// NewDeadline gives each request at most d from the moment it is sent
// until its response body is closed: a registry that sends headers and
// then stalls in the body is otherwise waited for as long as the caller's
// context lasts, which may be for ever. Layers below see the deadline in
// the request's context (the retry layer does not wait past it). When the
// deadline passes, the round trip or the body's Read fails with a
// *TimeoutError. A non-positive d sets no deadline.
func NewDeadline(next http.RoundTripper, d time.Duration) http.RoundTripper {
	if d <= 0 {
		return next
	}
	return &deadline{next: next, d: d}
}

type deadline struct {
	next http.RoundTripper
	d    time.Duration
}

func (t *deadline) RoundTrip(req *http.Request) (*http.Response, error) {
	cause := &TimeoutError{Method: req.Method, URL: req.URL.Redacted(), After: t.d}
	ctx, cancel := context.WithTimeoutCause(req.Context(), t.d, cause)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		timedOut := context.Cause(ctx) == error(cause)
		cancel()
		if timedOut {
			// http.Client names the request in its *url.Error.
			return nil, &TimeoutError{After: t.d}
		}
		return nil, err
	}
	resp.Body = &deadlineBody{ReadCloser: resp.Body, ctx: ctx, cancel: cancel, cause: cause}
	return resp, nil
}

// deadlineBody ends the request's context when the body is closed, and
// reports a read cut short by the deadline as the timeout it is.
type deadlineBody struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelFunc
	cause  *TimeoutError
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && context.Cause(b.ctx) == error(b.cause) {
		return n, b.cause
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
