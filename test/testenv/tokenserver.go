package testenv

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TokenServer issues bearer tokens for a Distribution registry, the way
// Docker Hub, GHCR or Quay do: a client that is refused by the registry asks
// the realm for a token with its credentials and the scope it needs.
type TokenServer struct {
	Service string
	*tokenIssuer
	// Issued counts the tokens handed out; Refused the requests refused.
	Issued, Refused atomic.Int64

	username, password string
	mu                 sync.Mutex
	users              map[string]limitedUser // see AddUser
	port               int
}

// tokenIssuer signs the tokens a Distribution registry accepts: RS256
// JWTs whose x5c header carries the certificate in CertFile, which the
// registry's rootcertbundle names.
type tokenIssuer struct {
	Issuer   string
	CertFile string // PEM certificate the registry trusts
	key      *rsa.PrivateKey
	certDER  []byte
}

func newTokenIssuer(t testing.TB, issuer string) *tokenIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test token issuer"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	i := &tokenIssuer{Issuer: issuer, CertFile: filepath.Join(t.TempDir(), "token-cert.pem"), key: key, certDER: der}
	writeFile(t, i.CertFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	return i
}

// StartTokenServer serves tokens on a loopback port. Its realm names the
// host "localhost": go-containerregistry refuses realms that are loopback
// IP literals.
func StartTokenServer(t testing.TB, username, password string) *TokenServer {
	t.Helper()
	ts := &TokenServer{
		Service:     "test-registry",
		tokenIssuer: newTokenIssuer(t, "test-token-issuer"),
		username:    username,
		password:    password,
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.port = l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(ts.serveToken), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ts
}

// limitedUser may only pull the repositories under prefix.
type limitedUser struct {
	password, prefix string
}

// AddUser lets username and password obtain tokens for the repositories
// under prefix ("org-a" covers org-a/app) and no others, as a registry's
// per-organisation robot accounts do.
func (ts *TokenServer) AddUser(username, password, prefix string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.users == nil {
		ts.users = map[string]limitedUser{}
	}
	ts.users[username] = limitedUser{password: password, prefix: prefix}
}

// Realm is the URL the registry sends clients to.
func (ts *TokenServer) Realm() string {
	return "http://" + ts.Host() + "/token"
}

// Host is the realm's host and port. It is internal: the client reaches
// it only when the registry's registries.conf entry lists it under
// internal_hosts.
func (ts *TokenServer) Host() string {
	return "localhost:" + strconv.Itoa(ts.port)
}

// authenticate checks a client's credentials and says which repositories
// it may pull.
func (ts *TokenServer) authenticate(user, pass string) (allowed func(repo string) bool, ok bool) {
	ts.mu.Lock()
	limited, isLimited := ts.users[user]
	ts.mu.Unlock()
	switch {
	case isLimited:
		return func(repo string) bool {
			return repo == limited.prefix || strings.HasPrefix(repo, limited.prefix+"/")
		}, pass == limited.password
	case user == ts.username && pass == ts.password:
		return func(string) bool { return true }, true
	}
	return nil, false
}

func (ts *TokenServer) serveToken(w http.ResponseWriter, r *http.Request) {
	user, pass, hasAuth := r.BasicAuth()
	allowed, ok := ts.authenticate(user, pass)
	if !hasAuth || !ok {
		ts.Refused.Add(1)
		w.Header().Set("WWW-Authenticate", `Basic realm="test token server"`)
		http.Error(w, `{"details":"incorrect username or password"}`, http.StatusUnauthorized)
		return
	}
	token, err := ts.registryToken(user, r.URL.Query().Get("service"), grantedAccess(r.URL.Query()["scope"], allowed))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ts.Issued.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"token": token, "access_token": token, "expires_in": 300, "issued_at": time.Now().UTC().Format(time.RFC3339),
	})
}

// grantedAccess is the access claim of a registry token for the scopes
// asked for, those of the repositories allowed.
func grantedAccess(scopes []string, allowed func(repo string) bool) []map[string]any {
	var access []map[string]any
	for _, scope := range scopes {
		// repository:<name>:<actions>; names may contain ':' only before the
		// last field, so split from the right.
		i, j := strings.Index(scope, ":"), strings.LastIndex(scope, ":")
		if i < 0 || i == j || !allowed(scope[i+1:j]) {
			continue
		}
		access = append(access, map[string]any{
			"type":    scope[:i],
			"name":    scope[i+1 : j],
			"actions": strings.Split(scope[j+1:], ","),
		})
	}
	return access
}

// registryToken makes a token the registry accepts for five minutes.
func (i *tokenIssuer) registryToken(subject, audience string, access []map[string]any) (string, error) {
	now := time.Now()
	jti := make([]byte, 8)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	return i.sign(map[string]any{
		"iss": i.Issuer, "sub": subject, "aud": audience,
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"jti": hex.EncodeToString(jti), "access": access,
	})
}

// sign makes an RS256 JWT of claims whose x5c header carries the
// certificate the registry trusts.
func (i *tokenIssuer) sign(claims map[string]any) (string, error) {
	header, err := json.Marshal(map[string]any{
		"alg": "RS256", "typ": "JWT", "x5c": []string{base64.StdEncoding.EncodeToString(i.certDER)},
	})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signingInput := enc.EncodeToString(header) + "." + enc.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signingInput))
	sig, err := rsa.SignPKCS1v15(rand.Reader, i.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return signingInput + "." + enc.EncodeToString(sig), nil
}
