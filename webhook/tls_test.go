package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// writePair writes a certificate and key, dated at, so that a rewrite is
// seen as a change even within the file system's time resolution.
func writePair(t *testing.T, dir string, certPEM, keyPEM []byte, at time.Time) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for f, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, at, at); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// serveTLS serves h with cfg on a loopback port and returns its address.
func serveTLS(t *testing.T, h http.Handler, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// servedIssuer is the issuer of the certificate addr serves, verified
// against roots.
func servedIssuer(t *testing.T, addr string, roots *x509.CertPool) (string, error) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Issuer.CommonName, nil
}

// The endpoint serves the certificate of the files, a renewed one after
// the files change, and keeps the last good one when a rewrite is broken.
func TestCertFilesReload(t *testing.T) {
	dir := t.TempDir()
	first, second := testenv.NewCA(t, "first-ca"), testenv.NewCA(t, "second-ca")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(first.PEM)
	roots.AppendCertsFromPEM(second.PEM)
	start := time.Now().Add(-time.Hour)

	certPEM, keyPEM := first.ServerCertPEM(t)
	certFile, keyFile := writePair(t, dir, certPEM, keyPEM, start)
	certs, err := NewCertFiles(certFile, keyFile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, http.NotFoundHandler(), certs.TLSConfig())

	steps := []struct {
		name       string
		cert, key  []byte
		wantIssuer string
	}{
		{name: "as started", wantIssuer: "first-ca"},
		{name: "renewed", cert: nil, wantIssuer: "second-ca"},
		{name: "broken rewrite keeps the last good one", cert: []byte("not a certificate"), key: []byte("not a key"), wantIssuer: "second-ca"},
	}
	for i, st := range steps {
		if i == 1 {
			st.cert, st.key = second.ServerCertPEM(t)
		}
		if st.cert != nil {
			writePair(t, dir, st.cert, st.key, start.Add(time.Duration(i)*time.Minute))
		}
		got, err := servedIssuer(t, addr, roots)
		if err != nil || got != st.wantIssuer {
			t.Errorf("%s: served a certificate of %q (%v), want %q", st.name, got, err, st.wantIssuer)
		}
	}
}

// A pair that cannot be read stops the start with an error naming it.
func TestNewCertFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewCA(t, "ca")
	certPEM, _ := ca.ServerCertPEM(t)
	_, otherKey := ca.ServerCertPEM(t)
	tests := []struct {
		name      string
		cert, key []byte
		missing   bool
		wantErr   string
	}{
		{name: "missing files", missing: true, wantErr: "no such file"},
		{name: "key of another certificate", cert: certPEM, key: otherKey, wantErr: "tls.crt and key"},
		{name: "not PEM", cert: []byte("x"), key: []byte("y"), wantErr: "tls.crt and key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certFile, keyFile := filepath.Join(dir, "none.crt"), filepath.Join(dir, "none.key")
			if !tt.missing {
				certFile, keyFile = writePair(t, t.TempDir(), tt.cert, tt.key, time.Now())
			}
			_, err := NewCertFiles(certFile, keyFile, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if tt.missing && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("error %v does not wrap the missing file", err)
			}
		})
	}
}
