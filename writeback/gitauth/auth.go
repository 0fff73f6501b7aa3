// Package gitauth is how the git write-back reaches a repository once
// repoaccess has said it may, and with which credentials: go-git's
// authentication and clients, GitHub App installation tokens, the
// clients of the forges' APIs, and the bounds on what a git server sends.
package gitauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
)

// githubTokenUser is the user name sent with a password but no user, as
// Argo CD does: GitHub and most forges accept any user with a token.
const githubTokenUser = "x-access-token"

// Resolver finds the credentials of the repositories of one Write
// (repoaccess.Resolver) and turns them into go-git's settings.
type Resolver struct {
	*repoaccess.Resolver
	github *GitHubTokens
}

// NewResolver returns a resolver for one Write of Argo CD's repository
// Secrets in namespace; github is the writer's token cache, which
// outlives it.
func NewResolver(lister repoaccess.SecretLister, namespace, tempDir string, github *GitHubTokens) *Resolver {
	if github == nil {
		github = NewGitHubTokens(nil)
	}
	return &Resolver{Resolver: repoaccess.NewResolver(lister, namespace, tempDir), github: github}
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
	creds    repoaccess.Credentials
	// httpTransport is client's, kept to close its idle connections.
	httpTransport *http.Transport
}

// GitHubApp tells whether the credentials are a GitHub App's.
func (acc Remote) GitHubApp() bool { return acc.creds.GitHubApp() }

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
func (acc Remote) Describe() string { return acc.creds.Describe() }

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
func (r *Resolver) Access(ctx context.Context, repoURL string, c repoaccess.Credentials, ignoreHostKey bool) (Remote, error) {
	repo, err := repourl.ParseURL(repoURL)
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
		user, password := c.Username, c.Password
		useApp := user == "" && password == "" && c.GitHubApp()
		if user == "" && password == "" && !useApp {
			// repoaccess.Credentials written into the URL, sent as go-git would.
			user, password = ep.User, ep.Password
			if user != "" || password != "" {
				acc.creds.Source = "the repository URL"
			}
		}
		if (user != "" || password != "" || useApp) && ep.Protocol == "http" && !repo.Loopback() {
			return Remote{}, fmt.Errorf("refusing to send %s over plain http to %s; use https", acc.creds.Describe(), ep.Host)
		}
		tr, err := r.HTTPTransport(ctx, repo.Host(), c)
		if err != nil {
			return Remote{}, err
		}
		acc.httpTransport = tr
		acc.Client = githttp.NewClient(&http.Client{Transport: boundedAnswers{next: tr}, CheckRedirect: repoaccess.CheckRedirect})
		if useApp {
			if password, err = r.githubAppToken(ctx, repositoryOwner(repo.Path()), c); err != nil {
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
		if c.SSHPrivateKey == "" {
			return Remote{}, fmt.Errorf("no SSH private key for %s (%s)", repo, c.Describe())
		}
		signer, err := ssh.ParsePrivateKey([]byte(c.SSHPrivateKey))
		if err != nil {
			var missing *ssh.PassphraseMissingError
			if errors.As(err, &missing) {
				return Remote{}, fmt.Errorf("the SSH private key in %s is protected by a passphrase, which is not supported", c.Source)
			}
			return Remote{}, fmt.Errorf("the SSH private key in %s cannot be parsed", c.Source)
		}
		user := ep.User
		if user == "" {
			user = "git"
		}
		callback := ssh.InsecureIgnoreHostKey()
		if !ignoreHostKey && !c.Insecure {
			if callback, err = r.HostKeyCallback(ctx); err != nil {
				return Remote{}, err
			}
		}
		acc.Auth = &gitssh.PublicKeys{User: user, Signer: signer, HostKeyCallbackHelper: gitssh.HostKeyCallbackHelper{HostKeyCallback: callback}}
		acc.Client = gitssh.DefaultClient
		acc.sshProxy = transport.ProxyOptions{URL: c.Proxy}
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
func (r *Resolver) githubAppToken(ctx context.Context, owner string, c repoaccess.Credentials) (string, error) {
	app, err := parseGitHubApp(c.Source, c.GitHubAppID, c.GitHubAppInstallationID, c.GitHubAppPrivateKey, c.GitHubAppBaseURL)
	if err != nil {
		return "", err
	}
	api, err := url.Parse(app.baseURL)
	if err != nil {
		return "", err
	}
	tr, err := r.HTTPTransport(ctx, api.Hostname(), c)
	if err != nil {
		return "", err
	}
	defer tr.CloseIdleConnections()
	return r.github.token(ctx, app, owner, c.Source, tr)
}
