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
	"github.com/image-updater/argocd-image-updater/internal/budget"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/internal/transient"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
)

// DefaultMaxIndexSize bounds one index.yaml as read: the largest public
// repositories serve some tens of MiB. Parsing is streamed, so the bound
// is on time and traffic; memory holds only the versions (MaxVersions).
const DefaultMaxIndexSize = 128 << 20

// DefaultCycleBudget bounds in bytes the chart versions a cycle holds at
// once, of all the indexes it reads, from the read of an index to the
// choice of its charts: a tenant names the repositories and their charts,
// and another's server answers. Real charts list some hundreds of
// versions (some tens of KiB); this is some 1.5 million versions, an
// eighth of the install's 512 MiB.
const DefaultCycleBudget = 64 << 20

// DefaultMaxKept bounds in bytes the indexes kept between cycles, each
// with its ETag, the least recently used dropped first: as much as a
// cycle may hold, so that the steady cycle, asking for what it asked
// before, is answered 304 from memory.
const DefaultMaxKept = 64 << 20

// Client reads Helm repository indexes, keeping each with its ETag (or
// Last-Modified) for the next read: of each index, only the versions of
// the charts asked for. It is safe for concurrent use.
type Client struct {
	secrets     repoaccess.SecretLister
	projects    repoaccess.AppProjectGetter
	namespace   string
	maxIndex    int64
	cycleBudget int64
	timeout     time.Duration

	calls coalesce.Group[Index]
	kept  *budget.LRU[string, *cached]
	// transports keeps the repositories' HTTP transports between
	// sessions: a cycle's requests reuse the connections of the last.
	transports *repoaccess.Transports
}

// cached is an index kept between cycles.
type cached struct {
	key                string
	etag, lastModified string
	// asked are the charts read, listed or not: the index answers for
	// them alone, and is read whole again when asked for another.
	asked map[string]bool
	index Index
}

// keptEntry is what a kept index takes besides its names and versions:
// its entry in the LRU, its map of charts asked.
const keptEntry = 256

func (e *cached) Bytes() int64 {
	n := keptEntry + e.index.Bytes() + budget.String(e.key) + budget.String(e.etag) + budget.String(e.lastModified)
	for name := range e.asked {
		n += chartBytes(name)
	}
	return n
}

// covers tells whether the kept index answers for all of charts.
func (e *cached) covers(charts []string) bool {
	for _, c := range charts {
		if !e.asked[c] {
			return false
		}
	}
	return true
}

// Option configures a Client.
type Option func(*Client)

// WithMaxIndexSize bounds the index.yaml read (default
// DefaultMaxIndexSize).
func WithMaxIndexSize(n int64) Option { return func(c *Client) { c.maxIndex = n } }

// WithCycleBudget bounds in bytes the chart versions a cycle holds at
// once (default DefaultCycleBudget).
func WithCycleBudget(n int64) Option { return func(c *Client) { c.cycleBudget = n } }

// WithMaxKept bounds in bytes the indexes kept between cycles (default
// DefaultMaxKept).
func WithMaxKept(n int64) Option {
	return func(c *Client) { c.kept = budget.NewLRU[string, *cached](n) }
}

// WithTimeout bounds one index request, body included (default 2 minutes).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// NewClient reads Argo CD's repository Secrets and AppProjects from
// argoCDNamespace through secrets and projects.
func NewClient(secrets repoaccess.SecretLister, projects repoaccess.AppProjectGetter, argoCDNamespace string, opts ...Option) *Client {
	c := &Client{
		secrets: secrets, projects: projects, namespace: argoCDNamespace,
		maxIndex: DefaultMaxIndexSize, cycleBudget: DefaultCycleBudget, timeout: 2 * time.Minute,
		kept:       budget.NewLRU[string, *cached](DefaultMaxKept),
		transports: repoaccess.NewTransports(0),
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Session is one cycle's reads of Argo CD's Secrets and AppProjects: each
// is read once however many Applications ask. The indexes read through
// its Accesses count against its budget until released.
type Session struct {
	c        *Client
	resolver *repoaccess.Resolver
	policy   *repoaccess.Policy
	budget   *budget.Budget
	mu       sync.Mutex
	seen     map[string]accessResult
}

type accessResult struct {
	access Access
	err    error
}

// Session starts a cycle's reads.
func (c *Client) Session() *Session { return c.SessionWithin(budget.New(c.cycleBudget)) }

// SessionWithin is a Session whose indexes count against b, a budget the
// caller shares with what else its cycle holds.
func (c *Client) SessionWithin(b *budget.Budget) *Session {
	return &Session{
		c:        c,
		resolver: repoaccess.NewResolver(c.secrets, c.namespace, "", repoaccess.KeepTransports(c.transports)),
		policy:   repoaccess.NewPolicy(c.projects, c.namespace),
		budget:   b,
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
	// budget is the Session's.
	budget *budget.Budget
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
	client.Transport = bounded.Transport(client.Transport, s.c.maxIndex, "index of "+repourl.RedactURL(repoURL))
	return Access{URL: repoURL, client: client, auth: auth, creds: creds.Source, budget: s.budget}, nil
}

// Index is the versions of charts in the repository's index, counted
// against the Session's budget until released (Index.Release): the index
// is read again only when the server says it changed (If-None-Match,
// If-Modified-Since), or when it was kept without one of charts, and once
// for callers that ask at the same time.
func (c *Client) Index(ctx context.Context, a Access, charts []string) (Index, error) {
	if a.client == nil {
		return Index{}, errors.New("no access to the repository (see Session.Access)")
	}
	charts = slices.Compact(slices.Sorted(slices.Values(charts)))
	return c.calls.Do(ctx, a.Key()+"\x00"+strings.Join(charts, "\x00"), nil, func(ctx context.Context) (Index, error) {
		ix, err := c.read(ctx, a, charts)
		if err != nil {
			return Index{}, fmt.Errorf("the index of Helm repository %s: %w", repourl.RedactURL(a.URL), repourl.RedactErrorURLs(err))
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

func (c *Client) read(ctx context.Context, a Access, charts []string) (Index, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		ix, retry, err := c.readOnce(ctx, a, charts)
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
func (c *Client) readOnce(ctx context.Context, a Access, charts []string) (_ Index, retry bool, _ error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(a.URL, "/")+"/index.yaml", nil)
	if err != nil {
		return Index{}, false, err
	}
	a.auth(req)
	// A kept index without one of charts cannot answer for it: a 304
	// would tell nothing of that chart's versions.
	prev, _ := c.kept.Get(a.Key())
	if prev != nil && prev.covers(charts) {
		if prev.etag != "" {
			req.Header.Set("If-None-Match", prev.etag)
		} else {
			req.Header.Set("If-Modified-Since", prev.lastModified)
		}
	} else {
		prev = nil
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
		ix := Index{Charts: make(map[string][]string, len(charts))}
		for _, name := range charts {
			if v, ok := prev.index.Charts[name]; ok {
				ix.Charts[name] = v
			}
		}
		held, err := hold(ix, ix.Bytes(), a.budget)
		return held, false, err
	case resp.StatusCode != http.StatusOK:
		// The body is not quoted: the answer of whatever host a tenant
		// names is not read back to the tenant, as for registries.
		retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
		return Index{}, retry, fmt.Errorf("answered %s", bounded.Excerpt(resp.Status, bounded.MessageLength))
	}
	want := make(map[string]bool, len(charts))
	for _, name := range charts {
		want[name] = true
	}
	// The versions are counted as they are read: an index past the
	// budget fails while it is read, not once held.
	col := &collector{want: want, take: func(n int64) error { return take(a.budget, n) }}
	ix, err := parseIndex(resp.Body, col)
	if err != nil {
		a.budget.Release(col.bytes)
		return Index{}, !errors.Is(err, budget.ErrExceeded) && transient.Network(err), err
	}
	e := &cached{key: a.Key(), etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified"), asked: want, index: ix}
	if e.etag == "" && e.lastModified == "" {
		// Nothing to ask with next time.
		c.kept.Remove(e.key)
	} else {
		c.kept.Put(e.key, e)
	}
	ix.held = &held{budget: a.budget, bytes: col.bytes}
	return ix, false, nil
}

// hold counts n bytes of ix against b.
func hold(ix Index, n int64, b *budget.Budget) (Index, error) {
	if err := take(b, n); err != nil {
		return Index{}, err
	}
	ix.held = &held{budget: b, bytes: n}
	return ix, nil
}

// take counts n bytes against the cycle's budget b.
func take(b *budget.Budget, n int64) error {
	if err := b.Take(n); err != nil {
		return fmt.Errorf("the chart versions this cycle holds would pass its budget of %s: %w", budget.Format(b.Limit()), budget.ErrExceeded)
	}
	return nil
}
