package registry

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/time/rate"

	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/transport"
)

// endpointStack is the HTTP stack of one registry endpoint, shared by every
// repository and credential served by it. From the outside in:
//
//	host guard → metrics → [rate limit] → deadline → body limit → retry →
//	gate → [tag-list scheme] → scheme pin → User-Agent → base transport
//
// The host guard (transport.NewHostGuard) is outermost so that every
// request to another host than the API's, a token realm or a redirect,
// whoever makes it, is checked there before it costs anything else.
// The deadline comes after the rate limit, so that waiting for a slow
// limit is not a timeout, and before the retries, which stop when it
// nears. The gate (transport.Gate: requests in flight, Retry-After) is
// under the retries, so that each attempt waits for it and each 429 or 503
// teaches it; it belongs to the API host and outlives the stack. The
// session adds authentication on top, per repository and credential
// (transport.NewAuth), over the one ping of the endpoint and credentials
// (transport.PingOnce), and go-containerregistry's requests go through it
// as they are.
type endpointStack struct {
	settings stackSettings
	label    string        // the "registry" metrics label
	scheme   string        // of api_url: "http" or "https"
	host     string        // of api_url, with port if any
	limiter  *rate.Limiter // nil: no fixed cap
	gate     *transport.Gate
	rt       http.RoundTripper
}

// stackSettings are the endpoint fields the stack is built from; a
// reloaded configuration that changes them gets a new stack.
type stackSettings struct {
	apiURL   string
	insecure bool
	rps      float64
	tls      string // config.TLS.ID; "" for the defaults
	internal config.Hosts
	hostCA   string // the host's CA file's hash (WithHostCAs); "" for none
	// apiPaths are the prefixes, joined by commas, of the API's paths
	// when it is not a registry's /v2/ (push-time APIs).
	apiPaths string
}

func (c *Client) settingsOf(ep config.Endpoint) stackSettings {
	rps := ep.RateLimit()
	if ep.Limit <= 0 && c.defaultLimit > 0 {
		rps = c.defaultLimit
	}
	s := stackSettings{apiURL: ep.APIURL, insecure: ep.Insecure, rps: rps, internal: ep.InternalHosts}
	if ep.TLS != nil {
		s.tls = ep.TLS.ID
	}
	return s
}

// stackFor returns the stack of ep, building it on first use or when the
// endpoint's settings changed.
func (c *Client) stackFor(ep config.Endpoint) (*endpointStack, error) {
	return c.stackWith(ep, "")
}

// stackWith is stackFor for an API whose own paths on its host start
// with apiPaths (joined by commas; "" for a registry's /v2/).
func (c *Client) stackWith(ep config.Endpoint, apiPaths string) (*endpointStack, error) {
	s := c.settingsOf(ep)
	s.apiPaths = apiPaths
	ca, err := c.hostCAs.forEndpoint(ep)
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", cmp.Or(ep.Prefix, ep.APIURL), err)
	}
	if ca != nil {
		s.hostCA = ca.id
	}
	c.stacksMu.Lock()
	defer c.stacksMu.Unlock()
	if v, ok := c.stacks.Get(ep.Prefix); ok && v.(*endpointStack).settings == s {
		return v.(*endpointStack), nil
	}
	st, err := c.newStack(ep, s, ca)
	if err != nil {
		return nil, err
	}
	c.stacks.Add(ep.Prefix, st)
	return st, nil
}

func (c *Client) newStack(ep config.Endpoint, s stackSettings, ca *hostCA) (*endpointStack, error) {
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
		gate:     c.gateFor(u.Host),
	}
	if s.rps > 0 {
		// A burst of one second's worth lets a short volley (ping, token,
		// first page) go out at once while the average stays at the limit.
		st.limiter = rate.NewLimiter(rate.Limit(s.rps), max(1, int(math.Ceil(s.rps))))
	}
	rt := transport.NewUserAgent(c.endpointTransport(ep, ca), c.userAgent)
	rt = transport.NewSchemePin(rt, u.Scheme, u.Host)
	if seen := libraryScheme(u); seen != u.Scheme {
		rt = &tagListScheme{next: rt, host: u.Host, scheme: seen}
	}
	rt = transport.NewGated(rt, st.gate)
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
	rt = transport.NewBodyLimit(rt, c.bodyLimit)
	rt = transport.NewDeadline(rt, c.requestTimeout)
	if st.limiter != nil {
		rt = transport.NewRateLimit(rt, st.limiter)
	}
	rt = transport.NewMetrics(rt, func(d time.Duration, failed bool) { c.metrics.request(label, d, failed) })
	var paths []string
	if s.apiPaths != "" {
		paths = strings.Split(s.apiPaths, ",")
	}
	st.rt = transport.NewHostGuard(rt, u.Host, ep.InternalHosts.List(), paths...)
	return st, nil
}

// gateFor returns the gate of an API host, the same for every endpoint
// and stack on it; c.stacksMu is held.
func (c *Client) gateFor(host string) *transport.Gate {
	if g, ok := c.gates.Get(host); ok {
		return g.(*transport.Gate)
	}
	// The retry layer's longest wait, when a test shortens it, caps the
	// pause too.
	g := transport.NewGate(transport.WithMaxInFlight(c.maxInFlight), transport.WithMaxPause(c.retryMax))
	c.gates.Add(host, g)
	return g
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

// libraryScheme is the scheme go-containerregistry takes the API at u to
// have: http for an http:// api_url, and also for hosts it guesses are
// local (loopback, private addresses, localhost) whatever api_url says.
func libraryScheme(u *url.URL) string {
	var opts []name.Option
	if u.Scheme == "http" {
		opts = append(opts, name.Insecure)
	}
	reg, err := name.NewRegistry(u.Host, append(opts, name.WeakValidation)...)
	if err != nil {
		return u.Scheme
	}
	return reg.Scheme()
}

// tagListScheme makes the answer to a tag-list request name the request
// with the library's scheme for the host rather than the one it went out
// with. go-containerregistry resolves the next-page link against that
// request and refuses the link unless its scheme is the library's: for an
// https:// api_url on a host the library guesses is local, every page
// after the first would be refused.
type tagListScheme struct {
	next         http.RoundTripper
	host, scheme string
}

func (t *tagListScheme) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.URL.Host != t.host || !strings.HasSuffix(req.URL.Path, "/tags/list") {
		return resp, err
	}
	shown := req.WithContext(req.Context())
	u := *req.URL
	u.Scheme = t.scheme
	shown.URL = &u
	resp.Request = shown
	return resp, nil
}
