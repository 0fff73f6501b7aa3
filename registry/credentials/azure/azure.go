package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/internal/netguard"
	"github.com/image-updater/argocd-image-updater/registry/cloudhost"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// acrUser is the user name Azure Container Registry expects along with
// one of its refresh tokens as the password.
const acrUser = "00000000-0000-0000-0000-000000000000"

// The variables the AKS Workload Identity webhook sets in the pods of a
// ServiceAccount it serves.
const (
	envClientID      = "AZURE_CLIENT_ID"
	envTenantID      = "AZURE_TENANT_ID"
	envTokenFile     = "AZURE_FEDERATED_TOKEN_FILE"
	envAuthorityHost = "AZURE_AUTHORITY_HOST"
)

// defaultAuthorityHost is Entra ID's in Azure's public cloud, for a pod
// without AZURE_AUTHORITY_HOST.
const defaultAuthorityHost = "https://login.microsoftonline.com/"

// clientAssertionType says that the client authenticates with a JWT, the
// federated service-account token.
const clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// armScopes are, by the registry's cloud (its host suffix), the scope of
// the Entra ID token the registry's exchange takes: Azure Resource
// Manager's, which every registry accepts unless its owner turned
// authentication-as-arm off, and which az acr login and Flux ask for too.
var armScopes = map[string]string{
	"azurecr.io": "https://management.azure.com/.default",
	"azurecr.cn": "https://management.chinacloudapi.cn/.default",
	"azurecr.us": "https://management.usgovcloudapi.net/.default",
}

// maxAnswer bounds each answer read from Entra ID and a registry's
// exchange: theirs are a few KiB; an endpoint that sends without end must
// not grow the heap.
const maxAnswer = 1 << 20

// maxTokenFile bounds the federated token file: a service-account token
// is one or two KiB.
const maxTokenFile = 64 << 10

// requestTimeout bounds each request, besides the deadline of the work
// that needs the credentials.
const requestTimeout = 30 * time.Second

// refreshTokenLifetime is what ACR gives its refresh tokens; it is only
// used for one whose exp claim cannot be read.
const refreshTokenLifetime = 3 * time.Hour

// entraMargin: an Entra ID token is fetched anew once less than this is
// left of it, as Azure's own SDK does, so that a registry never receives
// one about to expire.
const entraMargin = 5 * time.Minute

// tenantRE is a tenant ID (a GUID) or a tenant's domain name: what may
// stand in the token endpoint's path.
var tenantRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$`)

// option configures a Provider in tests.
type option func(*Provider)

// withTransport sends the provider's requests through rt instead of its
// own transport (which refuses metadata addresses).
func withTransport(rt http.RoundTripper) option { return func(p *Provider) { p.base = rt } }

// withClock sets the clock that dates the Entra ID tokens kept.
func withClock(now func() time.Time) option { return func(p *Provider) { p.now = now } }

// Provider is the credentials.Source for azure references, that is native
// credentials for Azure Container Registry. In registries.conf (or
// wherever a credential reference is accepted):
//
//	credentials: azure
//	    The pod's AKS Workload Identity: the federated token in the file
//	    AZURE_FEDERATED_TOKEN_FILE names, for the client AZURE_CLIENT_ID in
//	    the tenant AZURE_TENANT_ID, at Entra ID under AZURE_AUTHORITY_HOST
//	    (https://login.microsoftonline.com/ when unset). The registry sees
//	    the user 00000000-0000-0000-0000-000000000000 and one of its refresh
//	    tokens.
//
// The reference takes no argument: the webhook sets the variables from
// the pod's ServiceAccount (its azure.workload.identity/client-id
// annotation). The token file is read again for every Entra ID token, as
// the kubelet renews it.
//
// The provider keeps each Entra ID token until five minutes before it
// expires and shares it among the registries of a cloud; a registry's
// refresh token is fetched on each call, and the credentials.Resolver's
// ResolveCached keeps it until 90% of its lifetime (its exp claim) has
// passed. It is safe for concurrent use.
type Provider struct {
	now  func() time.Time
	base http.RoundTripper
	http *http.Client

	mu      sync.Mutex
	tokens  map[entraKey]entraToken
	fetches coalesce.Group[entraToken]
}

var _ credentials.Source = (*Provider)(nil)

// NewProvider builds a Provider. Nothing is read until the first
// Credential call.
func NewProvider() *Provider { return newProvider() }

func newProvider(opts ...option) *Provider {
	p := &Provider{now: time.Now, tokens: map[entraKey]entraToken{}}
	// A token fetched for callers that gave up still fills the cache.
	p.fetches.Detached = true
	for _, opt := range opts {
		opt(p)
	}
	if p.base == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Neither Entra ID nor a registry answers at a metadata address,
		// whatever DNS says.
		tr.DialContext = (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second, Control: netguard.MetadataControl}).DialContext
		p.base = tr
	}
	p.http = &http.Client{
		Transport: bounded.Transport(p.base, maxAnswer, "Azure answer"),
		Timeout:   requestTimeout,
		// Both requests carry a token in their body, which a redirect
		// would send on to wherever it points.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return p
}

// Credential returns the user 00000000-0000-0000-0000-000000000000 and a
// refresh token of the registry t.Host, which must be an Azure Container
// Registry host (the Entra ID token is good for Azure Resource Manager, so
// it is sent nowhere else), with the refresh token's expiry. When the pod
// has no workload identity (AZURE_FEDERATED_TOKEN_FILE unset), the error
// wraps credentials.ErrNoNative. Errors name the registry, the client and
// the tenant, never a token.
func (p *Provider) Credential(ctx context.Context, ref credref.Ref, t credentials.Target) (credentials.Credential, time.Time, error) {
	host := t.Host
	if ref.Kind != credref.KindAzure {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("azure: cannot serve credentials of kind %s", ref.Kind)
	}
	cloud, ok := cloudhost.ACR(host)
	if !ok {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("azure: %s is not an Azure Container Registry host (<name>.azurecr.io, .azurecr.cn, .azurecr.us); an Entra ID token is only sent to those", host)
	}
	id, err := workloadIdentity()
	if err != nil {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("azure: credentials for %s: %w", host, err)
	}
	key := entraKey{authority: id.authority, tenant: id.tenant, client: id.client, scope: armScopes[cloud]}
	access, err := p.entraToken(ctx, id, key)
	if err != nil {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("azure: credentials for %s: Entra ID token of client %s in tenant %s: %w", host, id.client, id.tenant, err)
	}
	refresh, err := p.exchange(ctx, host, id.tenant, access)
	if err != nil {
		if errors.As(err, new(refusedError)) {
			// Whatever made the registry refuse it, the next try starts
			// from a fresh Entra ID token.
			p.forget(key, access)
		}
		return credentials.Credential{}, time.Time{}, fmt.Errorf("azure: credentials for %s: ACR token exchange: %w", host, err)
	}
	return credentials.Credential{Username: acrUser, Password: refresh}, p.refreshExpiry(refresh), nil
}

// identity is the pod's workload identity, as the webhook describes it.
type identity struct {
	client, tenant string
	tokenFile      string
	authority      string // https URL ending in "/"
}

// workloadIdentity reads the identity from the environment. Without a
// token file the pod has none (credentials.ErrNoNative); a token file
// without the rest is an error that names what is missing.
func workloadIdentity() (identity, error) {
	id := identity{client: os.Getenv(envClientID), tenant: os.Getenv(envTenantID), tokenFile: os.Getenv(envTokenFile)}
	if id.tokenFile == "" {
		return identity{}, fmt.Errorf("%w: %s is not set (the pod has no AKS workload identity)", credentials.ErrNoNative, envTokenFile)
	}
	var missing []string
	if id.client == "" {
		missing = append(missing, envClientID)
	}
	if id.tenant == "" {
		missing = append(missing, envTenantID)
	}
	if len(missing) > 0 {
		return identity{}, fmt.Errorf("%s is set but %s is not", envTokenFile, strings.Join(missing, " and "))
	}
	if !tenantRE.MatchString(id.tenant) {
		return identity{}, fmt.Errorf("%s is not a tenant ID or domain name", envTenantID)
	}
	authority := os.Getenv(envAuthorityHost)
	if authority == "" {
		authority = defaultAuthorityHost
	}
	u, err := url.Parse(authority)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		// The federated token must not travel in clear text.
		return identity{}, fmt.Errorf("%s %q is not an https URL", envAuthorityHost, authority)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	id.authority = u.String()
	return id, nil
}

// entraKey is what an Entra ID token is kept for.
type entraKey struct {
	authority, tenant, client, scope string
}

func (k entraKey) String() string {
	return k.authority + "\x00" + k.tenant + "\x00" + k.client + "\x00" + k.scope
}

type entraToken struct {
	value  string
	expiry time.Time
}

// entraToken returns the kept token for key while more than entraMargin
// is left of it, else fetches one, once for all concurrent callers.
func (p *Provider) entraToken(ctx context.Context, id identity, key entraKey) (string, error) {
	p.mu.Lock()
	tok, ok := p.tokens[key]
	p.mu.Unlock()
	if ok && p.now().Before(tok.expiry.Add(-entraMargin)) {
		return tok.value, nil
	}
	tok, err := p.fetches.Do(ctx, key.String(), nil, func(ctx context.Context) (entraToken, error) {
		tok, err := p.fetchEntra(ctx, id, key.scope)
		if err == nil {
			p.mu.Lock()
			p.tokens[key] = tok
			p.mu.Unlock()
		}
		return tok, err
	})
	return tok.value, err
}

// forget drops the kept token for key if it is still value.
func (p *Provider) forget(key entraKey, value string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tokens[key].value == value {
		delete(p.tokens, key)
	}
}

// fetchEntra trades the federated token for an Entra ID access token with
// the client credentials grant, the federated token being the client's
// assertion.
func (p *Provider) fetchEntra(ctx context.Context, id identity, scope string) (entraToken, error) {
	assertion, err := readTokenFile(id.tokenFile)
	if err != nil {
		return entraToken{}, err
	}
	form := url.Values{
		"client_id":             {id.client},
		"scope":                 {scope},
		"grant_type":            {"client_credentials"},
		"client_assertion_type": {clientAssertionType},
		"client_assertion":      {assertion},
	}
	body, status, err := p.post(ctx, id.authority+url.PathEscape(id.tenant)+"/oauth2/v2.0/token", form)
	if err != nil {
		return entraToken{}, err
	}
	if status != http.StatusOK {
		var e struct {
			Code        string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(body, &e)
		return entraToken{}, refusal(status, e.Code, e.Description, body, assertion)
	}
	var answer struct {
		AccessToken string  `json:"access_token"`
		ExpiresIn   seconds `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return entraToken{}, errors.New("the answer is not the token's JSON")
	}
	if answer.AccessToken == "" || answer.ExpiresIn <= 0 {
		return entraToken{}, errors.New("the answer holds no access token or no lifetime")
	}
	return entraToken{value: answer.AccessToken, expiry: p.now().Add(time.Duration(answer.ExpiresIn) * time.Second)}, nil
}

// readTokenFile reads the federated token, which the kubelet renews in
// place.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("federated token file: %w", err)
	}
	defer f.Close()
	b, err := bounded.ReadAll(f, maxTokenFile, "federated token file "+path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("federated token file %s is empty", path)
	}
	return token, nil
}

// refusedError is the error of an exchange the registry refused (401).
type refusedError struct{ error }

func (e refusedError) Unwrap() error { return e.error }

// exchange trades an Entra ID access token for a refresh token of the
// registry at host.
func (p *Provider) exchange(ctx context.Context, host, tenant, access string) (string, error) {
	service := strings.ToLower(host)
	if h, _, err := net.SplitHostPort(service); err == nil {
		service = h
	}
	form := url.Values{
		"grant_type":   {"access_token"},
		"service":      {service},
		"tenant":       {tenant},
		"access_token": {access},
	}
	body, status, err := p.post(ctx, "https://"+host+"/oauth2/exchange", form)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		var e struct {
			Errors []struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"errors"`
		}
		var code, message string
		if json.Unmarshal(body, &e) == nil && len(e.Errors) > 0 {
			code, message = e.Errors[0].Code, e.Errors[0].Message
		}
		err := refusal(status, code, message, body, access)
		if status == http.StatusUnauthorized {
			err = refusedError{err}
		}
		return "", err
	}
	var answer struct {
		RefreshToken string `json:"refresh_token"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return "", errors.New("the answer is not the exchange's JSON")
	}
	if answer.RefreshToken == "" {
		return "", errors.New("the answer holds no refresh token")
	}
	return answer.RefreshToken, nil
}

// refreshExpiry reads a refresh token's expiry from its exp claim; the
// signature is the registry's to check.
func (p *Provider) refreshExpiry(token string) time.Time {
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &claims); err == nil && claims.ExpiresAt != nil {
		return claims.ExpiresAt.Time
	}
	return p.now().Add(refreshTokenLifetime)
}

// post sends form and reads the answer whole, within maxAnswer.
func (p *Provider) post(ctx context.Context, endpoint string, form url.Values) (body []byte, status int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	return body, resp.StatusCode, nil
}

// refusal describes a refused request by its status and the server's own
// words (its error code and description, else its body), quoted within a
// length, with the token that was sent blanked out should the server
// repeat it.
func refusal(status int, code, description string, body []byte, sent string) error {
	if code == "" && description == "" {
		description = string(body)
	}
	if sent != "" {
		code = strings.ReplaceAll(code, sent, "<redacted>")
		description = strings.ReplaceAll(description, sent, "<redacted>")
	}
	msg := "status " + strconv.Itoa(status)
	if status >= 300 && status < 400 {
		return errors.New(msg + ": a redirect, which is not followed")
	}
	if c := bounded.Excerpt(code, 64); c != "" {
		msg += " " + c
	}
	if d := bounded.Excerpt(description, bounded.MessageLength); d != "" {
		msg += ": " + d
	}
	return errors.New(msg)
}

// seconds is a lifetime in seconds, which Entra ID's v2.0 endpoint writes
// as a number and older endpoints as a string.
type seconds int64

func (s *seconds) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	if err != nil {
		return err
	}
	*s = seconds(n)
	return nil
}
