package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/image-updater/argocd-image-updater/test/poll"
)

// recorder is a Notifier that keeps what it is given.
type recorder struct {
	mu  sync.Mutex
	got []Notification
	err error
}

func (r *recorder) Notify(n Notification) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.got = append(r.got, n)
	return nil
}

func (r *recorder) repositories() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, n := range r.got {
		out = append(out, sortedNames(n.Repositories)...)
	}
	return out
}

// sender describes how each registry sends its recorded payload.
type sender struct {
	source  string
	file    string
	headers map[string]string
	query   string // more query parameters of the URL it was given
	want    string // the repository the payload names
}

var senders = []sender{
	{source: DockerHub, file: "dockerhub.json", want: "docker.io/acme/shop"},
	{source: Quay, file: "quay.json", want: "quay.io/acme/shop"},
	{source: GHCR, file: "ghcr.json", headers: map[string]string{"X-GitHub-Event": "package"}, want: "ghcr.io/acme/shop"},
	{source: Harbor, file: "harbor.json", want: "harbor.example.com/acme/shop"},
	{source: Distribution, file: "distribution.json", want: "registry.example.com/acme/shop"},
	{source: ACR, file: "acr.json", want: "acme.azurecr.io/acme/shop"},
	{source: CloudEvents, file: "cloudevents.json", headers: map[string]string{"Content-Type": "application/cloudevents+json"},
		want: "123456789012.dkr.ecr.eu-west-1.amazonaws.com/acme/shop"},
	{source: ArtifactRegistry, file: "artifact-registry.json", want: "asia-northeast1-docker.pkg.dev/acme-prod/apps/shop"},
	{source: AliyunACR, file: "aliyun-acr.json", want: "registry.cn-hangzhou.aliyuncs.com/acme/shop"},
	{source: Artifactory, file: "artifactory.json", want: "acme.jfrog.io/docker-local/acme/shop"},
	{source: Nexus, file: "nexus.json", query: "registry_url=nexus.example.com:8443", want: "nexus.example.com:8443/acme/shop"},
	{source: Generic, file: "generic.json", want: "registry.example.com/acme/shop"},
}

// testGeneric maps generic.json, as an operator would.
var testGeneric = GenericMapping{Repository: "artifacts.0.image", Tag: "artifacts.0.version"}

// authOf is how source proves the secret.
func authOf(source string) authMethod {
	if source == Generic {
		return authHeaderOrQuery
	}
	return formats[source].auth
}

func readPayload(t *testing.T, file string) []byte {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// proof is how each kind of source proves it knows secret: what the
// registry's own webhook configuration makes it send.
type proof int

const (
	proofRight proof = iota
	proofWrong
	proofMissing
)

// request builds the request s's registry sends, carrying proof of secret.
func (s sender) request(t *testing.T, body []byte, secret string, p proof) *http.Request {
	t.Helper()
	if p == proofWrong {
		secret = "not-" + secret
	}
	target := Path + "?type=" + s.source
	// Harbor's requests name their type by header, to cover that way too.
	if s.source == Harbor {
		target = Path
	}
	if s.query != "" {
		target += "&" + s.query
	}
	auth := authOf(s.source)
	if p != proofMissing && auth == authQuery {
		target += "&secret=" + secret
	}
	req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if s.source == Harbor {
		req.Header.Set("X-Registry-Type", Harbor)
	}
	for k, v := range s.headers {
		req.Header.Set(k, v)
	}
	if p != proofMissing {
		switch auth {
		case authJFrog:
			req.Header.Set("X-JFrog-Event-Auth", secret)
		case authNexus:
			mac := hmac.New(sha1.New, []byte(secret))
			mac.Write(body)
			req.Header.Set("X-Nexus-Webhook-Signature", hex.EncodeToString(mac.Sum(nil)))
		case authHeaderOrQuery:
			req.Header.Set("Authorization", "Bearer "+secret)
		case authSignature:
			mac := hmac.New(sha256.New, []byte(secret))
			mac.Write(body)
			req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		case authHeader:
			if s.source == Distribution || s.source == CloudEvents {
				req.Header.Set("Authorization", "Bearer "+secret)
			} else {
				req.Header.Set("Authorization", secret)
			}
		}
	}
	return req
}

const testSecret = "s3cr3t-for-tests"

func allSecrets() map[string]string {
	m := map[string]string{}
	for _, s := range Sources() {
		m[s] = testSecret
	}
	return m
}

func newTestHandler(t *testing.T, n Notifier, cfg Config) (*Handler, *Metrics) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Generic == nil {
		cfg.Generic = &testGeneric
	}
	h, err := NewHandler(n, cfg, WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	return h, m
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Every source: its recorded payload is accepted with the right secret and
// names the repository; without it, nothing is notified.
func TestAuthentication(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		proof      proof
		wantStatus int
		wantReason string
	}{
		{name: "right secret", cfg: Config{Secrets: allSecrets()}, proof: proofRight, wantStatus: http.StatusAccepted},
		{name: "wrong secret", cfg: Config{Secrets: allSecrets()}, proof: proofWrong, wantStatus: http.StatusUnauthorized, wantReason: RejectUnauthorized},
		{name: "missing secret", cfg: Config{Secrets: allSecrets()}, proof: proofMissing, wantStatus: http.StatusUnauthorized, wantReason: RejectUnauthorized},
		{name: "no secret configured", cfg: Config{}, proof: proofMissing, wantStatus: http.StatusForbidden, wantReason: RejectNoSecret},
		{name: "no secret configured, sender has one", cfg: Config{}, proof: proofRight, wantStatus: http.StatusForbidden, wantReason: RejectNoSecret},
		{name: "unauthenticated sources allowed", cfg: Config{AllowUnauthenticated: true}, proof: proofMissing, wantStatus: http.StatusAccepted},
		{
			name: "unauthenticated sources allowed, but this one has a secret", cfg: Config{Secrets: allSecrets(), AllowUnauthenticated: true},
			proof: proofWrong, wantStatus: http.StatusUnauthorized, wantReason: RejectUnauthorized,
		},
	}
	for _, s := range senders {
		for _, tt := range tests {
			t.Run(s.source+"/"+tt.name, func(t *testing.T) {
				var n recorder
				h, m := newTestHandler(t, &n, tt.cfg)
				rec := serve(h, s.request(t, readPayload(t, s.file), testSecret, tt.proof))
				if rec.Code != tt.wantStatus {
					t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
				}
				got := n.repositories()
				if tt.wantStatus != http.StatusAccepted {
					if len(got) != 0 {
						t.Errorf("rejected, yet notified %v", got)
					}
					if c := testutil.ToFloat64(m.rejected.WithLabelValues(s.source, tt.wantReason)); c != 1 {
						t.Errorf("rejected{%s,%s} = %v", s.source, tt.wantReason, c)
					}
					return
				}
				if !slices.Equal(got, []string{s.want}) {
					t.Errorf("notified %v, want %s", got, s.want)
				}
				var resp response
				if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || !slices.Equal(resp.Repositories, []string{s.want}) {
					t.Errorf("answer %s (%v)", rec.Body, err)
				}
				if c := testutil.ToFloat64(m.received.WithLabelValues(s.source)); c != 1 {
					t.Errorf("received{%s} = %v", s.source, c)
				}
			})
		}
	}
}

// Every source: bodies over the limit, unreadable payloads and requests
// over the rate limit are refused, and nothing is notified.
func TestLimits(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		body       func(valid []byte) []byte
		before     int // requests accepted before the one checked
		wantStatus int
		wantReason string
		wantBody   string
	}{
		{
			name: "body over 1 MiB", cfg: Config{Secrets: allSecrets()},
			body:       func(valid []byte) []byte { return append(valid, bytes.Repeat([]byte(" "), DefaultMaxBodySize)...) },
			wantStatus: http.StatusRequestEntityTooLarge, wantReason: RejectTooLarge, wantBody: "exceeds 1048576 bytes",
		},
		{
			name: "body over a smaller limit", cfg: Config{Secrets: allSecrets(), MaxBodySize: 100},
			wantStatus: http.StatusRequestEntityTooLarge, wantReason: RejectTooLarge, wantBody: "exceeds 100 bytes",
		},
		{
			name: "malformed JSON", cfg: Config{Secrets: allSecrets()},
			body:       func(valid []byte) []byte { return valid[:len(valid)/2] },
			wantStatus: http.StatusBadRequest, wantReason: RejectMalformed, wantBody: "malformed",
		},
		{
			name: "not JSON at all", cfg: Config{Secrets: allSecrets()},
			body:       func([]byte) []byte { return []byte("<xml/>") },
			wantStatus: http.StatusBadRequest, wantReason: RejectMalformed, wantBody: "invalid",
		},
		{
			name: "rate limit", cfg: Config{Secrets: allSecrets(), RateLimit: 2}, before: 2,
			wantStatus: http.StatusTooManyRequests, wantReason: RejectRateLimited, wantBody: "the limit is 2 per hour",
		},
		{name: "under the rate limit", cfg: Config{Secrets: allSecrets(), RateLimit: 3}, before: 2, wantStatus: http.StatusAccepted},
	}
	for _, s := range senders {
		for _, tt := range tests {
			t.Run(s.source+"/"+tt.name, func(t *testing.T) {
				var n recorder
				h, m := newTestHandler(t, &n, tt.cfg)
				valid := readPayload(t, s.file)
				for range tt.before {
					if rec := serve(h, s.request(t, valid, testSecret, proofRight)); rec.Code != http.StatusAccepted {
						t.Fatalf("status %d before the limit: %s", rec.Code, rec.Body)
					}
				}
				body := valid
				if tt.body != nil {
					body = tt.body(valid)
				}
				rec := serve(h, s.request(t, body, testSecret, proofRight))
				if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
					t.Fatalf("status %d %q, want %d and %q", rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
				}
				if tt.wantStatus == http.StatusAccepted {
					return
				}
				if got := len(n.repositories()); got != tt.before {
					t.Errorf("%d notifications, want the %d before", got, tt.before)
				}
				if c := testutil.ToFloat64(m.rejected.WithLabelValues(s.source, tt.wantReason)); c != 1 {
					t.Errorf("rejected{%s,%s} = %v", s.source, tt.wantReason, c)
				}
				if tt.wantStatus == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
					t.Error("429 without Retry-After")
				}
			})
		}
	}
}

// The rate limit counts each source on its own.
func TestRateLimitPerSource(t *testing.T) {
	var n recorder
	h, _ := newTestHandler(t, &n, Config{Secrets: allSecrets(), RateLimit: 1})
	for _, s := range senders {
		if rec := serve(h, s.request(t, readPayload(t, s.file), testSecret, proofRight)); rec.Code != http.StatusAccepted {
			t.Errorf("%s: status %d: %s", s.source, rec.Code, rec.Body)
		}
	}
	if rec := serve(h, senders[0].request(t, readPayload(t, senders[0].file), testSecret, proofRight)); rec.Code != http.StatusTooManyRequests {
		t.Errorf("second request of %s: status %d", senders[0].source, rec.Code)
	}
}

// Requests that are not notifications at all.
func TestRequests(t *testing.T) {
	valid := readPayload(t, "quay.json")
	tests := []struct {
		name       string
		req        *http.Request
		notifyErr  error
		wantStatus int
		wantReason string
		wantBody   string
	}{
		{
			name:       "GET",
			req:        httptest.NewRequest(http.MethodGet, Path+"?type=quay.io&secret="+testSecret, nil),
			wantStatus: http.StatusMethodNotAllowed, wantReason: RejectMethod,
		},
		{
			name:       "other path",
			req:        httptest.NewRequest(http.MethodPost, "/hooks?type=quay.io&secret="+testSecret, bytes.NewReader(valid)),
			wantStatus: http.StatusNotFound,
		},
		{
			name:       "no type",
			req:        httptest.NewRequest(http.MethodPost, Path+"?secret="+testSecret, bytes.NewReader(valid)),
			wantStatus: http.StatusBadRequest, wantReason: RejectUnknownSource, wantBody: "give ?type= or the X-Registry-Type header",
		},
		{
			name:       "unknown type",
			req:        httptest.NewRequest(http.MethodPost, Path+"?type=gitlab&secret="+testSecret, bytes.NewReader(valid)),
			wantStatus: http.StatusBadRequest, wantReason: RejectUnknownSource, wantBody: `unknown registry type "gitlab"`,
		},
		{
			name:       "no checks run here",
			req:        httptest.NewRequest(http.MethodPost, Path+"?type=quay.io&secret="+testSecret, bytes.NewReader(valid)),
			notifyErr:  ErrNotRunning,
			wantStatus: http.StatusServiceUnavailable, wantReason: RejectUnavailable, wantBody: "leader",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := recorder{err: tt.notifyErr}
			h, m := newTestHandler(t, &n, Config{Secrets: allSecrets()})
			rec := serve(h, tt.req)
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("status %d %q, want %d and %q", rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
			}
			if tt.wantReason != "" {
				source := tt.req.URL.Query().Get("type")
				if _, ok := formats[source]; !ok {
					source = unknownSource
				}
				if c := testutil.ToFloat64(m.rejected.WithLabelValues(source, tt.wantReason)); c != 1 {
					t.Errorf("rejected{%s,%s} = %v", source, tt.wantReason, c)
				}
			}
			if len(n.repositories()) != 0 {
				t.Error("notified")
			}
		})
	}
}

func TestNewHandler(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		wantErr     string
		wantEnabled []string
		wantOpen    []string
	}{
		{name: "nothing configured"},
		{name: "two secrets", cfg: Config{Secrets: map[string]string{Quay: "a", Harbor: "b", GHCR: ""}}, wantEnabled: []string{Quay, Harbor}},
		{
			name: "open", cfg: Config{Secrets: map[string]string{Quay: "a"}, AllowUnauthenticated: true},
			wantEnabled: Sources()[:len(Sources())-1],
			wantOpen:    []string{DockerHub, GHCR, Harbor, Distribution, ACR, CloudEvents, ArtifactRegistry, AliyunACR, Artifactory, Nexus},
		},
		{
			name: "open, with a generic mapping", cfg: Config{Secrets: map[string]string{Quay: "a"}, AllowUnauthenticated: true, Generic: &testGeneric},
			wantEnabled: Sources(),
			wantOpen:    []string{DockerHub, GHCR, Harbor, Distribution, ACR, CloudEvents, ArtifactRegistry, AliyunACR, Artifactory, Nexus, Generic},
		},
		{name: "a generic secret without a mapping", cfg: Config{Secrets: map[string]string{Generic: "x"}}, wantErr: "no mapping of its payload's repository field"},
		{name: "a mapping without a repository", cfg: Config{Generic: &GenericMapping{Tag: "tag"}}, wantErr: "needs the field that names the repository"},
		{name: "a mapping with an empty segment", cfg: Config{Generic: &GenericMapping{Repository: "a..b"}}, wantErr: "an empty segment"},
		{name: "unknown source", cfg: Config{Secrets: map[string]string{"gitlab": "x"}}, wantErr: `unknown source "gitlab"`},
		{name: "negative rate", cfg: Config{RateLimit: -1}, wantErr: "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := NewHandler(&recorder{}, tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Enabled(); !slices.Equal(got, tt.wantEnabled) {
				t.Errorf("enabled %v, want %v", got, tt.wantEnabled)
			}
			if got := h.Unauthenticated(); !slices.Equal(got, tt.wantOpen) {
				t.Errorf("unauthenticated %v, want %v", got, tt.wantOpen)
			}
		})
	}
}

// Failed authentications and authenticated requests have budgets of their
// own: forged requests never delay a registry that knows the secret, and a
// sender that keeps failing is refused with 429.
func TestRateLimitAfterAuthentication(t *testing.T) {
	tests := []struct {
		name         string
		rateLimit    int
		forged       int // requests with a wrong secret, sent first
		wantRejected int // of them, answered 429 rather than 401
		legit        int // then requests with the right secret
		wantAccepted int // of them, answered 202
	}{
		{name: "forged requests beyond the limit leave the registry's budget", rateLimit: 2, forged: 10, wantRejected: 8, legit: 3, wantAccepted: 2},
		{name: "without a limit, failures still are", rateLimit: 0, forged: defaultFailureBurst + 5, wantRejected: 5, legit: 5, wantAccepted: 5},
		{name: "legitimate requests do not spend the failure budget", rateLimit: 3, legit: 3, wantAccepted: 3, forged: 4, wantRejected: 1},
	}
	for _, s := range senders {
		for _, tt := range tests {
			t.Run(s.source+"/"+tt.name, func(t *testing.T) {
				var n recorder
				h, m := newTestHandler(t, &n, Config{Secrets: allSecrets(), RateLimit: tt.rateLimit})
				body := readPayload(t, s.file)
				send := func(p proof, count int) (codes map[int]int) {
					codes = map[int]int{}
					for range count {
						rec := serve(h, s.request(t, body, testSecret, p))
						codes[rec.Code]++
						if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
							t.Error("429 without Retry-After")
						}
					}
					return codes
				}
				var forged, legit map[int]int
				if tt.legit > 0 && tt.name == "legitimate requests do not spend the failure budget" {
					legit, forged = send(proofRight, tt.legit), send(proofWrong, tt.forged)
				} else {
					forged, legit = send(proofWrong, tt.forged), send(proofRight, tt.legit)
				}
				if forged[http.StatusTooManyRequests] != tt.wantRejected || forged[http.StatusUnauthorized] != tt.forged-tt.wantRejected {
					t.Errorf("forged requests answered %v, want %d of 429 and the rest 401", forged, tt.wantRejected)
				}
				if legit[http.StatusAccepted] != tt.wantAccepted || legit[http.StatusTooManyRequests] != tt.legit-tt.wantAccepted {
					t.Errorf("requests with the secret answered %v, want %d of 202 and the rest 429", legit, tt.wantAccepted)
				}
				if got := len(n.repositories()); got != tt.wantAccepted {
					t.Errorf("%d notifications, want %d", got, tt.wantAccepted)
				}
				wantLimited := tt.wantRejected + tt.legit - tt.wantAccepted
				if c := testutil.ToFloat64(m.rejected.WithLabelValues(s.source, RejectRateLimited)); int(c) != wantLimited {
					t.Errorf("rejected{%s,rate_limited} = %v, want %d", s.source, c, wantLimited)
				}
			})
		}
	}
}

// ACR and CloudEvents webhooks set up for Argo CD Image Updater 1.x prove
// the secret in the query or in X-Webhook-Secret; those keep working.
func TestHeaderOrQuerySecret(t *testing.T) {
	tests := []struct {
		name       string
		query      string
		header     [2]string
		wantStatus int
	}{
		{name: "query", query: "&secret=" + testSecret, wantStatus: http.StatusAccepted},
		{name: "X-Webhook-Secret", header: [2]string{"X-Webhook-Secret", testSecret}, wantStatus: http.StatusAccepted},
		{name: "Authorization", header: [2]string{"Authorization", testSecret}, wantStatus: http.StatusAccepted},
		{name: "wrong query", query: "&secret=not-" + testSecret, wantStatus: http.StatusUnauthorized},
		{name: "wrong X-Webhook-Secret", header: [2]string{"X-Webhook-Secret", "x"}, wantStatus: http.StatusUnauthorized},
		{name: "none", wantStatus: http.StatusUnauthorized},
	}
	for _, s := range senders {
		if formats[s.source].auth != authHeaderOrQuery {
			continue
		}
		for _, tt := range tests {
			t.Run(s.source+"/"+tt.name, func(t *testing.T) {
				var n recorder
				h, _ := newTestHandler(t, &n, Config{Secrets: allSecrets()})
				req := httptest.NewRequest(http.MethodPost, Path+"?type="+s.source+tt.query, bytes.NewReader(readPayload(t, s.file)))
				for k, v := range s.headers {
					req.Header.Set(k, v)
				}
				if tt.header[0] != "" {
					req.Header.Set(tt.header[0], tt.header[1])
				}
				if rec := serve(h, req); rec.Code != tt.wantStatus {
					t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
				}
			})
		}
	}
}

// signedTestServer serves a handler with every secret, set up by tune,
// over a real loopback server; send delivers s's payload to it as its
// registry does.
func signedTestServer(t *testing.T, tune func(*Handler)) (h *Handler, m *Metrics, srv *httptest.Server, send func(s sender) int) {
	t.Helper()
	var n recorder
	h, m = newTestHandler(t, &n, Config{Secrets: allSecrets()})
	tune(h)
	srv = httptest.NewServer(h)
	t.Cleanup(srv.Close)
	send = func(s sender) int {
		t.Helper()
		body := readPayload(t, s.file)
		req := s.request(t, body, testSecret, proofRight)
		out, err := http.NewRequest(req.Method, srv.URL+req.URL.String(), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		out.Header = req.Header
		resp, err := http.DefaultClient.Do(out)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	return h, m, srv, send
}

func senderOf(source string) sender {
	return senders[slices.IndexFunc(senders, func(s sender) bool { return s.source == source })]
}

// stalled sends, from 127.0.0.1, the headers of a ghcr.io request that
// announces 1 MiB and 10 bytes of its payload, then nothing.
func stalled(srv *httptest.Server) (net.Conn, error) {
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "POST %s?type=%s HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: %d\r\n\r\n0123456789", Path, GHCR, DefaultMaxBodySize)
	return c, nil
}

func stall(t *testing.T, srv *httptest.Server) net.Conn {
	t.Helper()
	c, err := stalled(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// placesAre waits until held places are held and waiting requests wait.
func placesAre(t *testing.T, h *Handler, held, waiting int) {
	t.Helper()
	poll.Until(t, 10*time.Second, fmt.Sprintf("%d places held, %d requests waiting", held, waiting), func() (bool, string) {
		hd, w := h.unverified.count()
		return hd == held && w == waiting, fmt.Sprintf("%d held, %d waiting", hd, w)
	})
}

// Senders that know no secret cannot make the controller hold more than
// MaxUnverifiedReads payloads of a signed type, which are read before the
// signature can be checked. A request that finds them taken waits in
// turn, and a payload that has held its place for placeHold gives it up to
// it (503 with Retry-After); while none waits, senders who trickle their
// payload are cut after slowSenderGrace.
func TestUnverifiedReadsAreBounded(t *testing.T) {
	// Only a waiting request frees a place.
	h, m, srv, _ := signedTestServer(t, func(h *Handler) { h.grace = time.Hour })
	var held []net.Conn // oldest first
	for i := range MaxUnverifiedReads {
		held = append(held, stall(t, srv))
		placesAre(t, h, i+1, 0)
	}
	late := stall(t, srv)
	// The oldest gives its place up to the request that waits.
	resp, err := http.ReadResponse(bufio.NewReader(held[0]), nil)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the oldest payload while a request waits: %v %v, want 503 with Retry-After", resp, err)
	}
	placesAre(t, h, MaxUnverifiedReads, 0)
	if c := testutil.ToFloat64(m.rejected.WithLabelValues(GHCR, RejectUnavailable)); c != 1 {
		t.Errorf("rejected{ghcr,unavailable} = %v", c)
	}
	late.Close()
	placesAre(t, h, MaxUnverifiedReads-1, 0)
	for _, c := range held[1:] {
		c.Close()
	}
	placesAre(t, h, 0, 0)

	// While no place is given up: the trickling senders are cut after the
	// grace, and a delivery that waited meanwhile is accepted.
	h, _, srv, send := signedTestServer(t, func(h *Handler) { h.unverified.hold = time.Hour })
	for range MaxUnverifiedReads {
		stall(t, srv)
	}
	placesAre(t, h, MaxUnverifiedReads, 0)
	if code := send(senderOf(GHCR)); code != http.StatusAccepted {
		t.Fatalf("a genuine delivery while slow senders held the places: status %d, want 202", code)
	}
	placesAre(t, h, 0, 0)
}

// Senders that share one address with a registry (behind an Ingress or a
// load balancer every sender has its address), who keep every place of the
// signed payloads taken and come back each time they are cut, do not keep
// the registry's signed deliveries out: each waits its turn and is
// accepted. A delivery whose secret is in a header takes no place.
func TestSlowSendersBehindOneAddress(t *testing.T) {
	const deliveries = 12
	// The senders keep the pace: only a request waiting frees a place.
	h, _, srv, send := signedTestServer(t, func(h *Handler) { h.grace = time.Hour })
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var cut atomic.Int32
	for range MaxUnverifiedReads {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := stalled(srv)
				if err != nil {
					return
				}
				stop := context.AfterFunc(ctx, func() { c.Close() })
				if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil && resp.StatusCode == http.StatusServiceUnavailable {
					cut.Add(1)
				}
				stop()
				c.Close()
			}
		})
	}
	defer wg.Wait()
	defer cancel()
	for i := range deliveries {
		placesAre(t, h, MaxUnverifiedReads, 0)
		if code := send(senderOf(GHCR)); code != http.StatusAccepted {
			t.Fatalf("signed delivery %d of %d while slow senders from its address held the places: status %d, want 202", i+1, deliveries, code)
		}
	}
	placesAre(t, h, MaxUnverifiedReads, 0)
	if code := send(senderOf(Harbor)); code != http.StatusAccepted {
		t.Errorf("a delivery with its secret in a header while the places are held: status %d, want 202", code)
	}
	if c := cut.Load(); c < deliveries {
		t.Errorf("the slow senders were cut %d times, want at least %d (one for each delivery)", c, deliveries)
	}
}

// A sender that stops sending its payload is cut at the read deadline,
// counted from when its request arrived: for the signed types too, whose
// pace check alone would give it slowSenderGrace.
func TestReadTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	for _, source := range []string{Distribution, GHCR} {
		t.Run(source, func(t *testing.T) {
			var n recorder
			h, m := newTestHandler(t, &n, Config{Secrets: allSecrets()})
			h.readTimeout = timeout
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			s := senders[slices.IndexFunc(senders, func(s sender) bool { return s.source == source })]
			req := s.request(t, nil, testSecret, proofRight)
			start := time.Now()
			// Headers and 10 bytes of the 1,000 announced, then nothing.
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n", req.URL.RequestURI())
			for k := range req.Header {
				fmt.Fprintf(c, "%s: %s\r\n", k, req.Header.Get(k))
			}
			fmt.Fprint(c, "\r\n{\"events\":")
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("no answer to a stalled payload after %s: %v", took, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d, want 400", resp.StatusCode)
			}
			if took < timeout || took > timeout+time.Second {
				t.Errorf("answered after %s, want about %s", took, timeout)
			}
			if c := testutil.ToFloat64(m.rejected.WithLabelValues(source, RejectMalformed)); c != 1 {
				t.Errorf("rejected{%s,malformed} = %v", source, c)
			}
			if len(n.repositories()) != 0 {
				t.Error("a cut payload was notified")
			}
		})
	}
}
