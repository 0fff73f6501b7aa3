package gitauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/image-updater/argocd-image-updater/repoaccess"
)

// Helm repositories are read with the rules of git write-back: Argo CD's
// repository Secrets of type helm, scoped to AppProjects alike; the
// AppProject's sourceRepos (Policy.Check); no credentials over plain
// http but to loopback; redirects only on the repository's host; no
// connection to a cloud's metadata address.

// isHelmSecret keeps the credentials Argo CD keeps for HTTP(S) Helm
// repositories (type helm, without enableOCI).
func isHelmSecret(s *corev1.Secret) bool {
	return string(s.Data["type"]) == "helm" && !strings.EqualFold(string(s.Data["enableOCI"]), "true")
}

// ResolveHelm finds Argo CD's credentials for the HTTP(S) Helm repository
// repoURL, for an Application of project, by Resolve's rules.
func (r *Resolver) ResolveHelm(ctx context.Context, repoURL, project string) (Credentials, error) {
	return r.resolveArgoCD(ctx, repoURL, project, isHelmSecret)
}

// Source names where the credentials came from ("" for none): what
// tells two sets of credentials apart in cache keys, and never a secret.
func (c Credentials) Source() string { return c.source }

// HTTPRepository is how to read files of the HTTP(S) repository repoURL
// with credentials c: the client, with Argo CD's TLS settings for its
// host, following redirects on that host only, and the function that
// adds the credentials to a request.
func (r *Resolver) HTTPRepository(ctx context.Context, repoURL string, c Credentials) (*http.Client, func(*http.Request), error) {
	u, err := repoaccess.ParseURL(repoURL)
	if err != nil {
		return nil, nil, err
	}
	if u.Scheme() != "https" && u.Scheme() != "http" {
		return nil, nil, fmt.Errorf("%s is not an http(s):// URL", u)
	}
	if u.HoldsCredentials() {
		return nil, nil, fmt.Errorf("the repository URL %s holds credentials: keep them in an Argo CD repository Secret", u)
	}
	if (c.username != "" || c.password != "") && u.Scheme() == "http" && !u.Loopback() {
		return nil, nil, fmt.Errorf("refusing to send %s over plain http to %s; use https", c.describe(), u.Host())
	}
	tr, err := r.httpTransport(ctx, u.Host(), c)
	if err != nil {
		return nil, nil, err
	}
	client := &http.Client{Transport: tr, CheckRedirect: sameHostRedirect}
	auth := func(*http.Request) {}
	if c.username != "" || c.password != "" {
		user, password := c.username, c.password
		auth = func(req *http.Request) { req.SetBasicAuth(user, password) }
	}
	return client, auth, nil
}

// sameHostRedirect follows a redirect on the repository's own host (and
// from http to https there), as checkRedirect does for git: credentials
// and the internal hosts a tenant might aim at stay out of reach.
func sameHostRedirect(req *http.Request, via []*http.Request) error {
	if err := checkRedirect(req, via); err != nil {
		return errors.New(strings.Replace(err.Error(), "git requests", "requests", 1))
	}
	return nil
}
