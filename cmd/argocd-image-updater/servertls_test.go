package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// The TLS settings (--tlsminversion, --tlsmaxversion, --tlsciphers,
// --enable-http2, or the variables v1.3.0's install fills from the
// ConfigMap) hold on every HTTPS server the controller runs: the webhook
// endpoint and the secure metrics.
func TestServerTLSSettings(t *testing.T) {
	t.Parallel()
	w := newControllerWorld(t)
	ca := testenv.NewCA(t, "webhook-ca")
	certPEM, keyPEM := ca.ServerCertPEM(t)
	dir := t.TempDir()
	for name, b := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Both servers' keys are ECDSA keys. The list set below leaves
	// ChaCha20 out, and keeps the AES-128 suite HTTP/2 needs.
	chacha, aes256 := tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
	suites := tls.CipherSuiteName(aes256) + ":" + tls.CipherSuiteName(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)
	type client struct {
		name    string
		cfg     *tls.Config
		refused bool
		version uint16
		suite   uint16 // 0: not checked
		proto   string
	}
	h2 := []string{"h2", "http/1.1"}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		webhook []client
		metrics []client
	}{
		{
			name: "defaults: the webhook takes TLS 1.3 only, the metrics Go's versions, neither HTTP/2",
			webhook: []client{
				{name: "TLS 1.2", cfg: &tls.Config{MaxVersion: tls.VersionTLS12}, refused: true},
				{name: "TLS 1.3 offering h2", cfg: &tls.Config{NextProtos: h2}, version: tls.VersionTLS13, proto: "http/1.1"},
			},
			metrics: []client{
				{name: "TLS 1.2", cfg: &tls.Config{MaxVersion: tls.VersionTLS12, NextProtos: h2}, version: tls.VersionTLS12, proto: "http/1.1"},
			},
		},
		{
			name: "--tlsminversion 1.3",
			args: []string{"--tlsminversion", "1.3"},
			metrics: []client{
				{name: "TLS 1.2", cfg: &tls.Config{MaxVersion: tls.VersionTLS12}, refused: true},
				{name: "TLS 1.3", cfg: &tls.Config{}, version: tls.VersionTLS13},
			},
		},
		{
			name: "TLS 1.2 with a cipher list from the ConfigMap's variables, and --enable-http2",
			args: []string{"--enable-http2"},
			env:  map[string]string{"TLS_MIN_VERSION": "1.2", "TLS_MAX_VERSION": "1.2", "TLS_CIPHERS": suites},
			webhook: []client{
				{name: "TLS 1.3", cfg: &tls.Config{MinVersion: tls.VersionTLS13}, refused: true},
				{name: "ChaCha20 only", cfg: &tls.Config{CipherSuites: []uint16{chacha}}, refused: true},
				{name: "TLS 1.2 offering h2", cfg: &tls.Config{CipherSuites: []uint16{chacha, aes256}, NextProtos: h2}, version: tls.VersionTLS12, suite: aes256, proto: "h2"},
			},
			metrics: []client{
				{name: "TLS 1.3", cfg: &tls.Config{MinVersion: tls.VersionTLS13}, refused: true},
				{name: "ChaCha20 only", cfg: &tls.Config{CipherSuites: []uint16{chacha}}, refused: true},
				{name: "TLS 1.2 offering h2", cfg: &tls.Config{CipherSuites: []uint16{chacha, aes256}, NextProtos: h2}, version: tls.VersionTLS12, suite: aes256, proto: "h2"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			webhookPort, metricsPort := loopbackPort(t), loopbackPort(t)
			env := map[string]string{}
			for k, v := range w.env {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			ctx, stop := context.WithCancel(t.Context())
			done := make(chan int, 1)
			var out testenv.SyncBuffer
			args := append([]string{"run", "--kubeconfig", w.kubeconfig, "--registries-conf-path", w.conf, "--interval", "1h",
				"--listen-address", "127.0.0.1", "--health-port", "0", "--metrics-port", metricsPort, "--metrics-secure",
				"--enable-webhook", "--webhook-port", webhookPort,
				"--webhook-tls-cert-file", filepath.Join(dir, "tls.crt"), "--webhook-tls-key-file", filepath.Join(dir, "tls.key")}, tt.args...)
			go func() {
				done <- execute(ctx, args, &bytes.Buffer{}, &out, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			}()
			defer func() {
				stop()
				<-done
			}()
			for _, server := range []struct {
				name, port string
				clients    []client
			}{{"webhook", webhookPort, tt.webhook}, {"metrics", metricsPort, tt.metrics}} {
				addr := net.JoinHostPort("127.0.0.1", server.port)
				testenv.WaitFor(t, 60*time.Second, "the "+server.name+" server", func() (bool, string) {
					c, err := net.Dial("tcp", addr)
					if err == nil {
						c.Close()
					}
					return err == nil, fmt.Sprint(err, out.String())
				})
				for _, c := range server.clients {
					cfg := c.cfg.Clone()
					cfg.InsecureSkipVerify = true
					conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
					if c.refused {
						if err == nil {
							conn.Close()
							t.Errorf("%s, %s client: served, want refused", server.name, c.name)
						}
						continue
					}
					if err != nil {
						t.Errorf("%s, %s client: %v", server.name, c.name, err)
						continue
					}
					st := conn.ConnectionState()
					conn.Close()
					if st.Version != c.version || c.suite != 0 && st.CipherSuite != c.suite || c.proto != "" && st.NegotiatedProtocol != c.proto {
						t.Errorf("%s, %s client: TLS %s, %s, protocol %q; want TLS %s, %s, %q", server.name, c.name,
							tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite), st.NegotiatedProtocol,
							tls.VersionName(c.version), tls.CipherSuiteName(c.suite), c.proto)
					}
				}
			}
		})
	}
}
