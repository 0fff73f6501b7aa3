package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/image-updater/argocd-image-updater/registry/config"
)

// endpointStack is the HTTP stack of one registry endpoint, shared by every
// repository and credential served by it. From the outside in:
//
//	metrics → rate limit → retry → request shaping → base transport
//
// ggcr's authentication (challenge, token exchange, bearer refresh) wraps
// it per repository and credential. ggcr's own retry layer is never added
// (see newAccess), so retries happen here only and do not multiply.
type endpointStack struct {
	settings stackSettings
	label    string // the "registry" metrics label
	scheme   string // of api_url: "http" or "https"
	host     string // of api_url, with port if any
	limiter  *rate.Limiter
	rt       http.RoundTripper
}

// stackSettings are the endpoint fields the stack is built from; a
// reloaded configuration that changes them gets a new stack.
type stackSettings struct {
	apiURL   string
	insecure bool
	rps      float64
}

func (c *Client) settingsOf(ep config.Endpoint) stackSettings {
	rps := ep.Limit
	if rps <= 0 {
		rps = c.defaultLimit
	}
	return stackSettings{apiURL: ep.APIURL, insecure: ep.Insecure, rps: rps}
}

// stackFor returns the stack of ep, building it on first use or when the
// endpoint's settings changed.
func (c *Client) stackFor(ep config.Endpoint) (*endpointStack, error) {
	s := c.settingsOf(ep)
	c.stacksMu.Lock()
	defer c.stacksMu.Unlock()
	if st, ok := c.stacks[ep.Prefix]; ok && st.settings == s {
		return st, nil
	}
	st, err := c.newStack(ep, s)
	if err != nil {
		return nil, err
	}
	c.stacks[ep.Prefix] = st
	return st, nil
}

func (c *Client) newStack(ep config.Endpoint, s stackSettings) (*endpointStack, error) {
	u, err := url.Parse(ep.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("registry %s: api_url %q is not an absolute http(s) URL", ep.Prefix, ep.APIURL)
	}
	label := ep.Prefix
	if label == "" {
		label = u.Host
	}
	rps := s.rps
	st := &endpointStack{
		settings: s,
		label:    label,
		scheme:   u.Scheme,
		host:     u.Host,
		// A burst of one second's worth lets a short volley (ping, token,
		// first page) go out at once while the average stays at the limit.
		limiter: rate.NewLimiter(rate.Limit(rps), max(1, int(math.Ceil(rps)))),
	}
	var rt http.RoundTripper = &shapeTransport{
		next:      c.baseTransport(ep.Insecure),
		scheme:    u.Scheme,
		host:      u.Host,
		userAgent: c.userAgent,
	}
	rt = &retryTransport{
		next:     rt,
		attempts: c.retryAttempts,
		base:     c.retryBase,
		max:      c.retryMax,
		onRetry: func(req *http.Request, attempt int, delay time.Duration, status int, err error) {
			c.metrics.retry(label)
			c.log.LogAttrs(req.Context(), slog.LevelDebug, "retrying registry request",
				slog.String("registry", label), slog.String("method", req.Method),
				slog.String("path", req.URL.Path), slog.Int("attempt", attempt),
				slog.Int("status", status), slog.Any("error", err), slog.Duration("delay", delay))
		},
	}
	rt = &limitTransport{next: rt, limiter: st.limiter}
	st.rt = &metricsTransport{next: rt, metrics: c.metrics, label: label}
	return st, nil
}

// baseTransport is the caller's transport, or one of two shared
// http.Transports (verifying TLS or not), so that endpoints on the same
// host share connections.
func (c *Client) baseTransport(insecure bool) http.RoundTripper {
	if c.base != nil {
		return c.base
	}
	c.baseOnce.Do(func() {
		c.secureBase = newHTTPTransport(c.rootCAs, false)
		c.insecureBase = newHTTPTransport(c.rootCAs, true)
	})
	if insecure {
		return c.insecureBase
	}
	return c.secureBase
}

func newHTTPTransport(roots *x509.CertPool, insecure bool) *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   15 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSClientConfig: &tls.Config{
			RootCAs:            roots, // nil: the system's roots
			InsecureSkipVerify: insecure,
			MinVersion:         tls.VersionTLS12,
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16, // metadata is fetched several at a time
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second, // a stuck registry must not hold a cycle forever
		ExpectContinueTimeout: time.Second,
	}
}

// metricsTransport counts and times requests; see Metrics for what counts
// as failed.
type metricsTransport struct {
	next    http.RoundTripper
	metrics *Metrics
	label   string
}

func (t *metricsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	if t.metrics == nil {
		return resp, err
	}
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
	t.metrics.request(t.label, time.Since(start), failed)
	return resp, err
}

// limitTransport holds each request until the endpoint's token bucket
// allows it, or the request's context ends.
type limitTransport struct {
	next    http.RoundTripper
	limiter *rate.Limiter
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.limiter.Wait(req.Context()); err != nil {
		closeBody(req)
		return nil, fmt.Errorf("waiting for the rate limit of %s: %w", req.URL.Host, err)
	}
	return t.next.RoundTrip(req)
}

// shapeTransport sends requests for the registry host with the scheme of
// api_url, and sets the User-Agent. Pinning the scheme matters because
// ggcr probes https before http for hosts it guesses are local, and falls
// back to http for them: with the scheme pinned, an http:// endpoint costs
// no failing TLS attempt and an https:// one is never downgraded.
type shapeTransport struct {
	next      http.RoundTripper
	scheme    string
	host      string
	userAgent string
}

func (t *shapeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pin := req.URL.Host == t.host && req.URL.Scheme != t.scheme
	if !pin && (t.userAgent == "" || req.Header.Get("User-Agent") == t.userAgent) {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	if pin {
		r.URL.Scheme = t.scheme
	}
	if t.userAgent != "" {
		r.Header.Set("User-Agent", t.userAgent)
	}
	return t.next.RoundTrip(r)
}

// retryTransport sends a GET or HEAD again after a 429, a 5xx (except 501
// and 505, which will not change) or a connection error, up to attempts
// times in all. It waits for Retry-After when the registry sends one,
// otherwise for an exponential backoff with jitter; both are capped at max.
// Other methods are sent once: their bodies are never replayed.
type retryTransport struct {
	next     http.RoundTripper
	attempts int
	base     time.Duration
	max      time.Duration
	onRetry  func(req *http.Request, attempt int, delay time.Duration, status int, err error)
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !replayable(req) || t.attempts <= 1 {
		return t.next.RoundTrip(req)
	}
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		resp, err := t.next.RoundTrip(req)
		if attempt >= t.attempts || !shouldRetry(ctx, resp, err) {
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
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if t.onRetry != nil {
			t.onRetry(req, attempt, delay, status, err)
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, fmt.Errorf("waiting to retry %s %s: %w", req.Method, req.URL.Redacted(), err)
		}
	}
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
// verification failures and malformed requests, which will not.
func retryableError(err error) bool {
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
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
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

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// checkRedirect allows what http.Client allows, except a redirect from the
// registry to another host that is a loopback, private or link-local
// address: a hostile registry must not make the controller fetch from its
// own network.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if len(via) == 0 || req.URL.Host == via[0].URL.Host {
		return nil
	}
	host := req.URL.Hostname()
	if host == "localhost" {
		return fmt.Errorf("refusing a redirect from %s to %s", via[0].URL.Host, req.URL.Host)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsUnspecified() {
			return fmt.Errorf("refusing a redirect from %s to the internal address %s", via[0].URL.Host, req.URL.Host)
		}
	}
	return nil
}
