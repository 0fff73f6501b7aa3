// Package gitauth decides how the git write-back reaches a repository and
// whether it may: Argo CD's repository credentials (Secrets, GitHub Apps,
// TLS certificates, SSH known hosts) and the AppProject rules that keep an
// Application to the repositories and Secrets meant for it. It also hides
// credentials in URLs and error messages.
package gitauth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/repoaccess"
)

// Names Argo CD gives its repository credentials and SSH known hosts.
const (
	argoCDSecretTypeLabel      = "argocd.argoproj.io/secret-type"
	argoCDSecretTypeRepository = "repository"
	argoCDSecretTypeRepoCreds  = "repo-creds"
	argoCDKnownHostsConfigMap  = "argocd-ssh-known-hosts-cm"
	argoCDKnownHostsKey        = "ssh_known_hosts"
)

// githubTokenUser is the user name sent with a password but no user, as
// Argo CD does: GitHub and most forges accept any user with a token.
const githubTokenUser = "x-access-token"

// SecretLister reads the Kubernetes objects git credentials come from.
// Not-found errors satisfy apierrors.IsNotFound.
type SecretLister interface {
	// RepositorySecrets lists the Secrets of a namespace labelled
	// argocd.argoproj.io/secret-type repository or repo-creds.
	RepositorySecrets(ctx context.Context, namespace string) ([]corev1.Secret, error)
	// Secret reads one Secret.
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	// ConfigMap reads one ConfigMap.
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// NewKubeSecretLister reads through the Kubernetes API on every call
// (NewCachedSecretLister keeps its lists for a while). It needs list and get on
// secrets in the Argo CD namespace (get in namespaces git:secret: names)
// and get on configmaps there.
func NewKubeSecretLister(cs kubernetes.Interface) SecretLister { return kubeSecretLister{cs: cs} }

type kubeSecretLister struct{ cs kubernetes.Interface }

func (l kubeSecretLister) RepositorySecrets(ctx context.Context, namespace string) ([]corev1.Secret, error) {
	list, err := l.cs.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: argoCDSecretTypeLabel + " in (" + argoCDSecretTypeRepository + "," + argoCDSecretTypeRepoCreds + ")",
	})
	if err != nil {
		return nil, fmt.Errorf("list repository Secrets in %s: %w", namespace, err)
	}
	return list.Items, nil
}

func (l kubeSecretLister) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return l.cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (l kubeSecretLister) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return l.cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

// Credentials are the fields of an Argo CD repository Secret we use.
type Credentials struct {
	// source names where they came from, for messages ("" = none found).
	source             string
	username, password string
	sshPrivateKey      string
	// insecure skips TLS verification and SSH host key checks, as the
	// Secret's insecure field does for Argo CD.
	insecure bool
	proxy    string
	// tlsClientCert and tlsClientKey are a PEM client certificate for
	// servers that ask for one.
	tlsClientCert, tlsClientKey string
	// The GitHub App fields, all kept raw: parseGitHubApp checks them.
	githubAppID, githubAppInstallationID  string
	githubAppPrivateKey, githubAppBaseURL string
}

func credentialsFromSecret(s *corev1.Secret) Credentials {
	get := func(k string) string { return string(s.Data[k]) }
	flag := func(k string) bool { b, _ := strconv.ParseBool(get(k)); return b }
	return Credentials{
		source:        "Secret " + s.Namespace + "/" + s.Name,
		username:      get("username"),
		password:      get("password"),
		sshPrivateKey: get("sshPrivateKey"),
		insecure:      flag("insecure") || flag("insecureIgnoreHostKey"),
		proxy:         get("proxy"),
		tlsClientCert: get("tlsClientCertData"),
		tlsClientKey:  get("tlsClientCertKey"),

		githubAppID:             get("githubAppID"),
		githubAppInstallationID: get("githubAppInstallationID"),
		githubAppPrivateKey:     get("githubAppPrivateKey"),
		githubAppBaseURL:        get("githubAppEnterpriseBaseUrl"),
	}
}

func (c Credentials) githubApp() bool {
	return c.githubAppID != "" || c.githubAppInstallationID != "" || c.githubAppPrivateKey != ""
}

func (c Credentials) empty() bool {
	return c.username == "" && c.password == "" && c.sshPrivateKey == "" && !c.githubApp() && c.tlsClientCert == ""
}

func (c Credentials) describe() string {
	if c.source == "" {
		return "no credentials"
	}
	return "credentials from " + c.source
}

// Resolver finds credentials for the repositories of one Write.
// It reads the Secrets and known hosts at most once per Write, so a cycle
// costs one list however many repositories it writes to.
type Resolver struct {
	lister    SecretLister
	namespace string
	tempDir   string

	listOnce sync.Once
	secrets  []corev1.Secret
	listErr  error

	hostsOnce sync.Once
	hostKeys  ssh.HostKeyCallback
	hostsErr  error

	tlsOnce  sync.Once
	tlsCerts map[string]string
	tlsErr   error

	github *GitHubTokens
}

// NewResolver returns a resolver for one Write; github is the
// writer's token cache, which outlives it.
func NewResolver(lister SecretLister, namespace, tempDir string, github *GitHubTokens) *Resolver {
	if github == nil {
		github = NewGitHubTokens(nil)
	}
	return &Resolver{lister: lister, namespace: namespace, tempDir: tempDir, github: github}
}

// Resolve finds the credentials for a repository: with secretRef
// (git:secret:<namespace>/<name>) that Secret alone, refused when its url
// does not cover the repository; else Argo CD's repository Secret for
// that URL, then the repo-creds Secret with the longest URL prefix that
// covers it (Argo CD's own order; repoaccess.URL.Within). No match means no
// credentials, which is fine for public repositories over HTTPS.
//
// project is the Application's AppProject ("" is "default"). A Secret
// with a project field serves that project's Applications only, as Argo
// CD (2.12 and later) gives project-scoped repositories to their project
// alone; of a project's own Secret and an unscoped one, the project's
// wins.
func (r *Resolver) Resolve(ctx context.Context, repoURL string, secretRef types.NamespacedName, project string) (Credentials, error) {
	if secretRef != (types.NamespacedName{}) {
		ns, name := secretRef.Namespace, secretRef.Name
		if ns == "" || name == "" {
			return Credentials{}, fmt.Errorf("credentials Secret %q: want <namespace>/<name>", secretRef)
		}
		s, err := r.lister.Secret(ctx, ns, name)
		switch {
		case apierrors.IsNotFound(err):
			return Credentials{}, fmt.Errorf("credentials Secret %s/%s not found", ns, name)
		case err != nil:
			return Credentials{}, fmt.Errorf("read credentials Secret %s/%s: %w", ns, name, err)
		}
		if u := string(s.Data["url"]); u != "" && !repoaccess.Covers(u, repoURL) {
			return Credentials{}, notPermittedf("credentials Secret %s/%s is for %s, not for %s", ns, name, repoaccess.RedactURL(u), repoaccess.RedactURL(repoURL))
		}
		c := credentialsFromSecret(s)
		if c.empty() {
			return Credentials{}, fmt.Errorf("credentials Secret %s/%s has none of username, password, sshPrivateKey, githubAppPrivateKey, tlsClientCertData", ns, name)
		}
		return c, nil
	}
	return r.resolveArgoCD(ctx, repoURL, project, isGitSecret)
}

// resolveArgoCD finds Argo CD's repository credentials of the kind that
// of keeps, by Resolve's rules.
func (r *Resolver) resolveArgoCD(ctx context.Context, repoURL, project string, of func(*corev1.Secret) bool) (Credentials, error) {
	r.listOnce.Do(func() {
		r.secrets, r.listErr = r.lister.RepositorySecrets(ctx, r.namespace)
		slices.SortFunc(r.secrets, func(a, b corev1.Secret) int { return cmp.Compare(a.Name, b.Name) })
	})
	if r.listErr != nil {
		return Credentials{}, fmt.Errorf("read Argo CD repository credentials: %w", r.listErr)
	}
	if project == "" {
		project = "default"
	}
	repo, err := repoaccess.ParseURL(repoURL)
	if err != nil {
		return Credentials{}, err
	}
	var unscoped *corev1.Secret
	for i := range r.secrets {
		s := &r.secrets[i]
		if s.Labels[argoCDSecretTypeLabel] != argoCDSecretTypeRepository || !of(s) {
			continue
		}
		// A repository Secret without credentials of its own takes them
		// from a matching repo-creds Secret, as in Argo CD.
		if u, err := repoaccess.ParseURL(string(s.Data["url"])); err != nil || !u.Same(repo) || credentialsFromSecret(s).empty() {
			continue
		}
		switch scope := string(s.Data["project"]); scope {
		case project:
			return credentialsFromSecret(s), nil
		case "":
			if unscoped == nil {
				unscoped = s
			}
		}
	}
	if unscoped != nil {
		return credentialsFromSecret(unscoped), nil
	}
	var best *corev1.Secret
	bestLen, bestScoped := 0, false
	for i := range r.secrets {
		s := &r.secrets[i]
		if s.Labels[argoCDSecretTypeLabel] != argoCDSecretTypeRepoCreds || !of(s) {
			continue
		}
		prefix, err := repoaccess.ParseURL(string(s.Data["url"]))
		if err != nil || !repo.Within(prefix) {
			continue
		}
		scope := string(s.Data["project"])
		if scope != "" && scope != project {
			continue
		}
		n, scoped := len(prefix.Key()), scope != ""
		if best == nil || n > bestLen || n == bestLen && scoped && !bestScoped {
			best, bestLen, bestScoped = s, n, scoped
		}
	}
	if best != nil {
		return credentialsFromSecret(best), nil
	}
	return Credentials{}, nil
}

// isGitSecret skips credentials Argo CD keeps for Helm and OCI registries.
func isGitSecret(s *corev1.Secret) bool {
	t := string(s.Data["type"])
	return t == "" || t == "git"
}

// Remote is how to reach one repository.
type Remote struct {
	// Auth is what go-git sends to the repository.
	Auth transport.AuthMethod
	// Client speaks the repository's protocol. For HTTP(S) it is built
	// for this repository, since go-git's shared clients can neither
	// replace the trusted roots nor send a client certificate.
	Client transport.Transport
	// sshProxy is the Secret's proxy for SSH; HTTP clients carry theirs.
	sshProxy transport.ProxyOptions
	creds    Credentials
	// httpTransport is client's, kept to close its idle connections.
	httpTransport *http.Transport
}

// GitHubApp tells whether the credentials are a GitHub App's.
func (acc Remote) GitHubApp() bool { return acc.creds.githubApp() }

// Endpoint is the repository's endpoint for acc's client.
func (acc Remote) Endpoint(repoURL string) (*transport.Endpoint, error) {
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return nil, err
	}
	ep.Proxy = acc.sshProxy
	if ep.Protocol == "http" || ep.Protocol == "https" {
		// access moved the user info into acc.Auth; go-git's errors print
		// the request URLs.
		ep.User, ep.Password = "", ""
	}
	return ep, nil
}

// Describe says where the credentials came from, for errors; it never
// holds a secret.
func (acc Remote) Describe() string { return acc.creds.describe() }

// Close lets go of the connections the write kept open.
func (acc Remote) Close() {
	if acc.httpTransport != nil {
		acc.httpTransport.CloseIdleConnections()
	}
}

// Access turns credentials into go-git transport settings. Basic auth
// and tokens go only over HTTPS, except to loopback addresses (tests,
// port forwards): a password sent over plain HTTP could be read on the
// way. A username or password wins over a GitHub App, as in Argo CD; the
// app's installation token is sent as GitHub documents, with the user
// x-access-token. SSH host keys are checked against Argo CD's known hosts
// unless the writer or the Secret says otherwise.
func (r *Resolver) Access(ctx context.Context, repoURL string, c Credentials, ignoreHostKey bool) (Remote, error) {
	repo, err := repoaccess.ParseURL(repoURL)
	if err != nil {
		return Remote{}, err
	}
	ep, err := transport.NewEndpoint(strings.TrimSpace(repoURL))
	if err != nil {
		return Remote{}, fmt.Errorf("invalid repository URL %s", repo)
	}
	acc := Remote{creds: c}
	switch ep.Protocol {
	case "http", "https":
		user, password := c.username, c.password
		useApp := user == "" && password == "" && c.githubApp()
		if user == "" && password == "" && !useApp {
			// Credentials written into the URL, sent as go-git would.
			user, password = ep.User, ep.Password
			if user != "" || password != "" {
				acc.creds.source = "the repository URL"
			}
		}
		if (user != "" || password != "" || useApp) && ep.Protocol == "http" && !repo.Loopback() {
			return Remote{}, fmt.Errorf("refusing to send %s over plain http to %s; use https", acc.creds.describe(), ep.Host)
		}
		tr, err := r.httpTransport(ctx, repo.Host(), c)
		if err != nil {
			return Remote{}, err
		}
		acc.httpTransport = tr
		acc.Client = githttp.NewClient(&http.Client{Transport: boundedAnswers{next: tr}, CheckRedirect: checkRedirect})
		if useApp {
			if password, err = r.githubAppToken(ctx, c); err != nil {
				return Remote{}, err
			}
		}
		if user == "" && password == "" {
			return acc, nil
		}
		if user == "" {
			user = githubTokenUser
		}
		acc.Auth = &githttp.BasicAuth{Username: user, Password: password}
	case "ssh":
		if c.sshPrivateKey == "" {
			return Remote{}, fmt.Errorf("no SSH private key for %s (%s)", repo, c.describe())
		}
		signer, err := ssh.ParsePrivateKey([]byte(c.sshPrivateKey))
		if err != nil {
			var missing *ssh.PassphraseMissingError
			if errors.As(err, &missing) {
				return Remote{}, fmt.Errorf("the SSH private key in %s is protected by a passphrase, which is not supported", c.source)
			}
			return Remote{}, fmt.Errorf("the SSH private key in %s cannot be parsed", c.source)
		}
		user := ep.User
		if user == "" {
			user = "git"
		}
		callback := ssh.InsecureIgnoreHostKey()
		if !ignoreHostKey && !c.insecure {
			if callback, err = r.hostKeyCallback(ctx); err != nil {
				return Remote{}, err
			}
		}
		acc.Auth = &gitssh.PublicKeys{User: user, Signer: signer, HostKeyCallbackHelper: gitssh.HostKeyCallbackHelper{HostKeyCallback: callback}}
		acc.Client = gitssh.DefaultClient
		acc.sshProxy = transport.ProxyOptions{URL: c.proxy}
	default:
		if acc.Client, err = client.NewClient(ep); err != nil {
			return Remote{}, fmt.Errorf("repository %s: %w", repo, err)
		}
	}
	return acc, nil
}

// githubAppToken mints (or takes from the cache) an installation token
// for the GitHub App of c. The API host gets the same TLS and proxy
// settings as the repository's, as in Argo CD.
func (r *Resolver) githubAppToken(ctx context.Context, c Credentials) (string, error) {
	app, err := parseGitHubApp(c.source, c.githubAppID, c.githubAppInstallationID, c.githubAppPrivateKey, c.githubAppBaseURL)
	if err != nil {
		return "", err
	}
	api, err := url.Parse(app.baseURL)
	if err != nil {
		return "", err
	}
	tr, err := r.httpTransport(ctx, api.Hostname(), c)
	if err != nil {
		return "", err
	}
	defer tr.CloseIdleConnections()
	return r.github.token(ctx, app, c.source, tr)
}

// hostKeyCallback checks SSH host keys against the known_hosts lines of
// Argo CD's argocd-ssh-known-hosts-cm, with errors that name the host.
func (r *Resolver) hostKeyCallback(ctx context.Context) (ssh.HostKeyCallback, error) {
	r.hostsOnce.Do(func() { r.hostKeys, r.hostsErr = r.loadKnownHosts(ctx) })
	return r.hostKeys, r.hostsErr
}

func (r *Resolver) loadKnownHosts(ctx context.Context) (ssh.HostKeyCallback, error) {
	where := "ConfigMap " + r.namespace + "/" + argoCDKnownHostsConfigMap
	cm, err := r.lister.ConfigMap(ctx, r.namespace, argoCDKnownHostsConfigMap)
	switch {
	case apierrors.IsNotFound(err):
		return func(host string, _ net.Addr, key ssh.PublicKey) error {
			return fmt.Errorf("SSH host key %s of %s cannot be checked: %s does not exist", ssh.FingerprintSHA256(key), host, where)
		}, nil
	case err != nil:
		return nil, fmt.Errorf("read SSH known hosts from %s: %w", where, err)
	}
	// The known_hosts parser reads files only; the file lives just long
	// enough to be parsed.
	f, err := os.CreateTemp(r.tempDir, "known_hosts-*")
	if err != nil {
		return nil, fmt.Errorf("read SSH known hosts: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(cm.Data[argoCDKnownHostsKey])
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("read SSH known hosts: %w", err)
	}
	check, err := knownhosts.New(f.Name())
	if err != nil {
		return nil, fmt.Errorf("parse key %s of %s: %w", argoCDKnownHostsKey, where, err)
	}
	return func(host string, remote net.Addr, key ssh.PublicKey) error {
		err := check(host, remote, key)
		var keyErr *knownhosts.KeyError
		switch {
		case errors.As(err, &keyErr) && len(keyErr.Want) == 0:
			return fmt.Errorf("SSH host key %s of %s is unknown: add it to %s: %w", ssh.FingerprintSHA256(key), host, where, err)
		case errors.As(err, &keyErr):
			return fmt.Errorf("SSH host key %s of %s does not match the keys in %s: %w", ssh.FingerprintSHA256(key), host, where, err)
		}
		return err
	}, nil
}
