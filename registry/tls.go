package registry

import (
	"net/http"

	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/transport"
)

// endpointTransport is the transport under ep's stack: one of the shared
// ones, or, for an entry with CAs or a client certificate of its own, a
// transport of its own, so that neither reaches another registry.
// insecure: true still skips verification, whatever CAs the entry names.
func (c *Client) endpointTransport(ep config.Endpoint) http.RoundTripper {
	if ep.TLS == nil || c.base != nil {
		return c.baseTransport(ep.Insecure)
	}
	var opts []transport.HTTPOption
	if ep.TLS.RootCAs != nil {
		opts = append(opts, transport.WithRootCAs(ep.TLS.RootCAs))
	}
	if ep.TLS.Certificate != nil {
		opts = append(opts, transport.WithClientCertificate(*ep.TLS.Certificate))
	}
	return transport.NewHTTP(ep.Insecure, opts...)
}
