package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sync/errgroup"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/registry/transport"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// recorder is a base transport that remembers the requests reaching the
// network ("GET /v2/app/tags/list") and may hold some of them back.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string
	hold func(*http.Request) // called before a request goes out; may block
}

func newRecorder() *recorder { return &recorder{next: http.DefaultTransport} }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.URL.Path)
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		hold(req)
	}
	return r.next.RoundTrip(req)
}

// count is how many requests with this method had a path containing part.
func (r *recorder) count(method, part string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.seen {
		m, p, _ := strings.Cut(s, " ")
		if m == method && strings.Contains(p, part) {
			n++
		}
	}
	return n
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.seen = nil
	r.mu.Unlock()
}

func (r *recorder) setHold(f func(*http.Request)) {
	r.mu.Lock()
	r.hold = f
	r.mu.Unlock()
}

// testConfig is a registries.conf with one entry for host over plain HTTP,
// plus the given fields ("credentials: env:X").
func testConfig(t testing.TB, host string, fields ...string) func() *config.Config {
	t.Helper()
	return testConfigPrefix(t, host, host, fields...)
}

func testConfigPrefix(t testing.TB, prefix, host string, fields ...string) func() *config.Config {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "registries:\n- name: test\n  prefix: %s\n  api_url: http://%s\n", prefix, host)
	for _, f := range fields {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	cfg, err := config.Parse("registries.conf", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return func() *config.Config { return cfg }
}

// regFields are fields and what reg needs besides: its token server, on
// another loopback port, under internal_hosts.
func regFields(reg *testenv.Registry, fields ...string) []string {
	if reg.Tokens != nil {
		fields = append(fields, "internal_hosts: ["+reg.Tokens.Host()+"]")
	}
	return fields
}

// envResolver resolves env: references from vars only.
func envResolver(vars map[string]string, opts ...credentials.Option) *credentials.Resolver {
	lookup := func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
	return credentials.NewResolver(append([]credentials.Option{credentials.WithEnv(lookup)}, opts...)...)
}

// envRef is the reference env:<name>.
func envRef(name string) credref.Ref {
	return credref.Ref{Kind: credref.KindEnv, Var: name}
}

func imageRef(t testing.TB, s string) imageref.Reference {
	t.Helper()
	r, err := imageref.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newTestMetrics(t testing.TB) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pushManyTags pushes one image under n tags. Tagging goes through one
// reused pusher, four at a time: testenv's PushTags authenticates anew for
// every tag, which takes half a minute for thousands.
func pushManyTags(t testing.TB, reg *testenv.Registry, repo string, n int) []string {
	t.Helper()
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("1.%d.%d", i/100, i%100)
	}
	reg.PushTags(t, repo, tags[:1])
	first, err := name.NewTag(reg.Repo(repo)+":"+tags[0], name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(first, remote.WithAuth(reg.Auth()))
	if err != nil {
		t.Fatal(err)
	}
	p, err := remote.NewPusher(remote.WithAuth(reg.Auth()))
	if err != nil {
		t.Fatal(err)
	}
	var g errgroup.Group
	g.SetLimit(4)
	for _, tag := range tags[1:] {
		g.Go(func() error {
			ref, err := name.NewTag(reg.Repo(repo)+":"+tag, name.Insecure)
			if err != nil {
				return err
			}
			return p.Push(context.Background(), ref, desc)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("tagging %s: %v", repo, err)
	}
	return tags
}

// checkUnauthorized checks the error of a call refused with 401: it says
// so, names registry and repository, keeps ggcr's error reachable, and
// does not contain the password.
func checkUnauthorized(t *testing.T, err error, host, repo, password string) {
	t.Helper()
	if err == nil {
		t.Fatal("want an error for wrong credentials")
	}
	msg := err.Error()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a *registry.Error, got %T: %v", err, err)
	}
	if e.StatusCode() != http.StatusUnauthorized {
		t.Errorf("StatusCode() = %d, want 401 (%v)", e.StatusCode(), err)
	}
	var te *ggcr.Error
	if !errors.As(err, &te) {
		t.Errorf("ggcr's *transport.Error is not reachable: %v", err)
	}
	for _, want := range []string{host, repo, "401", "Unauthorized"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, password) {
		t.Errorf("error contains the password: %s", msg)
	}
}

func TestTagsAuth(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []testenv.RegistryOption
	}{
		{"htpasswd", nil},
		{"token", []testenv.RegistryOption{testenv.WithTokenAuth("updater", "token-server-password")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := testenv.StartRegistry(t, tc.opts...)
			reg.PushTags(t, "team/app", []string{"1.0.0", "1.1.0", "2.0.0"})
			const wrongPassword = "not-the-password-42"
			c := NewClient(
				WithConfig(testConfig(t, reg.Host, regFields(reg, "credentials: env:REG_CREDS")...)),
				WithCredentialResolver(envResolver(map[string]string{
					"REG_CREDS": reg.Username + ":" + reg.Password,
					"WRONG":     reg.Username + ":" + wrongPassword,
				})),
			)
			ref := imageRef(t, reg.Host+"/team/app:1.0.0")

			got, err := c.Tags(t.Context(), ref, credref.Ref{})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if want := []string{"1.0.0", "1.1.0", "2.0.0"}; !slices.Equal(got, want) {
				t.Errorf("tags = %v, want %v", got, want)
			}
			if reg.Tokens != nil && reg.Tokens.Issued.Load() == 0 {
				t.Error("the token server issued no token")
			}

			// The image's own reference overrides the registry's.
			_, err = c.Tags(t.Context(), ref, envRef("WRONG"))
			checkUnauthorized(t, err, reg.Host, "team/app", wrongPassword)
			if !strings.Contains(err.Error(), "env:WRONG") {
				t.Errorf("error does not name the credential reference: %v", err)
			}
			if reg.Tokens != nil && reg.Tokens.Refused.Load() == 0 {
				t.Error("the token server refused nothing")
			}

			// Without credentials the registry refuses too.
			_, err = NewClient(WithConfig(testConfig(t, reg.Host, regFields(reg)...))).Tags(t.Context(), ref, credref.Ref{})
			checkUnauthorized(t, err, reg.Host, "team/app", reg.Password)
			if !strings.Contains(err.Error(), "anonymously") {
				t.Errorf("error does not say the call was anonymous: %v", err)
			}
		})
	}
}

func TestTagsPaging(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithoutAuth())
	want := pushManyTags(t, reg, "many", 2500)
	slices.Sort(want)
	ca := testenv.NewCA(t, "registry-ca")
	tlsHost := strings.TrimPrefix(testenv.StartTLSProxy(t, "http://"+reg.Host, ca.ServerCert(t), nil), "https://")

	for _, tc := range []struct {
		name string
		host string
		conf string // registries.conf for host
	}{
		{"http", reg.Host, fmt.Sprintf("registries:\n- name: test\n  prefix: %[1]s\n  api_url: http://%[1]s\n", reg.Host)},
		// go-containerregistry takes a loopback host to speak http, and
		// checks next-page links against that.
		{"https on a loopback address", tlsHost, fmt.Sprintf("registries:\n- name: test\n  prefix: %[1]s\n  api_url: https://%[1]s\n  insecure: true\n", tlsHost)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("registries.conf", []byte(tc.conf))
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			rec.next = transport.NewHTTP(true)
			c := NewClient(WithConfig(func() *config.Config { return cfg }), withBaseTransport(rec))

			got, err := c.Tags(t.Context(), imageRef(t, tc.host+"/many"), credref.Ref{})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("got %d tags, want the %d pushed", len(got), len(want))
			}
			// Pages of 1000: the listing must have followed the Link headers.
			if n := rec.count(http.MethodGet, "/many/tags/list"); n != 3 {
				t.Errorf("%d tag-list requests, want 3 pages: %v", n, rec.requests())
			}
		})
	}
}

func TestTagsConcurrentCallsShareOneRequest(t *testing.T) {
	reg := testenv.StartRegistry(t)
	reg.PushTags(t, "app", []string{"v1", "v2"})
	good := reg.Username + ":" + reg.Password

	for _, tc := range []struct {
		name         string
		vars         []string // each caller's credentials are env:<one of these>
		wantRequests int
	}{
		{"same credentials", []string{"A"}, 1},
		{"two credential references", []string{"A", "B"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			release := make(chan struct{})
			rec.setHold(func(r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/tags/list") {
					<-release
				}
			})
			m := newTestMetrics(t)
			c := NewClient(
				WithConfig(testConfig(t, reg.Host)),
				WithCredentialResolver(envResolver(map[string]string{"A": good, "B": good})),
				withBaseTransport(rec),
				WithMetrics(m),
			)
			ref := imageRef(t, reg.Host+"/app")
			const callers = 20
			errs := make(chan error, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tags, err := c.Tags(t.Context(), ref, envRef(tc.vars[i%len(tc.vars)]))
					if err == nil && len(tags) != 2 {
						err = fmt.Errorf("got tags %v", tags)
					}
					errs <- err
				}()
			}
			// Every caller but the first of each reference has joined a
			// listing held at the registry's door.
			joined := float64(callers - len(tc.vars))
			poll.True(t, 10*time.Second, "every caller but the first of each reference to join the listing in flight", func() bool {
				return testutil.ToFloat64(m.cacheHits.WithLabelValues(cacheTagsInflight)) == joined
			})
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			if n := rec.count(http.MethodGet, "/tags/list"); n != tc.wantRequests {
				t.Errorf("%d tag-list requests reached the registry, want %d", n, tc.wantRequests)
			}
		})
	}
}

func TestTagsCallerLeavingDoesNotFailOthers(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithoutAuth())
	reg.PushTags(t, "app", []string{"v1"})
	rec := newRecorder()
	release := make(chan struct{})
	rec.setHold(func(r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/tags/list") {
			<-release
		}
	})
	m := newTestMetrics(t)
	c := NewClient(WithConfig(testConfig(t, reg.Host)), withBaseTransport(rec), WithMetrics(m))
	ref := imageRef(t, reg.Host+"/app")

	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := c.Tags(ctx, ref, credref.Ref{})
		first <- err
	}()
	poll.True(t, 10*time.Second, "the first caller's tag listing to reach the registry", func() bool { return rec.count(http.MethodGet, "/tags/list") == 1 })
	second := make(chan error, 1)
	go func() {
		_, err := c.Tags(t.Context(), ref, credref.Ref{})
		second <- err
	}()
	poll.True(t, 10*time.Second, "the second caller to join the listing in flight", func() bool { return testutil.ToFloat64(m.cacheHits.WithLabelValues(cacheTagsInflight)) == 1 })
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that left: %v, want context.Canceled", err)
	}
	close(release)
	if err := <-second; err != nil {
		t.Errorf("the caller that stayed: %v", err)
	}
}

func TestTagsRegistryDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()

	c := NewClient(WithConfig(testConfig(t, host)), withRetry(3, 10*time.Millisecond, 100*time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = c.Tags(ctx, imageRef(t, host+"/app"), credref.Ref{})
	if err == nil {
		t.Fatal("want an error from a registry that is down")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the call ran until the caller's deadline instead of giving up: %v", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("want connection refused, got %v", err)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("want a *registry.Error, got %#v", err)
	}
	for _, want := range []string{"list tags", host + "/app", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

func TestTagsEmptyRepositoryAndErrors(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithoutAuth())
	c := NewClient(WithConfig(testConfig(t, reg.Host)))

	_, err := c.Tags(t.Context(), imageRef(t, reg.Host+"/nothing-here"), credref.Ref{})
	var e *Error
	if !errors.As(err, &e) || e.StatusCode() != http.StatusNotFound {
		t.Fatalf("want a 404 *registry.Error for an unknown repository, got %v", err)
	}
	if _, err := c.Tags(t.Context(), imageref.Reference{}, credref.Ref{}); err == nil {
		t.Error("want an error for the zero reference")
	}
}
