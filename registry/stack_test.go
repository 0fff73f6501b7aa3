package registry

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// faultyProxy stands in front of a real registry and answers the next
// tag-list requests with an error status instead of passing them on.
type faultyProxy struct {
	host       string
	failures   atomic.Int32 // tag-list requests still to fail
	status     atomic.Int32
	retryAfter atomic.Value // string; "" sends no Retry-After
	tagLists   atomic.Int32 // tag-list requests seen
}

func startFaultyProxy(t *testing.T, registryHost string) *faultyProxy {
	t.Helper()
	target, err := url.Parse("http://" + registryHost)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &faultyProxy{}
	p.retryAfter.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/tags/list") {
			p.tagLists.Add(1)
			if p.failures.Add(-1) >= 0 {
				if ra := p.retryAfter.Load().(string); ra != "" {
					w.Header().Set("Retry-After", ra)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(int(p.status.Load()))
				code := "UNAVAILABLE"
				if p.status.Load() == http.StatusTooManyRequests {
					code = "TOOMANYREQUESTS"
				}
				_, _ = io.WriteString(w, `{"errors":[{"code":"`+code+`","message":"injected by the test"}]}`)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.host = strings.TrimPrefix(srv.URL, "http://")
	return p
}

func (p *faultyProxy) fail(n int, status int, retryAfter string) {
	p.failures.Store(int32(n))
	p.status.Store(int32(status))
	p.retryAfter.Store(retryAfter)
	p.tagLists.Store(0)
}

func TestRetryOnTooManyRequestsAndServerErrors(t *testing.T) {
	reg := testenv.StartRegistry(t)
	reg.PushTags(t, "app", []string{"1.0", "2.0"})
	proxy := startFaultyProxy(t, reg.Host)
	creds := "env:CREDS"
	vars := map[string]string{"CREDS": reg.Username + ":" + reg.Password}

	for _, tc := range []struct {
		name       string
		failures   int
		status     int
		retryAfter string
		maxDelay   time.Duration
		minElapsed time.Duration // lower bound only: waiting less would ignore Retry-After
		wantStatus int           // 0: success
	}{
		{name: "429 with Retry-After 0", failures: 1, status: 429, retryAfter: "0", maxDelay: 10 * time.Second},
		{name: "429 with Retry-After 1", failures: 1, status: 429, retryAfter: "1", maxDelay: 10 * time.Second, minElapsed: time.Second},
		{name: "Retry-After capped", failures: 2, status: 429, retryAfter: "3600", maxDelay: 20 * time.Millisecond},
		{name: "503 twice, then success", failures: 2, status: 503, maxDelay: 50 * time.Millisecond},
		{name: "503 beyond the attempt budget", failures: 3, status: 503, maxDelay: 50 * time.Millisecond, wantStatus: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestMetrics(t)
			c := NewClient(
				WithConfig(testConfig(t, proxy.host, "credentials: "+creds)),
				WithCredentialResolver(envResolver(vars)),
				withRetry(3, 5*time.Millisecond, tc.maxDelay),
				WithMetrics(m),
			)
			proxy.fail(tc.failures, tc.status, tc.retryAfter)
			start := time.Now()
			tags, err := c.Tags(t.Context(), imageRef(t, proxy.host+"/app"), credref.Ref{})
			elapsed := time.Since(start)

			if tc.wantStatus != 0 {
				var e *Error
				var te *ggcr.Error
				if !errors.As(err, &e) || e.StatusCode() != tc.wantStatus || !errors.As(err, &te) {
					t.Fatalf("want a *registry.Error with status %d wrapping a *transport.Error, got %v", tc.wantStatus, err)
				}
				if got := proxy.tagLists.Load(); got != 3 {
					t.Errorf("%d tag-list attempts, want the budget of 3", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tags) != 2 {
				t.Errorf("tags = %v", tags)
			}
			if got, want := proxy.tagLists.Load(), int32(tc.failures+1); got != want {
				t.Errorf("%d tag-list requests, want %d", got, want)
			}
			if got := testutil.ToFloat64(m.retries.WithLabelValues(proxy.host)); got != float64(tc.failures) {
				t.Errorf("retries metric = %v, want %d", got, tc.failures)
			}
			if elapsed < tc.minElapsed {
				t.Errorf("retried after %s, before the registry's Retry-After of %s", elapsed, tc.minElapsed)
			}
		})
	}
}

func TestRateLimitConfiguration(t *testing.T) {
	rps := func(st *endpointStack) float64 {
		if st.limiter == nil {
			return 0
		}
		return float64(st.limiter.Limit())
	}
	for _, tc := range []struct {
		name  string
		image string
		cfg   func() *config.Config
		opts  []Option
		want  float64 // 0: no fixed cap
		burst int
	}{
		{"limit set", "registry.test:5000/app", testConfig(t, "registry.test:5000", "limit: 5"), nil, 5, 5},
		{"entry without limit: no cap", "registry.test:5000/app", testConfig(t, "registry.test:5000"), nil, 0, 0},
		{"inferred private host: no cap", "registry.test:5000/app", nil, nil, 0, 0},
		{"inferred GHCR", "ghcr.io/org/app", nil, nil, config.PublicLimit, config.PublicLimit},
		{"inferred Docker Hub", "nginx", nil, nil, config.PublicLimit, config.PublicLimit},
		{"Quay entry without limit", "quay.io/org/app", testConfigPrefix(t, "quay.io", "quay.io"), nil, config.PublicLimit, config.PublicLimit},
		{"GCR entry with its own limit", "gcr.io/p/app", testConfigPrefix(t, "gcr.io", "gcr.io", "limit: 100"), nil, 100, 100},
		{"WithDefaultLimit for entries without one", "registry.test:5000/app", nil, []Option{WithDefaultLimit(2.5)}, 2.5, 3},
		{"WithDefaultLimit leaves limit alone", "registry.test:5000/app", testConfig(t, "registry.test:5000", "limit: 5"), []Option{WithDefaultLimit(2.5)}, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClient(append([]Option{WithConfig(tc.cfg)}, tc.opts...)...)
			st, err := c.stackFor(c.Endpoint(imageRef(t, tc.image)))
			if err != nil {
				t.Fatal(err)
			}
			if got := rps(st); got != tc.want {
				t.Errorf("%v requests per second, want %v", got, tc.want)
			}
			if st.limiter != nil && st.limiter.Burst() != tc.burst {
				t.Errorf("burst %d, want %d", st.limiter.Burst(), tc.burst)
			}
		})
	}
}

// A reloaded configuration builds a new stack, but the host's gate, with
// what it learnt of the registry's load, stays.
func TestStackReloadKeepsTheGate(t *testing.T) {
	limited := testConfig(t, "registry.test:5000", "limit: 5")
	current := limited
	c := NewClient(WithConfig(func() *config.Config { return current() }), WithMaxInFlight(7))
	ref := imageRef(t, "registry.test:5000/app")
	st, err := c.stackFor(c.Endpoint(ref))
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.stackFor(c.Endpoint(ref)); again != st {
		t.Error("the stack of an endpoint is not reused")
	}
	current = testConfig(t, "registry.test:5000")
	st2, err := c.stackFor(c.Endpoint(ref))
	if err != nil {
		t.Fatal(err)
	}
	if st2 == st || st2.limiter != nil {
		t.Errorf("after reload without limit: same stack %v, limiter %v", st2 == st, st2.limiter)
	}
	if st2.gate != st.gate || st.gate.Window() != 7 {
		t.Errorf("gate shared %v, window %d, want the same gate with 7 places", st2.gate == st.gate, st.gate.Window())
	}
	// internal_hosts belongs to the stack's host guard.
	current = testConfig(t, "registry.test:5000", "internal_hosts: [auth.registry.test]")
	if st3, err := c.stackFor(c.Endpoint(ref)); err != nil || st3 == st2 || st3.gate != st.gate {
		t.Errorf("after reload with internal_hosts: %v, same stack %v, same gate %v", err, st3 == st2, st3.gate == st.gate)
	}
}

// An image names its registry host: hosts without a registries.conf entry
// must not keep stacks and gates without bound.
func TestStacksAndGatesAreBounded(t *testing.T) {
	c := NewClient()
	for i := range hostCacheSize + 10 {
		if _, err := c.stackFor(c.Endpoint(imageRef(t, fmt.Sprintf("h%d.example/app", i)))); err != nil {
			t.Fatal(err)
		}
	}
	if c.stacks.Len() > hostCacheSize || c.gates.Len() > hostCacheSize {
		t.Errorf("%d stacks and %d gates kept, want at most %d", c.stacks.Len(), c.gates.Len(), hostCacheSize)
	}
}
