package registry

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"k8s.io/utils/lru"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
)

// Sizes of the client's caches, and its User-Agent unless WithUserAgent
// says otherwise.
const (
	// sessionCacheSize bounds the authenticated sessions kept, one per
	// endpoint, repository and credential source in use. Below the pairs
	// in use, every cycle evicts sessions it needs again and logs in anew:
	// at 20,000 Applications over 3,481 pairs a cache of 1,024 cost 3,404
	// token requests and as many pings per steady cycle.
	sessionCacheSize = 8192
	// metadataCacheSize bounds the metadata results kept by digest; sized
	// as the sessions, for the digests a cycle reads (4,100 at 20,000
	// Applications in the scale benchmark).
	metadataCacheSize = 16384
	// hostCacheSize bounds the endpoint stacks and host gates kept: an
	// image names its registry host, and a host no registries.conf entry
	// matches gets a stack and gate of its own.
	hostCacheSize    = 4096
	defaultUserAgent = "argocd-image-updater"
)

// Client reads tags and image metadata from container registries. It is
// safe for concurrent use.
//
// Each request goes to the api_url of the registries.conf entry that serves
// the image (or the endpoint inferred from its host); an http:// api_url
// means plain HTTP, `insecure: true` skips TLS verification, and `limit` is
// the endpoint's rate limit (otherwise config.Endpoint.RateLimit: a fixed
// cap for the public registries only, or what WithDefaultLimit says). Each
// registries.conf entry, and each host without one, has its own limit,
// which token requests to its auth server share. Each API host also has a
// transport.Gate, kept for the client's life (for the 4,096 hosts last
// used): a bound on requests waiting for an answer (WithMaxInFlight) that
// narrows on 429 and 503 answers, and a pause for the host's Retry-After.
// Requests that fail with 429 or 5xx are retried with the registry's
// Retry-After or a bounded exponential backoff.
//
// Credentials are chosen in this order: the image's own credential
// reference (kept for a minute, or, for ext: scripts, once per
// credentials.WithCycle context);
// else the entry's `credentials` (cached for `credsexpire`); else, for ECR
// and Google hosts when the credentials.Resolver has a source of that
// kind, the cloud's native credentials (a source reporting
// credentials.ErrNoNative means anonymous); else anonymous access. When the
// registry answers 401 to cached credentials, they are dropped, fetched
// again, and the call is made once more.
//
// tagsortmode is not used here: callers read it from the Endpoint and may
// then skip metadata.
//
// Tags are listed, and manifests and image configs read, with
// go-containerregistry's remote package over the client's own transport
// stack. What a registry sends is bounded: each request, body included,
// ends after DefaultRequestTimeout (or WithRequestTimeout); a tag list
// after 100,000 tags, 32 MiB or 10,000 pages; a manifest after 4 MiB and
// an image config after 16 MiB. Past a limit the call fails with an error
// that wraps ErrTooLarge. Calls also end when their context does.
type Client struct {
	config        func() *config.Config
	resolver      *credentials.Resolver
	metrics       *Metrics
	log           *slog.Logger
	base          http.RoundTripper
	retryAttempts int           // 0: the retry layer's default
	retryBase     time.Duration // 0: the retry layer's default
	retryMax      time.Duration // 0: the retry layer's default
	userAgent     string
	defaultLimit  float64  // 0: config.Endpoint.RateLimit
	maxInFlight   int      // 0: transport.DefaultMaxInFlight
	hostCAs       *hostCAs // nil: WithHostCAs not given
	ecrPushTimes  ECRPushTimes

	requestTimeout time.Duration
	maxTags        int
	maxTagBytes    int64
	maxTagPages    int

	baseOnce     sync.Once
	secureBase   http.RoundTripper
	insecureBase http.RoundTripper

	stacksMu sync.Mutex
	stacks   *lru.Cache // endpoint prefix → *endpointStack
	gates    *lru.Cache // API host → *transport.Gate

	sessions     *lru.Cache // sessionKey → *session
	pingsMu      sync.Mutex
	pings        *lru.Cache // pingKey → *transport.PingOnce
	sessionCalls coalesce.Group[*session]
	tagCalls     coalesce.Group[[]string]
	meta         *lru.Cache // metaKey → metaEntry
	metaCalls    coalesce.Group[metaEntry]
	known        *tagKnowledge
}

// Option configures a Client.
type Option func(*Client)

// WithConfig gives the registries configuration in force; it is called on
// every request, so it can follow a config.Watcher (pass its Current). By
// default the configuration is empty: every endpoint is inferred.
func WithConfig(current func() *config.Config) Option {
	return func(c *Client) {
		if current != nil {
			c.config = current
		}
	}
}

// WithCredentialResolver sets where credentials come from. By default a
// resolver without Kubernetes access and without native sources is used.
func WithCredentialResolver(r *credentials.Resolver) Option {
	return func(c *Client) {
		if r != nil {
			c.resolver = r
		}
	}
}

// WithMetrics records the client's requests and cache use in m.
func WithMetrics(m *Metrics) Option {
	return func(c *Client) { c.metrics = m }
}

// WithLogger sets the logger; by default nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

// withBaseTransport replaces the HTTP transport under the client's own
// layers (rate limit, retry, metrics, authentication), for tests that watch
// what reaches the network.
func withBaseTransport(rt http.RoundTripper) Option {
	return func(c *Client) { c.base = rt }
}

// withMetadataCacheSize bounds the metadata cache to n results, for
// benchmarks that must miss it.
func withMetadataCacheSize(n int) Option {
	return func(c *Client) { c.meta = lru.New(max(n, 1)) }
}

// withRetry sets how often a failed GET or HEAD is tried in all, the first
// backoff delay, and the longest wait, which also caps how long a
// Retry-After pauses the host; see transport.NewRetry and transport.Gate.
func withRetry(maxAttempts int, baseDelay, maxDelay time.Duration) Option {
	return func(c *Client) {
		c.retryAttempts, c.retryBase, c.retryMax = maxAttempts, baseDelay, maxDelay
	}
}

// WithDefaultLimit sets the rate limit, in requests per second, of
// registries whose registries.conf entry sets no limit, in place of
// config.Endpoint.RateLimit. A non-positive value keeps that rule.
func WithDefaultLimit(rps float64) Option {
	return func(c *Client) {
		if rps > 0 {
			c.defaultLimit = rps
		}
	}
}

// WithMaxInFlight bounds the requests to one registry host that wait for an
// answer at once, in place of transport.DefaultMaxInFlight. A
// non-positive value keeps the default.
func WithMaxInFlight(n int) Option {
	return func(c *Client) {
		if n > 0 {
			c.maxInFlight = n
		}
	}
}

// WithRequestTimeout bounds each HTTP request to a registry, from sending
// it to the end of its response body and retries included, in place of
// DefaultRequestTimeout. A non-positive value keeps the default.
func WithRequestTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.requestTimeout = d
		}
	}
}

// WithUserAgent sets the User-Agent of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) {
		if ua != "" {
			c.userAgent = ua
		}
	}
}

// NewClient builds a client.
func NewClient(opts ...Option) *Client {
	c := &Client{
		config:    func() *config.Config { return nil },
		log:       slog.New(slog.DiscardHandler),
		userAgent: defaultUserAgent,
		stacks:    lru.New(hostCacheSize),
		gates:     lru.New(hostCacheSize),
		sessions:  lru.New(sessionCacheSize),
		pings:     lru.New(hostCacheSize),
		meta:      lru.New(metadataCacheSize),
		known:     newTagKnowledge(knownBytes),

		requestTimeout: DefaultRequestTimeout,
		maxTags:        defaultMaxTags,
		maxTagBytes:    defaultMaxTagListBytes,
		maxTagPages:    defaultMaxTagPages,
	}
	for _, opt := range opts {
		opt(c)
	}
	if c.resolver == nil {
		c.resolver = credentials.NewResolver()
	}
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
	if h := e.hint(); h != "" {
		b.WriteString(" (" + h + ")")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// StatusCode is the HTTP status of the registry's answer that failed the
// operation, or 0 when it failed otherwise.
func (e *Error) StatusCode() int {
	var te *ggcr.Error
	if errors.As(e.Err, &te) {
		return te.StatusCode
	}
	return 0
}

func isUnauthorized(err error) bool {
	var te *ggcr.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusUnauthorized
}
