package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/image-updater/argocd-image-updater/registry/cloudhost"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// nativeKindFor says which native credential source serves a registry
// host by itself: ECR for private ECR hosts, GCP for gcr.io, *.gcr.io and
// <location>-docker.pkg.dev, Azure for *.azurecr.io (.cn, .us).
func nativeKindFor(host string) (credref.Kind, bool) {
	if _, _, ok := cloudhost.ECR(host); ok {
		return credref.KindECR, true
	}
	if cloudhost.Google(host) {
		return credref.KindGCP, true
	}
	if _, ok := cloudhost.ACR(host); ok {
		return credref.KindAzure, true
	}
	return 0, false
}

// credSource is where an operation's credentials come from.
type credSource struct {
	ref    credref.Ref // zero: anonymous
	cached bool        // registry-level: ResolveCached, dropped on 401
	ttl    time.Duration
	native bool // chosen by host: no native credentials means anonymous
}

// identity keys what may be shared between callers: the reference, never
// the secret it points to.
func (s credSource) identity() string { return s.ref.String() }

// imageCredentialTTL is how long an image's own credentials read from a
// Secret or the environment are reused. Without it, every tag listing and
// metadata request of such an image reads the Secret again; a short time
// keeps a rotated Secret effective within a minute (and a 401 rereads it
// at once). ext: scripts of an image are not kept here: Resolve runs them
// once per update cycle (credentials.WithCycle).
const imageCredentialTTL = time.Minute

func (c *Client) sourceFor(ep config.Endpoint, host string, creds credref.Ref) (credSource, error) {
	if !creds.IsZero() {
		if creds.Kind == credref.KindExt {
			return credSource{ref: creds}, nil
		}
		return credSource{ref: creds, cached: true, ttl: imageCredentialTTL}, nil
	}
	if ep.Credentials != "" {
		ref, err := credref.ParseRef(ep.Credentials)
		if err != nil {
			return credSource{}, fmt.Errorf("credentials of the registries.conf entry %s: %w", ep.Prefix, err)
		}
		return credSource{ref: ref, cached: true, ttl: ep.CredsExpire}, nil
	}
	if kind, ok := nativeKindFor(host); ok && c.resolver.HasNative(kind) {
		return credSource{ref: credref.Ref{Kind: kind}, cached: true, native: true}, nil
	}
	return credSource{}, nil
}

func (c *Client) resolve(ctx context.Context, src credSource, t credentials.Target) (credentials.Credential, error) {
	switch {
	case src.ref.IsZero():
		return credentials.Credential{}, nil
	case !src.cached:
		return c.resolver.Resolve(ctx, src.ref, t)
	}
	cred, err := c.resolver.ResolveCached(ctx, src.ref, t, src.ttl)
	if err != nil && src.native && errors.Is(err, credentials.ErrNoNative) {
		c.log.LogAttrs(ctx, slog.LevelDebug, "no native credentials; using anonymous access",
			slog.String("registry", t.Host), slog.String("kind", src.ref.Kind.String()))
		return credentials.Credential{}, nil
	}
	return cred, err
}
