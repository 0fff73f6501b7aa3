package transport

import (
	"context"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// NewAuth authenticates requests to repo with auth, through
// go-containerregistry: it pings the registry, answers its challenge (basic
// credentials, or a bearer token fetched from the token server for pull
// access to repo) and renews an expired token by itself. The ping and the
// token exchange go through next, so they are rate limited, retried and
// counted like every other request. With next a PingOnce, the ping is
// answered from the registry's first answer to it, and only the token, whose
// scope is repo, is fetched for each repository.
//
// next is not a go-containerregistry transport, so one is built on top of
// it; that result is returned and, handed to go-containerregistry again, is
// used as it is, with no retry layer of its own added: retries happen in
// NewRetry only and do not multiply.
func NewAuth(ctx context.Context, next http.RoundTripper, repo name.Repository, auth authn.Authenticator) (http.RoundTripper, error) {
	return ggcr.NewWithContext(ctx, repo.Registry, auth, next, []string{repo.Scope(ggcr.PullScope)})
}

// NewAuthScopes is NewAuth for the registry reg with the token scopes
// given, for APIs beside the registry's that want their own (ACR's
// metadata_read).
func NewAuthScopes(ctx context.Context, next http.RoundTripper, reg name.Registry, auth authn.Authenticator, scopes []string) (http.RoundTripper, error) {
	return ggcr.NewWithContext(ctx, reg, auth, next, scopes)
}
