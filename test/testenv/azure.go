package testenv

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Azure stands in for the two token services that AKS Workload Identity
// credentials for Azure Container Registry go through, at the wire level:
//
//   - Microsoft Entra ID's token endpoint, POST
//     /{tenant}/oauth2/v2.0/token: the client credentials grant, the
//     client authenticating with a federated service-account token as its
//     assertion (client_assertion_type
//     urn:ietf:params:oauth:client-assertion-type:jwt-bearer), answered
//     with an access token for the scope asked for;
//   - the token service every registry host serves: POST /oauth2/exchange
//     (grant_type=access_token, service, tenant, access_token) trades an
//     Entra ID token for a refresh token of the registry, a JWT with an exp
//     claim; GET /oauth2/token with the user
//     00000000-0000-0000-0000-000000000000 and a refresh token as the
//     password (or POST with grant_type=refresh_token) trades that for an
//     access token, which a Distribution registry started WithACRTokens
//     accepts.
//
// Entra ID answers at AuthorityHost; the registries' service answers for
// every <name>.azurecr.io (.cn, .us) host through Transport, which dials it
// where DNS would dial the registry. Both serve HTTPS with certificates of
// the CA given to StartAzure. Requests are checked as the services check
// them, and answered with their formats, errors included; what they would
// refuse as malformed is also listed by Problems.
type Azure struct {
	// AuthorityHost is Entra ID's base URL, https://localhost:<port>/, the
	// value for AZURE_AUTHORITY_HOST.
	AuthorityHost string
	// TenantID and ClientID name the identity Entra ID knows (the managed
	// identity or application whose federated credential trusts the
	// service account).
	TenantID, ClientID string
	// TokenFile holds the federated service-account token, the only
	// assertion Entra ID accepts (see FederatedToken, RotateFederatedToken).
	TokenFile string
	// AdminPassword is the password of each registry's admin user, whose
	// name is the registry's (the first label of its host): it may push.
	AdminPassword string

	ca       *CA
	issuer   *tokenIssuer
	acrTLS   string // the registries' HTTPS listener, 127.0.0.1:<port>
	acrPlain string // the same service over HTTP, localhost:<port>, for the Distribution registry's realm

	mu              sync.Mutex
	now             func() time.Time
	federated       string
	accessLifetime  time.Duration
	refreshLifetime time.Duration
	entraTokens     map[string]entraGrant
	refreshTokens   map[string]refreshGrant
	misbehave       map[string]string
	exchangeStatus  int
	calls           []AzureCall
	problems        []string
}

// AzureCall is one request the stand-in received.
type AzureCall struct {
	Endpoint string // AzureEntra, AzureExchange or AzureToken
	Method   string
	Host     string // as the client addressed it
	Path     string
	Form     url.Values // the form body, or the query of a GET
	Header   http.Header
}

// The endpoints, for AzureCall, CallsTo and Misbehave.
const (
	AzureEntra    = "entra"
	AzureExchange = "exchange"
	AzureToken    = "token"
)

// ACRUser is the user name that goes with a refresh token.
const ACRUser = "00000000-0000-0000-0000-000000000000"

// azureARMScopes are the scopes of the Entra ID tokens each cloud's
// registries accept at their exchange: Azure Resource Manager's, by the
// registry host's suffix.
var azureARMScopes = map[string]string{
	".azurecr.io": "https://management.azure.com/.default",
	".azurecr.cn": "https://management.chinacloudapi.cn/.default",
	".azurecr.us": "https://management.usgovcloudapi.net/.default",
}

type entraGrant struct {
	tenant, client, scope string
	expiry                time.Time
}

type refreshGrant struct {
	service string
	expiry  time.Time
}

// StartAzure starts Entra ID's and the registries' token services with
// certificates from ca, and writes the federated token file.
func StartAzure(t testing.TB, ca *CA) *Azure {
	t.Helper()
	a := &Azure{
		TenantID:        "72f988bf-86f1-41af-91ab-2d7cd011db47",
		ClientID:        "5a2cdbd1-6e0c-4d3e-9c8e-0f6c1d2b3a41",
		TokenFile:       filepath.Join(t.TempDir(), "azure-identity-token"),
		AdminPassword:   randomString(t, 32),
		ca:              ca,
		issuer:          newTokenIssuer(t, "Azure Container Registry"),
		now:             time.Now,
		accessLifetime:  time.Hour,
		refreshLifetime: 3 * time.Hour,
		entraTokens:     map[string]entraGrant{},
		refreshTokens:   map[string]refreshGrant{},
		misbehave:       map[string]string{},
	}
	a.RotateFederatedToken(t)

	entra := httptest.NewUnstartedServer(http.HandlerFunc(a.serveEntra))
	entra.TLS = ca.serverTLS(t)
	entra.Config.ErrorLog = log.New(io.Discard, "", 0)
	entra.StartTLS()
	t.Cleanup(entra.Close)
	a.AuthorityHost = strings.Replace(entra.URL, "127.0.0.1", "localhost", 1) + "/"

	acr := httptest.NewUnstartedServer(http.HandlerFunc(a.serveACR))
	acr.TLS = &tls.Config{Certificates: []tls.Certificate{ca.acrServerCert(t)}, MinVersion: tls.VersionTLS12}
	acr.Config.ErrorLog = log.New(io.Discard, "", 0)
	acr.StartTLS()
	t.Cleanup(acr.Close)
	a.acrTLS = acr.Listener.Addr().String()

	plain := httptest.NewServer(http.HandlerFunc(a.serveACR))
	t.Cleanup(plain.Close)
	a.acrPlain = strings.Replace(plain.Listener.Addr().String(), "127.0.0.1", "localhost", 1)
	return a
}

// acrServerCert issues a serving certificate for every registry host of
// Azure's three clouds, and for localhost.
func (ca *CA) acrServerCert(t testing.TB) tls.Certificate {
	t.Helper()
	cert, err := tls.X509KeyPair(ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "*.azurecr.io"},
		DNSNames:    []string{"*.azurecr.io", "*.azurecr.cn", "*.azurecr.us", "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}))
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// SetEnv sets the variables the AKS Workload Identity webhook sets in a
// pod, pointing at the stand-in, for the rest of the test.
func (a *Azure) SetEnv(t testing.TB) {
	t.Helper()
	t.Setenv("AZURE_CLIENT_ID", a.ClientID)
	t.Setenv("AZURE_TENANT_ID", a.TenantID)
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", a.TokenFile)
	t.Setenv("AZURE_AUTHORITY_HOST", a.AuthorityHost)
}

// Transport is a client transport that reaches the stand-in for every
// Azure Container Registry host (the names the registry's own certificate
// carries), and everything else as usual, trusting the CA the stand-in
// was started with.
func (a *Azure) Transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil && azureCloudOf(host) != "" {
			addr = a.acrTLS
		}
		return d.DialContext(ctx, network, addr)
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: a.ca.Pool(), MinVersion: tls.VersionTLS12}
	return tr
}

// azureCloudOf is the registry host suffix of host's cloud, "" for a host
// that is not a registry's.
func azureCloudOf(host string) string {
	host = strings.ToLower(host)
	for suffix := range azureARMScopes {
		if strings.HasSuffix(host, suffix) && len(host) > len(suffix) {
			return suffix
		}
	}
	return ""
}

// TokenServiceHost is the host and port of the registries' token service
// over plain HTTP, the realm a registry started WithACRTokens names; a
// client reaches it only when told it is allowed (internal_hosts).
func (a *Azure) TokenServiceHost() string { return a.acrPlain }

// WithACRTokens protects a Distribution registry the way name (a
// registry host such as example.azurecr.io) is protected: bearer tokens
// from a's token service for the service name. The registry's Username
// and Password are then name's admin user, who may push.
func WithACRTokens(a *Azure, name string) RegistryOption {
	return func(o *registryOptions) {
		o.auth = "external"
		o.username, o.password = strings.SplitN(name, ".", 2)[0], a.AdminPassword
		o.authConfig = fmt.Sprintf("auth:\n  token:\n    realm: http://%s/oauth2/token\n    service: %s\n    issuer: %s\n    rootcertbundle: %s\n",
			a.acrPlain, name, a.issuer.Issuer, a.issuer.CertFile)
	}
}

// FederatedToken is the service-account token Entra ID accepts now.
func (a *Azure) FederatedToken() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.federated
}

// RotateFederatedToken writes a new service-account token to TokenFile, as
// the kubelet does before the old one expires; from now on Entra ID
// accepts only the new one.
func (a *Azure) RotateFederatedToken(t testing.TB) {
	t.Helper()
	token := "eyJhbGciOiJSUzI1NiIsImtpZCI6InRlc3QifQ." + randomString(t, 48) + ".c2lnbmF0dXJl"
	if err := os.WriteFile(a.TokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.federated = token
	a.mu.Unlock()
}

// SetClock sets the clock that dates the tokens handed out and checks
// their expiry (time.Now unless set).
func (a *Azure) SetClock(now func() time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.now = now
}

// SetLifetimes sets how long the Entra ID access tokens and the refresh
// tokens handed out from now on live (one hour and three hours unless
// set).
func (a *Azure) SetLifetimes(access, refresh time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.accessLifetime, a.refreshLifetime = access, refresh
}

// Misbehave makes endpoint answer badly from now on: "endless" (an answer
// that never ends), "stall" (none until the client gives up), "redirect"
// (307 to another path of the same server, which lists a problem if it is
// followed) or "echo" (a 400 whose message repeats the secret sent). ""
// makes it behave again.
func (a *Azure) Misbehave(endpoint, how string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.misbehave[endpoint] = how
}

// FailExchange makes the exchange refuse well-formed requests with status
// and ACR's error body for it (0: answer them again).
func (a *Azure) FailExchange(status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.exchangeStatus = status
}

// RevokeAccessTokens forgets the Entra ID tokens handed out so far: the
// registries refuse them from now on.
func (a *Azure) RevokeAccessTokens() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.entraTokens)
}

// Calls returns the requests received so far.
func (a *Azure) Calls() []AzureCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

// CallsTo returns the requests endpoint received so far.
func (a *Azure) CallsTo(endpoint string) []AzureCall {
	var out []AzureCall
	for _, c := range a.Calls() {
		if c.Endpoint == endpoint {
			out = append(out, c)
		}
	}
	return out
}

// Problems lists the requests the services would have refused as
// malformed, and why; a client that follows their documentation causes
// none.
func (a *Azure) Problems() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.problems)
}

func (a *Azure) problem(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.problems = append(a.problems, fmt.Sprintf(format, args...))
}

// record notes the call and says how the endpoint is to misbehave.
func (a *Azure) record(endpoint string, r *http.Request) (AzureCall, string) {
	call := AzureCall{Endpoint: endpoint, Method: r.Method, Host: r.Host, Path: r.URL.Path, Header: r.Header.Clone()}
	if r.Method == http.MethodPost {
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
			a.problem("%s: Content-Type %q, want application/x-www-form-urlencoded", endpoint, ct)
		}
		if err := r.ParseForm(); err != nil {
			a.problem("%s: the body is not a form: %v", endpoint, err)
		}
		call.Form = r.PostForm
	} else {
		call.Form = r.URL.Query()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, call)
	return call, a.misbehave[endpoint]
}

// misbehaved answers as Misbehave said; false when how is none of its
// ways.
func (a *Azure) misbehaved(w http.ResponseWriter, r *http.Request, how, field, secret string) bool {
	switch how {
	case "stall":
		<-r.Context().Done()
	case "endless":
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = fmt.Fprintf(w, `{%q:"`, field)
		chunk := strings.Repeat("A", 64<<10)
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, chunk); err != nil {
				break
			}
		}
	case "redirect":
		http.Redirect(w, r, "/followed-redirect", http.StatusTemporaryRedirect)
	case "echo":
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"error":             "invalid_request",
			"error_description": "AADSTS50027: Invalid request " + secret + " was presented.",
			"errors":            []map[string]string{{"code": "DENIED", "message": "refused " + secret}},
		})
	default:
		return false
	}
	return true
}

// entraError writes an error the way Entra ID's token endpoint does.
func entraError(w http.ResponseWriter, status int, code string, aadsts int, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": code,
		"error_description": fmt.Sprintf("AADSTS%d: %s Trace ID: 0d6e0a52-7c4b-4f64-a6e5-2f1b4a7a6400 Correlation ID: 3b5e2ac0-98e1-4a93-8b6a-4c2f5d1e7f10 Timestamp: %s",
			aadsts, message, time.Now().UTC().Format("2006-01-02 15:04:05Z")),
		"error_codes":    []int{aadsts},
		"timestamp":      time.Now().UTC().Format("2006-01-02 15:04:05Z"),
		"trace_id":       "0d6e0a52-7c4b-4f64-a6e5-2f1b4a7a6400",
		"correlation_id": "3b5e2ac0-98e1-4a93-8b6a-4c2f5d1e7f10",
		"error_uri":      fmt.Sprintf("https://login.microsoftonline.com/error?code=%d", aadsts),
	})
}

func (a *Azure) serveEntra(w http.ResponseWriter, r *http.Request) {
	tenant, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/oauth2/v2.0/token")
	if !ok || tenant == "" || strings.Contains(tenant, "/") || r.Method != http.MethodPost {
		a.problem("entra: %s %s, want POST /{tenant}/oauth2/v2.0/token", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	call, how := a.record(AzureEntra, r)
	form := call.Form
	if a.misbehaved(w, r, how, "access_token", form.Get("client_assertion")) {
		return
	}
	a.mu.Lock()
	federated, now, lifetime := a.federated, a.now(), a.accessLifetime
	a.mu.Unlock()
	switch {
	case form.Get("grant_type") != "client_credentials":
		a.problem("entra: grant_type %q, want client_credentials", form.Get("grant_type"))
		entraError(w, http.StatusBadRequest, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.")
	case form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
		a.problem("entra: client_assertion_type %q", form.Get("client_assertion_type"))
		entraError(w, http.StatusBadRequest, "invalid_request", 90014, "The required field 'client_assertion_type' is missing or wrong.")
	case form.Get("client_secret") != "":
		a.problem("entra: a client_secret besides the assertion")
		entraError(w, http.StatusBadRequest, "invalid_request", 90015, "Multiple client credentials were presented.")
	case tenant != a.TenantID:
		entraError(w, http.StatusBadRequest, "invalid_request", 90002, fmt.Sprintf("Tenant '%s' not found.", tenant))
	case form.Get("client_id") != a.ClientID:
		entraError(w, http.StatusBadRequest, "unauthorized_client", 700016,
			fmt.Sprintf("Application with identifier '%s' was not found in the directory '%s'.", form.Get("client_id"), tenant))
	case form.Get("client_assertion") != federated:
		entraError(w, http.StatusUnauthorized, "invalid_client", 700211,
			"No matching federated identity record found for presented assertion issuer 'https://oidc.prod-aks.azure.com/00000000-0000-0000-0000-000000000000/'.")
	case !slices.Contains(slices.Collect(maps.Values(azureARMScopes)), form.Get("scope")):
		entraError(w, http.StatusBadRequest, "invalid_scope", 1002012, fmt.Sprintf("The provided value for scope %s is not valid.", form.Get("scope")))
	default:
		token := "entra-access-token-" + randomHex()
		a.mu.Lock()
		a.entraTokens[token] = entraGrant{tenant: tenant, client: a.ClientID, scope: form.Get("scope"), expiry: now.Add(lifetime)}
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		secs := int(lifetime / time.Second)
		_ = json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "expires_in": secs, "ext_expires_in": secs, "access_token": token})
	}
}

// acrError writes an error the way a registry's token service does.
func acrError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": message}}})
}

func (a *Azure) serveACR(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/oauth2/exchange":
		a.serveExchange(w, r)
	case "/oauth2/token":
		a.serveToken(w, r)
	default:
		a.problem("registry token service: %s %s", r.Method, r.URL.Path)
		acrError(w, http.StatusNotFound, "NOT_FOUND", "not found")
	}
}

func (a *Azure) serveExchange(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		a.problem("exchange: %s, want POST", r.Method)
		acrError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "method not allowed")
		return
	}
	call, how := a.record(AzureExchange, r)
	form := call.Form
	if a.misbehaved(w, r, how, "refresh_token", form.Get("access_token")) {
		return
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	a.mu.Lock()
	grant, known := a.entraTokens[form.Get("access_token")]
	now, lifetime, fail := a.now(), a.refreshLifetime, a.exchangeStatus
	a.mu.Unlock()
	switch cloud := azureCloudOf(host); {
	case form.Get("grant_type") != "access_token":
		a.problem("exchange: grant_type %q, want access_token", form.Get("grant_type"))
		acrError(w, http.StatusBadRequest, "UNSUPPORTED_GRANT_TYPE", "grant type is not supported")
	case cloud == "" || form.Get("service") != host:
		a.problem("exchange at %s: service %q, want the registry's host", r.Host, form.Get("service"))
		acrError(w, http.StatusBadRequest, "BAD_REQUEST", "invalid service")
	case fail != 0:
		acrError(w, fail, map[int]string{401: "UNAUTHORIZED", 403: "DENIED", 429: "TOOMANYREQUESTS"}[fail], "refused as told")
	case !known || !now.Before(grant.expiry) || grant.scope != azureARMScopes[cloud] ||
		form.Get("tenant") != "" && form.Get("tenant") != grant.tenant:
		acrError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required, visit https://aka.ms/acr/authorization for more information.")
	default:
		token, err := a.issuer.sign(map[string]any{
			"jti": randomHex(), "sub": grant.client, "iss": a.issuer.Issuer, "aud": host,
			"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(lifetime).Unix(),
			"version": "1.0", "grant_type": "refresh_token", "tenant": grant.tenant,
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		a.mu.Lock()
		a.refreshTokens[token] = refreshGrant{service: host, expiry: now.Add(lifetime)}
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(map[string]string{"refresh_token": token})
	}
}

// serveToken hands out registry tokens: to a refresh token, pull alone on
// every repository (the identity's AcrPull role); to the admin user,
// whatever is asked for.
func (a *Azure) serveToken(w http.ResponseWriter, r *http.Request) {
	call, how := a.record(AzureToken, r)
	form := call.Form
	if a.misbehaved(w, r, how, "access_token", "") {
		return
	}
	service := form.Get("service")
	var refresh, admin string
	switch user, pass, basic := r.BasicAuth(); {
	case r.Method == http.MethodPost:
		if form.Get("grant_type") != "refresh_token" {
			a.problem("token: POST with grant_type %q, want refresh_token", form.Get("grant_type"))
		}
		refresh = form.Get("refresh_token")
	case r.Method != http.MethodGet:
		a.problem("token: %s, want GET or POST", r.Method)
	case basic && user == ACRUser:
		refresh = pass
	case basic && user == strings.SplitN(service, ".", 2)[0] && pass == a.AdminPassword:
		admin = user
	}
	a.mu.Lock()
	grant, known := a.refreshTokens[refresh]
	now := a.now()
	a.mu.Unlock()
	subject, onlyPull := admin, false
	if refresh != "" && known && grant.service == service && now.Before(grant.expiry) {
		subject, onlyPull = a.ClientID, true
	}
	if subject == "" {
		acrError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required, visit https://aka.ms/acr/authorization for more information.")
		return
	}
	access := grantedAccess(form["scope"], func(string) bool { return true })
	if onlyPull {
		for _, entry := range access {
			entry["actions"] = slices.DeleteFunc(entry["actions"].([]string), func(action string) bool { return action != "pull" })
		}
	}
	token, err := a.issuer.registryToken(subject, service, access)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]string{"access_token": token})
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
