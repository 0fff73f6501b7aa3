package git

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback"
)

func (e *gitEnv) configMap(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	e.kube.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data})
}

// writeVersion writes tag as the new version of appUpdate's image.
func (e *gitEnv) writeVersion(w *Writer, url, tag string) writeback.Result {
	u := appUpdate("main", url)
	u.Images[0].New.Tag = tag
	return w.write(context.Background(), []update{u})[0]
}

// testGitHubApp pushes with the installation tokens of a GitHub App,
// minted by the stand-in of GitHub Enterprise's API, which the real git
// server then accepts for the user x-access-token.
func (e *gitEnv) testGitHubApp(t *testing.T) {
	ca := testenv.NewCA(t, "GitHub Enterprise CA")
	api := testenv.StartGitHubAPI(t, ca, func(token string) { e.git.AcceptCredentials(githubTokenUser, token) })
	// The operator names the GitHub Enterprise Server, as
	// --github-enterprise-api-url does.
	hosts, err := forge.NewHosts([]string{api.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		lifetime time.Duration
		status   int // the API's answer to every request; 0: a token
		// wantRequests is the number of token requests two writes make.
		wantRequests int64
		wantErr      []string
	}{
		{name: "token reused while valid", lifetime: time.Hour, wantRequests: 1},
		// Two minutes is within the refresh margin: the second write needs
		// a new token, and the git server no longer takes the first.
		{name: "token refreshed before it expires", lifetime: 2 * time.Minute, wantRequests: 2},
		{name: "bad credentials", status: http.StatusUnauthorized, wantRequests: 2, wantErr: []string{"401 Unauthorized", `"Bad credentials"`}},
		{name: "installation not found", status: http.StatusNotFound, wantRequests: 2, wantErr: []string{"404 Not Found", `"Not Found"`}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := e.argoNamespace(t, fmt.Sprintf("github-app-%d", i), false)
			repo := ns
			url := e.repo(t, repo, nil)
			e.configMap(t, ns, repoaccess.TLSCertsConfigMap, map[string]string{"127.0.0.1": string(ca.PEM)})
			e.secret(t, ns, "github-app", argoCDSecretTypeRepoCreds, map[string]string{
				"url":                        e.git.HTTPURL + "/",
				"githubAppID":                api.AppID,
				"githubAppInstallationID":    fmt.Sprint(api.InstallationID),
				"githubAppPrivateKey":        string(api.PrivateKey),
				"githubAppEnterpriseBaseUrl": api.URL + "/",
			})
			api.SetTokenLifetime(tt.lifetime)
			api.FailWith(tt.status)
			t.Cleanup(func() { api.FailWith(0) })
			requests := api.Requests.Load()
			pushes := e.git.Pushes.Load()
			w := e.writer(t, ns, WithForgeHosts(hosts))

			for _, tag := range []string{"v0.0.2", "v0.0.3"} {
				r := e.writeVersion(w, url, tag)
				if len(tt.wantErr) == 0 {
					if r.Err != nil {
						t.Fatalf("write %s: %v", tag, r.Err)
					}
					if log := e.git.Log(t, repo, "main"); log[0].Hash != r.Commit {
						t.Fatalf("write %s: commit %s is not the tip of main (%v)", tag, r.Commit, subjects(log))
					}
					continue
				}
				want := append([]string{"Secret " + ns + "/github-app", fmt.Sprintf("installation %d", api.InstallationID), api.URL + "/app/installations/"}, tt.wantErr...)
				for _, s := range want {
					if r.Err == nil || !strings.Contains(r.Err.Error(), s) {
						t.Errorf("write %s: got %v, want an error containing %q", tag, r.Err, s)
					}
				}
				if r.Err != nil {
					for _, secret := range []string{"PRIVATE KEY", strings.Split(string(api.PrivateKey), "\n")[2], "ghs_", "eyJ"} {
						if strings.Contains(r.Err.Error(), secret) {
							t.Errorf("the error shows %q: %v", secret, r.Err)
						}
					}
				}
			}
			if d := api.Requests.Load() - requests; d != tt.wantRequests {
				t.Errorf("%d token requests, want %d", d, tt.wantRequests)
			}
			if len(tt.wantErr) > 0 && e.git.Pushes.Load() != pushes {
				t.Errorf("pushed without a token")
			}
		})
	}

	// The cache must not hand a token to a Secret that names the same app
	// and installation with a key that is not the app's.
	t.Run("another key gets no cached token", func(t *testing.T) {
		ns := e.argoNamespace(t, "github-app-other-key", false)
		good, bad := e.repo(t, ns+"-good", nil), e.repo(t, ns+"-bad", nil)
		e.configMap(t, ns, repoaccess.TLSCertsConfigMap, map[string]string{"127.0.0.1": string(ca.PEM)})
		otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		otherPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(otherKey)})
		for name, key := range map[string][]byte{"good": api.PrivateKey, "bad": otherPEM} {
			e.secret(t, ns, name, argoCDSecretTypeRepository, map[string]string{
				"url": e.git.HTTPRepoURL(ns + "-" + name), "githubAppID": api.AppID, "githubAppInstallationID": fmt.Sprint(api.InstallationID),
				"githubAppPrivateKey": string(key), "githubAppEnterpriseBaseUrl": api.URL,
			})
		}
		api.SetTokenLifetime(time.Hour)
		w := e.writer(t, ns, WithForgeHosts(hosts))
		if r := e.writeVersion(w, good, "v0.0.2"); r.Err != nil {
			t.Fatal(r.Err)
		}
		problems := len(api.Problems())
		r := e.writeVersion(w, bad, "v0.0.2")
		if r.Err == nil || !strings.Contains(r.Err.Error(), "A JSON web token could not be decoded") || !strings.Contains(r.Err.Error(), "Secret "+ns+"/bad") {
			t.Errorf("got %v, want GitHub's refusal of the JWT naming Secret %s/bad", r.Err, ns)
		}
		if p := api.Problems(); len(p) != problems+1 || !strings.Contains(p[len(p)-1], "not signed by the app's key") {
			t.Errorf("the API saw %v", p[problems:])
		}
	})

	// A Secret may only name an API the operator allows: the Secret can be
	// a tenant's (git:secret:), and the controller would POST the app's
	// JWT to any host it names and quote the answer. Nothing is sent.
	t.Run("an API URL the operator did not name", func(t *testing.T) {
		ns := e.argoNamespace(t, "github-app-other-api", false)
		url := e.repo(t, ns, nil)
		e.configMap(t, ns, repoaccess.TLSCertsConfigMap, map[string]string{"127.0.0.1": string(ca.PEM)})
		e.secret(t, ns, "github-app", argoCDSecretTypeRepoCreds, map[string]string{
			"url":                        e.git.HTTPURL + "/",
			"githubAppID":                api.AppID,
			"githubAppInstallationID":    fmt.Sprint(api.InstallationID),
			"githubAppPrivateKey":        string(api.PrivateKey),
			"githubAppEnterpriseBaseUrl": api.URL + "/api/v3",
		})
		requests, pushes := api.Requests.Load(), e.git.Pushes.Load()
		for _, w := range []*Writer{e.writer(t, ns), e.writer(t, ns, WithForgeHosts(hosts))} {
			r := e.writeVersion(w, url, "v0.0.2")
			for _, want := range []string{`githubAppEnterpriseBaseUrl "` + api.URL + `/api/v3" in Secret ` + ns + "/github-app", "not a github API the controller may use", "--github-enterprise-api-url"} {
				if r.Err == nil || !strings.Contains(r.Err.Error(), want) {
					t.Errorf("got %v, want an error containing %q", r.Err, want)
				}
			}
		}
		if api.Requests.Load() != requests || e.git.Pushes.Load() != pushes {
			t.Errorf("%d token requests, %d pushes; want none", api.Requests.Load()-requests, e.git.Pushes.Load()-pushes)
		}
	})

	// Argo CD v3.3 lets a Secret leave githubAppInstallationID out: the
	// installation is looked up among the app's, for the repository's
	// owner, and the listing is kept.
	t.Run("installation looked up for the repository's owner", func(t *testing.T) {
		ns := e.argoNamespace(t, "github-app-lookup", false)
		// 150 installations on other accounts first: two pages of 100.
		others := map[string]int64{}
		for i := range 150 {
			others[fmt.Sprintf("org-%03d", i)] = int64(100000 + i)
		}
		api.SetOtherInstallations(others)
		t.Cleanup(func() { api.SetOtherInstallations(nil) })
		own := e.repo(t, "image-updater/"+ns, nil)
		stranger := e.repo(t, "nobody/"+ns, nil)
		e.configMap(t, ns, repoaccess.TLSCertsConfigMap, map[string]string{"127.0.0.1": string(ca.PEM)})
		e.secret(t, ns, "github-app", argoCDSecretTypeRepoCreds, map[string]string{
			"url":                        e.git.HTTPURL + "/",
			"githubAppID":                api.AppID,
			"githubAppPrivateKey":        string(api.PrivateKey),
			"githubAppEnterpriseBaseUrl": api.URL,
		})
		api.SetTokenLifetime(time.Hour)
		lists, tokens := api.Lists.Load(), api.Requests.Load()
		w := e.writer(t, ns, WithForgeHosts(hosts))
		for _, tag := range []string{"v0.0.2", "v0.0.3"} {
			if r := e.writeVersion(w, own, tag); r.Err != nil {
				t.Fatalf("write %s: %v", tag, r.Err)
			}
		}
		if d := api.Lists.Load() - lists; d != 2 {
			t.Errorf("%d pages of installations listed for two writes, want 2 (one listing)", d)
		}
		if d := api.Requests.Load() - tokens; d != 1 {
			t.Errorf("%d token requests, want 1", d)
		}
		// An owner without an installation: an error naming the owner and
		// the Secret, nothing pushed, and no new listing within minutes.
		pushes, lists := e.git.Pushes.Load(), api.Lists.Load()
		r := e.writeVersion(w, stranger, "v0.0.2")
		for _, want := range []string{"GitHub App " + api.AppID, "Secret " + ns + "/github-app", "not installed on nobody", "151 installations listed"} {
			if r.Err == nil || !strings.Contains(r.Err.Error(), want) {
				t.Errorf("got %v, want an error containing %q", r.Err, want)
			}
		}
		if e.git.Pushes.Load() != pushes || api.Lists.Load() != lists {
			t.Errorf("%d pushes, %d listings after the refusal; want none", e.git.Pushes.Load()-pushes, api.Lists.Load()-lists)
		}
	})

	// Every request but the one refused on purpose above followed GitHub's
	// documentation.
	for _, p := range api.Problems() {
		if !strings.Contains(p, "not signed by the app's key") {
			t.Errorf("GitHub would refuse this request: %s", p)
		}
	}
}

// testTLS reaches the git server through an HTTPS proxy whose certificate
// comes from a CA of the test, trusted only through Argo CD's
// argocd-tls-certs-cm, and through one that also requires a client
// certificate, given by the repository Secret.
func (e *gitEnv) testTLS(t *testing.T) {
	serverCA := testenv.NewCA(t, "git server CA")
	otherCA := testenv.NewCA(t, "unrelated CA")
	clientCA := testenv.NewCA(t, "client CA")
	httpsURL := testenv.StartTLSProxy(t, e.git.HTTPURL, serverCA.ServerCert(t), nil)
	mtlsURL := testenv.StartTLSProxy(t, e.git.HTTPURL, serverCA.ServerCert(t), clientCA.Pool())
	clientCert, clientKey := clientCA.ClientCert(t, "argocd-image-updater")
	strangerCert, strangerKey := otherCA.ClientCert(t, "stranger")
	trusted := map[string]string{"127.0.0.1": string(serverCA.PEM)}

	tests := []struct {
		name       string
		server     string
		certs      map[string]string // argocd-tls-certs-cm; nil: none
		clientCert []byte
		clientKey  []byte
		insecure   bool
		wantErr    string
	}{
		{name: "no ConfigMap", server: httpsURL, wantErr: "certificate signed by unknown authority (add the server's certificate, or its CA, to Argo CD's argocd-tls-certs-cm"},
		{name: "no entry for the host", server: httpsURL, certs: map[string]string{"git.example.com": string(serverCA.PEM)}, wantErr: "certificate signed by unknown authority"},
		{name: "another CA for the host", server: httpsURL, certs: map[string]string{"127.0.0.1": string(otherCA.PEM)}, wantErr: "certificate signed by unknown authority"},
		{name: "an entry that is no certificate", server: httpsURL, certs: map[string]string{"127.0.0.1": "not a certificate"}, wantErr: "key 127.0.0.1 of ConfigMap {ns}/argocd-tls-certs-cm holds no PEM certificate"},
		{name: "the CA for the host", server: httpsURL, certs: trusted},
		{name: "the CA among others", server: httpsURL, certs: map[string]string{"127.0.0.1": string(otherCA.PEM) + string(serverCA.PEM), "localhost": string(otherCA.PEM)}},
		{name: "insecure", server: httpsURL, insecure: true},
		{name: "client certificate required, none sent", server: mtlsURL, certs: trusted, wantErr: "tls: certificate required"},
		{name: "client certificate of another CA", server: mtlsURL, certs: trusted, clientCert: strangerCert, clientKey: strangerKey, wantErr: "remote error: tls:"},
		{name: "client certificate from the Secret", server: mtlsURL, certs: trusted, clientCert: clientCert, clientKey: clientKey},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := e.argoNamespace(t, fmt.Sprintf("tls-%d", i), false)
			repo := ns
			e.git.CreateRepo(t, repo, "testdata/seed003", nil)
			url := tt.server + "/" + repo + ".git"
			if tt.certs != nil {
				e.configMap(t, ns, repoaccess.TLSCertsConfigMap, tt.certs)
			}
			data := map[string]string{"url": tt.server + "/", "username": e.git.Username, "password": e.git.Password}
			if tt.clientCert != nil {
				data["tlsClientCertData"], data["tlsClientCertKey"] = string(tt.clientCert), string(tt.clientKey)
			}
			if tt.insecure {
				data["insecure"] = "true"
			}
			e.secret(t, ns, "creds", argoCDSecretTypeRepoCreds, data)

			r := e.writeVersion(e.writer(t, ns), url, "v0.0.2")
			if tt.wantErr != "" {
				want := strings.ReplaceAll(tt.wantErr, "{ns}", ns)
				if r.Err == nil || !strings.Contains(r.Err.Error(), want) {
					t.Fatalf("got %v, want an error containing %q", r.Err, want)
				}
				if strings.Contains(r.Err.Error(), "PRIVATE KEY") {
					t.Errorf("the error shows the client key: %v", r.Err)
				}
				if log := e.git.Log(t, repo, "main"); len(log) != 1 {
					t.Errorf("history %v", subjects(log))
				}
				return
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if log := e.git.Log(t, repo, "main"); log[0].Hash != r.Commit {
				t.Errorf("commit %s is not the tip of main (%v)", r.Commit, subjects(log))
			}
		})
	}
}
