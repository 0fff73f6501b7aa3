package chartrepo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
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
		ix, err := c.Index(ctx, a)
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
	if _, err := c.Index(ctx, a); err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), "who are you") {
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
// their versions all together, the least recently used dropped first: a
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
		_, _ = w.Write([]byte(helmIndex)) // 4 versions
	}))
	t.Cleanup(srv.Close)
	c := NewClient(secrets{}, projects{"default": {SourceRepos: []string{"*"}}}, "argocd")
	c.maxVersions = 8
	read := func(repo string) {
		t.Helper()
		a, err := c.Session().Access(t.Context(), "argocd", "", srv.URL+"/"+repo)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Index(t.Context(), a); err != nil {
			t.Fatal(err)
		}
	}
	for _, repo := range []string{"a", "b", "a", "c", "a", "b"} {
		read(repo)
	}
	// a, b kept; c drops b (a was used since); a is kept; b drops c.
	got := map[string]int32{}
	full.Range(func(k, v any) bool { got[k.(string)] = v.(*atomic.Int32).Load(); return true })
	if want := map[string]int32{"/a/index.yaml": 1, "/b/index.yaml": 2, "/c/index.yaml": 1}; !maps.Equal(got, want) {
		t.Errorf("full reads %v, want %v", got, want)
	}
	if c.versions != 8 || len(c.cache) != 2 {
		t.Errorf("%d versions in %d indexes kept, want 8 in 2", c.versions, len(c.cache))
	}
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
			_, err = c.Index(ctx, a)
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
			ix, err := c.Index(t.Context(), a)
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
