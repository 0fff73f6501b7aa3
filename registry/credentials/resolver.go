package credentials

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// Errors a resolution may wrap; match them with errors.Is.
var (
	// ErrNativeNotConfigured: the reference is of a native kind (ecr, gcp,
	// azure) and no Source was given for it with WithNative.
	ErrNativeNotConfigured = errors.New("no provider configured for native credentials")
	// ErrNoSecretGetter: the reference needs a Kubernetes Secret and the
	// resolver was built without WithSecretGetter.
	ErrNoSecretGetter = errors.New("reading Kubernetes Secrets is not configured")
	// ErrNotFound: the source exists but holds nothing for this reference
	// or registry (unset variable, missing field, no auths entry).
	ErrNotFound = errors.New("credentials not found")
	// ErrMalformed: the source holds something that is not a credential.
	// The offending value is never part of the message.
	ErrMalformed = errors.New("malformed credentials")
	// ErrScriptTimeout: an ext: script ran longer than the script timeout
	// and was killed.
	ErrScriptTimeout = errors.New("credential script timed out")
	// ErrNoNative is wrapped by a native Source's error when the
	// environment offers no credentials of its kind at all (no cloud
	// identity, no credentials file), so that a caller that chose the
	// source on its own can fall back to anonymous access instead of
	// failing.
	ErrNoNative = errors.New("no native cloud credentials available")
)

// defaultScriptTimeout bounds an ext: script.
const defaultScriptTimeout = 30 * time.Second

// Error is the error of a failed resolution. It names the reference and the
// registry; it never contains credential material.
type Error struct {
	Ref  credref.Ref
	Host string
	Err  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("credentials %s for registry %s: %v", e.Ref, e.Host, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Target is what credentials are wanted for: a registry host as written in
// image references ("ghcr.io", "localhost:5000") and a repository on it
// ("org/app"; "" when no repository is concerned).
type Target struct {
	Host       string
	Repository string
}

// Source produces the credentials that references of one kind point to,
// with their expiry (zero if unknown), which lets ResolveCached refresh
// them in time. Its errors must not contain credential material.
//
// The resolver serves pullsecret:, secret:, env: and ext: references with
// sources of its own; native ones (ecr, gcp, azure) are given with
// WithNative.
// ResolveCached keeps a Source's answer per registry, so a Source must give
// every repository of a registry the same credentials; only pull secrets,
// whose entries may name repositories, tell them apart.
type Source interface {
	Credential(ctx context.Context, ref credref.Ref, t Target) (Credential, time.Time, error)
}

// answer is what a source holds for one registry, asked per repository.
type answer interface {
	forRepository(repository string) (Credential, error)
}

// registryWide is one credential for every repository of a registry.
type registryWide Credential

func (c registryWide) forRepository(string) (Credential, error) { return Credential(c), nil }

// registrySource is a Source whose one read holds the credentials of every
// repository of a registry (a pull secret). ResolveCached keeps that whole
// answer, so that repositories with entries of their own share the read.
type registrySource interface {
	forRegistry(ctx context.Context, ref credref.Ref, host string) (answer, error)
}

// SecretGetter reads one Kubernetes Secret's data.
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (map[string][]byte, error)
}

// Option configures a Resolver.
type Option func(*Resolver)

// WithSecretGetter lets the resolver read Secrets for pullsecret: and
// secret: references.
func WithSecretGetter(g SecretGetter) Option {
	return func(r *Resolver) { r.secrets = g }
}

// WithEnv sets how env: references look up variables (os.LookupEnv by
// default). A nil function keeps the default.
func WithEnv(lookup func(string) (string, bool)) Option {
	return func(r *Resolver) {
		if lookup != nil {
			r.lookupEnv = lookup
		}
	}
}

// withScriptTimeout sets how long an ext: script may run before it and its
// children are killed. A non-positive value keeps the default.
func withScriptTimeout(d time.Duration) Option {
	return func(r *Resolver) {
		if d > 0 {
			r.scriptTimeout = d
		}
	}
}

// withClock sets the clock for cache expiry. A nil function keeps time.Now.
func WithClock(now func() time.Time) Option {
	return func(r *Resolver) {
		if now != nil {
			r.now = now
		}
	}
}

// WithNative serves references of a native kind (credref.KindECR, credref.KindGCP,
// credref.KindAzure) with s. It has no effect for other kinds, whose sources are
// built in.
func WithNative(kind credref.Kind, s Source) Option {
	return func(r *Resolver) {
		if kind.Native() && s != nil {
			r.sources[kind] = s
		}
	}
}

// Resolver turns credential references into credentials, each kind through
// its Source, and keeps registry-level credentials for reuse. It is safe
// for concurrent use.
type Resolver struct {
	secrets       SecretGetter
	lookupEnv     func(string) (string, bool)
	scriptTimeout time.Duration
	now           func() time.Time
	sources       map[credref.Kind]Source

	flight coalesce.Group[answer]
	// joined, when set, is told of each caller joining a resolution
	// (tests wait on it).
	joined func(shared bool)
	mu     sync.Mutex
	cache  map[cacheKey]cacheEntry
	gen    map[cacheKey]uint64 // bumped by Invalidate, so that a lookup already under way does not store what it fetched
}

type cacheKey struct {
	ref  credref.Ref
	host string
}

type cacheEntry struct {
	answer    answer
	refreshAt time.Time // zero: until invalidated
}

// NewResolver builds a resolver.
func NewResolver(opts ...Option) *Resolver {
	r := &Resolver{
		lookupEnv:     os.LookupEnv,
		scriptTimeout: defaultScriptTimeout,
		now:           time.Now,
		sources:       map[credref.Kind]Source{},
		cache:         map[cacheKey]cacheEntry{},
		gen:           map[cacheKey]uint64{},
	}
	// A resolution every caller left still fills the cache.
	r.flight.Detached = true
	for _, opt := range opts {
		opt(r)
	}
	r.sources[credref.KindPullSecret] = pullSecrets{secrets: r.secrets}
	r.sources[credref.KindSecret] = secretFields{secrets: r.secrets}
	r.sources[credref.KindEnv] = envVars{lookup: r.lookupEnv}
	r.sources[credref.KindExt] = scripts{timeout: r.scriptTimeout}
	return r
}

// HasNative reports whether references of the native kind are served by a
// Source (given with WithNative).
func (r *Resolver) HasNative(kind credref.Kind) bool {
	_, ok := r.sources[kind]
	return kind.Native() && ok
}

// Resolve fetches the credentials ref points to for t, without caching
// beyond the update cycle of ctx (see WithCycle). This is what image-level
// ext: references use.
func (r *Resolver) Resolve(ctx context.Context, ref credref.Ref, t Target) (Credential, error) {
	if s := cycleOf(ctx); s != nil {
		return s.resolve(ctx, cycleResultKey(ref, t), func(ctx context.Context) (Credential, error) {
			return r.resolveOnce(ctx, ref, t)
		})
	}
	return r.resolveOnce(ctx, ref, t)
}

func (r *Resolver) resolveOnce(ctx context.Context, ref credref.Ref, t Target) (Credential, error) {
	s, err := r.source(ref)
	if err == nil {
		var c Credential
		if c, _, err = s.Credential(ctx, ref, t); err == nil {
			return c, nil
		}
	}
	return Credential{}, &Error{Ref: ref, Host: t.Host, Err: err}
}

func (r *Resolver) source(ref credref.Ref) (Source, error) {
	switch s := r.sources[ref.Kind]; {
	case s != nil:
		return s, nil
	case ref.Kind.Native():
		return nil, ErrNativeNotConfigured
	}
	return nil, fmt.Errorf("%w: the reference has no kind", credref.ErrInvalidRef)
}

// resolveRegistry is Resolve for the whole registry of t: a pull secret's
// entries for it, or the one credential other sources give.
func (r *Resolver) resolveRegistry(ctx context.Context, ref credref.Ref, t Target) (answer, time.Time, error) {
	var (
		a      answer
		expiry time.Time
	)
	s, err := r.source(ref)
	if err == nil {
		if rs, ok := s.(registrySource); ok {
			a, err = rs.forRegistry(ctx, ref, t.Host)
		} else {
			var c Credential
			c, expiry, err = s.Credential(ctx, ref, t)
			a = registryWide(c)
		}
	}
	if err != nil {
		return nil, time.Time{}, &Error{Ref: ref, Host: t.Host, Err: err}
	}
	return a, expiry, nil
}

// sharedResolveGrace lets the script's own timeout, which has the clearer
// message, fire before the bound on a shared resolution does.
const sharedResolveGrace = 5 * time.Second

// ResolveCached is Resolve for credentials worth keeping: a result is
// reused for ttl (ttl <= 0: until Invalidate), or until shortly before the
// expiry a Source reported, whichever comes first. Results are kept per
// reference and registry; for a pull secret, that is all its entries for
// the registry, so each repository still gets its own entry and one read
// of the Secret serves them all. Concurrent callers for the same reference
// and registry share one resolution. Errors are not cached: a repository
// the kept result has no credentials for is looked up afresh. A caller
// whose ctx ends stops waiting; the shared resolution goes on (bounded by
// the script timeout) for the others and for the cache.
func (r *Resolver) ResolveCached(ctx context.Context, ref credref.Ref, t Target, ttl time.Duration) (Credential, error) {
	key := cacheKey{ref: ref, host: imageref.CanonicalHost(t.Host)}
	r.mu.Lock()
	e, ok := r.cache[key]
	r.mu.Unlock()
	if ok && (e.refreshAt.IsZero() || r.now().Before(e.refreshAt)) {
		if c, err := e.answer.forRepository(t.Repository); err == nil {
			return c, nil
		}
	}

	a, err := r.flight.Do(ctx, flightKey(key), r.joined, func(ctx context.Context) (answer, error) {
		r.mu.Lock()
		gen := r.gen[key]
		r.mu.Unlock()

		wctx, cancel := context.WithTimeout(ctx, r.scriptTimeout+sharedResolveGrace)
		defer cancel()
		start := r.now()
		a, expiry, err := r.resolveRegistry(wctx, ref, t)
		if err != nil {
			return nil, err
		}
		if at, keep := cacheUntil(start, ttl, expiry); keep && (at.IsZero() || r.now().Before(at)) {
			r.mu.Lock()
			if r.gen[key] == gen {
				r.cache[key] = cacheEntry{answer: a, refreshAt: at}
			}
			r.mu.Unlock()
		}
		return a, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return Credential{}, &Error{Ref: ref, Host: t.Host, Err: ctx.Err()}
		}
		return Credential{}, err
	}
	c, err := a.forRepository(t.Repository)
	if err != nil {
		return Credential{}, &Error{Ref: ref, Host: t.Host, Err: err}
	}
	return c, nil
}

// Invalidate drops the cached credentials of ref for the registry host, for
// example after the registry answered 401 with them. A resolution already
// under way is not reused or stored; the next caller starts a fresh one.
func (r *Resolver) Invalidate(ref credref.Ref, host string) {
	key := cacheKey{ref: ref, host: imageref.CanonicalHost(host)}
	r.mu.Lock()
	delete(r.cache, key)
	r.gen[key]++
	r.mu.Unlock()
	r.flight.Forget(flightKey(key))
}

func flightKey(k cacheKey) string { return k.ref.String() + "\x00" + k.host }

// cacheUntil says until when a credential fetched at start may be reused:
// zero at means without limit, keep=false means not at all (already expired).
// A source's expiry is honoured at 90% of the credential's lifetime, so a
// fresh one is in place before the old one stops working.
func cacheUntil(start time.Time, ttl time.Duration, expiry time.Time) (at time.Time, keep bool) {
	if ttl > 0 {
		at = start.Add(ttl)
	}
	if !expiry.IsZero() {
		life := expiry.Sub(start)
		if life <= 0 {
			return time.Time{}, false
		}
		refresh := start.Add(life - life/10)
		if at.IsZero() || refresh.Before(at) {
			at = refresh
		}
	}
	return at, true
}
