package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// NewHTTP is the transport under all the layers, with timeouts that keep a
// stuck registry from holding a cycle forever. insecure skips TLS
// verification; the system's roots are trusted otherwise.
func NewHTTP(insecure bool) *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   15 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
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
	if req.Response != nil {
		var via []*http.Request
		for r := req; r.Response != nil && r.Response.Request != nil; {
			r = r.Response.Request
			via = append([]*http.Request{r}, via...)
		}
		if err := CheckRedirect(req, via); err != nil {
			return nil, err
		}
	}
	return t.next.RoundTrip(req)
}

// CheckRedirect is a redirect policy: what http.Client allows by default
// (10 redirects), except a redirect from the registry to another host
// that is a loopback, private or link-local address, so that a hostile
// registry cannot make the controller fetch from its own network.
func CheckRedirect(req *http.Request, via []*http.Request) error {
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
