package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
)

// Errors a resolution may wrap; match them with errors.Is.
var (
	// ErrNativeNotConfigured: the reference is of a native kind (ecr, gcp)
	// and no NativeProvider was given for it.
	ErrNativeNotConfigured = errors.New("no provider configured for native credentials")
	// ErrNoSecretGetter: the reference needs a Kubernetes Secret and the
	// resolver was built without WithSecretGetter.
	ErrNoSecretGetter = errors.New("reading Kubernetes Secrets is not configured")
	// ErrCredentialNotFound: the source exists but holds nothing for this
	// reference or registry (unset variable, missing field, no auths entry).
	ErrCredentialNotFound = errors.New("credentials not found")
	// ErrMalformedCredential: the source holds something that is not a
	// credential. The offending value is never part of the message.
	ErrMalformedCredential = errors.New("malformed credentials")
	// ErrScriptTimeout: an ext: script ran longer than the script timeout
	// and was killed.
	ErrScriptTimeout = errors.New("credential script timed out")
)

// DefaultScriptTimeout bounds an ext: script unless WithScriptTimeout says
// otherwise.
const DefaultScriptTimeout = 30 * time.Second

// CredentialError is the error of a failed resolution. It names the
// reference and the registry; it never contains credential material.
type CredentialError struct {
	Ref  CredentialRef
	Host string
	Err  error
}

func (e *CredentialError) Error() string {
	return fmt.Sprintf("credentials %s for registry %s: %v", e.Ref, e.Host, e.Err)
}

func (e *CredentialError) Unwrap() error { return e.Err }

// SecretGetter reads one Kubernetes Secret's data.
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (map[string][]byte, error)
}

// NativeProvider produces credentials through a cloud provider's SDK. The
// returned expiry (zero if unknown) lets ResolveCached refresh in time. Its
// errors must not contain tokens.
type NativeProvider interface {
	Credential(ctx context.Context, ref CredentialRef, registryHost string) (Credential, time.Time, error)
}

// ResolverOption configures a CredentialResolver.
type ResolverOption func(*CredentialResolver)

// WithSecretGetter lets the resolver read Secrets for pullsecret: and
// secret: references.
func WithSecretGetter(g SecretGetter) ResolverOption {
	return func(r *CredentialResolver) { r.secrets = g }
}

// WithEnv sets how env: references look up variables (os.LookupEnv by
// default). A nil function keeps the default.
func WithEnv(lookup func(string) (string, bool)) ResolverOption {
	return func(r *CredentialResolver) {
		if lookup != nil {
			r.lookupEnv = lookup
		}
	}
}

// WithScriptTimeout sets how long an ext: script may run before it and its
// children are killed (DefaultScriptTimeout by default). A non-positive value
// keeps the default.
func WithScriptTimeout(d time.Duration) ResolverOption {
	return func(r *CredentialResolver) {
		if d > 0 {
			r.scriptTimeout = d
		}
	}
}

// WithClock sets the clock for cache expiry (time.Now by default). A nil
// function keeps the default.
func WithClock(now func() time.Time) ResolverOption {
	return func(r *CredentialResolver) {
		if now != nil {
			r.now = now
		}
	}
}

// WithNativeProvider serves references of a native kind (CredentialECR,
// CredentialGCP) with p. It has no effect for other kinds, whose sources
// are built in.
func WithNativeProvider(kind CredentialKind, p NativeProvider) ResolverOption {
	return func(r *CredentialResolver) {
		if kind.Native() && p != nil {
			r.native[kind] = p
		}
	}
}

// CredentialResolver turns credential references into credentials. It is
// safe for concurrent use.
type CredentialResolver struct {
	secrets       SecretGetter
	lookupEnv     func(string) (string, bool)
	scriptTimeout time.Duration
	now           func() time.Time
	native        map[CredentialKind]NativeProvider

	flight coalesce.Group[Credential]
	mu     sync.Mutex
	cache  map[cacheKey]cacheEntry
	gen    map[cacheKey]uint64 // bumped by Invalidate, so that a lookup already under way does not store what it fetched
}

type cacheKey struct {
	ref  CredentialRef
	host string
}

type cacheEntry struct {
	cred      Credential
	refreshAt time.Time // zero: until invalidated
}

// NewCredentialResolver builds a resolver.
func NewCredentialResolver(opts ...ResolverOption) *CredentialResolver {
	r := &CredentialResolver{
		lookupEnv:     os.LookupEnv,
		scriptTimeout: DefaultScriptTimeout,
		now:           time.Now,
		native:        map[CredentialKind]NativeProvider{},
		cache:         map[cacheKey]cacheEntry{},
		gen:           map[cacheKey]uint64{},
	}
	// A resolution every caller left still fills the cache.
	r.flight.Detached = true
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// HasNative reports whether references of the native kind are served by a
// provider (given with WithNativeProvider).
func (r *CredentialResolver) HasNative(kind CredentialKind) bool {
	_, ok := r.native[kind]
	return ok
}

// Resolve fetches the credentials ref points to for the registry
// registryHost, without caching. This is what image-level references use.
func (r *CredentialResolver) Resolve(ctx context.Context, ref CredentialRef, registryHost string) (Credential, error) {
	c, _, err := r.resolve(ctx, ref, registryHost)
	return c, err
}

func (r *CredentialResolver) resolve(ctx context.Context, ref CredentialRef, host string) (Credential, time.Time, error) {
	var (
		c      Credential
		expiry time.Time
		err    error
	)
	switch ref.Kind {
	case CredentialPullSecret:
		c, err = r.fromPullSecret(ctx, ref, host)
	case CredentialSecret:
		c, err = r.fromSecretField(ctx, ref)
	case CredentialEnv:
		c, err = r.fromEnv(ref)
	case CredentialExt:
		c, err = r.runScript(ctx, ref.Path)
	case CredentialECR, CredentialGCP:
		p := r.native[ref.Kind]
		if p == nil {
			err = ErrNativeNotConfigured
			break
		}
		c, expiry, err = p.Credential(ctx, ref, host)
	default:
		err = fmt.Errorf("%w: the reference has no kind", ErrInvalidCredentialRef)
	}
	if err != nil {
		return Credential{}, time.Time{}, &CredentialError{Ref: ref, Host: host, Err: err}
	}
	return c, expiry, nil
}

// sharedResolveGrace lets the script's own timeout, which has the clearer
// message, fire before the bound on a shared resolution does.
const sharedResolveGrace = 5 * time.Second

// ResolveCached is Resolve for registry-level credentials: a result is
// reused for ttl (ttl <= 0: until Invalidate), or until shortly before the
// expiry a NativeProvider reported, whichever comes first. Concurrent
// callers for the same reference and registry share one resolution. Errors
// are not cached. A caller whose ctx ends stops waiting; the shared
// resolution goes on (bounded by the script timeout) for the others and
// for the cache.
func (r *CredentialResolver) ResolveCached(ctx context.Context, ref CredentialRef, registryHost string, ttl time.Duration) (Credential, error) {
	key := cacheKey{ref: ref, host: imageref.CanonicalHost(registryHost)}
	r.mu.Lock()
	e, ok := r.cache[key]
	r.mu.Unlock()
	if ok && (e.refreshAt.IsZero() || r.now().Before(e.refreshAt)) {
		return e.cred, nil
	}

	c, err := r.flight.Do(ctx, flightKey(key), nil, func(ctx context.Context) (Credential, error) {
		r.mu.Lock()
		gen := r.gen[key]
		r.mu.Unlock()

		wctx, cancel := context.WithTimeout(ctx, r.scriptTimeout+sharedResolveGrace)
		defer cancel()
		start := r.now()
		c, expiry, err := r.resolve(wctx, ref, registryHost)
		if err != nil {
			return Credential{}, err
		}
		if at, keep := cacheUntil(start, ttl, expiry); keep && (at.IsZero() || r.now().Before(at)) {
			r.mu.Lock()
			if r.gen[key] == gen {
				r.cache[key] = cacheEntry{cred: c, refreshAt: at}
			}
			r.mu.Unlock()
		}
		return c, nil
	})
	if err != nil && ctx.Err() != nil {
		return Credential{}, &CredentialError{Ref: ref, Host: registryHost, Err: ctx.Err()}
	}
	return c, err
}

// Invalidate drops the cached credentials for ref and registryHost, for
// example after the registry answered 401 with them. A resolution already
// under way is not reused or stored; the next caller starts a fresh one.
func (r *CredentialResolver) Invalidate(ref CredentialRef, registryHost string) {
	key := cacheKey{ref: ref, host: imageref.CanonicalHost(registryHost)}
	r.mu.Lock()
	delete(r.cache, key)
	r.gen[key]++
	r.mu.Unlock()
	r.flight.Forget(flightKey(key))
}

func flightKey(k cacheKey) string { return k.ref.String() + "\x00" + k.host }

// cacheUntil says until when a credential fetched at start may be reused:
// zero at means without limit, keep=false means not at all (already expired).
// A provider's expiry is honoured at 90% of the credential's lifetime, so
// a fresh one is in place before the old one stops working.
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

func (r *CredentialResolver) fromEnv(ref CredentialRef) (Credential, error) {
	v, ok := r.lookupEnv(ref.Var)
	if !ok {
		return Credential{}, fmt.Errorf("%w: environment variable %s is not set", ErrCredentialNotFound, ref.Var)
	}
	c, err := parseUserPass(v)
	if err != nil {
		return Credential{}, fmt.Errorf("environment variable %s: %w", ref.Var, err)
	}
	return c, nil
}

func (r *CredentialResolver) getSecret(ctx context.Context, ref CredentialRef) (map[string][]byte, error) {
	if r.secrets == nil {
		return nil, ErrNoSecretGetter
	}
	data, err := r.secrets.GetSecret(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("reading secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return data, nil
}

func (r *CredentialResolver) fromSecretField(ctx context.Context, ref CredentialRef) (Credential, error) {
	data, err := r.getSecret(ctx, ref)
	if err != nil {
		return Credential{}, err
	}
	v, ok := data[ref.Field]
	if !ok {
		return Credential{}, fmt.Errorf("%w: secret %s/%s has no field %q", ErrCredentialNotFound, ref.Namespace, ref.Name, ref.Field)
	}
	c, err := parseUserPass(string(v))
	if err != nil {
		return Credential{}, fmt.Errorf("field %q of secret %s/%s: %w", ref.Field, ref.Namespace, ref.Name, err)
	}
	return c, nil
}

// Keys of image pull Secrets: the current kubernetes.io/dockerconfigjson
// type and the legacy kubernetes.io/dockercfg type, which lacks the "auths"
// level.
const (
	dockerConfigJSONKey = ".dockerconfigjson"
	dockerCfgKey        = ".dockercfg"
)

type dockerAuthEntry struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

func (r *CredentialResolver) fromPullSecret(ctx context.Context, ref CredentialRef, host string) (Credential, error) {
	data, err := r.getSecret(ctx, ref)
	if err != nil {
		return Credential{}, err
	}
	secret := ref.Namespace + "/" + ref.Name
	var auths map[string]dockerAuthEntry
	switch {
	case data[dockerConfigJSONKey] != nil:
		var cfg struct {
			Auths map[string]dockerAuthEntry `json:"auths"`
		}
		if err := json.Unmarshal(data[dockerConfigJSONKey], &cfg); err != nil {
			return Credential{}, fmt.Errorf("%w: %s of secret %s is not a docker config (%s)", ErrMalformedCredential, dockerConfigJSONKey, secret, jsonErrorPlace(err))
		}
		auths = cfg.Auths
	case data[dockerCfgKey] != nil:
		if err := json.Unmarshal(data[dockerCfgKey], &auths); err != nil {
			return Credential{}, fmt.Errorf("%w: %s of secret %s is not a docker config (%s)", ErrMalformedCredential, dockerCfgKey, secret, jsonErrorPlace(err))
		}
	default:
		return Credential{}, fmt.Errorf("%w: secret %s has no %s field (is it of type kubernetes.io/dockerconfigjson?)", ErrCredentialNotFound, secret, dockerConfigJSONKey)
	}

	key, ok := matchAuthKey(auths, host)
	if !ok {
		return Credential{}, fmt.Errorf("%w: secret %s has no entry for registry %s", ErrCredentialNotFound, secret, host)
	}
	c, err := authEntryCredential(auths[key])
	if err != nil {
		return Credential{}, fmt.Errorf("entry %q of secret %s: %w", key, secret, err)
	}
	return c, nil
}

// jsonErrorPlace describes a JSON error by position only: the decoder's own
// message may quote a piece of the document, which could be a password.
func jsonErrorPlace(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" {
			return "wrong type of the document"
		}
		return fmt.Sprintf("wrong type at %q", typ.Field)
	}
	return "invalid JSON"
}

// matchAuthKey finds the auths entry for host. Keys are written many ways
// ("ghcr.io", "https://ghcr.io", "https://index.docker.io/v1/"); all are
// reduced to a bare host. Sorting makes the choice among equivalent keys
// stable, with an exact spelling preferred.
func matchAuthKey(auths map[string]dockerAuthEntry, host string) (string, bool) {
	want := imageref.CanonicalHost(host)
	keys := make([]string, 0, len(auths))
	for k := range auths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	found, ok := "", false
	for _, k := range keys {
		if authKeyHost(k) != want {
			continue
		}
		if k == host {
			return k, true
		}
		if !ok {
			found, ok = k, true
		}
	}
	return found, ok
}

func authKeyHost(key string) string {
	k := strings.ToLower(strings.TrimSpace(key))
	k = strings.TrimPrefix(k, "https://")
	k = strings.TrimPrefix(k, "http://")
	k, _, _ = strings.Cut(k, "/")
	return imageref.CanonicalHost(k)
}

func authEntryCredential(e dockerAuthEntry) (Credential, error) {
	if e.Username != "" || e.Password != "" {
		return Credential{Username: e.Username, Password: e.Password}, nil
	}
	if e.Auth == "" {
		return Credential{}, fmt.Errorf("%w: the entry has neither username/password nor auth", ErrMalformedCredential)
	}
	raw := strings.TrimSpace(e.Auth)
	dec, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		dec, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(raw, "="))
	}
	if err != nil {
		return Credential{}, fmt.Errorf("%w: auth is not base64", ErrMalformedCredential)
	}
	c, err := parseUserPass(string(dec))
	if err != nil {
		return Credential{}, fmt.Errorf("auth: %w", err)
	}
	return c, nil
}
