package bench

import (
	"bytes"
	"encoding/pem"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/image-updater/argocd-image-updater/healthgate"
)

// counter is a set of named counts, safe for concurrent use.
type counter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *counter) add(key string, d int64) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[key] += d
	c.mu.Unlock()
}

func (c *counter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// Kinds of registry requests.
const (
	regTagPages  = "tag-list"      // every page of a tag listing
	regListings  = "listings"      // first pages: one per listing
	regManHead   = "manifest-head" // HEAD of a manifest (by tag: learns the digest)
	regManGet    = "manifest-get"
	regBlob      = "blob"
	regToken     = "token"
	regPing      = "ping" // GET /v2/, which starts every session
	regOther     = "other"
	regFailed    = "failed"   // status 400 or more, the 401 challenge excluded
	regRepeated  = "repeated" // a manifest or blob GET for a digest already fetched
	regChallenge = "challenge"
)

// registryProxy sits between the controller and the registry and counts
// requests by kind. The registry's token realm is rewritten to point at
// the proxy too, so that token requests are counted with the rest.
type registryProxy struct {
	URL string
	// RealmHost is the host of the rewritten realm, which registries.conf
	// lists under internal_hosts.
	RealmHost string
	count     counter

	mu      sync.Mutex
	fetched map[string]bool // repository + digest whose content was sent
	spans   map[string]span // when each kind was first and last seen since the last takeSpans
}

// span is when requests of one kind were sent, from the first one's start
// to the last one's answer.
type span struct{ first, last time.Time }

func startRegistryProxy(t testing.TB, registryHost, tokenRealm string) *registryProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &registryProxy{URL: "http://" + l.Addr().String(), fetched: map[string]bool{}, spans: map[string]span{}}
	registryURL := &url.URL{Scheme: "http", Host: registryHost}
	var tokenURL *url.URL
	proxyRealm := ""
	if tokenRealm != "" {
		if tokenURL, err = url.Parse(tokenRealm); err != nil {
			t.Fatal(err)
		}
		// ggcr refuses loopback IP literals as realms; "localhost" resolves
		// to the proxy's address all the same.
		p.RealmHost = "localhost:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		proxyRealm = "http://" + p.RealmHost + tokenURL.Path
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 256
	rp := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			kind, _, _ := classify(r.In.Method, r.In.URL.Path)
			p.seen(kind)
			if tokenURL != nil && r.In.URL.Path == tokenURL.Path {
				r.SetURL(&url.URL{Scheme: tokenURL.Scheme, Host: tokenURL.Host})
				return
			}
			r.SetURL(registryURL)
		},
		ModifyResponse: func(resp *http.Response) error {
			if proxyRealm != "" {
				if v := resp.Header.Get("Www-Authenticate"); v != "" {
					resp.Header.Set("Www-Authenticate", strings.Replace(v, tokenURL.String(), proxyRealm, 1))
				}
			}
			p.record(resp)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.count.add(regFailed, 1)
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// classify names the kind of a registry API request and the repository
// it is about.
func classify(method, path string) (kind, repo, ref string) {
	if path == "/v2/" || path == "/v2" {
		return regPing, "", ""
	}
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return regToken, "", ""
	}
	for _, k := range []string{"/tags/list", "/manifests/", "/blobs/"} {
		i := strings.LastIndex(rest, k)
		if i < 0 {
			continue
		}
		repo, ref = rest[:i], rest[i+len(k):]
		switch {
		case k == "/tags/list" && method == http.MethodGet:
			return regTagPages, repo, ""
		case k == "/manifests/" && method == http.MethodHead:
			return regManHead, repo, ref
		case k == "/manifests/" && method == http.MethodGet:
			return regManGet, repo, ref
		case k == "/blobs/" && (method == http.MethodGet || method == http.MethodHead):
			return regBlob, repo, ref
		}
	}
	return regOther, "", ""
}

// seen notes that a request of a kind is under way.
func (p *registryProxy) seen(kind string) {
	now := time.Now()
	p.mu.Lock()
	sp := p.spans[kind]
	if sp.first.IsZero() {
		sp.first = now
	}
	sp.last = now
	p.spans[kind] = sp
	p.mu.Unlock()
}

// takeSpans returns the spans since the last call and starts new ones.
func (p *registryProxy) takeSpans() map[string]span {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.spans
	p.spans = map[string]span{}
	return out
}

func (p *registryProxy) record(resp *http.Response) {
	req := resp.Request
	kind, repo, ref := classify(req.Method, req.URL.Path)
	p.seen(kind)
	p.count.add(kind, 1)
	if kind == regTagPages && req.URL.Query().Get("last") == "" {
		p.count.add(regListings, 1)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized && req.Header.Get("Authorization") == "":
		p.count.add(regChallenge, 1)
	case resp.StatusCode >= 400:
		p.count.add(regFailed, 1)
	}
	if resp.StatusCode != http.StatusOK || req.Method != http.MethodGet || (kind != regManGet && kind != regBlob) {
		return
	}
	digest := resp.Header.Get("Docker-Content-Digest")
	if digest == "" && strings.HasPrefix(ref, "sha256:") {
		digest = ref
	}
	key := repo + "@" + digest
	p.mu.Lock()
	seen := p.fetched[key]
	p.fetched[key] = true
	p.mu.Unlock()
	if seen {
		p.count.add(regRepeated, 1)
	}
}

// kubeProxy sits between the controller and the API server and counts
// requests by verb and resource ("list applications", "patch
// applications", "create events"). It passes the controller's own bearer
// token on, so RBAC still applies to the ServiceAccount. It serves TLS
// because client-go sends no token to a plain-HTTP server.
type kubeProxy struct {
	URL   string
	CA    []byte // PEM certificate of the proxy
	count counter
}

func startKubeProxy(t testing.TB, admin *rest.Config) *kubeProxy {
	t.Helper()
	target, err := url.Parse(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	// Trust the API server's CA, but present no client certificate: the
	// admin's would take precedence over the controller's token.
	transport, err := rest.TransportFor(&rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	p := &kubeProxy{}
	rp := &httputil.ReverseProxy{
		Transport:     transport,
		FlushInterval: -1, // watches stream
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			kind := kubeRequestKind(r.In.Method, r.In.URL)
			if kind == "patch applications" && strings.HasPrefix(r.In.Header.Get("Content-Type"), "application/merge-patch+json") {
				// The refresh after a git write-back, which sets Argo
				// CD's refresh annotation (with the record kept of the
				// write), or a save of that record on its own (health
				// gate, rollbacks); the argocd write-back sends JSON
				// patches, which carry the record.
				kind = "refresh applications"
				if body, err := io.ReadAll(io.LimitReader(r.In.Body, 1<<20)); err == nil {
					r.Out.Body, r.Out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
					if bytes.Contains(body, []byte(healthgate.StateAnnotation)) && !bytes.Contains(body, []byte(`"argocd.argoproj.io/refresh"`)) {
						kind = "save write records"
					}
				}
			}
			p.count.add(kind, 1)
		},
	}
	srv := httptest.NewUnstartedServer(rp)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	p.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return p
}

// kubeRequestKind is "<verb> <resource>" for a Kubernetes API request.
func kubeRequestKind(method string, u *url.URL) string {
	seg := strings.Split(strings.Trim(u.Path, "/"), "/")
	var rest []string
	switch {
	case len(seg) >= 2 && seg[0] == "api":
		rest = seg[2:]
	case len(seg) >= 3 && seg[0] == "apis":
		rest = seg[3:]
	}
	if len(rest) == 0 {
		return "discovery"
	}
	watch := u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1"
	if rest[0] == "watch" {
		watch, rest = true, rest[1:]
	}
	resource, name := "", ""
	switch {
	case rest[0] == "namespaces" && len(rest) >= 3:
		resource = rest[2]
		if len(rest) >= 4 {
			name = rest[3]
		}
	default:
		resource = rest[0]
		if len(rest) >= 2 {
			name = rest[1]
		}
	}
	verb := map[string]string{
		http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete",
	}[method]
	if method == http.MethodGet {
		switch {
		case watch:
			verb = "watch"
		case name == "":
			verb = "list"
		default:
			verb = "get"
		}
	}
	if verb == "" {
		verb = strings.ToLower(method)
	}
	return verb + " " + resource
}
