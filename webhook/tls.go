package webhook

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// CertFiles serves the endpoint's certificate from a certificate and a key
// file, and reads them again when either changes, so that a renewed
// Secret (cert-manager's, for example) is used without a restart.
type CertFiles struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu      sync.Mutex
	stamp   [2]fileStamp
	current *tls.Certificate
}

// fileStamp tells whether a file changed: Kubernetes replaces a Secret
// volume's files by swapping a symbolic link, which changes both.
type fileStamp struct {
	mod  time.Time
	size int64
}

// NewCertFiles reads the pair once, so that a bad pair stops the start.
func NewCertFiles(certFile, keyFile string, logger *slog.Logger) (*CertFiles, error) {
	c := &CertFiles{certFile: certFile, keyFile: keyFile, logger: logger}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// TLSConfig is the server configuration that serves the files'
// certificate.
func (c *CertFiles) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.getCertificate}
}

func (c *CertFiles) stamps() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, f := range []string{c.certFile, c.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return out, err
		}
		out[i] = fileStamp{mod: st.ModTime(), size: st.Size()}
	}
	return out, nil
}

func (c *CertFiles) load() error {
	stamp, err := c.stamps()
	if err != nil {
		return fmt.Errorf("webhook TLS certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("webhook TLS certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current, c.stamp = &cert, stamp
	return nil
}

// getCertificate costs two stat calls per handshake; a pair that fails to
// load (half written, mismatched) leaves the last good one in use.
func (c *CertFiles) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	stamp, err := c.stamps()
	c.mu.Lock()
	changed := err == nil && stamp != c.stamp
	c.mu.Unlock()
	if changed {
		if err := c.load(); err != nil {
			// Tried again when the files change again, not on every
			// handshake.
			c.mu.Lock()
			c.stamp = stamp
			c.mu.Unlock()
			c.logger.Warn("keeping the previous webhook TLS certificate", "error", err)
		} else {
			c.logger.Info("webhook TLS certificate reloaded", "certFile", c.certFile)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current, nil
}
