package testenv

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// GitHubAPI stands in for the calls of GitHub's REST API that the
// updater makes: listing a GitHub App's installations (GET
// /app/installations, paginated with a Link header) and creating an
// installation access token (POST
// /app/installations/{installation_id}/access_tokens), both authenticated
// with a JWT signed RS256 by the app's private key, and finding, opening
// and updating pull requests (GET, POST /repos/{owner}/{repo}/pulls,
// PATCH /repos/{owner}/{repo}/pulls/{number}, POST
// /repos/{owner}/{repo}/issues/{number}/labels, authenticated with a token
// it minted or was told to accept). It speaks the request and answer
// formats GitHub documents and checks every request the way GitHub would;
// there is no GitHub to run here.
type GitHubAPI struct {
	reviewsAPI
	commits githubCommits

	// URL is the API's base URL in GitHub Enterprise Server's form,
	// https://HOST/api/v3, served with a certificate of the CA given to
	// StartGitHubAPI.
	URL string
	// AppID and InstallationID identify the app and its installation,
	// installed on the account (user or organisation) Account.
	AppID          string
	InstallationID int64
	Account        string
	// Lists counts the listings of installations received (pages).
	Lists atomic.Int64
	// PrivateKey is the app's private key in the PKCS#1 PEM form GitHub
	// hands out.
	PrivateKey []byte
	// Requests counts the token requests received, answered or refused.
	Requests atomic.Int64

	key *rsa.PrivateKey

	mu sync.Mutex
	// others are installations on other accounts, listed before the
	// app's own; their tokens are not minted.
	others   map[string]int64
	lifetime time.Duration
	status   int
	minted   func(token string)
	problems []string
	issued   int
}

// githubAPIPrefix is where GitHub Enterprise Server serves the REST API.
const githubAPIPrefix = "/api/v3"

// StartGitHubAPI serves the stand-in over HTTPS with a certificate from
// ca. minted, if not nil, is told each token it hands out, for example
// to make a GitServer accept it.
func StartGitHubAPI(t testing.TB, ca *CA, minted func(token string)) *GitHubAPI {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	g := &GitHubAPI{
		AppID:          "104729",
		InstallationID: 7919,
		Account:        "Image-Updater",
		PrivateKey:     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		key:            key,
		lifetime:       time.Hour,
		minted:         minted,
		reviewsAPI:     reviewsAPI{newReviews()},
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(g.serve))
	srv.TLS = ca.serverTLS(t)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	g.URL = srv.URL + githubAPIPrefix
	return g
}

// SetTokenLifetime sets how long tokens minted from now on are valid
// (one hour unless set, as on GitHub).
func (g *GitHubAPI) SetTokenLifetime(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lifetime = d
}

// SetOtherInstallations sets the app's installations on other accounts
// (login to ID), listed before its own.
func (g *GitHubAPI) SetOtherInstallations(others map[string]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.others = others
}

// FailWith makes well-formed token requests fail with status and
// GitHub's error body for it (0: answer them again).
func (g *GitHubAPI) FailWith(status int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status = status
}

// Problems lists the requests GitHub would have refused as malformed,
// and why; a client that follows GitHub's documentation causes none.
func (g *GitHubAPI) Problems() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.problems...)
}

// githubError writes an error the way GitHub's REST API does.
func githubError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{
		"message":           message,
		"documentation_url": "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app",
		"status":            strconv.Itoa(status),
	})
}

func (g *GitHubAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api/graphql" {
		g.serveGraphQL(w, r)
		return
	}
	if parts := strings.Split(strings.TrimPrefix(r.URL.Path, githubAPIPrefix+"/repos/"), "/"); len(parts) == 4 && parts[2] == "git" && parts[3] == "refs" {
		g.serveRefs(w, r, parts[0]+"/"+parts[1])
		return
	}
	if strings.HasPrefix(r.URL.Path, githubAPIPrefix+"/repos/") {
		g.servePulls(w, r)
		return
	}
	if r.URL.Path == githubAPIPrefix+"/app/installations" {
		g.serveInstallations(w, r)
		return
	}
	g.Requests.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	refuse := func(status int, message, why string) {
		g.problems = append(g.problems, r.Method+" "+r.URL.Path+": "+why)
		githubError(w, status, message)
	}
	want := fmt.Sprintf("%s/app/installations/%d/access_tokens", githubAPIPrefix, g.InstallationID)
	if r.URL.Path != want {
		refuse(http.StatusNotFound, "Not Found", "unknown path, want "+want)
		return
	}
	if !g.appRequest(r, http.MethodPost, refuse) {
		return
	}
	switch g.status {
	case 0:
	case http.StatusUnauthorized:
		githubError(w, g.status, "Bad credentials")
		return
	case http.StatusNotFound:
		githubError(w, g.status, "Not Found")
		return
	default:
		githubError(w, g.status, http.StatusText(g.status))
		return
	}
	g.issued++
	random := make([]byte, 16)
	if _, err := rand.Read(random); err != nil {
		githubError(w, http.StatusInternalServerError, err.Error())
		return
	}
	token := fmt.Sprintf("ghs_%x%04d", random, g.issued)
	expires := time.Now().Add(g.lifetime).UTC().Truncate(time.Second)
	if g.minted != nil {
		g.minted(token)
	}
	g.s.acceptToken(token)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"token":                token,
		"expires_at":           expires.Format(time.RFC3339),
		"permissions":          map[string]string{"contents": "write", "metadata": "read"},
		"repository_selection": "all",
	})
}

// serveInstallations lists the app's installations, other accounts' first,
// as GitHub does: at most per_page (default 30, at most 100) a page, the
// next page named by a Link header.
func (g *GitHubAPI) serveInstallations(w http.ResponseWriter, r *http.Request) {
	g.Lists.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	refuse := func(status int, message, why string) {
		g.problems = append(g.problems, r.Method+" "+r.URL.Path+": "+why)
		githubError(w, status, message)
	}
	if !g.appRequest(r, http.MethodGet, refuse) {
		return
	}
	if g.status != 0 {
		githubError(w, g.status, http.StatusText(g.status))
		return
	}
	perPage, page := 30, 1
	if v := r.URL.Query().Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			refuse(http.StatusUnprocessableEntity, "Invalid per_page", "per_page "+v)
			return
		}
		perPage = min(n, 100)
	}
	if v := r.URL.Query().Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			refuse(http.StatusUnprocessableEntity, "Invalid page", "page "+v)
			return
		}
		page = n
	}
	type account struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	}
	type installation struct {
		ID      int64   `json:"id"`
		Account account `json:"account"`
		AppID   string  `json:"app_id"`
	}
	var all []installation
	logins := make([]string, 0, len(g.others))
	for login := range g.others {
		logins = append(logins, login)
	}
	slices.Sort(logins)
	for _, login := range logins {
		all = append(all, installation{ID: g.others[login], Account: account{Login: login, Type: "Organization"}, AppID: g.AppID})
	}
	all = append(all, installation{ID: g.InstallationID, Account: account{Login: g.Account, Type: "Organization"}, AppID: g.AppID})
	from := min((page-1)*perPage, len(all))
	to := min(from+perPage, len(all))
	if to < len(all) {
		next := *r.URL
		q := next.Query()
		q.Set("page", strconv.Itoa(page+1))
		q.Set("per_page", strconv.Itoa(perPage))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<https://%s%s>; rel="next"`, r.Host, next.RequestURI()))
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(all[from:to])
}

// appRequest checks a request the app makes as itself, as GitHub does:
// the method, the Accept and API version headers, and its JWT; a request
// that fails is refused with GitHub's answer and false.
func (g *GitHubAPI) appRequest(r *http.Request, method string, refuse func(status int, message, why string)) bool {
	if r.Method != method {
		refuse(http.StatusNotFound, "Not Found", "want "+method)
		return false
	}
	if accept := r.Header.Get("Accept"); accept != "application/vnd.github+json" {
		refuse(http.StatusUnsupportedMediaType, "Unsupported 'Accept' header", fmt.Sprintf("Accept %q, want application/vnd.github+json", accept))
		return false
	}
	if v := r.Header.Get("X-GitHub-Api-Version"); v != "" && v != "2022-11-28" {
		refuse(http.StatusBadRequest, "Invalid API version", "X-GitHub-Api-Version "+v)
		return false
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		refuse(http.StatusUnauthorized, "A JSON web token could not be decoded", "no Authorization: Bearer <JWT>")
		return false
	}
	if why := g.checkJWT(bearer, time.Now()); why != "" {
		refuse(http.StatusUnauthorized, "A JSON web token could not be decoded", why)
		return false
	}
	return true
}

// checkJWT verifies a JWT as GitHub documents it for apps: RS256 signed
// by the app's key, iss the app's ID, iat in the past, exp in the future
// and at most ten minutes after iat. It says what is wrong, or "".
func (g *GitHubAPI) checkJWT(token string, now time.Time) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "the JWT does not have three parts"
	}
	enc := base64.RawURLEncoding
	var header struct{ Alg, Typ string }
	if b, err := enc.DecodeString(parts[0]); err != nil || json.Unmarshal(b, &header) != nil {
		return "the JWT header does not decode"
	}
	if header.Alg != "RS256" {
		return "JWT alg " + header.Alg + ", want RS256"
	}
	sig, err := enc.DecodeString(parts[2])
	if err != nil {
		return "the JWT signature does not decode"
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&g.key.PublicKey, crypto.SHA256, digest[:], sig); err != nil {
		return "the JWT is not signed by the app's key"
	}
	var claims struct {
		Iss      json.RawMessage
		Iat, Exp int64
	}
	if b, err := enc.DecodeString(parts[1]); err != nil || json.Unmarshal(b, &claims) != nil {
		return "the JWT claims do not decode"
	}
	// GitHub takes the issuer as a number or a string.
	if iss := strings.Trim(string(claims.Iss), `"`); iss != g.AppID {
		return "JWT iss " + string(claims.Iss) + ", want the app ID " + g.AppID
	}
	switch {
	case claims.Iat == 0 || claims.Exp == 0:
		return "the JWT lacks iat or exp"
	case time.Unix(claims.Iat, 0).After(now):
		return "the JWT's iat is in the future"
	case !time.Unix(claims.Exp, 0).After(now):
		return "the JWT has expired"
	case claims.Exp-claims.Iat > 600:
		return "the JWT's exp is more than ten minutes after its iat"
	}
	return ""
}
