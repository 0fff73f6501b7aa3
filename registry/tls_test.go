package registry

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/testenv"
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
			tags, err := c.Tags(t.Context(), imageRef(t, host+"/app"), credentials.Ref{})
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
