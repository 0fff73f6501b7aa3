package registry

import (
	"crypto/x509"
	"net/http"

	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/transport"
)

// endpointTransport is the transport under ep's stack: one of the shared
// ones, or, for an entry with CAs or a client certificate of its own, or
// a host with a CA file (ca, WithHostCAs), a transport of its own, so that
// neither reaches another registry. insecure: true still skips
// verification, whatever CAs the entry names.
func (c *Client) endpointTransport(ep config.Endpoint, ca *hostCA) http.RoundTripper {
	if (ep.TLS == nil && ca == nil) || c.base != nil {
		return c.baseTransport(ep.Insecure)
	}
	var opts []transport.HTTPOption
	var roots *x509.CertPool
	if ep.TLS != nil {
		roots = ep.TLS.RootCAs
		if ep.TLS.Certificate != nil {
			opts = append(opts, transport.WithClientCertificate(*ep.TLS.Certificate))
		}
	}
	if ca != nil {
		if roots == nil {
			var err error
			if roots, err = x509.SystemCertPool(); err != nil {
				roots = x509.NewCertPool()
			}
		} else {
			roots = roots.Clone()
		}
		roots.AppendCertsFromPEM(ca.pem)
	}
	if roots != nil {
		opts = append(opts, transport.WithRootCAs(roots))
	}
	return transport.NewHTTP(ep.Insecure, opts...)
}
