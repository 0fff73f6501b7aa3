package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"

	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/testenv"
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
				WithRetry(3, 5*time.Millisecond, tc.maxDelay),
				WithMetrics(m),
			)
			proxy.fail(tc.failures, tc.status, tc.retryAfter)
			start := time.Now()
			tags, err := c.Tags(t.Context(), imageRef(t, proxy.host+"/app"), credentials.Ref{})
			elapsed := time.Since(start)

			if tc.wantStatus != 0 {
				var e *Error
				var te *transport.Error
				if !errors.As(err, &e) || e.StatusCode() != tc.wantStatus || !e.Temporary() || !errors.As(err, &te) {
					t.Fatalf("want a temporary *registry.Error with status %d wrapping a *transport.Error, got %v", tc.wantStatus, err)
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

// roundTripFunc adapts a function to http.RoundTripper, the one-method seam
// the retry layer wraps.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func statusResponse(r *http.Request, code int) *http.Response {
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}
}

func TestRetryTransport(t *testing.T) {
	refusedErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name      string
		method    string
		body      bool
		answers   []int // status per attempt; -1 = connection refused
		wantCalls int
		wantCode  int // -1: an error
	}{
		{"GET 503 then 200", http.MethodGet, false, []int{503, 200}, 2, 200},
		{"HEAD 502 then 200", http.MethodHead, false, []int{502, 200}, 2, 200},
		{"GET refused then 200", http.MethodGet, false, []int{-1, 200}, 2, 200},
		{"GET 404 is final", http.MethodGet, false, []int{404}, 1, 404},
		{"GET 501 is final", http.MethodGet, false, []int{501}, 1, 501},
		{"GET budget spent", http.MethodGet, false, []int{503, 503, 503, 503, 200}, 4, 503},
		{"GET refused to the end", http.MethodGet, false, []int{-1, -1, -1, -1}, 4, -1},
		{"POST never replayed", http.MethodPost, true, []int{503, 200}, 1, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			rt := &retryTransport{
				attempts: 4, base: time.Microsecond, max: time.Millisecond,
				next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
					code := tc.answers[calls]
					calls++
					if code == -1 {
						return nil, refusedErr
					}
					return statusResponse(r, code), nil
				}),
			}
			var body io.Reader
			if tc.body {
				body = strings.NewReader("payload")
			}
			req := httptest.NewRequestWithContext(t.Context(), tc.method, "http://registry.test/v2/", body)
			resp, err := rt.RoundTrip(req)
			if calls != tc.wantCalls {
				t.Errorf("%d attempts, want %d", calls, tc.wantCalls)
			}
			switch {
			case tc.wantCode == -1 && err == nil:
				t.Errorf("want an error, got status %d", resp.StatusCode)
			case tc.wantCode != -1 && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.wantCode != -1 && resp.StatusCode != tc.wantCode:
				t.Errorf("status %d, want %d", resp.StatusCode, tc.wantCode)
			}
		})
	}

	t.Run("gives up when the caller's deadline comes before the retry", func(t *testing.T) {
		var calls int
		rt := &retryTransport{
			attempts: 4, base: time.Hour, max: time.Hour,
			next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				calls++
				return statusResponse(r, 503), nil
			}),
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		resp, err := rt.RoundTrip(httptest.NewRequestWithContext(ctx, http.MethodGet, "http://registry.test/v2/", nil))
		if err != nil || resp.StatusCode != 503 || calls != 1 {
			t.Errorf("want the 503 at once after one attempt, got %v, %v after %d", resp, err, calls)
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"soon", 0, false},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	base, maxDelay := 200*time.Millisecond, 10*time.Second
	for attempt := 1; attempt <= 10; attempt++ {
		full := min(base<<(attempt-1), maxDelay)
		for range 50 {
			d := backoff(attempt, base, maxDelay)
			if d < full/2 || d > full {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", attempt, d, full/2, full)
			}
		}
	}
}

func TestRetryableError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"reset", &url.Error{Op: "Get", Err: syscall.ECONNRESET}, true},
		{"EOF", io.ErrUnexpectedEOF, true},
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"plain HTTP answer to TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, false},
		{"other", errors.New("unsupported protocol scheme"), false},
	} {
		if got := retryableError(tc.err); got != tc.want {
			t.Errorf("%s: retryableError = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRateLimitConfiguration(t *testing.T) {
	limited := testConfig(t, "registry.test:5000", "limit: 5")
	unlimited := testConfig(t, "registry.test:5000")
	current := limited
	c := NewClient(WithConfig(func() *config.Config { return current() }))
	ref := imageRef(t, "registry.test:5000/app")

	st, err := c.stackFor(c.Endpoint(ref))
	if err != nil {
		t.Fatal(err)
	}
	if st.limiter.Limit() != 5 || st.limiter.Burst() != 5 {
		t.Errorf("limit: 5 gives %v rps, burst %d", st.limiter.Limit(), st.limiter.Burst())
	}
	if again, _ := c.stackFor(c.Endpoint(ref)); again != st {
		t.Error("the stack of an endpoint is not reused")
	}

	// A reloaded configuration without a limit gets the default.
	current = unlimited
	st2, err := c.stackFor(c.Endpoint(ref))
	if err != nil {
		t.Fatal(err)
	}
	if st2 == st || st2.limiter.Limit() != config.DefaultLimit {
		t.Errorf("after reload: limit %v, want a new stack at %d rps", st2.limiter.Limit(), config.DefaultLimit)
	}

	// So do inferred endpoints, unless the client's default is changed.
	if st, _ := NewClient(WithDefaultLimit(2.5)).stackFor(c.Endpoint(ref)); st.limiter.Limit() != 2.5 || st.limiter.Burst() != 3 {
		t.Errorf("WithDefaultLimit(2.5): %v rps, burst %d", st.limiter.Limit(), st.limiter.Burst())
	}
	st3, err := c.stackFor(c.Endpoint(imageRef(t, "ghcr.io/org/app")))
	if err != nil {
		t.Fatal(err)
	}
	if st3.limiter.Limit() != config.DefaultLimit || st3.label != "ghcr.io" {
		t.Errorf("inferred endpoint: %v rps, label %q", st3.limiter.Limit(), st3.label)
	}
}

func TestLimitTransportHonoursContext(t *testing.T) {
	var sent atomic.Int32
	lt := &limitTransport{
		limiter: rate.NewLimiter(rate.Every(time.Hour), 1),
		next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			return statusResponse(r, 200), nil
		}),
	}
	if _, err := lt.RoundTrip(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://registry.test/v2/", nil)); err != nil {
		t.Fatal(err)
	}
	// The bucket is empty for an hour: a cancelled caller must not wait.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := lt.RoundTrip(httptest.NewRequestWithContext(ctx, http.MethodGet, "http://registry.test/v2/", nil))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("want context.Canceled, got %v", err)
	}
	// Nor one whose deadline comes before the next token.
	ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := lt.RoundTrip(httptest.NewRequestWithContext(ctx, http.MethodGet, "http://registry.test/v2/", nil)); err == nil {
		t.Error("want an error when the deadline comes before the next token")
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("%d requests went out, want 1", n)
	}
}

func TestShapeTransportPinsScheme(t *testing.T) {
	var got []string
	st := &shapeTransport{
		scheme: "http", host: "registry.test:5000", userAgent: "test-agent",
		next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = append(got, r.URL.String()+" "+r.Header.Get("User-Agent"))
			return statusResponse(r, 200), nil
		}),
	}
	for _, u := range []string{"https://registry.test:5000/v2/", "http://registry.test:5000/v2/", "https://auth.test/token"} {
		if _, err := st.RoundTrip(httptest.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"http://registry.test:5000/v2/ test-agent",
		"http://registry.test:5000/v2/ test-agent",
		"https://auth.test/token test-agent",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckRedirect(t *testing.T) {
	from := httptest.NewRequest(http.MethodGet, "https://registry.example.com/v2/app/blobs/sha256:abc", nil)
	for _, tc := range []struct {
		to string
		ok bool
	}{
		{"https://registry.example.com/other", true},
		{"https://storage.example.net/blob", true},
		{"http://169.254.169.254/latest/meta-data/", false},
		{"http://10.0.0.1/x", false},
		{"http://localhost:8080/x", false},
		{"http://[::1]:8080/x", false},
	} {
		err := checkRedirect(httptest.NewRequest(http.MethodGet, tc.to, nil), []*http.Request{from})
		if (err == nil) != tc.ok {
			t.Errorf("redirect to %s: %v, want allowed=%v", tc.to, err, tc.ok)
		}
	}
}
