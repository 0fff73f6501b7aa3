package transport

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"time"

	"github.com/image-updater/argocd-image-updater/internal/netguard"
)

// HTTPOption configures NewHTTP.
type HTTPOption func(*tls.Config)

// WithRootCAs trusts the certificates of pool instead of the system's.
func WithRootCAs(pool *x509.CertPool) HTTPOption {
	return func(c *tls.Config) { c.RootCAs = pool }
}

// WithClientCertificate presents cert to servers that ask for one.
func WithClientCertificate(cert tls.Certificate) HTTPOption {
	return func(c *tls.Config) { c.Certificates = []tls.Certificate{cert} }
}

// NewHTTP is the transport under all the layers, with timeouts that keep a
// stuck registry from holding a cycle forever. insecure skips TLS
// verification; the system's roots are trusted otherwise. A request that
// NewHostGuard marked (netguard.PublicOnly) goes through a transport of
// its own whose dialer refuses internal addresses, checked on the address
// dialed, so that a name resolving to an internal address (or resolving
// again to one) is refused too, and a connection kept for the registry is
// never reused for it.
func NewHTTP(insecure bool, opts ...HTTPOption) http.RoundTripper {
	// The host of an image is a tenant's choice: no registry answers at a
	// cloud's metadata address, whatever the entry.
	dialer := &net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second, Control: netguard.MetadataControl}
	return netguard.NewTransport(newHTTP(dialer, insecure, opts), newHTTP(netguard.PublicDialer(dialer), insecure, opts))
}

func newHTTP(dialer *net.Dialer, insecure bool, opts []HTTPOption) *http.Transport {
	tlsConfig := &tls.Config{
		InsecureSkipVerify: insecure,
		MinVersion:         tls.VersionTLS12,
	}
	for _, opt := range opts {
		opt(tlsConfig)
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConfig,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16, // metadata is fetched several at a time
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
