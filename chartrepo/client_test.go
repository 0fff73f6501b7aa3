package chartrepo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/internal/budget"
	"github.com/image-updater/argocd-image-updater/repoaccess"
)

type secrets []corev1.Secret

func (s secrets) RepositorySecrets(context.Context, string) ([]corev1.Secret, error) { return s, nil }
func (s secrets) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}
func (s secrets) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

type projects map[string]*repoaccess.AppProject

func (p projects) AppProject(_ context.Context, _, name string) (*repoaccess.AppProject, error) {
	if pr, ok := p[name]; ok {
		return pr, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "appprojects"}, name)
}

func helmSecret(name, url, project, user, password string) corev1.Secret {
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "argocd", Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
		Data: map[string][]byte{"type": []byte("helm"), "url": []byte(url), "project": []byte(project),
			"username": []byte(user), "password": []byte(password)},
	}
}

// repoServer serves helmIndex with an ETag, asking for basic auth when
// user is set, and counts full and conditional answers.
func repoServer(t *testing.T, user, password string) (*httptest.Server, *atomic.Int32, *atomic.Int32) {
	var full, notModified atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, _ := r.BasicAuth(); user != "" && (u != user || p != password) {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/charts/index.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		full.Add(1)
		_, _ = w.Write([]byte(helmIndex))
	}))
	t.Cleanup(srv.Close)
	return srv, &full, &notModified
}

func TestIndex(t *testing.T) {
	srv, full, notModified := repoServer(t, "reader", "s3cret")
	url := srv.URL + "/charts"
	all := &repoaccess.AppProject{SourceRepos: []string{"*"}}
	c := NewClient(secrets{
		helmSecret("other-project", url, "team-b", "reader", "wrong"),
		helmSecret("repo", url, "", "reader", "s3cret"),
	}, projects{"default": all, "team-b": all, "narrow": {SourceRepos: []string{"https://charts.example.com/*"}}}, "argocd")
	ctx := context.Background()

	for cycle := range 3 {
		s := c.Session()
		a, err := s.Access(ctx, "argocd", "", url)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := c.Index(ctx, a, []string{"podinfo"})
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		if !slices.Equal(ix.Versions("podinfo"), []string{"6.5.1", "6.5.0"}) {
			t.Fatalf("cycle %d: %v", cycle, ix.Charts)
		}
	}
	if full.Load() != 1 || notModified.Load() != 2 {
		t.Errorf("%d full answers and %d not modified, want 1 and 2", full.Load(), notModified.Load())
	}

	s := c.Session()
	// A project's own Secret is its Applications' alone, and wins.
	a, err := s.Access(ctx, "argocd", "team-b", url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Index(ctx, a, []string{"podinfo"}); err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), "who are you") {
		t.Errorf("error %v, want the server's 401, not its answer's body, and no password", err)
	}
	if _, err := s.Access(ctx, "argocd", "narrow", url); !errors.Is(err, repoaccess.ErrNotPermitted) {
		t.Errorf("error %v, want not permitted by the AppProject", err)
	}
	if _, err := s.Access(ctx, "argocd", "missing", url); !errors.Is(err, repoaccess.ErrNotPermitted) {
		t.Errorf("error %v, want not permitted: no AppProject", err)
	}
	if _, err := s.Access(ctx, "argocd", "", "http://user:pw@"+strings.TrimPrefix(url, "http://")); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("error %v, want a refusal without the password", err)
	}
}

// TestIndexCacheBound: the indexes kept between cycles are bounded by
// their bytes all together, the least recently used dropped first: a
// dropped one is read whole again.
func TestIndexCacheBound(t *testing.T) {
	var full sync.Map // path → *atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		n, _ := full.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		_, _ = w.Write([]byte(helmIndex))
	}))
	t.Cleanup(srv.Close)
	read := func(c *Client, repo string) {
		t.Helper()
		a, err := c.Session().Access(t.Context(), "argocd", "", srv.URL+"/"+repo)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Index(t.Context(), a, []string{"podinfo", "redis"}); err != nil {
			t.Fatal(err)
		}
	}
	// What one index takes, kept: those of a, b, c take as much.
	probe := NewClient(secrets{}, projects{"default": {SourceRepos: []string{"*"}}}, "argocd")
	read(probe, "p")
	one := probe.kept.Used()
	full.Clear()
	c := NewClient(secrets{}, projects{"default": {SourceRepos: []string{"*"}}}, "argocd", WithMaxKept(2*one))
	for _, repo := range []string{"a", "b", "a", "c", "a", "b"} {
		read(c, repo)
	}
	// a, b kept; c drops b (a was used since); a is kept; b drops c.
	got := map[string]int32{}
	full.Range(func(k, v any) bool { got[k.(string)] = v.(*atomic.Int32).Load(); return true })
	if want := map[string]int32{"/a/index.yaml": 1, "/b/index.yaml": 2, "/c/index.yaml": 1}; !maps.Equal(got, want) {
		t.Errorf("full reads %v, want %v", got, want)
	}
	if c.kept.Used() != 2*one || c.kept.Len() != 2 {
		t.Errorf("%d bytes in %d indexes kept, want %d in 2", c.kept.Used(), c.kept.Len(), 2*one)
	}
}

// TestIndexKeepsAskedCharts: of an index, only the charts asked are kept
// and answered; a kept index asked for a chart it was read without is read
// whole again, not answered 304 as if the chart had no versions.
func TestIndexKeepsAskedCharts(t *testing.T) {
	srv, full, notModified := repoServer(t, "", "")
	c := NewClient(secrets{}, projects{"default": {SourceRepos: []string{"*"}}}, "argocd")
	steps := []struct {
		charts []string
		want   map[string][]string
		full   int32 // full reads so far
	}{
		{[]string{"podinfo"}, map[string][]string{"podinfo": {"6.5.1", "6.5.0"}}, 1},
		{[]string{"podinfo"}, map[string][]string{"podinfo": {"6.5.1", "6.5.0"}}, 1},
		{[]string{"redis", "podinfo", "missing"}, map[string][]string{"podinfo": {"6.5.1", "6.5.0"}, "redis": {"18.0.1", "18.0.0"}}, 2},
		{[]string{"redis"}, map[string][]string{"redis": {"18.0.1", "18.0.0"}}, 2},
		{[]string{"missing"}, map[string][]string{}, 2},
		{[]string{"empty"}, map[string][]string{"empty": nil}, 3},
	}
	for i, st := range steps {
		s := c.Session()
		a, err := s.Access(t.Context(), "argocd", "", srv.URL+"/charts")
		if err != nil {
			t.Fatal(err)
		}
		ix, err := c.Index(t.Context(), a, st.charts)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !maps.EqualFunc(ix.Charts, st.want, slices.Equal) || full.Load() != st.full {
			t.Errorf("step %d: %v after %d full reads, want %v after %d", i, ix.Charts, full.Load(), st.want, st.full)
		}
		if s.budget.Used() != ix.Bytes() || ix.Bytes() == 0 && len(st.want) > 0 {
			t.Errorf("step %d: the cycle holds %d bytes for an index of %d", i, s.budget.Used(), ix.Bytes())
		}
		ix.Release()
		ix.Release()
		if s.budget.Used() != 0 {
			t.Errorf("step %d: the cycle holds %d bytes once the index is released", i, s.budget.Used())
		}
	}
	if notModified.Load() != 3 {
		t.Errorf("%d answers 304, want 3", notModified.Load())
	}
	e, _ := c.kept.Get(srv.URL + "/charts\x00")
	if e == nil || !slices.Equal(slices.Sorted(maps.Keys(e.index.Charts)), []string{"empty"}) {
		t.Errorf("kept %v, want the chart last asked alone", e)
	}
}

// TestIndexCycleBudget: the versions a cycle holds are counted against
// its budget as they are read; the read that would pass it fails, naming
// the repository and the budget, and holds nothing; others go on.
func TestIndexCycleBudget(t *testing.T) {
	var index strings.Builder
	index.WriteString("entries:\n  big:\n")
	for i := range 10_000 {
		fmt.Fprintf(&index, "  - version: 1.0.%d\n", i)
	}
	big := index.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.URL.Path == "/big/index.yaml" {
			_, _ = w.Write([]byte(big))
			return
		}
		_, _ = w.Write([]byte(helmIndex))
	}))
	t.Cleanup(srv.Close)
	c := NewClient(secrets{}, projects{"default": {SourceRepos: []string{"*"}}}, "argocd", WithCycleBudget(64<<10))
	s := c.Session()
	access := func(path string) Access {
		a, err := s.Access(t.Context(), "argocd", "", srv.URL+path)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	small, err := c.Index(t.Context(), access("/small"), []string{"podinfo"})
	if err != nil {
		t.Fatal(err)
	}
	held := s.budget.Used()
	_, err = c.Index(t.Context(), access("/big"), []string{"big"})
	if !errors.Is(err, budget.ErrExceeded) || !strings.Contains(err.Error(), srv.URL+"/big") || !strings.Contains(err.Error(), "budget of 64 KiB") {
		t.Fatalf("error %v, want the budget passed, naming the repository", err)
	}
	if s.budget.Used() != held {
		t.Errorf("the cycle holds %d bytes after a failed read, want the %d it held before", s.budget.Used(), held)
	}
	if _, ok := c.kept.Get(srv.URL + "/big\x00"); ok {
		t.Error("an index past the budget kept")
	}
	if !slices.Equal(small.Versions("podinfo"), []string{"6.5.1", "6.5.0"}) {
		t.Errorf("versions %v", small.Versions("podinfo"))
	}
	small.Release()
	// The next cycle has a budget of its own, and the index of another
	// cycle's failed read is read whole.
	if _, err := c.Index(t.Context(), access("/other"), []string{"podinfo"}); err != nil {
		t.Fatal(err)
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// longNamesIndex is an index of charts names long charts of about 60 KiB
// each, one version each, with the podinfo of helmIndex.
func longNamesIndex(charts int) (string, []string) {
	var b strings.Builder
	b.WriteString(helmIndex[:strings.Index(helmIndex, "  redis:")])
	var names []string
	for i := range charts {
		name := fmt.Sprintf("%05d-%s", i, strings.Repeat("n", 60<<10))
		names = append(names, name)
		fmt.Fprintf(&b, "  %s:\n  - version: 1.0.0\n", name)
	}
	return b.String(), names
}

// TestIndexKeptLongNames: the indexes kept between cycles stay within
// their budget in bytes, names counted, whatever the length of the
// charts' names; of an index of long names, the charts not asked cost
// nothing kept.
func TestIndexKeptLongNames(t *testing.T) {
	body, names := longNamesIndex(100) // 6 MB, of names alone
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	const maxKept = 4 << 20
	c := NewClient(secrets{}, projects{"default": {SourceRepos: []string{"*"}}}, "argocd", WithMaxKept(maxKept))
	before := liveHeap()
	for repo := range 8 {
		s := c.Session()
		a, err := s.Access(t.Context(), "argocd", "", fmt.Sprintf("%s/%d", srv.URL, repo))
		if err != nil {
			t.Fatal(err)
		}
		// Each repository is asked for podinfo and 10 of its long names:
		// about 1.2 MiB kept, the names counted as read and as asked.
		ix, err := c.Index(t.Context(), a, append([]string{"podinfo"}, names[repo*10:repo*10+10]...))
		if err != nil {
			t.Fatal(err)
		}
		if len(ix.Charts) != 11 {
			t.Fatalf("%d charts answered, want the 11 asked", len(ix.Charts))
		}
		ix.Release()
	}
	grown := liveHeap() - before
	runtime.KeepAlive(c)
	runtime.KeepAlive(names)
	if c.kept.Used() > maxKept || c.kept.Len() != 3 {
		t.Errorf("%d bytes in %d indexes kept, want at most %d in 3", c.kept.Used(), c.kept.Len(), maxKept)
	}
	// Kept whole, the 8 indexes would hold 48 MiB of names.
	if grown > 2*maxKept {
		t.Errorf("the heap grew by %d MiB for %d MiB kept", grown>>20, c.kept.Used()>>20)
	}
	t.Logf("heap grown by %.1f MiB, %.1f MiB kept in %d indexes", float64(grown)/(1<<20), float64(c.kept.Used())/(1<<20), c.kept.Len())
}

// BenchmarkIndexLongNames reads 8 indexes of 100 charts of 60 KiB names,
// asking one chart of each: the bytes kept are the chart asked, not the
// names listed.
func BenchmarkIndexLongNames(b *testing.B) {
	body, _ := longNamesIndex(100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		_, _ = w.Write([]byte(body))
	}))
	b.Cleanup(srv.Close)
	var c *Client
	var grown int64
	b.ReportAllocs()
	b.SetBytes(8 * int64(len(body)))
	for b.Loop() {
		c = NewClient(secrets{}, projects{"default": {SourceRepos: []string{"*"}}}, "argocd")
		before := liveHeap()
		for repo := range 8 {
			a, err := c.Session().Access(b.Context(), "argocd", "", fmt.Sprintf("%s/%d", srv.URL, repo))
			if err != nil {
				b.Fatal(err)
			}
			ix, err := c.Index(b.Context(), a, []string{"podinfo"})
			if err != nil {
				b.Fatal(err)
			}
			ix.Release()
		}
		grown = liveHeap() - before
	}
	b.ReportMetric(float64(c.kept.Used()), "kept-bytes")
	b.ReportMetric(float64(grown), "heap-kept-bytes")
}

func TestIndexBounds(t *testing.T) {
	big := strings.Repeat("# padding\n", 20_000)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(helmIndex))
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big/index.yaml":
			_, _ = w.Write([]byte(big + helmIndex))
		case "/moved/index.yaml":
			http.Redirect(w, r, other.URL+"/index.yaml", http.StatusFound)
		}
	}))
	t.Cleanup(srv.Close)
	c := NewClient(secrets{}, projects{"default": {SourceRepos: []string{"*"}}}, "argocd", WithMaxIndexSize(int64(len(big))))
	s := c.Session()
	ctx := context.Background()
	tests := []struct {
		path string
		want error
		msg  string
	}{
		{"/big", bounded.ErrTooLarge, "larger than"},
		{"/moved", nil, "refusing to follow a redirect"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			a, err := s.Access(ctx, "argocd", "", srv.URL+tt.path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Index(ctx, a, []string{"podinfo"})
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v, want %v (%q)", err, tt.want, tt.msg)
			}
		})
	}
}

// TestIndexRetried: a 5xx, a connection reset and an answer cut short are
// each retried within the read; a 404 is not, and a server failing every
// time is asked three times, then reported.
func TestIndexRetried(t *testing.T) {
	tests := []struct {
		name     string
		faults   []string // what the first requests get: "500", "reset", "cut", "404"
		wantErr  string
		requests int32
	}{
		{name: "a 500 once", faults: []string{"500"}, requests: 2},
		{name: "a reset once", faults: []string{"reset"}, requests: 2},
		{name: "an answer cut short once", faults: []string{"cut"}, requests: 2},
		{name: "a 404 is not retried", faults: []string{"404"}, wantErr: "404", requests: 1},
		{name: "failing every time", faults: []string{"500", "500", "500", "500"}, wantErr: "500", requests: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := int(n.Add(1)) - 1
				fault := ""
				if i < len(tt.faults) {
					fault = tt.faults[i]
				}
				switch fault {
				case "500":
					http.Error(w, "try again", http.StatusInternalServerError)
				case "404":
					http.NotFound(w, r)
				case "reset", "cut":
					conn, buf, err := w.(http.Hijacker).Hijack()
					if err != nil {
						t.Error(err)
						return
					}
					if fault == "cut" {
						fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(helmIndex), helmIndex[:len(helmIndex)/2])
						_ = buf.Flush()
					}
					_ = conn.Close()
				default:
					_, _ = w.Write([]byte(helmIndex))
				}
			}))
			t.Cleanup(srv.Close)
			c := NewClient(secrets{}, projects{"default": {SourceRepos: []string{"*"}}}, "argocd")
			a, err := c.Session().Access(t.Context(), "argocd", "", srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			ix, err := c.Index(t.Context(), a, []string{"podinfo"})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr == "" && !slices.Equal(ix.Versions("podinfo"), []string{"6.5.1", "6.5.0"}):
				t.Errorf("versions %v", ix.Versions("podinfo"))
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one naming %s", err, tt.wantErr)
			}
			if got := n.Load(); got != tt.requests {
				t.Errorf("%d requests, want %d", got, tt.requests)
			}
		})
	}
}

// TestConnectionsReusedAcrossSessions: each cycle's session reads the
// index over the connection of the cycle before, with the same
// credentials or new ones; another client certificate is another
// transport.
func TestConnectionsReusedAcrossSessions(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(helmIndex))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	url := srv.URL + "/charts"
	all := projects{"default": {SourceRepos: []string{"*"}}}
	c := NewClient(secrets{helmSecret("repo", url, "", "reader", "s3cret")}, all, "argocd")
	for cycle := range 3 {
		s := c.Session()
		a, err := s.Access(t.Context(), "argocd", "", url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Index(t.Context(), a, []string{"podinfo"}); err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("%d connections for 3 cycles' reads, want 1", got)
	}

	// Another client holds its own transports.
	other := NewClient(secrets{helmSecret("repo", url, "", "reader", "s3cret")}, all, "argocd")
	a, err := other.Session().Access(t.Context(), "argocd", "", url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Index(t.Context(), a, []string{"podinfo"}); err != nil {
		t.Fatal(err)
	}
	if got := conns.Load(); got != 2 {
		t.Errorf("%d connections after another client's read, want 2", got)
	}
}
