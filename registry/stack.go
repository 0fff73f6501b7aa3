package registry

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/time/rate"

	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/transport"
)

// endpointStack is the HTTP stack of one registry endpoint, shared by every
// repository and credential served by it. From the outside in:
//
//	metrics → rate limit → retry → scheme pin → User-Agent → base transport
//
// The session adds authentication on top, per repository and credential
// (transport.NewAuth).
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
	tls      string // config.TLS.ID; "" for the defaults
}

func (c *Client) settingsOf(ep config.Endpoint) stackSettings {
	rps := ep.Limit
	if rps <= 0 {
		rps = c.defaultLimit
	}
	s := stackSettings{apiURL: ep.APIURL, insecure: ep.Insecure, rps: rps}
	if ep.TLS != nil {
		s.tls = ep.TLS.ID
	}
	return s
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
	st := &endpointStack{
		settings: s,
		label:    label,
		scheme:   u.Scheme,
		host:     u.Host,
		// A burst of one second's worth lets a short volley (ping, token,
		// first page) go out at once while the average stays at the limit.
		limiter: rate.NewLimiter(rate.Limit(s.rps), max(1, int(math.Ceil(s.rps)))),
	}
	rt := transport.NewUserAgent(c.endpointTransport(ep), c.userAgent)
	rt = transport.NewSchemePin(rt, u.Scheme, u.Host)
	rt = transport.NewRetry(rt,
		transport.WithAttempts(c.retryAttempts),
		transport.WithBackoff(c.retryBase, c.retryMax),
		transport.WithRetryHook(func(req *http.Request, attempt int, delay time.Duration, status int, err error) {
			c.metrics.retry(label)
			c.log.LogAttrs(req.Context(), slog.LevelDebug, "retrying registry request",
				slog.String("registry", label), slog.String("method", req.Method),
				slog.String("path", req.URL.Path), slog.Int("attempt", attempt),
				slog.Int("status", status), slog.Any("error", err), slog.Duration("delay", delay))
		}))
	rt = transport.NewRateLimit(rt, st.limiter)
	st.rt = transport.NewMetrics(rt, func(d time.Duration, failed bool) { c.metrics.request(label, d, failed) })
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
		c.secureBase = transport.NewHTTP(false)
		c.insecureBase = transport.NewHTTP(true)
	})
	if insecure {
		return c.insecureBase
	}
	return c.secureBase
}
