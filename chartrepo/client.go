package chartrepo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/internal/transient"
	"github.com/image-updater/argocd-image-updater/repoaccess"
)

// DefaultMaxIndexSize bounds one index.yaml as read: the largest public
// repositories serve some tens of MiB. Parsing is streamed, so the bound
// is on time and traffic; memory holds only the versions (MaxVersions).
const DefaultMaxIndexSize = 128 << 20

// DefaultMaxCached bounds the indexes kept between cycles, one per
// repository and credentials.
const DefaultMaxCached = 1000

// maxCachedVersions bounds the versions of all the indexes kept together
// (some tens of MiB): each may hold MaxVersions, and the repositories
// are named by tenants, so a count of indexes alone bounds nothing.
const maxCachedVersions = 2 * MaxVersions

// Client reads Helm repository indexes, keeping each with its ETag (or
// Last-Modified) for the next read. It is safe for concurrent use.
type Client struct {
	secrets   repoaccess.SecretLister
	projects  repoaccess.AppProjectGetter
	namespace string
	maxIndex  int64
	maxCached int
	// maxVersions bounds the versions of the indexes kept together.
	maxVersions int
	timeout     time.Duration

	calls coalesce.Group[Index]
	mu    sync.Mutex
	cache map[string]*cached
	// order is the keys of cache, least recently used first.
	order []string
	// versions counts the versions of the indexes in cache.
	versions int
}

type cached struct {
	etag, lastModified string
	index              Index
	versions           int
}

// Option configures a Client.
type Option func(*Client)

// WithMaxIndexSize bounds the index.yaml read (default
// DefaultMaxIndexSize).
func WithMaxIndexSize(n int64) Option { return func(c *Client) { c.maxIndex = n } }

// WithMaxCached bounds the indexes kept between cycles (default
// DefaultMaxCached).
func WithMaxCached(n int) Option { return func(c *Client) { c.maxCached = max(n, 1) } }

// WithTimeout bounds one index request, body included (default 2 minutes).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// NewClient reads Argo CD's repository Secrets and AppProjects from
// argoCDNamespace through secrets and projects.
func NewClient(secrets repoaccess.SecretLister, projects repoaccess.AppProjectGetter, argoCDNamespace string, opts ...Option) *Client {
	c := &Client{
		secrets: secrets, projects: projects, namespace: argoCDNamespace,
		maxIndex: DefaultMaxIndexSize, maxCached: DefaultMaxCached, maxVersions: maxCachedVersions, timeout: 2 * time.Minute,
		cache: map[string]*cached{},
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Session is one cycle's reads of Argo CD's Secrets and AppProjects: each
// is read once however many Applications ask.
type Session struct {
	c        *Client
	resolver *repoaccess.Resolver
	policy   *repoaccess.Policy
	mu       sync.Mutex
	seen     map[string]accessResult
}

type accessResult struct {
	access Access
	err    error
}

// Session starts a cycle's reads.
func (c *Client) Session() *Session {
	return &Session{
		c:        c,
		resolver: repoaccess.NewResolver(c.secrets, c.namespace, ""),
		policy:   repoaccess.NewPolicy(c.projects, c.namespace),
		seen:     map[string]accessResult{},
	}
}

// Access is one repository as an Application may read it: the URL, with
// the credentials it gets.
type Access struct {
	URL    string
	client *http.Client
	auth   func(*http.Request)
	// creds names the credentials ("" for none).
	creds string
}

// Key identifies what a read gives: the same URL read with the same
// credentials gives the same index.
func (a Access) Key() string { return a.URL + "\x00" + a.creds }

// Access checks that an Application of namespace and project may read the
// repository repoURL (its AppProject's sourceRepos and sourceNamespaces,
// as for git write-back), and finds its credentials among Argo CD's
// repository Secrets of type helm.
func (s *Session) Access(ctx context.Context, namespace, project, repoURL string) (Access, error) {
	key := namespace + "\x00" + project + "\x00" + repoURL
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.seen[key]; ok {
		return r.access, r.err
	}
	a, err := s.access(ctx, namespace, project, repoURL)
	s.seen[key] = accessResult{a, err}
	return a, err
}

func (s *Session) access(ctx context.Context, namespace, project, repoURL string) (Access, error) {
	if err := s.policy.Check(ctx, repoaccess.Request{Namespace: namespace, Project: project, RepoURL: repoURL}); err != nil {
		return Access{}, err
	}
	creds, err := s.resolver.ResolveHelm(ctx, repoURL, project)
	if err != nil {
		return Access{}, err
	}
	client, auth, err := s.resolver.HTTPRepository(ctx, repoURL, creds)
	if err != nil {
		return Access{}, err
	}
	client.Transport = bounded.Transport(client.Transport, s.c.maxIndex, "index of "+repoaccess.RedactURL(repoURL))
	return Access{URL: repoURL, client: client, auth: auth, creds: creds.Source}, nil
}

// Index is the repository's index: read again only when the server says
// it changed (If-None-Match, If-Modified-Since), and once for callers
// that ask at the same time.
func (c *Client) Index(ctx context.Context, a Access) (Index, error) {
	if a.client == nil {
		return Index{}, errors.New("no access to the repository (see Session.Access)")
	}
	return c.calls.Do(ctx, a.Key(), nil, func(ctx context.Context) (Index, error) {
		ix, err := c.read(ctx, a)
		if err != nil {
			return Index{}, fmt.Errorf("the index of Helm repository %s: %w", repoaccess.RedactURL(a.URL), repoaccess.RedactErrorURLs(err))
		}
		return ix, nil
	})
}

// indexAttempts and indexBackoff bound the retries of an index read that
// met a fault the next request may not meet (a reset, a cut answer, a
// 5xx or 429): without them one such answer costs the charts of the
// repository a whole cycle.
const (
	indexAttempts = 3
	indexBackoff  = 500 * time.Millisecond
)

func (c *Client) read(ctx context.Context, a Access) (Index, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		ix, retry, err := c.readOnce(ctx, a)
		if err == nil || !retry || attempt == indexAttempts {
			return ix, err
		}
		select {
		case <-ctx.Done():
			return Index{}, err
		case <-time.After(indexBackoff << (attempt - 1)):
		}
	}
}

// readOnce asks for the index once; retry tells whether its failure may
// not recur.
func (c *Client) readOnce(ctx context.Context, a Access) (_ Index, retry bool, _ error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(a.URL, "/")+"/index.yaml", nil)
	if err != nil {
		return Index{}, false, err
	}
	a.auth(req)
	c.mu.Lock()
	prev := c.cache[a.Key()]
	c.mu.Unlock()
	if prev != nil {
		if prev.etag != "" {
			req.Header.Set("If-None-Match", prev.etag)
		} else if prev.lastModified != "" {
			req.Header.Set("If-Modified-Since", prev.lastModified)
		}
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return Index{}, transient.Network(err), err
	}
	defer func() {
		// What is left of a body (an error's) is not read: the
		// connection is closed rather than drained.
		_ = resp.Body.Close()
	}()
	switch {
	case resp.StatusCode == http.StatusNotModified && prev != nil:
		c.keep(a.Key(), prev)
		return prev.index, false, nil
	case resp.StatusCode != http.StatusOK:
		// The body is not quoted: the answer of whatever host a tenant
		// names is not read back to the tenant, as for registries.
		retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
		return Index{}, retry, fmt.Errorf("answered %s", bounded.Excerpt(resp.Status, bounded.MessageLength))
	}
	ix, err := ParseIndex(resp.Body)
	if err != nil {
		return Index{}, transient.Network(err), err
	}
	n := 0
	for _, v := range ix.Charts {
		n += len(v)
	}
	c.keep(a.Key(), &cached{etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified"), index: ix, versions: n})
	return ix, false, nil
}

// keep records e as the latest read of key, most recently used, and
// drops the least recently used beyond the bounds.
func (c *Client) keep(key string, e *cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop(key)
	if e.etag == "" && e.lastModified == "" {
		// Nothing to ask with next time.
		return
	}
	c.cache[key] = e
	c.order = append(c.order, key)
	c.versions += e.versions
	for len(c.order) > c.maxCached || c.versions > c.maxVersions {
		c.drop(c.order[0])
	}
}

// drop forgets key; the caller holds c.mu.
func (c *Client) drop(key string) {
	e, ok := c.cache[key]
	if !ok {
		return
	}
	delete(c.cache, key)
	c.versions -= e.versions
	c.order = slices.DeleteFunc(c.order, func(k string) bool { return k == key })
}
