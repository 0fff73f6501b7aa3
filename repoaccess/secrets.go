package repoaccess

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
)

// Names Argo CD gives its repository credentials and SSH known hosts.
const (
	argoCDSecretTypeLabel      = "argocd.argoproj.io/secret-type"
	argoCDSecretTypeRepository = "repository"
	argoCDSecretTypeRepoCreds  = "repo-creds"
	// The write credentials of Argo CD (v3.1 and later, for its source
	// hydrator's pushes): the updater pushes with them where they match,
	// so that an operator can let it push without letting Argo CD's read
	// path.
	argoCDSecretTypeRepositoryWrite = "repository-write"
	argoCDSecretTypeRepoWriteCreds  = "repo-write-creds"
	argoCDKnownHostsConfigMap       = "argocd-ssh-known-hosts-cm"
	argoCDKnownHostsKey             = "ssh_known_hosts"
)

// SecretLister reads the Kubernetes objects repository credentials come
// from.
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
		LabelSelector: argoCDSecretTypeLabel + " in (" + strings.Join([]string{argoCDSecretTypeRepository, argoCDSecretTypeRepoCreds, argoCDSecretTypeRepositoryWrite, argoCDSecretTypeRepoWriteCreds}, ",") + ")",
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

// Credentials are the fields of an Argo CD repository Secret the
// controller uses. String and GoString name only where they came from, so
// that no format verb prints a secret.
type Credentials struct {
	// Source names where they came from, for messages ("" = none found).
	Source             string
	Username, Password string
	SSHPrivateKey      string
	// Insecure skips TLS verification and SSH host key checks, as the
	// Secret's insecure field does for Argo CD.
	Insecure bool
	Proxy    string
	// TLSClientCert and TLSClientKey are a PEM client certificate for
	// servers that ask for one.
	TLSClientCert, TLSClientKey string
	// The GitHub App fields, all kept raw: their user checks them.
	GitHubAppID, GitHubAppInstallationID  string
	GitHubAppPrivateKey, GitHubAppBaseURL string
}

// CredentialsFromSecret reads the credentials of an Argo CD repository
// or repo-creds Secret.
func CredentialsFromSecret(s *corev1.Secret) Credentials {
	get := func(k string) string { return string(s.Data[k]) }
	flag := func(k string) bool { b, _ := strconv.ParseBool(get(k)); return b }
	return Credentials{
		Source:        "Secret " + s.Namespace + "/" + s.Name,
		Username:      get("username"),
		Password:      get("password"),
		SSHPrivateKey: get("sshPrivateKey"),
		Insecure:      flag("insecure") || flag("insecureIgnoreHostKey"),
		Proxy:         get("proxy"),
		TLSClientCert: get("tlsClientCertData"),
		TLSClientKey:  get("tlsClientCertKey"),

		GitHubAppID:             get("githubAppID"),
		GitHubAppInstallationID: get("githubAppInstallationID"),
		GitHubAppPrivateKey:     get("githubAppPrivateKey"),
		GitHubAppBaseURL:        get("githubAppEnterpriseBaseUrl"),
	}
}

func (c Credentials) GitHubApp() bool {
	return c.GitHubAppID != "" || c.GitHubAppInstallationID != "" || c.GitHubAppPrivateKey != ""
}

func (c Credentials) empty() bool {
	return c.Username == "" && c.Password == "" && c.SSHPrivateKey == "" && !c.GitHubApp() && c.TLSClientCert == ""
}

// Describe says where the credentials came from, for messages.
func (c Credentials) Describe() string {
	if c.Source == "" {
		return "no credentials"
	}
	return "credentials from " + c.Source
}

func (c Credentials) String() string   { return c.Describe() }
func (c Credentials) GoString() string { return c.Describe() }

// Resolver finds credentials, TLS certificates and SSH known hosts for
// the repositories of one Write or one cycle's chart reads. It reads
// each at most once, so a cycle costs one list however many
// repositories it reaches.
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

	// transports, when set, keeps the HTTP transports between Resolvers.
	transports *Transports
}

// NewResolver returns a resolver for one Write (or one cycle's reads) of
// the Secrets of Argo CD's namespace; the known hosts are parsed from a
// file in tempDir ("" for the system's).
func NewResolver(lister SecretLister, namespace, tempDir string, opts ...ResolverOption) *Resolver {
	r := &Resolver{lister: lister, namespace: namespace, tempDir: tempDir}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// Resolve finds the credentials for a repository the updater writes to:
// with secretRef (git:secret:<namespace>/<name>) that Secret alone,
// refused when its url does not cover the repository; else Argo CD's
// write credentials, then its read ones, each by Argo CD's own order: the
// repository Secret for that URL (repository-write, repository), then the
// Secret of credentials with the longest URL prefix that covers it
// (repo-write-creds, repo-creds; URL.Within). No match means no
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
		if u := string(s.Data["url"]); u != "" && !repourl.Covers(u, repoURL) {
			return Credentials{}, notPermittedf("credentials Secret %s/%s is for %s, not for %s", ns, name, repourl.RedactURL(u), repourl.RedactURL(repoURL))
		}
		c := CredentialsFromSecret(s)
		if c.empty() {
			return Credentials{}, fmt.Errorf("credentials Secret %s/%s has none of username, password, sshPrivateKey, githubAppPrivateKey, tlsClientCertData", ns, name)
		}
		return c, nil
	}
	c, err := r.resolveArgoCD(ctx, repoURL, project, isGitSecret, writeSecrets)
	if err != nil || !c.empty() {
		return c, err
	}
	return r.resolveArgoCD(ctx, repoURL, project, isGitSecret, readSecrets)
}

// ResolveRead finds Argo CD's credentials for reading the git repository
// repoURL, for an Application of project: those Argo CD syncs it with
// (repository, then repo-creds), never its write credentials.
func (r *Resolver) ResolveRead(ctx context.Context, repoURL, project string) (Credentials, error) {
	return r.resolveArgoCD(ctx, repoURL, project, isGitSecret, readSecrets)
}

// secretTypes are the values of argocd.argoproj.io/secret-type of a
// repository's own Secret and of a Secret of credentials for URL prefixes.
type secretTypes struct{ repository, creds string }

var (
	readSecrets  = secretTypes{argoCDSecretTypeRepository, argoCDSecretTypeRepoCreds}
	writeSecrets = secretTypes{argoCDSecretTypeRepositoryWrite, argoCDSecretTypeRepoWriteCreds}
)

// resolveArgoCD finds Argo CD's repository credentials of the kind that
// of keeps, among the Secrets of types, by Resolve's rules.
func (r *Resolver) resolveArgoCD(ctx context.Context, repoURL, project string, of func(*corev1.Secret) bool, types secretTypes) (Credentials, error) {
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
	repo, err := repourl.ParseURL(repoURL)
	if err != nil {
		// No Secret is for it; reaching it fails with the parser's error.
		return Credentials{}, nil
	}
	var unscoped *corev1.Secret
	for i := range r.secrets {
		s := &r.secrets[i]
		if s.Labels[argoCDSecretTypeLabel] != types.repository || !of(s) {
			continue
		}
		// A repository Secret without credentials of its own takes them
		// from a matching repo-creds Secret, as in Argo CD.
		if u, err := repourl.ParseURL(string(s.Data["url"])); err != nil || !u.Same(repo) || CredentialsFromSecret(s).empty() {
			continue
		}
		switch scope := string(s.Data["project"]); scope {
		case project:
			return CredentialsFromSecret(s), nil
		case "":
			if unscoped == nil {
				unscoped = s
			}
		}
	}
	if unscoped != nil {
		return CredentialsFromSecret(unscoped), nil
	}
	var best *corev1.Secret
	bestLen, bestScoped := 0, false
	for i := range r.secrets {
		s := &r.secrets[i]
		if s.Labels[argoCDSecretTypeLabel] != types.creds || !of(s) {
			continue
		}
		prefix, err := repourl.ParseURL(string(s.Data["url"]))
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
		return CredentialsFromSecret(best), nil
	}
	return Credentials{}, nil
}

// isGitSecret skips credentials Argo CD keeps for Helm and OCI registries.
func isGitSecret(s *corev1.Secret) bool {
	t := string(s.Data["type"])
	return t == "" || t == "git"
}
