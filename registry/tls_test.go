package registry

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// A registry behind an HTTPS proxy whose certificate comes from a CA of
// the test's own, as a registry with an internal CA is reached: trusted
// through ca_file or ca_data only, and, where the proxy asks for one,
// with the entry's client certificate.
func TestRegistryTLS(t *testing.T) {
	reg := testenv.StartRegistry(t)
	reg.PushTags(t, "app", []string{"1.0"})
	ca := testenv.NewCA(t, "registry CA")
	other := testenv.NewCA(t, "another CA")
	clientCA := testenv.NewCA(t, "client CA")

	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", ca.PEM)
	otherFile := write("other.pem", other.PEM)
	certPEM, keyPEM := clientCA.ClientCert(t, "argocd-image-updater")
	certFile, keyFile := write("client.pem", certPEM), write("client-key.pem", keyPEM)
	strangerCert, strangerKey := other.ClientCert(t, "stranger")
	strangerCertFile, strangerKeyFile := write("stranger.pem", strangerCert), write("stranger-key.pem", strangerKey)

	plain := testenv.StartTLSProxy(t, "http://"+reg.Host, ca.ServerCert(t), nil)
	mutual := testenv.StartTLSProxy(t, "http://"+reg.Host, ca.ServerCert(t), clientCA.Pool())

	inline := "ca_data: |\n    " + strings.ReplaceAll(strings.TrimSpace(string(ca.PEM)), "\n", "\n    ")
	tests := []struct {
		name    string
		apiURL  string
		fields  []string
		wantErr string // "" for success
	}{
		{name: "system roots only", apiURL: plain, wantErr: "certificate signed by unknown authority"},
		{name: "ca_file", apiURL: plain, fields: []string{"ca_file: " + caFile}},
		{name: "ca_data", apiURL: plain, fields: []string{inline}},
		{name: "another CA", apiURL: plain, fields: []string{"ca_file: " + otherFile}, wantErr: "certificate signed by unknown authority"},
		{name: "insecure wins over ca_file", apiURL: plain, fields: []string{"ca_file: " + otherFile, "insecure: true"}},
		{name: "client certificate required, none given", apiURL: mutual, fields: []string{"ca_file: " + caFile}, wantErr: "certificate required"},
		{name: "client certificate", apiURL: mutual, fields: []string{"ca_file: " + caFile, "client_cert_file: " + certFile, "client_key_file: " + keyFile}},
		{name: "client certificate of another CA", apiURL: mutual, fields: []string{"ca_file: " + caFile, "client_cert_file: " + strangerCertFile, "client_key_file: " + strangerKeyFile}, wantErr: "certificate required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := strings.TrimPrefix(tt.apiURL, "https://")
			text := fmt.Sprintf("registries:\n- name: internal\n  prefix: %s\n  api_url: %s\n  credentials: env:CREDS\n", host, tt.apiURL)
			for _, f := range tt.fields {
				text += "  " + f + "\n"
			}
			cfg, err := config.Parse("registries.conf", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			c := NewClient(
				WithConfig(func() *config.Config { return cfg }),
				WithCredentialResolver(envResolver(map[string]string{"CREDS": reg.Username + ":" + reg.Password})),
				withRetry(1, 0, 0),
			)
			tags, err := c.Tags(t.Context(), imageRef(t, host+"/app"), credref.Ref{})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr == "" && (len(tags) != 1 || tags[0] != "1.0"):
				t.Errorf("tags %v", tags)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
}

// A CA file named after the registry's host, in the folder of Argo CD's
// TLS certificates (argocd-tls-certs-cm, which argocd-operator mounts at
// /app/config/tls), is trusted for that host with no registries.conf
// entry, as v1.3.0 trusts it. The file is named after the host without
// its port, as there: a ConfigMap key cannot hold a colon.
func TestHostCAs(t *testing.T) {
	reg := testenv.StartRegistry(t)
	reg.PushTags(t, "app", []string{"1.0"})
	ca := testenv.NewCA(t, "registry CA")
	other := testenv.NewCA(t, "another CA")
	proxy := testenv.StartTLSProxy(t, "http://"+reg.Host, ca.ServerCert(t), nil)
	host := strings.TrimPrefix(proxy, "https://") // 127.0.0.1:<port>
	hostname := strings.Split(host, ":")[0]
	elsewhere := t.TempDir()
	otherFile := filepath.Join(elsewhere, "other.pem")
	if err := os.WriteFile(otherFile, other.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	inlineOther := "ca_data: |\n    " + strings.ReplaceAll(strings.TrimSpace(string(other.PEM)), "\n", "\n    ")
	entry := func(fields ...string) string {
		text := fmt.Sprintf("registries:\n- name: internal\n  prefix: %s\n  api_url: %s\n", host, proxy)
		for _, f := range fields {
			text += "  " + f + "\n"
		}
		return text
	}
	const unknown = "certificate signed by unknown authority"
	tests := []struct {
		name    string
		files   map[string][]byte // the folder's files
		conf    string            // registries.conf; "" for none
		wantErr string            // "" for success
	}{
		{name: "no entry, no file", wantErr: unknown},
		{name: "no entry, the host's file", files: map[string][]byte{hostname: ca.PEM}},
		{name: "a file named with the port is not the host's", files: map[string][]byte{host: ca.PEM}, wantErr: unknown},
		{name: "another host's file", files: map[string][]byte{"registry.example.com": ca.PEM}, wantErr: unknown},
		{name: "the host's file of another CA", files: map[string][]byte{hostname: other.PEM}, wantErr: unknown},
		{name: "an entry without CAs takes the file", files: map[string][]byte{hostname: ca.PEM}, conf: entry()},
		{name: "ca_data adds to the file", files: map[string][]byte{hostname: ca.PEM}, conf: entry(inlineOther)},
		{name: "ca_file replaces the file", files: map[string][]byte{hostname: ca.PEM}, conf: entry("ca_file: " + otherFile), wantErr: unknown},
		{name: "insecure: true is not looked up", files: map[string][]byte{hostname: []byte("not a certificate")}, conf: entry("insecure: true")},
		{name: "a file without a certificate is an error naming it", files: map[string][]byte{hostname: []byte("not a certificate")},
			wantErr: "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var cfg *config.Config
			if tt.conf != "" {
				var err error
				if cfg, err = config.Parse("registries.conf", []byte(tt.conf)); err != nil {
					t.Fatal(err)
				}
			}
			c := NewClient(WithConfig(func() *config.Config { return cfg }), WithHostCAs(dir),
				WithCredentialResolver(envResolver(map[string]string{"CREDS": reg.Username + ":" + reg.Password})), withRetry(1, 0, 0))
			tags, err := c.Tags(t.Context(), imageRef(t, host+"/app"), envRef("CREDS"))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr == "" && (len(tags) != 1 || tags[0] != "1.0"):
				t.Errorf("tags %v", tags)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tt.wantErr)
			}
		})
	}

	// The CA rotated: the file replaced as the kubelet replaces a mounted
	// ConfigMap's (a symbolic link to a new folder) is read again, and the
	// registry trusted with the new CA by the same client.
	t.Run("a replaced file is read again", func(t *testing.T) {
		dir := t.TempDir()
		mount := func(version string, pem []byte) {
			data := filepath.Join(dir, version)
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(data, hostname), pem, 0o600); err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(dir, "..data_tmp")
			if err := os.Symlink(version, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
		}
		mount("..v1", other.PEM)
		if err := os.Symlink(filepath.Join("..data", hostname), filepath.Join(dir, hostname)); err != nil {
			t.Fatal(err)
		}
		c := NewClient(WithHostCAs(dir), WithCredentialResolver(envResolver(map[string]string{"CREDS": reg.Username + ":" + reg.Password})), withRetry(1, 0, 0))
		if _, err := c.Tags(t.Context(), imageRef(t, host+"/app"), envRef("CREDS")); err == nil || !strings.Contains(err.Error(), unknown) {
			t.Fatalf("with another CA's file: %v, want %q", err, unknown)
		}
		mount("..v2", ca.PEM)
		if tags, err := c.Tags(t.Context(), imageRef(t, host+"/app"), envRef("CREDS")); err != nil || len(tags) != 1 {
			t.Fatalf("with the registry's CA: %v, %v", tags, err)
		}
	})
}
