package registry

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/registry/credentials/ecr"
	"github.com/image-updater/argocd-image-updater/registry/credentials/gcp"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"k8s.io/utils/lru"
)

// Defaults of the Client options.
const (
	DefaultRetryAttempts     = 4
	DefaultRetryBaseDelay    = 200 * time.Millisecond
	DefaultRetryMaxDelay     = 10 * time.Second
	DefaultMetadataCacheSize = 4096
	DefaultUserAgent         = "argocd-image-updater"
)

// sessionCacheSize bounds the authenticated sessions kept, one per
// endpoint, repository and credential source in use.
const sessionCacheSize = 1024

// tagsPageSize is the n of a tag-list request: the most ECR accepts, and a
// size every registry we know pages at or honours.
const tagsPageSize = 1000

// Client reads tags and image metadata from container registries. It is
// safe for concurrent use.
//
// Each request goes to the api_url of the registries.conf entry that serves
// the image (or the endpoint inferred from its host); an http:// api_url
// means plain HTTP, `insecure: true` skips TLS verification, and `limit` is
// the endpoint's rate limit (config.DefaultLimit requests per second
// otherwise, or
// what WithDefaultLimit says). Each registries.conf entry, and each host
// without one, has its own limit, which token requests to its auth server
// share. Requests that fail with 429 or 5xx are retried with the
// registry's Retry-After or a bounded exponential backoff.
//
// Credentials are chosen in this order: the image's own credential
// reference (kept for a minute, or run on every call for ext: scripts);
// else the entry's `credentials` (cached for `credsexpire`); else, for ECR
// and Google hosts when the credentials.Resolver has a source of that kind,
// the cloud's native credentials (a source reporting
// credentials.ErrNoNative means anonymous); else anonymous access. When the registry answers 401 to cached
// credentials, they are dropped, fetched again, and the call is made once
// more.
//
// tagsortmode is not used here: callers read it from the Endpoint and may then
// skip metadata.
//
// Calls end when their context does; give it a deadline, since a registry
// that stops sending halfway through an answer is otherwise waited for.
type Client struct {
	config        func() *config.Config
	resolver      *credentials.Resolver
	metrics       *Metrics
	log           *slog.Logger
	base          http.RoundTripper
	rootCAs       *x509.CertPool
	retryAttempts int
	retryBase     time.Duration
	retryMax      time.Duration
	metaCacheSize int
	userAgent     string
	defaultLimit  float64

	baseOnce     sync.Once
	secureBase   http.RoundTripper
	insecureBase http.RoundTripper

	stacksMu sync.Mutex
	stacks   map[string]*endpointStack // by endpoint prefix

	sessions     *lru.Cache // sessionKey → *session
	sessionCalls coalesce.Group[*session]
	tagCalls     coalesce.Group[[]string]
	meta         *lru.Cache // metaKey → metaEntry
	metaCalls    coalesce.Group[metaEntry]
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithConfig gives the registries configuration in force; it is called on
// every request, so it can follow a config.Watcher (pass its Current). By
// default the configuration is empty: every endpoint is inferred.
func WithConfig(current func() *config.Config) ClientOption {
	return func(c *Client) {
		if current != nil {
			c.config = current
		}
	}
}

// WithCredentialResolver sets where credentials come from. By default a
// resolver without Kubernetes access and without native sources is used.
func WithCredentialResolver(r *credentials.Resolver) ClientOption {
	return func(c *Client) {
		if r != nil {
			c.resolver = r
		}
	}
}

// WithMetrics records the client's requests and cache use in m.
func WithMetrics(m *Metrics) ClientOption {
	return func(c *Client) { c.metrics = m }
}

// WithLogger sets the logger; by default nothing is logged.
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

// WithBaseTransport replaces the HTTP transport under the client's own
// layers (rate limit, retry, metrics, authentication). The TLS options
// (WithRootCAs, `insecure`) then are that transport's business.
func WithBaseTransport(rt http.RoundTripper) ClientOption {
	return func(c *Client) { c.base = rt }
}

// WithRootCAs sets the certificate authorities trusted for registries'
// TLS certificates, instead of the system's. To add a CA bundle to the
// system's, start from x509.SystemCertPool.
func WithRootCAs(pool *x509.CertPool) ClientOption {
	return func(c *Client) { c.rootCAs = pool }
}

// WithRetry sets how often a failed GET or HEAD is tried in all (1 means no
// retry), the first backoff delay, and the longest wait, which also caps a
// registry's Retry-After. Non-positive values keep the defaults.
func WithRetry(maxAttempts int, baseDelay, maxDelay time.Duration) ClientOption {
	return func(c *Client) {
		if maxAttempts > 0 {
			c.retryAttempts = maxAttempts
		}
		if baseDelay > 0 {
			c.retryBase = baseDelay
		}
		if maxDelay > 0 {
			c.retryMax = maxDelay
		}
	}
}

// WithMetadataCacheSize sets how many metadata results are kept by digest.
// A non-positive value keeps DefaultMetadataCacheSize.
func WithMetadataCacheSize(n int) ClientOption {
	return func(c *Client) {
		if n > 0 {
			c.metaCacheSize = n
		}
	}
}

// WithDefaultLimit sets the rate limit, in requests per second, of
// registries whose registries.conf entry sets no limit, in place of
// config.DefaultLimit. A non-positive value keeps config.DefaultLimit.
func WithDefaultLimit(rps float64) ClientOption {
	return func(c *Client) {
		if rps > 0 {
			c.defaultLimit = rps
		}
	}
}

// WithUserAgent sets the User-Agent of every request.
func WithUserAgent(ua string) ClientOption {
	return func(c *Client) {
		if ua != "" {
			c.userAgent = ua
		}
	}
}

// NewClient builds a client.
func NewClient(opts ...ClientOption) *Client {
	c := &Client{
		config:        func() *config.Config { return nil },
		log:           slog.New(slog.DiscardHandler),
		retryAttempts: DefaultRetryAttempts,
		retryBase:     DefaultRetryBaseDelay,
		retryMax:      DefaultRetryMaxDelay,
		metaCacheSize: DefaultMetadataCacheSize,
		userAgent:     DefaultUserAgent,
		defaultLimit:  config.DefaultLimit,
		stacks:        make(map[string]*endpointStack),
	}
	for _, opt := range opts {
		opt(c)
	}
	if c.resolver == nil {
		c.resolver = credentials.NewResolver()
	}
	c.retryBase = min(c.retryBase, c.retryMax)
	c.sessions = lru.New(sessionCacheSize)
	c.meta = lru.New(c.metaCacheSize)
	return c
}

// Endpoint returns the registry endpoint that serves ref under the current
// configuration, for example to read its TagSortMode.
func (c *Client) Endpoint(ref imageref.Reference) config.Endpoint {
	return c.config().EndpointFor(ref)
}

// Error is the error of a registry operation. It names the operation, the
// image and the credential reference used (never the credentials), and
// wraps the cause: errors.As finds a *transport.Error of
// go-containerregistry for registry answers, a *credentials.Error when
// credentials could not be obtained.
type Error struct {
	Op          string // "list tags", "get metadata"
	Registry    string // registry host of the image
	Repository  string
	Tag         string // "" when not about one tag
	Digest      string // "" when not about one digest
	APIHost     string // host the requests went to
	Credentials string // credential reference used; "" means anonymous
	Err         error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	b.WriteString(" of ")
	b.WriteString(e.Registry)
	b.WriteString("/")
	b.WriteString(e.Repository)
	if e.Tag != "" {
		b.WriteString(":" + e.Tag)
	}
	if e.Digest != "" {
		b.WriteString("@" + e.Digest)
	}
	if e.APIHost != "" && e.APIHost != e.Registry {
		b.WriteString(" at " + e.APIHost)
	}
	if e.Credentials != "" {
		b.WriteString(" with credentials " + e.Credentials)
	} else {
		b.WriteString(" anonymously")
	}
	if code := e.StatusCode(); code != 0 {
		fmt.Fprintf(&b, ": HTTP %d %s", code, http.StatusText(code))
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// StatusCode is the HTTP status of the registry's answer that failed the
// operation, or 0 when it failed otherwise.
func (e *Error) StatusCode() int {
	var te *transport.Error
	if errors.As(e.Err, &te) {
		return te.StatusCode
	}
	return 0
}

// Temporary reports whether trying again later may succeed: the registry
// was overloaded or unavailable (429, 5xx), could not be reached, or did not
// answer in time.
func (e *Error) Temporary() bool {
	var te *transport.Error
	if errors.As(e.Err, &te) {
		return te.Temporary()
	}
	if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, syscall.ECONNREFUSED) ||
		errors.Is(e.Err, syscall.ECONNRESET) {
		return true
	}
	var netErr net.Error
	if errors.As(e.Err, &netErr) && netErr.Timeout() {
		return true
	}
	var opErr *net.OpError
	return errors.As(e.Err, &opErr) && opErr.Op == "dial"
}

func isUnauthorized(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusUnauthorized
}

// nativeKindFor says which native credential provider serves a registry
// host by itself: ECR for private ECR hosts, GCP for gcr.io, *.gcr.io and
// <location>-docker.pkg.dev.
func nativeKindFor(host string) (credentials.Kind, bool) {
	if _, _, ok := ecr.ParseHost(host); ok {
		return credentials.KindECR, true
	}
	if gcp.IsRegistryHost(host) {
		return credentials.KindGCP, true
	}
	return 0, false
}

// credSource is where an operation's credentials come from.
type credSource struct {
	ref    credentials.Ref // zero: anonymous
	cached bool            // registry-level: ResolveCached, dropped on 401
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
// at once). ext: scripts of an image run on every use, as they always have.
const imageCredentialTTL = time.Minute

func (c *Client) sourceFor(ep config.Endpoint, host string, creds credentials.Ref) (credSource, error) {
	if !creds.IsZero() {
		if creds.Kind == credentials.KindExt {
			return credSource{ref: creds}, nil
		}
		return credSource{ref: creds, cached: true, ttl: imageCredentialTTL}, nil
	}
	if ep.Credentials != "" {
		ref, err := credentials.ParseRef(ep.Credentials)
		if err != nil {
			return credSource{}, fmt.Errorf("credentials of the registries.conf entry %s: %w", ep.Prefix, err)
		}
		return credSource{ref: ref, cached: true, ttl: ep.CredsExpire}, nil
	}
	if kind, ok := nativeKindFor(host); ok && c.resolver.HasNative(kind) {
		return credSource{ref: credentials.Ref{Kind: kind}, cached: true, native: true}, nil
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

// target is what one operation works on, with the error to wrap its
// failures in.
type target struct {
	ref   imageref.Reference
	stack *endpointStack
	src   credSource
}

// target finds ref's endpoint and credential source. On error, the
// returned target can still wrap it.
func (c *Client) target(ref imageref.Reference, creds credentials.Ref) (target, error) {
	t := target{ref: ref, src: credSource{ref: creds}}
	if ref.IsZero() {
		return t, errors.New("empty image reference")
	}
	ep := c.Endpoint(ref)
	st, err := c.stackFor(ep)
	if err != nil {
		return t, err
	}
	t.stack = st
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
		if err == nil || retried || !t.src.cached || !isUnauthorized(err) {
			return err
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "registry refused cached credentials; fetching them again",
			slog.String("registry", host), slog.String("repository", t.ref.Repository()),
			slog.String("credentials", t.src.identity()))
		c.resolver.Invalidate(t.src.ref, host)
		c.sessions.Remove(sessionKey{stack: t.stack, repo: t.ref.Repository(), identity: t.src.identity()})
	}
}

// session is an authenticated view of one repository: ggcr's transport
// (after the ping and, for bearer auth, the token exchange) on top of the
// endpoint's stack. Reusing it saves those requests on every call; ggcr
// renews an expired token by itself.
type session struct {
	cred   credentials.Credential // what it authenticates with; a change means a new session
	repo   name.Repository
	client *http.Client
	base   string // scheme://host of the API
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
			c.metrics.cache(CacheAuth, true)
			return s, nil
		}
	}
	c.metrics.cache(CacheAuth, false)
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
	// Our stack is not a *transport.Wrapper, so ggcr pings and
	// authenticates on top of it, and the result is a Wrapper: handed to
	// ggcr again it is used as it is, with no retry layer of ggcr's.
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, st.rt, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, err
	}
	return &session{
		cred:   cred,
		repo:   repo,
		client: &http.Client{Transport: rt, CheckRedirect: checkRedirect},
		base:   st.scheme + "://" + st.host,
		host:   st.host,
	}, nil
}
