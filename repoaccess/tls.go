package repoaccess

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/image-updater/argocd-image-updater/internal/netguard"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
)

// TLSCertsConfigMap holds Argo CD's trusted certificates for HTTPS
// servers: each key is a server name without port, each value PEM.
const TLSCertsConfigMap = "argocd-tls-certs-cm"

// tlsRoots returns the PEM certificates Argo CD trusts for host: "" when
// the ConfigMap has no entry for it, which means the system's roots.
func (r *Resolver) tlsRoots(ctx context.Context, host string) (string, error) {
	r.tlsOnce.Do(func() { r.tlsCerts, r.tlsErr = r.loadTLSCerts(ctx) })
	if r.tlsErr != nil {
		return "", r.tlsErr
	}
	key, err := repourl.CanonicalHost(host)
	if err != nil {
		return "", err
	}
	pemData, ok := r.tlsCerts[key]
	if ok && pemData == "" {
		return "", fmt.Errorf("key %s of ConfigMap %s/%s holds no PEM certificate", host, r.namespace, TLSCertsConfigMap)
	}
	return pemData, nil
}

func (r *Resolver) loadTLSCerts(ctx context.Context) (map[string]string, error) {
	cm, err := r.lister.ConfigMap(ctx, r.namespace, TLSCertsConfigMap)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read TLS certificates from ConfigMap %s/%s: %w", r.namespace, TLSCertsConfigMap, err)
	}
	// Keyed by the host as compared; a key that is no host name serves
	// no host.
	certs := make(map[string]string, len(cm.Data))
	for host, pemData := range cm.Data {
		if key, err := repourl.CanonicalHost(host); err == nil {
			certs[key] = pemData
		}
	}
	return certs, nil
}

// HTTPTransport is the HTTP transport for host (without port) with Argo
// CD's repository credentials c, set up as Argo CD sets up its own:
//   - the certificates of argocd-tls-certs-cm for the server's host are
//     the only trusted roots when there are any, else the system's;
//   - the client certificate of the Secret (tlsClientCertData and
//     tlsClientCertKey) is sent whenever the server asks for one;
//   - insecure skips verification, proxy replaces the environment's proxy.
//
// With KeepTransports, a transport built before for the same settings is
// given again, its connections with it.
func (r *Resolver) HTTPTransport(ctx context.Context, host string, c Credentials) (*http.Transport, error) {
	roots := ""
	if !c.Insecure {
		var err error
		if roots, err = r.tlsRoots(ctx, host); err != nil {
			return nil, err
		}
	}
	build := func() (*http.Transport, error) { return r.newHTTPTransport(host, c, roots) }
	if r.transports == nil {
		return build()
	}
	return r.transports.get(transportKey(host, c, roots), build)
}

// newHTTPTransport builds HTTPTransport's transport, trusting the PEM
// certificates of roots alone ("": the system's roots).
func (r *Resolver) newHTTPTransport(host string, c Credentials, roots string) (*http.Transport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A repository URL is a tenant's choice: no git server answers at a
	// cloud's metadata address.
	tr.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: netguard.MetadataControl}).DialContext
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	tr.TLSClientConfig = cfg
	if c.Insecure {
		cfg.InsecureSkipVerify = true
	} else if roots != "" {
		// Also for http: a redirect may move to https on the same host.
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(roots)) {
			return nil, fmt.Errorf("key %s of ConfigMap %s/%s holds no PEM certificate", host, r.namespace, TLSCertsConfigMap)
		}
		cfg.RootCAs = pool
	}
	if c.TLSClientCert != "" || c.TLSClientKey != "" {
		if c.TLSClientCert == "" || c.TLSClientKey == "" {
			return nil, fmt.Errorf("%s has only one of tlsClientCertData and tlsClientCertKey", c.Source)
		}
		cert, err := tls.X509KeyPair([]byte(c.TLSClientCert), []byte(c.TLSClientKey))
		if err != nil {
			// The parser's errors describe the PEM, never the key.
			return nil, fmt.Errorf("the TLS client certificate in %s cannot be used: %w", c.Source, err)
		}
		// Sent even when the server's list of acceptable CAs does not name
		// its issuer, as Argo CD does: servers often send no list.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	if c.Proxy != "" {
		p, err := url.Parse(c.Proxy)
		if err != nil || p.Host == "" {
			return nil, fmt.Errorf("the proxy of %s is not a URL", c.Source)
		}
		tr.Proxy = http.ProxyURL(p)
	}
	return tr, nil
}
