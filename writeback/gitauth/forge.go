package gitauth

import (
	"context"
	"fmt"
	"net/url"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/image-updater/argocd-image-updater/forge"
)

// ForgeClient builds the client of a repository's requests, with the
// token of the credentials that push to it: the password (an access
// token) of HTTPS credentials, from the repository URL too, or the GitHub
// App's installation token, with the credentials' user name for the
// services that take both (Bitbucket Cloud's app passwords). The API host
// gets the TLS and proxy settings of the credentials, as the repository's
// host does.
func (r *Resolver) ForgeClient(ctx context.Context, repo forge.Repository, acc Remote) (forge.Client, func(), error) {
	var token, user string
	switch basic, ok := acc.Auth.(*githttp.BasicAuth); {
	case ok && basic.Password != "":
		token, user = basic.Password, basic.Username
	case acc.creds.Password != "":
		token, user = acc.creds.Password, acc.creds.Username
	case acc.creds.GitHubApp():
		var err error
		if token, err = r.githubAppToken(ctx, repositoryOwner(repo.Project), acc.creds); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("%s hold no token for the %s API: add a password (an access token) to them; an SSH key only pushes", acc.creds.Describe(), repo.Kind)
	}
	api, err := url.Parse(repo.API)
	if err != nil {
		return nil, nil, err
	}
	tr, err := r.HTTPTransport(ctx, api.Hostname(), acc.creds)
	if err != nil {
		return nil, nil, err
	}
	c, err := repo.Client(token, tr, forge.WithUsername(user))
	if err != nil {
		tr.CloseIdleConnections()
		return nil, nil, err
	}
	return c, tr.CloseIdleConnections, nil
}
