package config

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// writeTestFile replaces the file at once, as Kubernetes updates a mounted
// Secret, so that a poll never reads it half written.
func writeTestFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p+".new", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	return p
}

// indented writes PEM as a YAML block scalar under a field.
func indented(pem []byte) string {
	return "|\n    " + strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", "\n    ")
}

func TestParseTLS(t *testing.T) {
	ca := testenv.NewCA(t, "registry CA")
	other := testenv.NewCA(t, "other CA")
	dir := t.TempDir()
	caFile := writeTestFile(t, dir, "ca.pem", ca.PEM)
	garbage := writeTestFile(t, dir, "garbage.pem", []byte("not a certificate\n"))
	certPEM, keyPEM := ca.ClientCert(t, "updater")
	otherCert, _ := other.ClientCert(t, "someone")
	certFile, keyFile := writeTestFile(t, dir, "client.pem", certPEM), writeTestFile(t, dir, "client-key.pem", keyPEM)
	otherCertFile := writeTestFile(t, dir, "other-client.pem", otherCert)
	serverCert := ca.ServerCert(t)
	server, err := x509.ParseCertificate(serverCert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		fields     string
		wantRoots  bool // the server certificate verifies with the roots
		wantClient bool
		wantErr    []string // one per reported error, in order
	}{
		{name: "none"},
		{name: "ca_file", fields: "  ca_file: " + caFile + "\n", wantRoots: true},
		{name: "ca_data", fields: "  ca_data: " + indented(ca.PEM) + "\n", wantRoots: true},
		{name: "both", fields: "  ca_data: " + indented(other.PEM) + "\n  ca_file: " + caFile + "\n", wantRoots: true},
		{name: "client certificate", fields: "  client_cert_file: " + certFile + "\n  client_key_file: " + keyFile + "\n", wantClient: true},
		{name: "relative ca_file", fields: "  ca_file: ca.pem\n",
			wantErr: []string{`registries.conf:4: registries[0].ca_file: "ca.pem" is not an absolute path`}},
		{name: "missing ca_file", fields: "  ca_file: " + filepath.Join(dir, "nope.pem") + "\n",
			wantErr: []string{"registries.conf:4: registries[0].ca_file: open " + filepath.Join(dir, "nope.pem") + ": no such file or directory"}},
		{name: "ca_file without a certificate", fields: "  ca_file: " + garbage + "\n",
			wantErr: []string{"registries.conf:4: registries[0].ca_file: " + garbage + " holds no PEM certificate"}},
		{name: "ca_data without a certificate", fields: "  ca_data: hello\n",
			wantErr: []string{"registries.conf:4: registries[0].ca_data: holds no PEM certificate"}},
		{name: "ca_data not a string", fields: "  ca_data: [a]\n",
			wantErr: []string{"registries.conf:4: registries[0].ca_data: expected PEM certificates, got a list"}},
		{name: "certificate without key", fields: "  client_cert_file: " + certFile + "\n",
			wantErr: []string{"registries.conf:4: registries[0].client_cert_file: needs client_key_file as well"}},
		{name: "key without certificate", fields: "  limit: 1\n  client_key_file: " + keyFile + "\n",
			wantErr: []string{"registries.conf:5: registries[0].client_key_file: needs client_cert_file as well"}},
		{name: "key of another certificate", fields: "  client_cert_file: " + otherCertFile + "\n  client_key_file: " + keyFile + "\n",
			wantErr: []string{"registries.conf:4: registries[0].client_cert_file: " + otherCertFile + " and " + keyFile + " are not a certificate and its key: tls: private key does not match public key"}},
		{name: "unreadable key", fields: "  client_cert_file: " + certFile + "\n  client_key_file: " + filepath.Join(dir, "nokey.pem") + "\n",
			wantErr: []string{"registries.conf:5: registries[0].client_key_file: open " + filepath.Join(dir, "nokey.pem") + ": no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("registries.conf", []byte("registries:\n- name: internal\n  prefix: registry.internal\n"+tt.fields))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				lines := strings.Split(err.Error(), "\n")
				if len(lines) != len(tt.wantErr) {
					t.Fatalf("errors:\n%v\nwant %d", err, len(tt.wantErr))
				}
				for i, want := range tt.wantErr {
					if !strings.HasPrefix(lines[i], want) {
						t.Errorf("error %d:\n%s\nwant\n%s", i, lines[i], want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ep := cfg.endpoints()[0]
			if tt.wantRoots || tt.wantClient {
				if ep.TLS == nil || ep.TLS.ID == "" {
					t.Fatalf("no TLS settings: %+v", ep)
				}
			} else if ep.TLS != nil {
				t.Fatalf("TLS settings without any TLS field: %+v", ep.TLS)
			}
			if tt.wantRoots {
				if _, err := server.Verify(x509.VerifyOptions{Roots: ep.TLS.RootCAs, DNSName: "localhost"}); err != nil {
					t.Errorf("the roots do not trust the registry's CA: %v", err)
				}
			}
			if got := ep.TLS != nil && ep.TLS.Certificate != nil; got != tt.wantClient {
				t.Errorf("client certificate %v, want %v", got, tt.wantClient)
			}
		})
	}
}

// The same material gives the same ID, so that a reload that changes
// nothing keeps the registry's connections; other material another.
func TestTLSID(t *testing.T) {
	ca := testenv.NewCA(t, "a")
	other := testenv.NewCA(t, "b")
	parse := func(pem []byte) string {
		cfg, err := Parse("r.conf", []byte("registries:\n- name: x\n  prefix: x.io\n  ca_data: "+indented(pem)+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.endpoints()[0].TLS.ID
	}
	if parse(ca.PEM) != parse(ca.PEM) {
		t.Error("the same CA gives different IDs")
	}
	if parse(ca.PEM) == parse(other.PEM) {
		t.Error("different CAs give the same ID")
	}
}

// A CA file replaced in place (a mounted Secret rotated) is a new
// configuration, although registries.conf did not change.
func TestWatchTLSFiles(t *testing.T) {
	dir := t.TempDir()
	caFile := writeTestFile(t, dir, "ca.pem", testenv.NewCA(t, "first").PEM)
	path := writeTestFile(t, dir, "registries.conf", []byte("registries:\n- name: x\n  prefix: x.io\n  ca_file: "+caFile+"\n"))
	rec := &watchRecorder{}
	w, err := Watch(t.Context(), path, withPollInterval(pollEvery), WithErrorHandler(rec.onError), WithReloadHandler(rec.onReload))
	if err != nil {
		t.Fatal(err)
	}
	first := w.Current().endpoints()[0].TLS.ID
	waitPolls(t, w)
	if _, reloads := rec.counts(); reloads != 0 {
		t.Fatalf("%d reloads without a change", reloads)
	}
	writeTestFile(t, dir, "ca.pem", testenv.NewCA(t, "second").PEM)
	poll.True(t, 10*time.Second, "the configuration to take the new CA file", func() bool { return w.Current().endpoints()[0].TLS.ID != first })

	// A broken CA file is reported; the last good configuration stays.
	before := w.Current()
	writeTestFile(t, dir, "ca.pem", []byte("oops"))
	poll.True(t, 10*time.Second, "the broken CA file to be reported", func() bool { n, _ := rec.counts(); return n == 1 })
	if w.Current() != before {
		t.Error("a broken CA file replaced the configuration")
	}
	if err := rec.lastErr(); !strings.Contains(err.Error(), "registries[0].ca_file: "+caFile+" holds no PEM certificate") {
		t.Errorf("reported: %v", err)
	}
}
