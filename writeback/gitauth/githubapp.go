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
// The installation may be left out, as Argo CD allows since v3.3: it is
// then looked up for the repository's owner (see GitHubTokens.installation).
func parseGitHubApp(source, appID, installationID, privateKey, baseURL string) (githubApp, error) {
	app := githubApp{
		appID:          strings.TrimSpace(appID),
		installationID: strings.TrimSpace(installationID),
		privateKey:     privateKey,
		baseURL:        strings.TrimSuffix(strings.TrimSpace(baseURL), "/"),
	}
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"githubAppID", app.appID}, {"githubAppPrivateKey", strings.TrimSpace(app.privateKey)},
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
	if n, err := strconv.ParseUint(app.installationID, 10, 64); app.installationID != "" && (err != nil || n == 0) {
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
	return a.appKey() + " " + a.installationID
}

// appKey tells apps apart, with a hash of the key, for the same reason.
func (a githubApp) appKey() string {
	sum := sha256.Sum256([]byte(a.privateKey))
	return a.appID + " " + a.baseURL + " " + hex.EncodeToString(sum[:])
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
	// installations are the apps' installations listed, by appKey.
	installations map[string]installationList
	list          coalesce.Group[installationList]
}

// installationList is an app's installations by account login, lower
// case, and when they were listed.
type installationList struct {
	ids map[string]string
	at  time.Time
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
	return &GitHubTokens{now: time.Now, apis: apis, timeout: githubAPITimeout, tokens: map[string]githubToken{}, installations: map[string]installationList{}}
}

// token returns a valid installation token for app, minting one through
// the GitHub REST API with rt (which carries the TLS and proxy settings
// for the API host) when none is cached; owner is the repository's owner,
// whose installation is looked up when app names none. Concurrent writes
// to repositories of one installation share one request. An API the
// operator does not allow is refused before anything is sent: the Secret
// that names it may be a tenant's, and the answer would reach the
// tenant's errors.
func (g *GitHubTokens) token(ctx context.Context, app githubApp, owner, source string, rt http.RoundTripper) (string, error) {
	if _, err := g.apis.APIURL(settings.ForgeGitHub, app.baseURL); err != nil {
		return "", fmt.Errorf("githubAppEnterpriseBaseUrl %q in %s: %v; the operator allows a GitHub Enterprise Server with --github-enterprise-api-url", app.baseURL, source, err)
	}
	if app.installationID == "" {
		id, err := g.installation(ctx, app, owner, source, rt)
		if err != nil {
			return "", err
		}
		app.installationID = id
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

// appJWT is the JWT that authenticates the app itself, signed with its
// key.
func (g *GitHubTokens) appJWT(app githubApp) (string, error) {
	key, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(app.privateKey))
	if err != nil {
		return "", errors.New("githubAppPrivateKey is not an RSA private key in PEM form")
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
		return "", fmt.Errorf("sign the GitHub App JWT: %w", err)
	}
	return signed, nil
}

// request asks GitHub for an installation token: a JWT signed with the
// app's key, sent to POST /app/installations/{id}/access_tokens. Errors
// never hold the key, the JWT or a token.
func (g *GitHubTokens) request(ctx context.Context, app githubApp, rt http.RoundTripper) (githubToken, error) {
	signed, err := g.appJWT(app)
	if err != nil {
		return githubToken{}, err
	}
	endpoint := app.baseURL + "/app/installations/" + app.installationID + "/access_tokens"
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	resp, body, err := appRequest(ctx, rt, http.MethodPost, endpoint, signed)
	if err != nil {
		return githubToken{}, err
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

// appRequest sends one request of the app itself (authenticated by its
// JWT, signed) through rt, and reads its answer up to maxGitHubAnswer.
// Errors name the method and endpoint, never the JWT.
func appRequest(ctx context.Context, rt http.RoundTripper, method, endpoint, signed string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, endpoint, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("Authorization", "Bearer "+signed)
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", method, endpoint, err)
	}
	defer resp.Body.Close()
	body, err := bounded.ReadAll(resp.Body, maxGitHubAnswer, "GitHub API answer")
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", method, endpoint, err)
	}
	return resp, body, nil
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

// Bounds of the installation lookup. A listing is kept an hour, as Argo
// CD keeps what it finds; an owner it does not hold is asked again only
// once it is five minutes old, so that repositories of owners without an
// installation (a tenant may name any) cost one listing per five minutes,
// not one per write. At most 10 pages of 100: 1,000 accounts.
const (
	installationTTL      = time.Hour
	installationRecheck  = 5 * time.Minute
	maxInstallationPages = 10
	installationsPerPage = 100
)

// installation is the ID of app's installation on owner (a repository's
// owner, lower case), from the app's installations as GET
// /app/installations lists them, matched on the account's login without
// regard to case, as Argo CD v3.3 matches them when a Secret names no
// githubAppInstallationID.
func (g *GitHubTokens) installation(ctx context.Context, app githubApp, owner, source string, rt http.RoundTripper) (string, error) {
	if owner == "" {
		return "", fmt.Errorf("%s names no githubAppInstallationID, and the repository URL names no owner (org/repo) to look the installation up for", source)
	}
	key := app.appKey()
	now := g.now()
	g.mu.Lock()
	l, ok := g.installations[key]
	g.mu.Unlock()
	if id, found := l.ids[owner]; ok && found && now.Sub(l.at) < installationTTL {
		return id, nil
	}
	if !ok || now.Sub(l.at) >= installationRecheck {
		var err error
		l, err = g.list.Do(ctx, key, nil, func(ctx context.Context) (installationList, error) {
			l, err := g.listInstallations(ctx, app, rt)
			if err != nil {
				return installationList{}, err
			}
			g.mu.Lock()
			g.installations[key] = l
			g.mu.Unlock()
			return l, nil
		})
		if err != nil {
			return "", fmt.Errorf("look up the installation of GitHub App %s on %s (credentials from %s, which name no githubAppInstallationID): %w", app.appID, owner, source, err)
		}
	}
	if id, found := l.ids[owner]; found {
		return id, nil
	}
	return "", fmt.Errorf("GitHub App %s (credentials from %s, which name no githubAppInstallationID) is not installed on %s: %d installations listed at %s", app.appID, source, owner, len(l.ids), app.baseURL)
}

// listInstallations lists app's installations, page by page.
func (g *GitHubTokens) listInstallations(ctx context.Context, app githubApp, rt http.RoundTripper) (installationList, error) {
	signed, err := g.appJWT(app)
	if err != nil {
		return installationList{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	l := installationList{ids: map[string]string{}, at: g.now()}
	for page := 1; ; page++ {
		endpoint := fmt.Sprintf("%s/app/installations?per_page=%d&page=%d", app.baseURL, installationsPerPage, page)
		resp, body, err := appRequest(ctx, rt, http.MethodGet, endpoint, signed)
		if err != nil {
			return installationList{}, err
		}
		if resp.StatusCode != http.StatusOK {
			return installationList{}, fmt.Errorf("GET %s: %s%s", endpoint, resp.Status, githubErrorMessage(body))
		}
		var installations []struct {
			ID      int64 `json:"id"`
			Account struct {
				Login string `json:"login"`
			} `json:"account"`
		}
		if err := json.Unmarshal(body, &installations); err != nil {
			return installationList{}, fmt.Errorf("GET %s: the answer is not a list of installations", endpoint)
		}
		for _, in := range installations {
			// GitHub's logins are at most 39 characters: a longer one
			// is no account a repository URL names.
			if in.ID > 0 && in.Account.Login != "" && len(in.Account.Login) <= 100 {
				l.ids[strings.ToLower(in.Account.Login)] = strconv.FormatInt(in.ID, 10)
			}
		}
		// GitHub names the next page in its Link header; its absence, or
		// a short page, ends the list.
		if len(installations) < installationsPerPage || !strings.Contains(resp.Header.Get("Link"), `rel="next"`) {
			return l, nil
		}
		if page == maxInstallationPages {
			return installationList{}, fmt.Errorf("GET %s: more than %d installations", endpoint, maxInstallationPages*installationsPerPage)
		}
	}
}

// repositoryOwner is the owner (organisation or user) of a repository
// path "owner/name(.git)", lower case, or "" when the path names none.
func repositoryOwner(path string) string {
	path = strings.Trim(path, "/")
	owner, rest, ok := strings.Cut(path, "/")
	if !ok || owner == "" || strings.TrimSuffix(rest, ".git") == "" {
		return ""
	}
	return strings.ToLower(owner)
}
