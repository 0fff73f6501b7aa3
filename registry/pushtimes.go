package registry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/registry/pushtime"
	"github.com/image-updater/argocd-image-updater/registry/transport"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// ECRPushTimes gives when tags of an ECR repository were pushed, with the
// controller's AWS identity (ecr.Provider.PushTimes).
type ECRPushTimes func(ctx context.Context, host, repository, base string, tags []string) (map[string]time.Time, error)

// WithECRPushTimes reads ECR's push times through f; without it, ECR
// repositories have none.
func WithECRPushTimes(f ECRPushTimes) Option { return func(c *Client) { c.ecrPushTimes = f } }

// pushTimePaths are the paths of each push-time API on its host; others
// there (ACR's /oauth2/token) are token exchanges.
var pushTimePaths = map[config.PushTimes]string{
	config.PushTimesArtifactRegistry: "/v1/",
	config.PushTimesACR:              "/v2/,/acr/v1/",
	config.PushTimesDockerHub:        "/v2/",
	config.PushTimesHarbor:           "/api/v2.0/",
	config.PushTimesGHCR:             "/users/,/orgs/",
	config.PushTimesQuay:             "/api/v1/",
}

// apiPaths is paths under base's own path (a GitHub Enterprise API's
// /api/v3).
func apiPaths(base, paths string) string {
	u, err := url.Parse(base)
	if err != nil || strings.Trim(u.Path, "/") == "" {
		return paths
	}
	prefix := "/" + strings.Trim(u.Path, "/")
	out := strings.Split(paths, ",")
	for i, p := range out {
		out[i] = prefix + p
	}
	return strings.Join(out, ",")
}

// ErrNoPushTimes is matched (errors.Is) by the error of a registry whose
// push times the client cannot read: its entry says pushtimes: none, its
// host is not one whose API is known, or (ECR) no AWS identity is wired.
var ErrNoPushTimes = errors.New("the registry's push times are not read")

// PushTimes gives when the registry says each of tags of ref's repository
// was pushed, from the API of its endpoint (config.Endpoint.PushTimesAPI),
// with the image's credentials as for its tags. The API's requests go
// through a stack of their own, pinned to the API's host, rate limited,
// retried and counted as the registry's (label "<prefix> push times"). A
// tag the API does not give is missing from the map.
func (c *Client) PushTimes(ctx context.Context, ref imageref.Reference, creds credref.Ref, tags []string) (map[string]time.Time, error) {
	ref = ref.WithoutVersion()
	t, err := c.target(ref, creds)
	if err != nil {
		return nil, t.wrap("read push times", err)
	}
	ep := c.Endpoint(ref)
	api, base := ep.PushTimesAPI()
	switch {
	case api == config.PushTimesNone:
		return nil, t.wrap("read push times", ErrNoPushTimes)
	case api == config.PushTimesECR && c.ecrPushTimes == nil:
		return nil, t.wrap("read push times", ErrNoPushTimes)
	case api == config.PushTimesECR:
		times, err := c.ecrPushTimes(ctx, ref.Registry(), ref.Repository(), base, tags)
		if err != nil {
			return nil, t.wrap("read push times", err)
		}
		return times, nil
	}
	st, err := c.stackWith(config.Endpoint{
		Prefix: ep.Prefix + " push times", APIURL: base, Insecure: ep.Insecure, Limit: ep.Limit,
		TLS: ep.TLS, InternalHosts: ep.InternalHosts,
	}, apiPaths(base, pushTimePaths[api]))
	if err != nil {
		return nil, t.wrap("read push times", err)
	}
	cred, err := c.resolve(ctx, t.src, credentials.Target{Host: ref.Registry(), Repository: ref.Repository()})
	if err != nil {
		return nil, t.wrap("read push times", err)
	}
	rt := st.rt
	if api == config.PushTimesACR {
		// ACR's metadata API answers the registry's own challenge, and
		// wants a token for metadata_read.
		if rt, err = c.acrMetadataAuth(ctx, st, ref.Repository(), cred); err != nil {
			return nil, t.wrap("read push times", err)
		}
	}
	hc := &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	times, err := pushtime.List(ctx, hc, pushtime.Query{
		API: api, Base: base, Registry: ref.Registry(), Repository: ref.Repository(),
		Username: cred.Username, Password: cred.Password, Tags: tags,
	})
	if err != nil {
		return nil, t.wrap("read push times", err)
	}
	return times, nil
}

// acrMetadataAuth authenticates requests to the ACR host of st with cred,
// asking a token for metadata_read (and pull) of repo.
func (c *Client) acrMetadataAuth(ctx context.Context, st *endpointStack, repo string, cred credentials.Credential) (http.RoundTripper, error) {
	opts := []name.Option{name.WeakValidation}
	if st.scheme == "http" {
		opts = append(opts, name.Insecure)
	}
	r, err := name.NewRepository(st.host+"/"+repo, opts...)
	if err != nil {
		return nil, err
	}
	auth := authn.Anonymous
	if !cred.IsZero() {
		auth = &authn.Basic{Username: cred.Username, Password: cred.Password}
	}
	return transport.NewAuthScopes(ctx, st.rt, r.Registry, auth, []string{r.Scope("pull"), r.Scope("metadata_read")})
}
