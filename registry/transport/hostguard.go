package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/internal/netguard"
)

// maxRedirects is the most redirects followed in a row, as http.Client
// allows by default.
const maxRedirects = 10

// maxTokenAnswer bounds a token server's answer, as go-containerregistry
// does.
const maxTokenAnswer = 64 << 10

// NewHostGuard guards the requests of one registry endpoint whose API is
// at host (api_url's host, with its port if it has one). Being the
// outermost layer of the endpoint's stack, it sees every request made for
// the endpoint, by the client or by go-containerregistry: the API's own,
// the token exchange at the realm the registry names, the redirects of
// either. A request to another host than the API's (a realm, a redirect
// target), unless allowed names it (host or host:port, the entry's
// internal_hosts):
//
//   - is refused when it names an internal host (netguard.InternalHost);
//   - may only connect to a public address (netguard.PublicOnly, which
//     NewHTTP's dialer enforces), unless a proxy carries it;
//   - has the body of an answer other than 2xx dropped, so that another
//     host's answer, perhaps an internal service's, is never quoted in
//     errors and events, which the Application's owner reads.
//
// Whatever the host, the 2xx answer of a token exchange (a request that
// started at another host, or outside /v2/ on the API's own) is read
// within 64 KiB and passed on as its token fields alone: an answer without
// a token fails without being quoted. An eleventh redirect in a row is
// refused. apiPaths, when given, are the prefixes of the API's own paths
// on its host in place of /v2/ (the APIs beside a registry's that give
// push times).
func NewHostGuard(next http.RoundTripper, host string, allowed []string, apiPaths ...string) http.RoundTripper {
	if len(apiPaths) == 0 {
		apiPaths = []string{"/v2/"}
	}
	g := &hostGuard{next: next, host: host, own: parseHostPattern(host), apiPaths: apiPaths}
	for _, a := range allowed {
		g.allowed = append(g.allowed, parseHostPattern(a))
	}
	return g
}

type hostGuard struct {
	next     http.RoundTripper
	host     string // for errors
	own      hostPattern
	allowed  []hostPattern
	apiPaths []string
}

// hostPattern is a host name or address, in lower case without brackets
// or final dot, and a port ("": any).
type hostPattern struct{ name, port string }

func parseHostPattern(s string) hostPattern {
	s = strings.ToLower(s)
	if name, port, err := net.SplitHostPort(s); err == nil {
		return hostPattern{strings.TrimSuffix(name, "."), port}
	}
	return hostPattern{strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), "."), ""}
}

// matches tells whether u is on the pattern's host; a port left out on
// either side matches the default port of u's scheme.
func (p hostPattern) matches(u *url.URL, anyPort bool) bool {
	if strings.TrimSuffix(strings.ToLower(u.Hostname()), ".") != p.name {
		return false
	}
	if anyPort && p.port == "" {
		return true
	}
	port, def := u.Port(), defaultPort(u.Scheme)
	return port == p.port || port == "" && p.port == def || p.port == "" && port == def
}

func defaultPort(scheme string) string {
	if scheme == "http" {
		return "80"
	}
	return "443"
}

func (g *hostGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	origin := Origin(req)
	if req != origin {
		n := 0
		for r := req; r.Response != nil && r.Response.Request != nil; r = r.Response.Request {
			n++
		}
		if n >= maxRedirects {
			return nil, fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
	}
	other := !g.own.matches(req.URL, false)
	if other && !g.allows(req.URL) {
		if netguard.InternalHost(req.URL.Hostname()) {
			return nil, g.refused(&netguard.RefusedError{Host: req.URL.Host, Name: true})
		}
		// Through a proxy, the proxy is what is dialed, and decides.
		if proxy, err := http.ProxyFromEnvironment(req); err == nil && proxy == nil {
			req = req.WithContext(netguard.PublicOnly(req.Context()))
		}
	}
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		if errors.Is(err, netguard.ErrInternal) {
			err = g.refused(err)
		}
		return nil, err
	}
	switch {
	case other && resp.StatusCode >= 300:
		_ = resp.Body.Close()
		resp.Body, resp.ContentLength = http.NoBody, 0
	case resp.StatusCode < 300 && req.Method != http.MethodHead && g.tokenExchange(origin):
		if err := checkToken(req.URL.Host, resp); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

func (g *hostGuard) allows(u *url.URL) bool {
	for _, p := range g.allowed {
		if p.matches(u, true) {
			return true
		}
	}
	return false
}

// tokenExchange tells whether a chain of requests that began with origin
// fetches a token: the API's requests are those under its paths (/v2/) on
// its own host.
func (g *hostGuard) tokenExchange(origin *http.Request) bool {
	if !g.own.matches(origin.URL, false) {
		return true
	}
	for _, p := range g.apiPaths {
		if strings.HasPrefix(origin.URL.Path, p) {
			return false
		}
	}
	return true
}

func (g *hostGuard) refused(err error) error {
	return fmt.Errorf("%w, which the registry at %s named as its token server or in a redirect (internal_hosts of its registries.conf entry lists the internal hosts it may name)", err, g.host)
}

// checkToken replaces a token answer's body by its token fields, or fails
// when it holds no token. go-containerregistry would quote the whole
// answer in its error.
func checkToken(host string, resp *http.Response) error {
	body, err := bounded.ReadAll(resp.Body, maxTokenAnswer, "token answer")
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("reading the answer of the token server %s: %w", host, err)
	}
	var tok ggcr.Token
	if json.Unmarshal(body, &tok) != nil || (tok.Token == "" && tok.AccessToken == "") {
		return fmt.Errorf("the token server %s answered %s with no token the client can read", host, resp.Status)
	}
	b, err := json.Marshal(tok)
	if err != nil {
		return err
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	resp.Header.Del("Content-Length")
	return nil
}
