package gitauth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// noObjects is a cluster without Secrets or ConfigMaps.
type noObjects struct{}

func (noObjects) RepositorySecrets(context.Context, string) ([]corev1.Secret, error) {
	return nil, nil
}

func (noObjects) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func (noObjects) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
}

func TestAccess(t *testing.T) {
	r := NewResolver(noObjects{}, "argocd", t.TempDir(), nil)
	ctx := context.Background()
	basic := repoaccess.Credentials{Source: "Secret argocd/repo", Username: "bot", Password: "s3cret"}

	tests := []struct {
		name, url string
		creds     repoaccess.Credentials
		wantUser  string
		err       string
	}{
		{name: "https", url: "https://git.example.com/org/repo.git", creds: basic, wantUser: "bot"},
		{name: "token without user", url: "https://git.example.com/org/repo.git", creds: repoaccess.Credentials{Source: "x", Password: "token"}, wantUser: githubTokenUser},
		{name: "plain http to loopback", url: "http://127.0.0.1:8080/repo.git", creds: basic, wantUser: "bot"},
		{name: "plain http to localhost", url: "http://localhost/repo.git", creds: basic, wantUser: "bot"},
		{name: "plain http elsewhere", url: "http://git.example.com/repo.git", creds: basic, err: "refusing to send credentials from Secret argocd/repo over plain http to git.example.com; use https"},
		{name: "anonymous", url: "https://git.example.com/org/repo.git"},
		{name: "credentials in the URL", url: "https://bot:s3cret@git.example.com/org/repo.git", wantUser: "bot"},
		{name: "a token in the URL", url: "https://s3cret@git.example.com/org/repo.git", wantUser: "s3cret"},
		{name: "the Secret wins over the URL", url: "https://other:s3cret@git.example.com/org/repo.git", creds: basic, wantUser: "bot"},
		{name: "credentials in the URL over plain http to loopback", url: "http://bot:s3cret@127.0.0.1:8080/repo.git", wantUser: "bot"},
		{name: "unparsable URL with credentials", url: "https://bot:s3cret@git.example.com:http/repo.git", err: `repository URL "https://xxxxx@git.example.com:http/repo.git": invalid port`},
		{name: "credentials in the URL over plain http elsewhere", url: "http://bot:s3cret@git.example.com/repo.git", err: "refusing to send credentials from the repository URL over plain http to git.example.com; use https"},
		{name: "github app without ids", url: "https://github.com/org/repo.git", creds: repoaccess.Credentials{Source: "Secret argocd/app", GitHubAppPrivateKey: "s3cret"}, err: "Secret argocd/app holds GitHub App credentials without githubAppID"},
		{name: "github app with a bad installation", url: "https://github.com/org/repo.git", creds: repoaccess.Credentials{Source: "Secret argocd/app", GitHubAppID: "1", GitHubAppInstallationID: "../1", GitHubAppPrivateKey: "s3cret"}, err: `githubAppInstallationID "../1" in Secret argocd/app is not a positive number`},
		{name: "github app over plain http", url: "http://git.example.com/org/repo.git", creds: repoaccess.Credentials{Source: "Secret argocd/app", GitHubAppID: "1", GitHubAppInstallationID: "2", GitHubAppPrivateKey: "s3cret"}, err: "refusing to send credentials from Secret argocd/app over plain http to git.example.com"},
		{name: "github enterprise api over plain http", url: "https://github.example.com/org/repo.git", creds: repoaccess.Credentials{Source: "Secret argocd/app", GitHubAppID: "1", GitHubAppInstallationID: "2", GitHubAppPrivateKey: "s3cret", GitHubAppBaseURL: "http://github.example.com/api/v3"}, err: "refusing to send GitHub App credentials over plain http"},
		{name: "github app with a bad key", url: "https://github.com/org/repo.git", creds: repoaccess.Credentials{Source: "Secret argocd/app", GitHubAppID: "1", GitHubAppInstallationID: "2", GitHubAppPrivateKey: "s3cret"}, err: "githubAppPrivateKey is not an RSA private key in PEM form"},
		{name: "half a client certificate", url: "https://git.example.com/org/repo.git", creds: repoaccess.Credentials{Source: "Secret argocd/mtls", TLSClientCert: "cert"}, err: "Secret argocd/mtls has only one of tlsClientCertData and tlsClientCertKey"},
		{name: "bad client certificate", url: "https://git.example.com/org/repo.git", creds: repoaccess.Credentials{Source: "Secret argocd/mtls", TLSClientCert: "cert", TLSClientKey: "s3cret"}, err: "the TLS client certificate in Secret argocd/mtls cannot be used"},
		{name: "ssh without a key", url: "git@github.com:org/repo.git", creds: basic, err: "no SSH private key for git@github.com:org/repo.git"},
		{name: "ssh with a bad key", url: "ssh://git@github.com/org/repo.git", creds: repoaccess.Credentials{Source: "Secret argocd/ssh", SSHPrivateKey: "not a key"}, err: "the SSH private key in Secret argocd/ssh cannot be parsed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acc, err := r.Access(ctx, tt.url, tt.creds, false)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error containing %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The user info travels in the Authorization header only.
			if ep, err := acc.Endpoint(tt.url); err != nil || ep.User != "" || ep.Password != "" || strings.Contains(ep.String(), "s3cret") {
				t.Errorf("endpoint %v, %v: want one without user info", ep, err)
			}
			switch a := acc.Auth.(type) {
			case nil:
				if tt.wantUser != "" {
					t.Errorf("no auth, want user %s", tt.wantUser)
				}
			case *githttp.BasicAuth:
				if a.Username != tt.wantUser {
					t.Errorf("user %q, want %q", a.Username, tt.wantUser)
				}
			default:
				t.Errorf("auth %T", a)
			}
		})
	}
}

func TestAccessSSHUser(t *testing.T) {
	key := string(testSSHKey(t))
	r := NewResolver(noObjects{}, "argocd", t.TempDir(), nil)
	for url, want := range map[string]string{
		"git@github.com:org/repo.git":                "git",
		"ssh://deploy@git.example.com:2222/repo.git": "deploy",
		"ssh://git.example.com/repo.git":             "git",
	} {
		acc, err := r.Access(context.Background(), url, repoaccess.Credentials{Source: "x", SSHPrivateKey: key}, true)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if a, ok := acc.Auth.(*gitssh.PublicKeys); !ok || a.User != want {
			t.Errorf("%s: auth %+v, want user %s", url, acc.Auth, want)
		}
	}
}

// testSSHKey makes an unprotected OpenSSH private key.
func testSSHKey(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}
