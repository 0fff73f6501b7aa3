package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwksServer serves the public half of keys as Google's JWKS endpoint
// does, and counts the fetches.
func jwksServer(t *testing.T, keys map[string]*rsa.PrivateKey) (string, *atomic.Int32) {
	t.Helper()
	type jwk struct {
		Kid string `json:"kid"`
		Kty string `json:"kty"`
		Alg string `json:"alg"`
		Use string `json:"use"`
		N   string `json:"n"`
		E   string `json:"e"`
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	for kid, k := range keys {
		set.Keys = append(set.Keys, jwk{Kid: kid, Kty: "RSA", Alg: "RS256", Use: "sig",
			N: base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
			E: base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
	}
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &fetches
}

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const (
	testAudience = "https://updater.example.com/webhook?type=artifact-registry"
	testAccount  = "pubsub-push@acme-prod.iam.gserviceaccount.com"
)

// pushToken is the token a push subscription sends, with changes.
func pushToken(t *testing.T, key *rsa.PrivateKey, kid string, change func(jwt.MapClaims)) string {
	t.Helper()
	claims := jwt.MapClaims{
		"aud": testAudience, "iss": "https://accounts.google.com", "email": testAccount, "email_verified": true,
		"sub": "1234567890", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	}
	if change != nil {
		change(claims)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A Pub/Sub push subscription with authentication: the OIDC token is
// checked against the keys of the JWKS, the audience, the issuer and the
// service account; with a secret as well, both are required.
func TestPubSubOIDC(t *testing.T) {
	good, other := rsaKey(t), rsaKey(t)
	jwksURL, fetches := jwksServer(t, map[string]*rsa.PrivateKey{"key-1": good})
	body := readPayload(t, "artifact-registry.json")
	tests := []struct {
		name       string
		secret     string
		query      string
		auth       func() string
		wantStatus int
	}{
		{name: "valid token", auth: func() string { return "Bearer " + pushToken(t, good, "key-1", nil) }, wantStatus: http.StatusAccepted},
		{name: "issuer without scheme", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { c["iss"] = "accounts.google.com" })
		}, wantStatus: http.StatusAccepted},
		{name: "no token", auth: func() string { return "" }, wantStatus: http.StatusUnauthorized},
		{name: "not a bearer token", auth: func() string { return pushToken(t, good, "key-1", nil) }, wantStatus: http.StatusUnauthorized},
		{name: "other audience", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { c["aud"] = "https://elsewhere.example.com/" })
		}, wantStatus: http.StatusUnauthorized},
		{name: "other issuer", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { c["iss"] = "https://issuer.example.com" })
		}, wantStatus: http.StatusUnauthorized},
		{name: "other service account", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { c["email"] = "someone@example.com" })
		}, wantStatus: http.StatusUnauthorized},
		{name: "email not verified", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { c["email_verified"] = false })
		}, wantStatus: http.StatusUnauthorized},
		{name: "expired", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() })
		}, wantStatus: http.StatusUnauthorized},
		{name: "no expiry", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { delete(c, "exp") })
		}, wantStatus: http.StatusUnauthorized},
		{name: "expiry zero", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { c["exp"] = 0 })
		}, wantStatus: http.StatusUnauthorized},
		{name: "issued in the future", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { c["iat"] = time.Now().Add(time.Hour).Unix() })
		}, wantStatus: http.StatusUnauthorized},
		{name: "not valid yet", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() })
		}, wantStatus: http.StatusUnauthorized},
		{name: "audience in a list", auth: func() string {
			return "Bearer " + pushToken(t, good, "key-1", func(c jwt.MapClaims) { c["aud"] = []string{"https://elsewhere.example.com/", testAudience} })
		}, wantStatus: http.StatusAccepted},
		{name: "signed by another key with a known key ID", auth: func() string { return "Bearer " + pushToken(t, other, "key-1", nil) }, wantStatus: http.StatusUnauthorized},
		{name: "signed by an unknown key", auth: func() string { return "Bearer " + pushToken(t, other, "key-2", nil) }, wantStatus: http.StatusUnauthorized},
		{name: "HMAC with the public key", auth: func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"aud": testAudience, "iss": "https://accounts.google.com",
				"email": testAccount, "email_verified": true, "exp": time.Now().Add(time.Hour).Unix()})
			tok.Header["kid"] = "key-1"
			s, _ := tok.SignedString(good.N.Bytes())
			return "Bearer " + s
		}, wantStatus: http.StatusUnauthorized},
		{name: "token and secret", secret: testSecret, query: "&secret=" + testSecret,
			auth: func() string { return "Bearer " + pushToken(t, good, "key-1", nil) }, wantStatus: http.StatusAccepted},
		{name: "token, wrong secret", secret: testSecret, query: "&secret=x",
			auth: func() string { return "Bearer " + pushToken(t, good, "key-1", nil) }, wantStatus: http.StatusUnauthorized},
		{name: "secret, no token", secret: testSecret, query: "&secret=" + testSecret,
			auth: func() string { return "" }, wantStatus: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewOIDCVerifier(testAudience, testAccount, jwksURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			var n recorder
			h, _ := newTestHandler(t, &n, Config{Secrets: map[string]string{ArtifactRegistry: tt.secret}, OIDC: map[string]*OIDCVerifier{ArtifactRegistry: v}})
			req := httptest.NewRequest(http.MethodPost, Path+"?type="+ArtifactRegistry+tt.query, bytes.NewReader(body))
			if a := tt.auth(); a != "" {
				req.Header.Set("Authorization", a)
			}
			rec := serve(h, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if got := len(n.repositories()); (got == 1) != (tt.wantStatus == http.StatusAccepted) {
				t.Errorf("%d notifications", got)
			}
		})
	}

	// Tokens naming unknown keys do not make the controller fetch the
	// keys for each of them.
	fetches.Store(0)
	v, _ := NewOIDCVerifier(testAudience, testAccount, jwksURL, nil)
	h, _ := newTestHandler(t, &recorder{}, Config{OIDC: map[string]*OIDCVerifier{ArtifactRegistry: v}})
	for i := range 20 {
		req := httptest.NewRequest(http.MethodPost, Path+"?type="+ArtifactRegistry, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+pushToken(t, other, "forged-"+string(rune('a'+i)), nil))
		if rec := serve(h, req); rec.Code != http.StatusUnauthorized {
			t.Fatalf("forged key: status %d", rec.Code)
		}
	}
	if got := fetches.Load(); got != 1 {
		t.Errorf("the keys were fetched %d times for 20 unknown key IDs, want 1", got)
	}
}

func TestNewOIDCVerifier(t *testing.T) {
	if _, err := NewOIDCVerifier("", "", "", nil); err == nil {
		t.Error("no error without an audience")
	}
	// The audience alone admits a token any Google account can obtain.
	if _, err := NewOIDCVerifier(testAudience, "", "", nil); err == nil {
		t.Error("no error without the service account")
	}
	v, _ := NewOIDCVerifier(testAudience, testAccount, "", nil)
	if _, err := NewHandler(&recorder{}, Config{OIDC: map[string]*OIDCVerifier{Quay: v}}); err == nil {
		t.Error("OIDC accepted for quay.io")
	}
	h, err := NewHandler(&recorder{}, Config{OIDC: map[string]*OIDCVerifier{ArtifactRegistry: v}})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Enabled(); len(got) != 1 || got[0] != ArtifactRegistry {
		t.Errorf("enabled %v", got)
	}
}

// A request that is gone before the keys are fetched does not spend the
// refresh: the next token signed by the new key is accepted.
func TestOIDCRefreshOutlivesRequest(t *testing.T) {
	key := rsaKey(t)
	jwksURL, fetches := jwksServer(t, map[string]*rsa.PrivateKey{"k1": key})
	v, _ := NewOIDCVerifier(testAudience, testAccount, jwksURL, nil)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if err := v.Verify(gone, "Bearer "+pushToken(t, rsaKey(t), "forged", nil)); err == nil {
		t.Fatal("forged token accepted")
	}
	if err := v.Verify(t.Context(), "Bearer "+pushToken(t, key, "k1", nil)); err != nil {
		t.Errorf("token of a published key after a cancelled refresh: %v", err)
	}
	if got := fetches.Load(); got != 1 {
		t.Errorf("the keys were fetched %d times, want 1", got)
	}
}

// A key endpoint that stalls is given up on at the fetch's deadline, even
// for a client without a timeout of its own and a caller without a
// deadline; one that sends without end is read no further than maxJWKS.
func TestOIDCKeyFetchBounds(t *testing.T) {
	const timeout = 200 * time.Millisecond
	tests := []struct {
		name    string
		answer  func(w http.ResponseWriter, r *http.Request, gone <-chan struct{}, served *atomic.Int64)
		want    string
		maxTook time.Duration
	}{
		{name: "stalls", answer: func(w http.ResponseWriter, r *http.Request, gone <-chan struct{}, _ *atomic.Int64) {
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-gone:
			}
		}, want: "deadline exceeded", maxTook: timeout + time.Second},
		{name: "without end", answer: func(w http.ResponseWriter, _ *http.Request, _ <-chan struct{}, served *atomic.Int64) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"keys":[`)
			key := `{"kid":"k","kty":"RSA","n":"` + strings.Repeat("A", 1000) + `","e":"AQAB"},`
			chunk := strings.Repeat(key, 64)
			for served.Load() < 64<<20 {
				n, err := io.WriteString(w, chunk)
				served.Add(int64(n))
				if err != nil {
					return
				}
			}
		}, want: "unexpected EOF", maxTook: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var served atomic.Int64
			gone := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tt.answer(w, r, gone, &served)
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(gone) }) // before srv.Close, which waits for the handler
			v, err := NewOIDCVerifier(testAudience, testAccount, srv.URL, &http.Client{})
			if err != nil {
				t.Fatal(err)
			}
			v.timeout = timeout
			token := "Bearer " + pushToken(t, rsaKey(t), "k", nil)
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- v.Verify(context.Background(), token) }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("no answer after 10s")
			}
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
			if took > tt.maxTook {
				t.Errorf("took %s", took)
			}
			if n := served.Load(); n > 16<<20 {
				t.Errorf("the verifier took %d MiB of the key set", n>>20)
			}
		})
	}
}
