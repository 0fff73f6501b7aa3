package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/image-updater/argocd-image-updater/registry/transport"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// badRegistry is a small registry API server for what the real registry
// cannot be made to do: stall halfway through an answer, send without
// end, page for ever. It answers the version check (anonymous access) and
// hands every other request to route.
type badRegistry struct {
	host   string
	served atomic.Int64 // body bytes the client took
	gone   chan struct{}
}

func startBadRegistry(t *testing.T, route func(b *badRegistry, w http.ResponseWriter, r *http.Request)) *badRegistry {
	t.Helper()
	b := &badRegistry{gone: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		route(b, w, r)
	}))
	t.Cleanup(srv.Close)
	// Runs before srv.Close, which waits for stalled handlers.
	t.Cleanup(func() { close(b.gone) })
	b.host = strings.TrimPrefix(srv.URL, "http://")
	return b
}

// write sends s and counts it; false once the client has gone.
func (b *badRegistry) write(w http.ResponseWriter, s string) bool {
	n, err := io.WriteString(w, s)
	b.served.Add(int64(n))
	return err == nil
}

// stall sends what was written so far and then nothing, until the client
// gives up or the test ends.
func (b *badRegistry) stall(w http.ResponseWriter, r *http.Request) {
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-b.gone:
	}
}

// flood sends prefix and then fill until the client stops reading or
// total bytes went out.
func (b *badRegistry) flood(w http.ResponseWriter, prefix, fill string, total int64) {
	if !b.write(w, prefix) {
		return
	}
	chunk := strings.Repeat(fill, (64<<10)/len(fill))
	for b.served.Load() < total {
		if !b.write(w, chunk) {
			return
		}
	}
}

// tagPages answers tag-list requests with pages of n tags each, padded
// with pad bytes of whitespace, and a link to the next page for ever.
func tagPages(n, pad int) func(*badRegistry, http.ResponseWriter, *http.Request) {
	return func(b *badRegistry, w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("last"))
		tags := make([]string, n)
		for i := range tags {
			tags[i] = fmt.Sprintf("%q", fmt.Sprintf("p%d-%d", page, i))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Link", fmt.Sprintf(`</v2/app/tags/list?n=1000&last=%d>; rel="next"`, page+1))
		b.write(w, `{"name":"app","tags":[`+strings.Join(tags, ",")+"]"+strings.Repeat(" ", pad)+"}")
	}
}

func tagPage(link string) func(*badRegistry, http.ResponseWriter, *http.Request) {
	return func(b *badRegistry, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Link", link)
		b.write(w, `{"name":"app","tags":["1.0"]}`)
	}
}

// A registry's tag list is bounded in tags, bytes and pages, whatever the
// registry sends: the listing ends with an error that names the
// repository and the limit, and no more than the limit is read.
func TestTagListLimits(t *testing.T) {
	const notRead = 48 << 20 // what a listing held to 32 MiB may have been sent, socket buffers included
	for _, tc := range []struct {
		name     string
		route    func(*badRegistry, http.ResponseWriter, *http.Request)
		want     string
		tooLarge bool // the error wraps ErrTooLarge
	}{
		{
			name:     "pages for ever, a thousand new tags each",
			route:    tagPages(1000, 0),
			want:     "the repository has more than 100000 tags, the most the client reads",
			tooLarge: true,
		},
		{
			name:     "pages of 1 MiB each",
			route:    tagPages(10, 1<<20),
			want:     "the tag list is larger than 32 MiB in all, the most the client reads",
			tooLarge: true,
		},
		{
			name:     "empty pages for ever",
			route:    tagPages(0, 0),
			want:     "the tag list has more than 10000 pages, the most the client reads",
			tooLarge: true,
		},
		{
			// 31 MiB of one-character tags: within the byte budget, and
			// eight million strings once decoded.
			name: "one page of millions of short tags",
			route: func(b *badRegistry, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				b.flood(w, `{"name":"app","tags":["0"`, `,"a"`, 31<<20)
				b.write(w, "]}")
			},
			want:     "the repository has more than 100000 tags, the most the client reads",
			tooLarge: true,
		},
		{
			name: "one page without end",
			route: func(b *badRegistry, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				b.flood(w, `{"name":"app","tags":["0"`, " ", 1<<30)
			},
			want:     "the tag list is larger than 32 MiB in all, the most the client reads",
			tooLarge: true,
		},
		{
			name:  "a link back to the same page",
			route: tagPage(`</v2/app/tags/list?n=1000&last=1.0>; rel="next"`),
			want:  "the tag list does not end: page 2 links back to an earlier page",
		},
		{
			name:  "a link to another host",
			route: tagPage(`<http://elsewhere.test/v2/app/tags/list?last=1.0>; rel="next"`),
			want:  "pagination URL host does not match registry host",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := startBadRegistry(t, tc.route)
			c := NewClient(WithConfig(testConfig(t, bad.host, benchLimit)))
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			var err error
			grown := heapGrowth(func() { _, err = c.Tags(ctx, imageRef(t, bad.host+"/app"), credref.Ref{}) })
			if grown > maxHeapGrowth {
				t.Errorf("the heap grew by %d MiB while listing, want at most %d", grown>>20, maxHeapGrowth>>20)
			}
			if err == nil {
				t.Fatal("want an error")
			}
			var e *Error
			if !errors.As(err, &e) || e.Repository != "app" || !strings.Contains(err.Error(), bad.host+"/app") {
				t.Errorf("want a *registry.Error naming the repository, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not say %q: %v", tc.want, err)
			}
			if errors.Is(err, ErrTooLarge) != tc.tooLarge {
				t.Errorf("errors.Is(err, ErrTooLarge) = %v, want %v", !tc.tooLarge, tc.tooLarge)
			}
			if n := bad.served.Load(); n > notRead {
				t.Errorf("the client took %d bytes of the registry's answers, want at most %d", n, notRead)
			}
		})
	}
}

// maxHeapGrowth is what a listing held to the tag list limits may take
// at most: the JSON decoder's buffer for a 32 MiB page, which doubles as
// it grows (about 110 MiB at the peak, measured), or 100,000 decoded
// tags. Without the count of tags as a page streams in, a page of short
// tags took over 400 MiB.
const maxHeapGrowth = 160 << 20

// heapGrowth runs f and returns how much the heap grew at most meanwhile,
// sampled every few milliseconds.
func heapGrowth(f func()) uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	var peak atomic.Uint64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-stopped
	return max(peak.Load(), base) - base
}

// testImage is an image's manifest, config and their digests, for the
// small servers that serve it.
type testImage struct {
	manifest, config     string
	digest, configDigest string
	manifestType         string
}

func newTestImage(t *testing.T) testImage {
	t.Helper()
	img := testenv.NewImage(t)
	m, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	cd, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	return testImage{manifest: string(m), config: string(cfg), digest: d.String(), configDigest: cd.String(), manifestType: string(mt)}
}

// serveImage answers for app:1.0 with img, and lets misbehave answer
// first: it returns true when it has.
func serveImage(img testImage, misbehave func(b *badRegistry, w http.ResponseWriter, r *http.Request) bool) func(*badRegistry, http.ResponseWriter, *http.Request) {
	return func(b *badRegistry, w http.ResponseWriter, r *http.Request) {
		if misbehave(b, w, r) {
			return
		}
		switch r.URL.Path {
		case "/v2/app/tags/list":
			w.Header().Set("Content-Type", "application/json")
			b.write(w, `{"name":"app","tags":["1.0"]}`)
		case "/v2/app/manifests/1.0", "/v2/app/manifests/" + img.digest:
			w.Header().Set("Content-Type", img.manifestType)
			w.Header().Set("Docker-Content-Digest", img.digest)
			w.Header().Set("Content-Length", strconv.Itoa(len(img.manifest)))
			if r.Method == http.MethodGet {
				b.write(w, img.manifest)
			}
		case "/v2/app/blobs/" + img.configDigest:
			b.write(w, img.config)
		default:
			http.NotFound(w, r)
		}
	}
}

// Each request ends within the request timeout, its body included: a
// registry that stops halfway through an answer fails the call with a
// timeout rather than holding it until the caller's context ends.
func TestRequestTimeout(t *testing.T) {
	img := newTestImage(t)
	const timeout = 500 * time.Millisecond
	partial := func(path, contentType, part string) func(*badRegistry, http.ResponseWriter, *http.Request) bool {
		return func(b *badRegistry, w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodGet || r.URL.Path != path {
				return false
			}
			w.Header().Set("Content-Type", contentType)
			b.write(w, part)
			b.stall(w, r)
			return true
		}
	}
	for _, tc := range []struct {
		name      string
		misbehave func(*badRegistry, http.ResponseWriter, *http.Request) bool
		metadata  bool // the call is Metadata; else Tags
	}{
		{
			name: "tag list never answers",
			misbehave: func(b *badRegistry, w http.ResponseWriter, r *http.Request) bool {
				if !strings.HasSuffix(r.URL.Path, "/tags/list") {
					return false
				}
				select {
				case <-r.Context().Done():
				case <-b.gone:
				}
				return true
			},
		},
		{name: "tag list stops after its headers", misbehave: partial("/v2/app/tags/list", "application/json", "")},
		{name: "tag list stops halfway", misbehave: partial("/v2/app/tags/list", "application/json", `{"name":"app","tags":["1.0",`)},
		{name: "manifest stops halfway", misbehave: partial("/v2/app/manifests/"+img.digest, img.manifestType, img.manifest[:len(img.manifest)/2]), metadata: true},
		{name: "image config stops halfway", misbehave: partial("/v2/app/blobs/"+img.configDigest, "application/octet-stream", img.config[:len(img.config)/2]), metadata: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := startBadRegistry(t, serveImage(img, tc.misbehave))
			c := NewClient(WithConfig(testConfig(t, bad.host)), WithRequestTimeout(timeout))
			// The caller would wait far longer: the request timeout must
			// end the call.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			ref := imageRef(t, bad.host+"/app:1.0")
			start := time.Now()
			var err error
			if tc.metadata {
				_, err = c.Metadata(ctx, ref, credref.Ref{}, nil)
			} else {
				_, err = c.Tags(ctx, ref, credref.Ref{})
			}
			elapsed := time.Since(start)
			if ctx.Err() != nil {
				t.Fatalf("the call ran until the caller's deadline: %v", err)
			}
			var te *transport.TimeoutError
			if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("want a *transport.TimeoutError, got %v", err)
			}
			if want := "no complete answer within 500ms"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), bad.host+"/app") {
				t.Errorf("error does not say %q about %s/app: %v", want, bad.host, err)
			}
			if elapsed > 10*time.Second {
				t.Errorf("the call took %s", elapsed)
			}
		})
	}
}

// Manifests and image configs are read up to 4 MiB and 16 MiB: a
// registry that sends more fails the call, whether it announces the size
// or not, after no more than that was read.
func TestManifestAndConfigSizeLimits(t *testing.T) {
	img := newTestImage(t)
	// A manifest whose config is announced as 17 MiB.
	const bigConfig = 17 << 20
	bigConfigDigest := "sha256:" + strings.Repeat("ab", 32)
	bigConfigManifest := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",`+
		`"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":%q,"size":%d},"layers":[]}`, bigConfigDigest, bigConfig)
	bigConfigImage := img
	bigConfigImage.manifest, bigConfigImage.manifestType = bigConfigManifest, "application/vnd.oci.image.manifest.v1+json"
	bigConfigImage.digest = v1Digest(t, bigConfigManifest)
	bigConfigImage.configDigest = bigConfigDigest

	hugeManifest := func(announce bool) func(*badRegistry, http.ResponseWriter, *http.Request) bool {
		return func(b *badRegistry, w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/v2/app/manifests/1.0" && r.URL.Path != "/v2/app/manifests/"+img.digest {
				return false
			}
			w.Header().Set("Content-Type", img.manifestType)
			w.Header().Set("Docker-Content-Digest", img.digest)
			const size = 5 << 20
			if announce || r.Method == http.MethodHead {
				w.Header().Set("Content-Length", strconv.Itoa(size))
			}
			if r.Method == http.MethodGet {
				b.flood(w, `{"schemaVersion":2,`, " ", size)
			}
			return true
		}
	}
	for _, tc := range []struct {
		name      string
		img       testImage
		misbehave func(*badRegistry, http.ResponseWriter, *http.Request) bool
		want      string
	}{
		{"manifest of 5 MiB, announced", img, hugeManifest(true), "the manifest is larger than 4 MiB, the most the client reads"},
		{"manifest of 5 MiB, not announced", img, hugeManifest(false), "the manifest is larger than 4 MiB, the most the client reads"},
		{
			name: "image config of 17 MiB",
			img:  bigConfigImage,
			misbehave: func(b *badRegistry, w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != "/v2/app/blobs/"+bigConfigDigest {
					return false
				}
				b.flood(w, "{", " ", bigConfig)
				return true
			},
			want: "the image config is larger than 16 MiB, the most the client reads",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := startBadRegistry(t, serveImage(tc.img, tc.misbehave))
			c := NewClient(WithConfig(testConfig(t, bad.host)))
			_, err := c.Metadata(t.Context(), imageRef(t, bad.host+"/app:1.0"), credref.Ref{}, []v1.Platform{linuxAMD64})
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("want ErrTooLarge, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), bad.host+"/app:1.0") {
				t.Errorf("error does not say %q about the image: %v", tc.want, err)
			}
			if n := bad.served.Load(); n > 24<<20 {
				t.Errorf("the client took %d bytes", n)
			}
		})
	}
}

func v1Digest(t *testing.T, s string) string {
	t.Helper()
	h, _, err := v1.SHA256(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// The scanner counts the strings of a page's "tags" array, whatever else
// the page holds, and however the page is cut into chunks.
func TestTagScanner(t *testing.T) {
	for _, tc := range []struct {
		name string
		page string
		want int64
	}{
		{"plain", `{"name":"app","tags":["1.0","1.1","latest"]}`, 3},
		{"no tags", `{"name":"app","tags":null}`, 0},
		{"empty", `{"name":"app","tags":[]}`, 0},
		{"spaces", "{ \"name\" : \"app\" ,\n \"tags\" : [ \"a\" , \"b\" ] }", 2},
		{"tags first, then more members", `{"tags":["a","b"],"name":"app","child":["x","y","z"]}`, 2},
		{
			"per-digest data as Google's registries add it",
			`{"child":[],"manifest":{"sha256:aa":{"imageSizeBytes":"1","mediaType":"m","tag":["a","b"],"timeCreatedMs":"0"}},"name":"p/app","tags":["a","b"]}`,
			2,
		},
		{"escapes", `{"name":"ap\"p","tags":["a\\\"b","c"],"x\"tags":["d"]}`, 2},
		{"a member named tags further down", `{"name":"app","meta":{"tags":["x"]},"tags":["a"]}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int{1, 3, len(tc.page)} {
				l := &tagListing{maxTags: 1 << 30}
				sc := &tagScanner{l: l}
				for i := 0; i < len(tc.page); i += size {
					if err := sc.scan([]byte(tc.page[i:min(i+size, len(tc.page))])); err != nil {
						t.Fatal(err)
					}
				}
				if got := l.tags.Load(); got != tc.want {
					t.Errorf("chunks of %d: %d tags, want %d", size, got, tc.want)
				}
			}
		})
	}
}

// An answer other than a tag list, a manifest or an image config, such as
// the API version check every session starts with, is read up to 1 MiB:
// a registry whose version check never ends costs the client no more, and
// the listing goes on.
func TestOtherAnswersSizeLimit(t *testing.T) {
	const flood = 128 << 20
	var served atomic.Int64
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/":
			chunk := strings.Repeat(" ", 64<<10)
			for served.Load() < flood {
				select {
				case <-gone:
					return
				default:
				}
				n, err := io.WriteString(w, chunk)
				served.Add(int64(n))
				if err != nil {
					return
				}
			}
		case "/v2/app/tags/list":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"name":"app","tags":["1.0"]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(gone) })
	host := strings.TrimPrefix(srv.URL, "http://")
	c := NewClient(WithConfig(testConfig(t, host)))
	tags, err := c.Tags(t.Context(), imageRef(t, host+"/app"), credref.Ref{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 1 || tags[0] != "1.0" {
		t.Errorf("tags %v, want [1.0]", tags)
	}
	// 1 MiB, and what the connection's buffers took before the client
	// closed it.
	if n := served.Load(); n > 32<<20 {
		t.Errorf("the client took %d MiB of the version check's answer", n>>20)
	}
}
