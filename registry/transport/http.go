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

// CheckRedirect is an http.Client's redirect policy: what http.Client
// allows, except a redirect from the registry to another host that is a
// loopback, private or link-local address, so that a hostile registry
// cannot make the controller fetch from its own network.
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
