package credentials

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/poll"
)

// fakeSecrets serves Secrets from a map keyed "namespace/name".
type fakeSecrets struct {
	data  map[string]map[string][]byte
	calls atomic.Int32
}

var errSecretNotFound = errors.New("not found")

func (f *fakeSecrets) GetSecret(_ context.Context, namespace, name string) (map[string][]byte, error) {
	f.calls.Add(1)
	d, ok := f.data[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("secret %q: %w", name, errSecretNotFound)
	}
	return d, nil
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeNative hands out numbered credentials valid for lifetime (0: no
// expiry reported), or fails while failing is set.
type fakeNative struct {
	clock    *fakeClock
	lifetime time.Duration
	failing  atomic.Bool
	calls    atomic.Int32
	block    chan struct{} // if set, each call waits for it
}

func (f *fakeNative) Credential(ctx context.Context, _ credref.Ref, _ Target) (Credential, time.Time, error) {
	n := f.calls.Add(1)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return Credential{}, time.Time{}, ctx.Err()
		}
	}
	if f.failing.Load() {
		return Credential{}, time.Time{}, errors.New("provider unavailable")
	}
	var exp time.Time
	if f.lifetime != 0 {
		exp = f.clock.Now().Add(f.lifetime)
	}
	return Credential{Username: "AWS", Password: fmt.Sprintf("token-%d", n)}, exp, nil
}

func mustRef(t *testing.T, s string) credref.Ref {
	t.Helper()
	r, err := credref.ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func dockerConfig(auths string) map[string][]byte {
	return map[string][]byte{".dockerconfigjson": []byte(`{"auths":{` + auths + `}}`)}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestResolve(t *testing.T) {
	secrets := &fakeSecrets{data: map[string]map[string][]byte{
		"argocd/fields": {"creds": []byte("robot:pa:ss\n"), "bad": []byte("no-colon"), "empty": nil},
		"argocd/regcred": dockerConfig(`
			"https://ghcr.io": {"username": "gh-user", "password": "gh-pass"},
			"quay.io": {"auth": "` + b64("quay-user:quay-pass") + `"},
			"registry.example.com/v1/": {"auth": "` + b64("ex-user:ex-pass") + `"},
			"https://index.docker.io/v1/": {"username": "hub-user", "password": "hub-pass"},
			"http://LOCALHOST:5000": {"username": "local", "password": "lp"},
			"nothing.io": {}`),
		"argocd/legacy":   {".dockercfg": []byte(`{"legacy.io": {"auth": "` + b64("old:pw") + `"}}`)},
		"argocd/opaque":   {"token": []byte("x")},
		"argocd/exacthub": dockerConfig(`"docker.io": {"username": "a", "password": "1"}, "https://index.docker.io/v1/": {"username": "b", "password": "2"}`),
	}}
	env := map[string]string{"REG_CREDS": "envuser:envpass", "BAD_CREDS": "nocolon", "MULTI": "a:b\nc:d"}
	r := NewResolver(
		WithSecretGetter(secrets),
		WithEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }),
	)

	ok := []struct {
		ref, host string
		want      Credential
	}{
		{"env:REG_CREDS", "ghcr.io", Credential{"envuser", "envpass"}},
		{"secret:argocd/fields#creds", "ghcr.io", Credential{"robot", "pa:ss"}},
		{"pullsecret:argocd/regcred", "ghcr.io", Credential{"gh-user", "gh-pass"}},
		{"pullsecret:argocd/regcred", "quay.io", Credential{"quay-user", "quay-pass"}},
		{"pullsecret:argocd/regcred", "registry.example.com", Credential{"ex-user", "ex-pass"}},
		{"pullsecret:argocd/regcred", "docker.io", Credential{"hub-user", "hub-pass"}},
		{"pullsecret:argocd/regcred", "index.docker.io", Credential{"hub-user", "hub-pass"}},
		{"pullsecret:argocd/regcred", "localhost:5000", Credential{"local", "lp"}},
		{"pullsecret:argocd/legacy", "legacy.io", Credential{"old", "pw"}},
		{"pullsecret:argocd/exacthub", "docker.io", Credential{"a", "1"}},
	}
	for _, tt := range ok {
		t.Run(tt.ref+"@"+tt.host, func(t *testing.T) {
			got, err := r.Resolve(t.Context(), mustRef(t, tt.ref), Target{Host: tt.host})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}

	failing := []struct {
		ref, host string
		is        error
		msg       string
	}{
		{"env:UNSET", "ghcr.io", ErrNotFound, "credentials env:UNSET for registry ghcr.io: credentials not found: environment variable UNSET is not set"},
		{"env:BAD_CREDS", "ghcr.io", ErrMalformed, "environment variable BAD_CREDS: malformed credentials"},
		{"env:MULTI", "ghcr.io", ErrMalformed, "not a single line"},
		{"secret:argocd/fields#nope", "ghcr.io", ErrNotFound, `secret argocd/fields has no field "nope"`},
		{"secret:argocd/fields#bad", "ghcr.io", ErrMalformed, `field "bad" of secret argocd/fields`},
		{"secret:argocd/fields#empty", "ghcr.io", ErrMalformed, `field "empty" of secret argocd/fields`},
		{"secret:argocd/missing#x", "ghcr.io", errSecretNotFound, "reading secret argocd/missing"},
		{"pullsecret:argocd/regcred", "gcr.io", ErrNotFound, "secret argocd/regcred has no entry for registry gcr.io"},
		{"pullsecret:argocd/regcred", "nothing.io", ErrMalformed, `entry "nothing.io" of secret argocd/regcred`},
		{"pullsecret:argocd/opaque", "ghcr.io", ErrNotFound, "secret argocd/opaque has no .dockerconfigjson field"},
		{"ecr", "123456789012.dkr.ecr.eu-west-1.amazonaws.com", ErrNativeNotConfigured, "credentials ecr for registry 123456789012.dkr.ecr.eu-west-1.amazonaws.com: no provider configured"},
		{"gcp", "gcr.io", ErrNativeNotConfigured, "credentials gcp for registry gcr.io"},
		{"azure", "example.azurecr.io", ErrNativeNotConfigured, "credentials azure for registry example.azurecr.io"},
	}
	for _, tt := range failing {
		t.Run("error "+tt.ref+"@"+tt.host, func(t *testing.T) {
			_, err := r.Resolve(t.Context(), mustRef(t, tt.ref), Target{Host: tt.host})
			if !errors.Is(err, tt.is) {
				t.Fatalf("got %v, want errors.Is %v", err, tt.is)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Host != tt.host {
				t.Errorf("not a *Error for %s: %#v", tt.host, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q should contain %q", err.Error(), tt.msg)
			}
		})
	}

	t.Run("no secret getter", func(t *testing.T) {
		_, err := NewResolver().Resolve(t.Context(), mustRef(t, "pullsecret:a/b"), Target{Host: "ghcr.io"})
		if !errors.Is(err, ErrNoSecretGetter) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("zero reference", func(t *testing.T) {
		_, err := r.Resolve(t.Context(), credref.Ref{}, Target{Host: "ghcr.io"})
		if !errors.Is(err, credref.ErrInvalidRef) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("native provider", func(t *testing.T) {
		p := &fakeNative{clock: newFakeClock()}
		r := NewResolver(WithNative(credref.KindECR, p), WithNative(credref.KindExt, p))
		got, err := r.Resolve(t.Context(), mustRef(t, "ecr:arn:aws:iam::123456789012:role/x"), Target{Host: "123456789012.dkr.ecr.eu-west-1.amazonaws.com"})
		if err != nil || got.Username != "AWS" {
			t.Fatalf("got %v, %v", got, err)
		}
		if _, err := r.Resolve(t.Context(), mustRef(t, "gcp"), Target{Host: "gcr.io"}); !errors.Is(err, ErrNativeNotConfigured) {
			t.Fatalf("gcp without provider: %v", err)
		}
		if _, err := r.Resolve(t.Context(), mustRef(t, "ext:/nonexistent/script"), Target{Host: "x.io"}); err == nil || p.calls.Load() != 1 {
			t.Fatalf("a provider for a non-native kind must be ignored: %v, %d calls", err, p.calls.Load())
		}
	})
}

func TestResolveCached(t *testing.T) {
	host := "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
	ref := credref.Ref{Kind: credref.KindECR}

	t.Run("ttl", func(t *testing.T) {
		clock := newFakeClock()
		p := &fakeNative{clock: clock}
		r := NewResolver(WithClock(clock.Now), WithNative(credref.KindECR, p))
		get := func() string {
			t.Helper()
			c, err := r.ResolveCached(t.Context(), ref, Target{Host: host}, 10*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return c.Password
		}
		if got := get(); got != "token-1" {
			t.Fatalf("first: %s", got)
		}
		clock.Advance(10*time.Hour - time.Second)
		if got := get(); got != "token-1" {
			t.Fatalf("before ttl: %s", got)
		}
		clock.Advance(time.Second)
		if got := get(); got != "token-2" {
			t.Fatalf("at ttl: %s", got)
		}
		r.Invalidate(ref, host)
		if got := get(); got != "token-3" {
			t.Fatalf("after Invalidate: %s", got)
		}
		// Other hosts and references have their own entries.
		if c, _ := r.ResolveCached(t.Context(), ref, Target{Host: "other.dkr.ecr.eu-west-1.amazonaws.com"}, 10*time.Hour); c.Password != "token-4" {
			t.Fatalf("other host: %s", c.Password)
		}
	})

	t.Run("no expiry", func(t *testing.T) {
		clock := newFakeClock()
		p := &fakeNative{clock: clock}
		r := NewResolver(WithClock(clock.Now), WithNative(credref.KindECR, p))
		for range 3 {
			if _, err := r.ResolveCached(t.Context(), ref, Target{Host: host}, 0); err != nil {
				t.Fatal(err)
			}
			clock.Advance(1000 * time.Hour)
		}
		if p.calls.Load() != 1 {
			t.Fatalf("ttl 0 should cache until Invalidate; %d calls", p.calls.Load())
		}
	})

	t.Run("provider expiry before ttl", func(t *testing.T) {
		clock := newFakeClock()
		p := &fakeNative{clock: clock, lifetime: time.Hour}
		r := NewResolver(WithClock(clock.Now), WithNative(credref.KindECR, p))
		get := func() string {
			c, err := r.ResolveCached(t.Context(), ref, Target{Host: host}, 10*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return c.Password
		}
		get()
		clock.Advance(53 * time.Minute)
		if got := get(); got != "token-1" {
			t.Fatalf("at 53m of 60m: %s", got)
		}
		clock.Advance(2 * time.Minute)
		if got := get(); got != "token-2" {
			t.Fatalf("at 55m of 60m the credential should be refreshed: %s", got)
		}
	})

	t.Run("expired at once is not cached", func(t *testing.T) {
		clock := newFakeClock()
		p := &fakeNative{clock: clock, lifetime: -time.Minute}
		r := NewResolver(WithClock(clock.Now), WithNative(credref.KindECR, p))
		r.ResolveCached(t.Context(), ref, Target{Host: host}, 0)
		r.ResolveCached(t.Context(), ref, Target{Host: host}, 0)
		if p.calls.Load() != 2 {
			t.Fatalf("%d calls", p.calls.Load())
		}
	})

	t.Run("errors are not cached", func(t *testing.T) {
		clock := newFakeClock()
		p := &fakeNative{clock: clock}
		p.failing.Store(true)
		r := NewResolver(WithClock(clock.Now), WithNative(credref.KindECR, p))
		if _, err := r.ResolveCached(t.Context(), ref, Target{Host: host}, time.Hour); err == nil || !strings.Contains(err.Error(), "provider unavailable") {
			t.Fatalf("got %v", err)
		}
		p.failing.Store(false)
		if c, err := r.ResolveCached(t.Context(), ref, Target{Host: host}, time.Hour); err != nil || c.Password != "token-2" {
			t.Fatalf("got %v, %v", c, err)
		}
	})

	t.Run("caller leaving does not stop the others", func(t *testing.T) {
		clock := newFakeClock()
		p := &fakeNative{clock: clock, block: make(chan struct{})}
		r := NewResolver(WithClock(clock.Now), WithNative(credref.KindECR, p))
		ctx, cancel := context.WithCancel(t.Context())
		leaver := make(chan error, 1)
		go func() {
			_, err := r.ResolveCached(ctx, ref, Target{Host: host}, time.Hour)
			leaver <- err
		}()
		poll.True(t, 10*time.Second, "the first caller's resolution to reach the provider", func() bool { return p.calls.Load() == 1 })
		// The second caller must have joined before the first leaves:
		// a resolution nobody waits for any more is stopped.
		joined := make(chan struct{}, 1)
		r.joined = func(shared bool) {
			if shared {
				joined <- struct{}{}
			}
		}
		stayer := make(chan error, 1)
		go func() {
			_, err := r.ResolveCached(t.Context(), ref, Target{Host: host}, time.Hour)
			stayer <- err
		}()
		<-joined
		cancel()
		if err := <-leaver; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled caller: %v", err)
		}
		close(p.block)
		if err := <-stayer; err != nil {
			t.Fatalf("remaining caller: %v", err)
		}
		if p.calls.Load() != 1 {
			t.Fatalf("%d calls, want one shared", p.calls.Load())
		}
	})

	t.Run("invalidate during a resolution", func(t *testing.T) {
		clock := newFakeClock()
		p := &fakeNative{clock: clock, block: make(chan struct{})}
		r := NewResolver(WithClock(clock.Now), WithNative(credref.KindECR, p))
		done := make(chan struct{})
		go func() {
			r.ResolveCached(t.Context(), ref, Target{Host: host}, time.Hour)
			close(done)
		}()
		poll.True(t, 10*time.Second, "the resolution to reach the provider", func() bool { return p.calls.Load() == 1 })
		r.Invalidate(ref, host)
		close(p.block)
		<-done
		if c, _ := r.ResolveCached(t.Context(), ref, Target{Host: host}, time.Hour); c.Password != "token-2" {
			t.Fatalf("what was fetched before Invalidate must not be kept: %s", c.Password)
		}
	})
}

func TestCacheUntil(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		ttl    time.Duration
		expiry time.Time
		at     time.Time
		keep   bool
	}{
		{"no limits", 0, time.Time{}, time.Time{}, true},
		{"ttl only", time.Hour, time.Time{}, start.Add(time.Hour), true},
		{"expiry only", 0, start.Add(12 * time.Hour), start.Add(12*time.Hour - 72*time.Minute), true},
		{"ttl earlier", time.Hour, start.Add(12 * time.Hour), start.Add(time.Hour), true},
		{"expiry earlier", 10 * time.Hour, start.Add(time.Hour), start.Add(54 * time.Minute), true},
		{"expired", time.Hour, start, time.Time{}, false},
	}
	for _, tt := range tests {
		at, keep := cacheUntil(start, tt.ttl, tt.expiry)
		if !at.Equal(tt.at) || keep != tt.keep {
			t.Errorf("%s: got %v %v, want %v %v", tt.name, at, keep, tt.at, tt.keep)
		}
	}
}
