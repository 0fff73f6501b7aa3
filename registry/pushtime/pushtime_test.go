package pushtime

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/image-updater/argocd-image-updater/registry/config"
)

func TestLinkNext(t *testing.T) {
	tests := []struct {
		header []string
		want   string
	}{
		{nil, ""},
		{[]string{`</acr/v1/app/_tags?last=b&n=100>; rel="next"`}, "/acr/v1/app/_tags?last=b&n=100"},
		{[]string{`<https://api.github.com/x?page=2>; rel="next", <https://api.github.com/x?page=9>; rel="last"`}, "https://api.github.com/x?page=2"},
		{[]string{`</p?page=1>; rel="prev" , </p?page=3>; rel="next"`}, "/p?page=3"},
		{[]string{`</p?page=3>; rel=next`}, "/p?page=3"},
		{[]string{`/p?page=3; rel="next"`}, ""},
		{[]string{`</p?page=1>; rel="prev"`}, ""},
	}
	for _, tt := range tests {
		if got := linkNext(http.Header{"Link": tt.header}); got != tt.want {
			t.Errorf("linkNext(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
}

// A page may not lead to another host, and a listing that never ends
// stops after MaxPages.
func TestPagesBounded(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		if r.URL.Query().Get("away") != "" {
			w.Header().Set("Link", `<http://elsewhere.example/api/v2.0/x>; rel="next"`)
		} else {
			w.Header().Set("Link", fmt.Sprintf(`<%s?away=&page=%d>; rel="next"`, r.URL.Path, n+1))
		}
		fmt.Fprint(w, `[{"tags":[{"name":"old","push_time":"2026-01-01T00:00:00Z"}]}]`)
	}))
	defer srv.Close()
	q := Query{API: config.PushTimesHarbor, Base: srv.URL, Registry: "harbor.example.com", Repository: "p/app", Tags: []string{"new"}}

	got, err := List(t.Context(), srv.Client(), q)
	if err != nil || len(got) != 0 {
		t.Errorf("endless listing: %v, %v; want nothing found, no error", got, err)
	}
	if n := served.Load(); n != MaxPages {
		t.Errorf("%d pages read, want %d", n, MaxPages)
	}

	served.Store(0)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", `<http://elsewhere.example/api/v2.0/x>; rel="next"`)
		fmt.Fprint(w, `[]`)
	})
	if _, err := List(t.Context(), srv.Client(), q); err == nil || !strings.Contains(err.Error(), "leads off") {
		t.Errorf("a link to another host: %v", err)
	}
}
