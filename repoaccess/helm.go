package repoaccess

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
)

// Helm repositories are read with the rules of git repositories: Argo CD's
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
	return r.resolveArgoCD(ctx, repoURL, project, isHelmSecret, readSecrets)
}

// HTTPRepository is how to read files of the HTTP(S) repository repoURL
// with credentials c: the client, with Argo CD's TLS settings for its
// host, following redirects on that host only, and the function that
// adds the credentials to a request.
func (r *Resolver) HTTPRepository(ctx context.Context, repoURL string, c Credentials) (*http.Client, func(*http.Request), error) {
	u, err := repourl.ParseURL(repoURL)
	if err != nil {
		return nil, nil, err
	}
	if u.Scheme() != "https" && u.Scheme() != "http" {
		return nil, nil, fmt.Errorf("%s is not an http(s):// URL", u)
	}
	if u.HoldsCredentials() {
		return nil, nil, fmt.Errorf("the repository URL %s holds credentials: keep them in an Argo CD repository Secret", u)
	}
	if (c.Username != "" || c.Password != "") && u.Scheme() == "http" && !u.Loopback() {
		return nil, nil, fmt.Errorf("refusing to send %s over plain http to %s; use https", c.Describe(), u.Host())
	}
	tr, err := r.HTTPTransport(ctx, u.Host(), c)
	if err != nil {
		return nil, nil, err
	}
	client := &http.Client{Transport: tr, CheckRedirect: CheckRedirect}
	auth := func(*http.Request) {}
	if c.Username != "" || c.Password != "" {
		user, password := c.Username, c.Password
		auth = func(req *http.Request) { req.SetBasicAuth(user, password) }
	}
	return client, auth, nil
}
