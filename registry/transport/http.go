package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// NewHTTP is the transport under all the layers, with timeouts that keep a
// stuck registry from holding a cycle forever. insecure skips TLS
// verification; the system's roots are trusted otherwise.
func NewHTTP(insecure bool) *http.Transport {
	dialer := &net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}
	// A redirect to another host may only reach public addresses, checked
	// on the address dialed, so that a name resolving to an internal
	// address (or resolving again to one) is refused too.
	public := &net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second, Control: refuseInternal}
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if ctx.Value(publicOnlyKey{}) != nil {
				return public.DialContext(ctx, network, addr)
			}
			return dialer.DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{
			InsecureSkipVerify: insecure,
			MinVersion:         tls.VersionTLS12,
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16, // metadata is fetched several at a time
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// NewRedirectGuard applies CheckRedirect to each request that follows a
// redirect. The policy sits in the transport rather than in an
// http.Client because the client that follows redirects is
// go-containerregistry's, whose own policy sets no bound on their number
// and lets names such as localhost through.
func NewRedirectGuard(next http.RoundTripper) http.RoundTripper {
	return &redirectGuard{next: next}
}

type redirectGuard struct{ next http.RoundTripper }

func (t *redirectGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Response == nil {
		return t.next.RoundTrip(req)
	}
	var via []*http.Request
	for r := req; r.Response != nil && r.Response.Request != nil; {
		r = r.Response.Request
		via = append([]*http.Request{r}, via...)
	}
	if err := CheckRedirect(req, via); err != nil {
		return nil, err
	}
	if req.URL.Host == via[0].URL.Host {
		return t.next.RoundTrip(req)
	}
	// Through a proxy, the proxy is what is dialed, and decides.
	if proxy, err := http.ProxyFromEnvironment(req); err == nil && proxy == nil {
		req = req.WithContext(context.WithValue(req.Context(), publicOnlyKey{}, true))
	}
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode >= 300 {
		// Another host's refusal is not quoted in errors, which reach
		// events the Application's owner reads: it may be an internal
		// service's answer.
		_ = resp.Body.Close()
		resp.Body = http.NoBody
		resp.ContentLength = 0
	}
	return resp, err
}

// publicOnlyKey marks a request whose connection must reach a public
// address.
type publicOnlyKey struct{}

// refuseInternal is a dialer's Control: no loopback, private, link-local
// or unspecified address.
func refuseInternal(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(host); err == nil && internal(a) {
		return fmt.Errorf("refusing to connect to the internal address %s after a redirect", host)
	}
	return nil
}

func internal(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified()
}

// CheckRedirect is a redirect policy: what http.Client allows by default
// (10 redirects), except a redirect from the registry to another host
// that is a loopback, private or link-local address, or a name of the
// cluster's or the machine's own (localhost, a name without a dot,
// *.svc, *.cluster.local, *.internal, *.local), so that a hostile registry
// cannot make the controller fetch from its own network. Names resolving
// to such addresses are refused when dialed (NewHTTP).
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if len(via) == 0 || req.URL.Host == via[0].URL.Host {
		return nil
	}
	host := strings.TrimSuffix(strings.ToLower(req.URL.Hostname()), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		if internal(a) {
			return fmt.Errorf("refusing a redirect from %s to the internal address %s", via[0].URL.Host, req.URL.Host)
		}
		return nil
	}
	if !strings.Contains(host, ".") || host == "localhost" || hasAnySuffix(host, ".localhost", ".svc", ".cluster.local", ".internal", ".local") {
		return fmt.Errorf("refusing a redirect from %s to the internal name %s", via[0].URL.Host, req.URL.Host)
	}
	return nil
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, suf := range suffixes {
		if strings.HasSuffix(s, suf) {
			return true
		}
	}
	return false
}
