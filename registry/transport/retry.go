package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/internal/netguard"
	"github.com/image-updater/argocd-image-updater/internal/transient"
)

// Retry defaults: a request is tried four times in all, after backoffs
// starting at 200ms and never longer than 10s.
const (
	defaultAttempts  = 4
	defaultBaseDelay = 200 * time.Millisecond
	defaultMaxDelay  = 10 * time.Second
)

// defaultReadAhead is how much of a successful answer's body the retry
// layer reads before it hands the answer on, so that a body cut short
// (a reset, a proxy that gave up) is retried like a failed request. A tag
// list page or a manifest fits; a larger body is handed on as it streams,
// and a cut past this point is the caller's error. The caller would read
// the body whole anyway, so reading it first costs no more memory.
const defaultReadAhead = 4 << 20

// maxDrained is how much of a failed answer's body is read before it is
// closed to retry: enough for an error message, so that the connection can
// be reused, and no more, whatever the registry sends.
const maxDrained = 64 << 10

// WithReadAhead sets how much of a successful answer's body is read, and
// retried when cut short, before the answer is handed on; 0 reads none.
func WithReadAhead(n int64) RetryOption {
	return func(r *retry) { r.readAhead = max(n, 0) }
}

// RetryOption configures NewRetry.
type RetryOption func(*retry)

// WithAttempts sets how often a request is tried in all; 1 means no retry.
// A non-positive value keeps the default.
func WithAttempts(n int) RetryOption {
	return func(r *retry) {
		if n > 0 {
			r.attempts = n
		}
	}
}

// WithBackoff sets the first backoff delay and the longest wait, which also
// caps a registry's Retry-After. Non-positive values keep the defaults.
func WithBackoff(base, max time.Duration) RetryOption {
	return func(r *retry) {
		if base > 0 {
			r.base = base
		}
		if max > 0 {
			r.max = max
		}
	}
}

// RetryHook is told about each retry before its wait: the attempt that
// failed (1 for the first), the wait, and the status (0 when there was no
// answer) or error of that attempt.
type RetryHook func(req *http.Request, attempt int, delay time.Duration, status int, err error)

// WithRetryHook calls f before each retry, for logs and metrics.
func WithRetryHook(f RetryHook) RetryOption {
	return func(r *retry) { r.hook = f }
}

// NewRetry sends a GET or HEAD again after a 429, a 5xx (except 501 and
// 505, which will not change) or a connection error. It waits for
// Retry-After when the registry sends one, otherwise for an exponential
// backoff with jitter; both are capped. It gives the answer back at once
// when the caller's deadline would pass during the wait. Other methods are
// sent once: their bodies are never replayed.
func NewRetry(next http.RoundTripper, opts ...RetryOption) http.RoundTripper {
	r := &retry{next: next, attempts: defaultAttempts, base: defaultBaseDelay, max: defaultMaxDelay, readAhead: defaultReadAhead}
	for _, opt := range opts {
		opt(r)
	}
	r.base = min(r.base, r.max)
	return r
}

type retry struct {
	next     http.RoundTripper
	attempts int
	base     time.Duration
	max      time.Duration
	hook     RetryHook
	// readAhead: see WithReadAhead.
	readAhead int64
}

func (t *retry) RoundTrip(req *http.Request) (*http.Response, error) {
	if !replayable(req) || t.attempts <= 1 {
		return t.next.RoundTrip(req)
	}
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		resp, err := t.next.RoundTrip(req)
		last := attempt >= t.attempts
		if err == nil && !last {
			resp, err = t.readAheadBody(req, resp)
		}
		if last || !shouldRetry(ctx, resp, err) {
			return resp, err
		}
		delay := backoff(attempt, t.base, t.max)
		status := 0
		if resp != nil {
			status = resp.StatusCode
			if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				delay = min(d, t.max)
			}
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < delay {
			// The caller would be gone before the retry; give it the
			// registry's answer now.
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrained))
			resp.Body.Close()
		}
		if t.hook != nil {
			t.hook(req, attempt, delay, status, err)
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, fmt.Errorf("waiting to retry %s %s: %w", req.Method, req.URL.Redacted(), err)
		}
	}
}

// readAheadBody reads the start of a successful answer's body (see
// WithReadAhead). A body cut short becomes the attempt's error, so that
// shouldRetry sees it; a whole body is handed on from memory, the rest of a
// longer one from the connection after what was read.
func (t *retry) readAheadBody(req *http.Request, resp *http.Response) (*http.Response, error) {
	if t.readAhead == 0 || req.Method != http.MethodGet || resp.StatusCode < 200 || resp.StatusCode > 299 || resp.Body == nil {
		return resp, nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, t.readAhead+1))
	if err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("reading the answer to %s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	if int64(len(buf)) <= t.readAhead {
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(buf))
		return resp, nil
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
	return resp, nil
}

func replayable(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		(req.Body == nil || req.Body == http.NoBody)
}

func shouldRetry(ctx context.Context, resp *http.Response, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		return retryableError(err)
	}
	switch c := resp.StatusCode; {
	case c == http.StatusTooManyRequests:
		return true
	case c == http.StatusNotImplemented || c == http.StatusHTTPVersionNotSupported:
		return false
	default:
		return c >= 500 && c <= 599
	}
}

// retryableError tells connection trouble, which may pass, from TLS
// verification failures, malformed requests and refused internal
// addresses, which will not.
func retryableError(err error) bool {
	if errors.Is(err, netguard.ErrInternal) {
		return false
	}
	var (
		certErr     *tls.CertificateVerificationError
		recordErr   tls.RecordHeaderError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidErr  x509.CertificateInvalidError
	)
	if errors.As(err, &certErr) || errors.As(err, &recordErr) || errors.As(err, &unknownAuth) ||
		errors.As(err, &hostErr) || errors.As(err, &invalidErr) {
		return false
	}
	// An attempt that timed out is retried whatever its cause: the
	// caller's own deadline is checked before (shouldRetry).
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	return transient.Network(err)
}

// backoff is base·2^(attempt-1), capped at max, with "equal jitter": a
// random point in its upper half, so that clients refused together do not
// come back together.
func backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(math.MaxInt64/time.Second) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(secs) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
