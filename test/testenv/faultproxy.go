package testenv

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// Fault is one way a request fails between a client and its server, as
// networks and overloaded servers fail.
type Fault int

const (
	// FaultNone lets the request through.
	FaultNone Fault = iota
	// Fault500 answers 500 Internal Server Error, without Retry-After.
	Fault500
	// Fault502 answers 502 Bad Gateway, as a load balancer whose backend
	// went away does.
	Fault502
	// Fault503 answers 503 Service Unavailable with Retry-After: 1.
	Fault503
	// Fault429 answers 429 Too Many Requests with Retry-After: 1.
	Fault429
	// FaultReset drops the connection (HTTP/1.1) or resets the stream
	// (HTTP/2) before any answer.
	FaultReset
	// FaultTruncate passes the request to the server and cuts its answer
	// in the middle of the body, after a Content-Length that promised more.
	FaultTruncate
)

func (f Fault) String() string {
	return [...]string{"none", "500", "502", "503", "429", "reset", "truncate"}[f]
}

// FaultProxy is a reverse proxy in front of a test server that fails the
// requests a test chooses, in a chosen order or at a seeded rate, and lets
// the others through: the server itself stays as it is.
type FaultProxy struct {
	// URL is the proxy's base URL, to use in place of the server's.
	URL string
	// CAData is the PEM certificate of the proxy's TLS server, for a
	// client to trust, when the proxy serves TLS.
	CAData []byte

	rp *httputil.ReverseProxy

	mu       sync.Mutex
	rules    []*faultRule
	injected map[Fault]int
}

type faultRule struct {
	match  func(*http.Request) bool
	faults []Fault // taken in order; then rate applies
	rng    *rand.Rand
	rate   float64
	mix    []Fault
}

// StartFaultProxy serves target (an http:// base URL) on a loopback port,
// over plain HTTP.
func StartFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := newFaultProxy(httputil.NewSingleHostReverseProxy(u))
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// StartKubeFaultProxy serves the API server of cfg over TLS, HTTP/2 as the
// API server does, and returns it with the client configuration that goes
// through it, with cfg's credentials.
func StartKubeFaultProxy(t testing.TB, cfg *rest.Config) (*FaultProxy, *rest.Config) {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := rest.TLSConfigFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}
	p := newFaultProxy(rp)
	srv := httptest.NewUnstartedServer(p)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	p.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	through := rest.CopyConfig(cfg)
	through.Host = srv.URL
	through.TLSClientConfig = rest.TLSClientConfig{CAData: p.CAData, CertData: cfg.CertData, KeyData: cfg.KeyData}
	return p, through
}

func newFaultProxy(rp *httputil.ReverseProxy) *FaultProxy {
	// A cut answer is read whole from the server first, so that the
	// server is never left writing to a connection nobody reads; the
	// client gets half of it and a dropped connection.
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Context().Value(truncateKey{}) == nil {
			return nil
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:len(body)/2]), failingReader{}))
		return nil
	}
	rp.ErrorLog = log.New(io.Discard, "", 0)
	return &FaultProxy{rp: rp, injected: map[Fault]int{}}
}

type truncateKey struct{}

// failingReader ends a cut answer's body with an error, which makes the
// reverse proxy drop the client's connection.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// Inject fails the next requests that match accepts, one fault each, in
// the order given; after them, matching requests go through.
func (p *FaultProxy) Inject(match func(*http.Request) bool, faults ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &faultRule{match: match, faults: faults})
}

// InjectRate fails the given share (0 to 1) of the requests match accepts,
// each with one of mix, drawn from a generator seeded with seed: the same
// seed and the same sequence of requests fail the same way.
func (p *FaultProxy) InjectRate(match func(*http.Request) bool, seed uint64, rate float64, mix ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &faultRule{match: match, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rate: rate, mix: mix})
}

// Clear stops every fault: from now on all requests go through.
func (p *FaultProxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Total is how many requests failed so far, in every way.
func (p *FaultProxy) Total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.injected {
		n += c
	}
	return n
}

// Injected is how many requests failed with f so far.
func (p *FaultProxy) Injected(f Fault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.injected[f]
}

func (p *FaultProxy) next(r *http.Request) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rule := range p.rules {
		if !rule.match(r) {
			continue
		}
		f := FaultNone
		switch {
		case len(rule.faults) > 0:
			f, rule.faults = rule.faults[0], rule.faults[1:]
		case rule.rng != nil && len(rule.mix) > 0 && rule.rng.Float64() < rule.rate:
			f = rule.mix[rule.rng.IntN(len(rule.mix))]
		}
		if f != FaultNone {
			p.injected[f]++
			return f
		}
	}
	return FaultNone
}

func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch f := p.next(r); f {
	case Fault500, Fault502:
		code := map[Fault]int{Fault500: http.StatusInternalServerError, Fault502: http.StatusBadGateway}[f]
		http.Error(w, fmt.Sprintf("injected %d", code), code)
	case Fault503, Fault429:
		code := map[Fault]int{Fault503: http.StatusServiceUnavailable, Fault429: http.StatusTooManyRequests}[f]
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("injected %d", code), code)
	case FaultReset:
		panic(http.ErrAbortHandler)
	case FaultTruncate:
		p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), truncateKey{}, true)))
	default:
		p.rp.ServeHTTP(w, r)
	}
}
