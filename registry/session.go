package registry

import (
	"context"
	"errors"
	"log/slog"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/registry/transport"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// target is what one operation works on, with the error to wrap its
// failures in.
type target struct {
	ref     imageref.Reference
	stack   *endpointStack
	src     credSource
	mutable bool // the entry says `mutabletags`
}

// target finds ref's endpoint and credential source. On error, the
// returned target can still wrap it.
func (c *Client) target(ref imageref.Reference, creds credref.Ref) (target, error) {
	t := target{ref: ref, src: credSource{ref: creds}}
	if ref.IsZero() {
		return t, errors.New("empty image reference")
	}
	ep := c.Endpoint(ref)
	st, err := c.stackFor(ep)
	if err != nil {
		return t, err
	}
	t.stack, t.mutable = st, ep.MutableTags
	if t.src, err = c.sourceFor(ep, ref.Registry(), creds); err != nil {
		return t, err
	}
	return t, nil
}

// key identifies the repository and credential source, for sharing work
// between concurrent callers.
func (t target) key() string {
	return t.stack.label + "\x00" + t.stack.host + "\x00" + t.ref.Registry() + "\x00" + t.ref.Repository() + "\x00" + t.src.identity()
}

func (t target) wrap(op string, err error) error {
	e := &Error{
		Op:          op,
		Registry:    t.ref.Registry(),
		Repository:  t.ref.Repository(),
		Tag:         t.ref.Tag(),
		Digest:      t.ref.Digest(),
		Credentials: t.src.identity(),
		Err:         err,
	}
	if t.stack != nil {
		e.APIHost = t.stack.host
	}
	return e
}

// run calls op with a session for t's repository. When the registry
// answers 401 to cached registry-level credentials, they are invalidated and
// op runs once more with freshly resolved ones.
func (c *Client) run(ctx context.Context, t target, op func(context.Context, *session) error) error {
	host := t.ref.Registry()
	for retried := false; ; retried = true {
		cred, err := c.resolve(ctx, t.src, credentials.Target{Host: host, Repository: t.ref.Repository()})
		if err != nil {
			return err
		}
		s, err := c.session(ctx, t, cred)
		if err == nil {
			err = op(ctx, s)
		}
		if isUnauthorized(err) && (retried || !t.src.cached) {
			// Refused for good: the next session asks the registry
			// anew how it wants to be authenticated.
			c.pings.Remove(pingKey{stack: t.stack, cred: cred})
		}
		if err == nil || retried || !t.src.cached || !isUnauthorized(err) {
			return err
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "registry refused cached credentials; fetching them again",
			slog.String("registry", host), slog.String("repository", t.ref.Repository()),
			slog.String("credentials", t.src.identity()))
		c.resolver.Invalidate(t.src.ref, host)
		c.sessions.Remove(sessionKey{stack: t.stack, repo: t.ref.Repository(), identity: t.src.identity()})
		c.pings.Remove(pingKey{stack: t.stack, cred: cred})
	}
}

// session is an authenticated view of one repository: ggcr's transport
// (after the ping and, for bearer auth, the token exchange) on top of the
// endpoint's stack, and a remote.Puller that sends through it. Reusing it
// saves those requests on every call; ggcr renews an expired token by
// itself. The ping is sent once per endpoint and credentials (pingFor),
// whatever the repositories: only the token is per repository, as its
// scope is.
type session struct {
	cred   credentials.Credential // what it authenticates with; a change means a new session
	repo   name.Repository
	puller *remote.Puller
	host   string
}

type sessionKey struct {
	stack    *endpointStack
	repo     string
	identity string
}

func (c *Client) session(ctx context.Context, t target, cred credentials.Credential) (*session, error) {
	key := sessionKey{stack: t.stack, repo: t.ref.Repository(), identity: t.src.identity()}
	if v, ok := c.sessions.Get(key); ok {
		if s := v.(*session); s.cred == cred {
			c.metrics.cache(cacheAuth, true)
			return s, nil
		}
	}
	c.metrics.cache(cacheAuth, false)
	s, err := c.sessionCalls.Do(ctx, t.key(), nil, func(ctx context.Context) (*session, error) {
		return c.newSession(ctx, t.stack, key.repo, cred)
	})
	if err == nil && s.cred != cred {
		// Joined a session being set up with other credentials from the
		// same source (they were just renewed); set up our own.
		s, err = c.newSession(ctx, t.stack, key.repo, cred)
	}
	if err != nil {
		return nil, err
	}
	c.sessions.Add(key, s)
	return s, nil
}

func (c *Client) newSession(ctx context.Context, st *endpointStack, repoPath string, cred credentials.Credential) (*session, error) {
	opts := []name.Option{name.WeakValidation}
	if st.scheme == "http" {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(st.host+"/"+repoPath, opts...)
	if err != nil {
		return nil, err
	}
	auth := authn.Anonymous
	if !cred.IsZero() {
		auth = &authn.Basic{Username: cred.Username, Password: cred.Password}
	}
	rt, err := transport.NewAuth(ctx, c.pingFor(st, cred), repo, auth)
	if err != nil {
		return nil, err
	}
	// rt is a go-containerregistry transport.Wrapper: the Puller sends
	// through it as it is, without a ping, token exchange, retry or
	// User-Agent layer of its own.
	p, err := remote.NewPuller(remote.WithTransport(rt), remote.WithPageSize(tagsPageSize))
	if err != nil {
		return nil, err
	}
	return &session{cred: cred, repo: repo, puller: p, host: st.host}, nil
}

// pingKey identifies whom a ping's answer serves: an endpoint and the
// credentials used there. New credentials (a rotated Secret) ping anew.
type pingKey struct {
	stack *endpointStack
	cred  credentials.Credential
}

// pingFor is the endpoint's stack under the one PingOnce of st and cred.
func (c *Client) pingFor(st *endpointStack, cred credentials.Credential) *transport.PingOnce {
	key := pingKey{stack: st, cred: cred}
	c.pingsMu.Lock()
	defer c.pingsMu.Unlock()
	if v, ok := c.pings.Get(key); ok {
		return v.(*transport.PingOnce)
	}
	p := transport.NewPingOnce(st.rt, st.host)
	c.pings.Add(key, p)
	return p
}
