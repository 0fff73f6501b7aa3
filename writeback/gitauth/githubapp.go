package gitauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
)

// defaultGitHubAPI is where installation tokens come from unless the
// Secret names a GitHub Enterprise Server (https://HOST/api/v3).
const defaultGitHubAPI = "https://api.github.com"

// githubTokenRefreshMargin is how long before it expires a token is
// replaced, so that one that is still valid when a write starts does not
// expire during its fetch and push.
const githubTokenRefreshMargin = 5 * time.Minute

// githubAPITimeout bounds one token request.
const githubAPITimeout = 30 * time.Second

// maxGitHubAnswer bounds what is read of the token request's answer: a
// token, its expiry and permissions, and the repositories it is limited
// to, if any.
const maxGitHubAnswer = 1 << 20

// githubApp is the GitHub App of an Argo CD repository Secret.
type githubApp struct {
	appID, installationID string
	privateKey            string
	// baseURL is the REST API root without a trailing slash.
	baseURL string
}

// parseGitHubApp checks the GitHub App fields of credentials from source.
func parseGitHubApp(source, appID, installationID, privateKey, baseURL string) (githubApp, error) {
	app := githubApp{
		appID:          strings.TrimSpace(appID),
		installationID: strings.TrimSpace(installationID),
		privateKey:     privateKey,
		baseURL:        strings.TrimSuffix(strings.TrimSpace(baseURL), "/"),
	}
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"githubAppID", app.appID}, {"githubAppInstallationID", app.installationID}, {"githubAppPrivateKey", strings.TrimSpace(app.privateKey)},
	} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return githubApp{}, fmt.Errorf("%s holds GitHub App credentials without %s", source, strings.Join(missing, ", "))
	}
	// Both IDs go into the request: the installation into its path, the
	// app into the JWT's issuer, which GitHub also accepts as a client ID.
	if n, err := strconv.ParseUint(app.installationID, 10, 64); err != nil || n == 0 {
		return githubApp{}, fmt.Errorf("githubAppInstallationID %q in %s is not a positive number", app.installationID, source)
	}
	if strings.IndexFunc(app.appID, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '_' || r == '-')
	}) >= 0 {
		return githubApp{}, fmt.Errorf("githubAppID %q in %s is neither an app ID nor a client ID", app.appID, source)
	}
	if app.baseURL == "" {
		app.baseURL = defaultGitHubAPI
	}
	u, err := url.Parse(app.baseURL)
	switch {
	case err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return githubApp{}, fmt.Errorf("githubAppEnterpriseBaseUrl %q in %s is not a URL such as https://github.example.com/api/v3", app.baseURL, source)
	case u.Scheme == "http" && !repourl.LoopbackHost(u.Hostname()):
		// The JWT is a bearer credential for the app itself.
		return githubApp{}, fmt.Errorf("githubAppEnterpriseBaseUrl %q in %s: refusing to send GitHub App credentials over plain http; use https", app.baseURL, source)
	case u.Scheme != "https" && u.Scheme != "http":
		return githubApp{}, fmt.Errorf("githubAppEnterpriseBaseUrl %q in %s is not an http(s) URL", app.baseURL, source)
	}
	return app, nil
}

// cacheKey tells installation tokens apart. It holds a hash of the
// private key: otherwise a Secret naming someone else's app and
// installation, with any key, would be handed the token minted for the
// Secret that holds the real key.
func (a githubApp) cacheKey() string {
	sum := sha256.Sum256([]byte(a.privateKey))
	return a.appID + " " + a.installationID + " " + a.baseURL + " " + hex.EncodeToString(sum[:])
}

// GitHubTokens mints and caches GitHub App installation tokens. One lives
// as long as its Writer, so a token serves every write until shortly
// before it expires. It asks only the GitHub APIs the operator allows.
type GitHubTokens struct {
	now  func() time.Time
	apis *forge.Hosts
	mint coalesce.Group[githubToken]
	// timeout bounds one token request: githubAPITimeout.
	timeout time.Duration

	mu     sync.Mutex
	tokens map[string]githubToken
}

type githubToken struct {
	value   string
	expires time.Time
}

// NewGitHubTokens returns an empty token cache that mints tokens at the
// GitHub APIs apis knows (api.github.com and the GitHub Enterprise Servers
// the operator names); nil: api.github.com alone.
func NewGitHubTokens(apis *forge.Hosts) *GitHubTokens {
	if apis == nil {
		apis, _ = forge.NewHosts(nil, nil)
	}
	return &GitHubTokens{now: time.Now, apis: apis, timeout: githubAPITimeout, tokens: map[string]githubToken{}}
}

// token returns a valid installation token for app, minting one through
// the GitHub REST API with rt (which carries the TLS and proxy settings
// for the API host) when none is cached. Concurrent writes to repositories
// of one installation share one request. An API the operator does not
// allow is refused before anything is sent: the Secret that names it may
// be a tenant's, and the answer would reach the tenant's errors.
func (g *GitHubTokens) token(ctx context.Context, app githubApp, source string, rt http.RoundTripper) (string, error) {
	if _, err := g.apis.APIURL(settings.ForgeGitHub, app.baseURL); err != nil {
		return "", fmt.Errorf("githubAppEnterpriseBaseUrl %q in %s: %v; the operator allows a GitHub Enterprise Server with --github-enterprise-api-url", app.baseURL, source, err)
	}
	key := app.cacheKey()
	g.mu.Lock()
	t, ok := g.tokens[key]
	g.mu.Unlock()
	if ok && g.now().Add(githubTokenRefreshMargin).Before(t.expires) {
		return t.value, nil
	}
	t, err := g.mint.Do(ctx, key, nil, func(ctx context.Context) (githubToken, error) {
		t, err := g.request(ctx, app, rt)
		if err != nil {
			return githubToken{}, fmt.Errorf("get an access token for GitHub App installation %s (app %s, credentials from %s): %w", app.installationID, app.appID, source, err)
		}
		g.mu.Lock()
		g.tokens[key] = t
		g.mu.Unlock()
		return t, nil
	})
	if err != nil {
		return "", err
	}
	return t.value, nil
}

// request asks GitHub for an installation token: a JWT signed with the
// app's key, sent to POST /app/installations/{id}/access_tokens. Errors
// never hold the key, the JWT or a token.
func (g *GitHubTokens) request(ctx context.Context, app githubApp, rt http.RoundTripper) (githubToken, error) {
	key, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(app.privateKey))
	if err != nil {
		return githubToken{}, errors.New("githubAppPrivateKey is not an RSA private key in PEM form")
	}
	now := g.now()
	// GitHub allows at most ten minutes between now and exp, and
	// recommends dating iat a minute back against clock drift.
	signed, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer:    app.appID,
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)),
	}).SignedString(key)
	if err != nil {
		return githubToken{}, fmt.Errorf("sign the GitHub App JWT: %w", err)
	}
	endpoint := app.baseURL + "/app/installations/" + app.installationID + "/access_tokens"
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, nil)
	if err != nil {
		return githubToken{}, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("Authorization", "Bearer "+signed)
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return githubToken{}, fmt.Errorf("POST %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	body, err := bounded.ReadAll(resp.Body, maxGitHubAnswer, "GitHub API answer")
	if err != nil {
		return githubToken{}, fmt.Errorf("POST %s: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return githubToken{}, fmt.Errorf("POST %s: %s%s", endpoint, resp.Status, githubErrorMessage(body))
	}
	var answer struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Token == "" || answer.ExpiresAt.IsZero() {
		return githubToken{}, fmt.Errorf("POST %s: the answer holds no token and expiry", endpoint)
	}
	return githubToken{value: answer.Token, expires: answer.ExpiresAt}, nil
}

// githubErrorMessage is the "message" GitHub gives with an error, which
// says what is wrong ("Not Found", "A JSON web token could not be
// decoded"), on one line and cut short; the rest of the body is left out.
func githubErrorMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	if msg := bounded.Excerpt(e.Message, bounded.MessageLength); msg != "" {
		return ": " + msg
	}
	return ""
}
