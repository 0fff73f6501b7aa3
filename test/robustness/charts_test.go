package robustness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// chartConstraint is the chart Applications' constraint: versions 2.x,
// published alongside, are never to be written.
const chartConstraint = "^1"

func chartVersion(round int) string { return fmt.Sprintf("1.%d.0", round) }

// helmRepo is an HTTP Helm repository serving index.yaml, with an ETag,
// for the chart podinfo; versions are published during the run.
type helmRepo struct {
	url      string
	mu       sync.Mutex
	versions []string
}

func startHelmRepo(t *testing.T) *helmRepo {
	r := &helmRepo{versions: []string{"1.0.0"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/index.yaml" {
			http.NotFound(w, req)
			return
		}
		index := r.index()
		sum := sha256.Sum256(index)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", etag)
		if req.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(index)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// publish adds versions of the chart.
func (r *helmRepo) publish(versions ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions = append(r.versions, versions...)
}

// index is index.yaml as `helm repo index` writes it.
func (r *helmRepo) index() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nentries:\n  podinfo:\n")
	for _, v := range r.versions {
		fmt.Fprintf(&b, "  - apiVersion: v2\n    created: \"2026-01-01T00:00:00Z\"\n    name: podinfo\n    urls:\n    - podinfo-%s.tgz\n    version: %s\n", v, v)
	}
	b.WriteString("generated: \"2026-01-01T00:00:00Z\"\n")
	return b.Bytes()
}
