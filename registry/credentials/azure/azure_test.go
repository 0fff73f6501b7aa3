package azure

import (
	"cmp"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/image-updater/argocd-image-updater/internal/netguard"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

const testRegistry = "example.azurecr.io"

var azureRef = credref.Ref{Kind: credref.KindAzure}

// startAzure starts the stand-in and points the environment at it, as
// the AKS webhook would.
func startAzure(t *testing.T) *testenv.Azure {
	t.Helper()
	a := testenv.StartAzure(t, testenv.NewCA(t, "azure test CA"))
	a.SetEnv(t)
	t.Cleanup(func() {
		for _, p := range a.Problems() {
			t.Errorf("the stand-in would refuse a request: %s", p)
		}
	})
	return a
}

// The workload identity's token is traded at Entra ID for an access
// token for Azure Resource Manager, that at the registry for a refresh
// token, which the registry takes as the password of the null user.
func TestAzureProviderWorkloadIdentity(t *testing.T) {
	a := startAzure(t)
	p := newProvider(withTransport(a.Transport()))

	cred, expiry, err := p.Credential(t.Context(), azureRef, credentials.Target{Host: testRegistry, Repository: "team/app"})
	if err != nil {
		t.Fatalf("Credential: %v", err)
	}
	if cred.Username != "00000000-0000-0000-0000-000000000000" || cred.Password == "" {
		t.Fatalf("credential = %v, want the null user and a refresh token", cred)
	}
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(cred.Password, &claims); err != nil || claims.ExpiresAt == nil {
		t.Fatalf("the password is not the refresh token (%v)", err)
	}
	if !expiry.Equal(claims.ExpiresAt.Time) {
		t.Errorf("expiry = %v, want the refresh token's exp %v", expiry, claims.ExpiresAt.Time)
	}
	if life := time.Until(expiry); life < 179*time.Minute || life > 3*time.Hour {
		t.Errorf("the refresh token lives %v, want three hours", life)
	}

	entra := a.CallsTo(testenv.AzureEntra)
	if len(entra) != 1 {
		t.Fatalf("%d Entra ID requests, want 1", len(entra))
	}
	for field, want := range map[string]string{
		"client_id":             a.ClientID,
		"scope":                 "https://management.azure.com/.default",
		"grant_type":            "client_credentials",
		"client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
		"client_assertion":      a.FederatedToken(),
	} {
		if got := entra[0].Form.Get(field); got != want {
			t.Errorf("Entra ID %s = %q, want %q", field, got, want)
		}
	}
	if want := "/" + a.TenantID + "/oauth2/v2.0/token"; entra[0].Path != want {
		t.Errorf("Entra ID path %q, want %q", entra[0].Path, want)
	}

	exchange := a.CallsTo(testenv.AzureExchange)
	if len(exchange) != 1 {
		t.Fatalf("%d exchanges, want 1", len(exchange))
	}
	x := exchange[0]
	if x.Host != testRegistry {
		t.Errorf("the exchange went to %q, want the registry %s", x.Host, testRegistry)
	}
	for field, want := range map[string]string{"grant_type": "access_token", "service": testRegistry, "tenant": a.TenantID} {
		if got := x.Form.Get(field); got != want {
			t.Errorf("exchange %s = %q, want %q", field, got, want)
		}
	}
	if !strings.HasPrefix(x.Form.Get("access_token"), "entra-access-token-") {
		t.Errorf("the exchange did not send the Entra ID token")
	}

	// Another registry of the same cloud shares the Entra ID token; one of
	// another cloud needs a token for that cloud's Resource Manager.
	if _, _, err := p.Credential(t.Context(), azureRef, credentials.Target{Host: "other.azurecr.io"}); err != nil {
		t.Fatalf("Credential for other.azurecr.io: %v", err)
	}
	if n := len(a.CallsTo(testenv.AzureEntra)); n != 1 {
		t.Errorf("%d Entra ID requests after a second registry, want 1", n)
	}
	if _, _, err := p.Credential(t.Context(), azureRef, credentials.Target{Host: "example.azurecr.cn"}); err != nil {
		t.Fatalf("Credential for example.azurecr.cn: %v", err)
	}
	entra = a.CallsTo(testenv.AzureEntra)
	if len(entra) != 2 || entra[1].Form.Get("scope") != "https://management.chinacloudapi.cn/.default" {
		t.Errorf("Entra ID requests %d, the last for %q; want a second one for Azure China's Resource Manager", len(entra), entra[len(entra)-1].Form.Get("scope"))
	}
	if got := a.CallsTo(testenv.AzureExchange)[2].Host; got != "example.azurecr.cn" {
		t.Errorf("the third exchange went to %s", got)
	}
}

// Tokens are kept until shortly before they expire: the Entra ID token
// by the provider until five minutes before, the registry's refresh
// token by the resolver until 90% of its life. The token file is read
// again for each Entra ID token, as the kubelet renews it.
func TestAzureProviderCaching(t *testing.T) {
	a := startAzure(t)
	start := time.Now().Truncate(time.Second) // exp claims carry whole seconds
	var clock atomic.Pointer[time.Time]
	clock.Store(&start)
	now := func() time.Time { return *clock.Load() }
	a.SetClock(now)
	a.SetLifetimes(time.Hour, 3*time.Hour)
	r := credentials.NewResolver(credentials.WithClock(now), credentials.WithNative(credref.KindAzure, newProvider(withTransport(a.Transport()), withClock(now))))
	target := credentials.Target{Host: testRegistry, Repository: "team/app"}

	var (
		last      string
		exchanges int
	)
	for i, step := range []struct {
		at              time.Duration // since start
		rotate          bool          // the kubelet writes a new token first
		entra, exchange int           // requests so far
	}{
		{0, false, 1, 1},                 // first use
		{0, false, 1, 1},                 // kept
		{2 * time.Hour, false, 1, 1},     // two thirds of the refresh token's life: kept
		{161 * time.Minute, false, 1, 1}, // just under 90% of it: still kept
		{162 * time.Minute, true, 2, 2},  // 90%: a new refresh token, from a new Entra ID token and the new file
		{162 * time.Minute, false, 2, 2}, // kept again
	} {
		at := start.Add(step.at)
		clock.Store(&at)
		if step.rotate {
			a.RotateFederatedToken(t)
		}
		c, err := r.ResolveCached(t.Context(), azureRef, target, 0)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		n, m := len(a.CallsTo(testenv.AzureEntra)), len(a.CallsTo(testenv.AzureExchange))
		if n != step.entra || m != step.exchange {
			t.Errorf("step %d (%v): %d Entra ID requests and %d exchanges, want %d and %d", i, step.at, n, m, step.entra, step.exchange)
		}
		if changed := c.Password != last; c.Password == "" || changed != (m != exchanges) {
			t.Errorf("step %d: the password changed: %v; want a change with each exchange only", i, changed)
		}
		last, exchanges = c.Password, m
	}
	if got := a.CallsTo(testenv.AzureEntra)[1].Form.Get("client_assertion"); got != a.FederatedToken() {
		t.Error("the second Entra ID request did not send the renewed federated token")
	}
}

// The provider keeps an Entra ID token, for all registries, while more
// than five minutes are left of it.
func TestAzureProviderEntraTokenMargin(t *testing.T) {
	a := startAzure(t)
	start := time.Now()
	var clock atomic.Pointer[time.Time]
	clock.Store(&start)
	now := func() time.Time { return *clock.Load() }
	a.SetClock(now)
	a.SetLifetimes(time.Hour, 3*time.Hour)
	p := newProvider(withTransport(a.Transport()), withClock(now))
	for i, step := range []struct {
		at    time.Duration
		entra int
	}{
		{0, 1},
		{54 * time.Minute, 1}, // six minutes left
		{55*time.Minute - time.Second, 1},
		{56 * time.Minute, 2}, // four minutes left: a new one
		{60 * time.Minute, 2},
	} {
		at := start.Add(step.at)
		clock.Store(&at)
		if _, _, err := p.Credential(t.Context(), azureRef, credentials.Target{Host: testRegistry}); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if n := len(a.CallsTo(testenv.AzureEntra)); n != step.entra {
			t.Errorf("step %d (%v): %d Entra ID requests, want %d", i, step.at, n, step.entra)
		}
	}
	if n := len(a.CallsTo(testenv.AzureExchange)); n != 5 {
		t.Errorf("%d exchanges, want one per call (the resolver keeps their results)", n)
	}
}

// A registry that refuses the kept Entra ID token makes the provider
// drop it: the next call fetches a fresh one instead of failing until it
// expires.
func TestAzureProviderRefusedEntraToken(t *testing.T) {
	a := startAzure(t)
	p := newProvider(withTransport(a.Transport()))
	target := credentials.Target{Host: testRegistry}
	if _, _, err := p.Credential(t.Context(), azureRef, target); err != nil {
		t.Fatal(err)
	}
	a.RevokeAccessTokens()
	_, _, err := p.Credential(t.Context(), azureRef, target)
	if err == nil || !strings.Contains(err.Error(), "azure: credentials for example.azurecr.io: ACR token exchange: status 401") {
		t.Fatalf("after revocation: %v, want the exchange's 401", err)
	}
	if _, _, err := p.Credential(t.Context(), azureRef, target); err != nil {
		t.Fatalf("the call after the refusal: %v", err)
	}
	if n := len(a.CallsTo(testenv.AzureEntra)); n != 2 {
		t.Errorf("%d Entra ID requests, want 2", n)
	}
}

// Without a workload identity the error wraps credentials.ErrNoNative,
// also through the resolver, so that a registry chosen by its host falls
// back to anonymous access; nothing is sent.
func TestAzureProviderNoIdentity(t *testing.T) {
	a := startAzure(t)
	for _, k := range []string{"AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_AUTHORITY_HOST"} {
		t.Setenv(k, "")
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
	p := newProvider(withTransport(a.Transport()))
	_, _, err := p.Credential(t.Context(), azureRef, credentials.Target{Host: testRegistry})
	if !errors.Is(err, credentials.ErrNoNative) || !strings.Contains(err.Error(), "azure: credentials for example.azurecr.io") ||
		!strings.Contains(err.Error(), "AZURE_FEDERATED_TOKEN_FILE is not set") {
		t.Fatalf("error = %v, want credentials.ErrNoNative naming the registry and the variable", err)
	}
	r := credentials.NewResolver(credentials.WithNative(credref.KindAzure, p))
	_, err = r.ResolveCached(t.Context(), azureRef, credentials.Target{Host: testRegistry}, 0)
	var ce *credentials.Error
	if !errors.Is(err, credentials.ErrNoNative) || !errors.As(err, &ce) {
		t.Errorf("resolver error = %v, want a credentials.Error wrapping credentials.ErrNoNative", err)
	}
	if calls := a.Calls(); len(calls) != 0 {
		t.Errorf("%d requests sent", len(calls))
	}
}

// Errors name what failed (the registry, the variable or file, the client
// and tenant, the service's own error) and never a token.
func TestAzureProviderErrors(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, a *testenv.Azure)
		host   string
		ref    credref.Ref
		want   []string
		native bool // wraps credentials.ErrNoNative
	}{{
		name: "token file missing",
		setup: func(t *testing.T, a *testenv.Azure) {
			t.Setenv("AZURE_FEDERATED_TOKEN_FILE", filepath.Join(t.TempDir(), "absent"))
		},
		want: []string{"Entra ID token of client", "federated token file", "absent: no such file"},
	}, {
		name: "token file empty",
		setup: func(t *testing.T, a *testenv.Azure) {
			f := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(f, []byte("\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("AZURE_FEDERATED_TOKEN_FILE", f)
		},
		want: []string{"federated token file", "is empty"},
	}, {
		name: "token file too large",
		setup: func(t *testing.T, a *testenv.Azure) {
			f := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(f, []byte(strings.Repeat("x", 65<<10)), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("AZURE_FEDERATED_TOKEN_FILE", f)
		},
		want: []string{"federated token file", "is larger than 64 KiB"},
	}, {
		name:  "client ID missing",
		setup: func(t *testing.T, a *testenv.Azure) { t.Setenv("AZURE_CLIENT_ID", "") },
		want:  []string{"azure: credentials for example.azurecr.io: AZURE_FEDERATED_TOKEN_FILE is set but AZURE_CLIENT_ID is not"},
	}, {
		name:  "tenant not a tenant",
		setup: func(t *testing.T, a *testenv.Azure) { t.Setenv("AZURE_TENANT_ID", "../common") },
		want:  []string{"AZURE_TENANT_ID is not a tenant ID or domain name"},
	}, {
		name:  "authority over plain HTTP",
		setup: func(t *testing.T, a *testenv.Azure) { t.Setenv("AZURE_AUTHORITY_HOST", "http://login.example.test/") },
		want:  []string{`AZURE_AUTHORITY_HOST "http://login.example.test/" is not an https URL`},
	}, {
		name: "federated token not trusted",
		setup: func(t *testing.T, a *testenv.Azure) {
			if err := os.WriteFile(a.TokenFile, []byte("eyJhbGciOiJSUzI1NiJ9.another-service-account.c2ln"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		want: []string{"Entra ID token of client 5a2cdbd1-6e0c-4d3e-9c8e-0f6c1d2b3a41 in tenant 72f988bf-86f1-41af-91ab-2d7cd011db47",
			`status 401 "invalid_client": "AADSTS700211: No matching federated identity record found`},
	}, {
		name: "unknown client",
		setup: func(t *testing.T, a *testenv.Azure) {
			t.Setenv("AZURE_CLIENT_ID", "11111111-2222-3333-4444-555555555555")
		},
		want: []string{`status 400 "unauthorized_client": "AADSTS700016: Application with identifier '11111111-2222-3333-4444-555555555555' was not found`},
	}, {
		name:  "unknown tenant",
		setup: func(t *testing.T, a *testenv.Azure) { t.Setenv("AZURE_TENANT_ID", "contoso.onmicrosoft.com") },
		want:  []string{"in tenant contoso.onmicrosoft.com", `"AADSTS90002: Tenant 'contoso.onmicrosoft.com' not found.`},
	}, {
		name:  "exchange refused",
		setup: func(t *testing.T, a *testenv.Azure) { a.FailExchange(401) },
		want:  []string{`azure: credentials for example.azurecr.io: ACR token exchange: status 401 "UNAUTHORIZED": "refused as told"`},
	}, {
		name:  "exchange denied",
		setup: func(t *testing.T, a *testenv.Azure) { a.FailExchange(403) },
		want:  []string{`ACR token exchange: status 403 "DENIED"`},
	}, {
		name: "not an ACR host",
		host: "registry.example.com",
		want: []string{"azure: registry.example.com is not an Azure Container Registry host", "an Entra ID token is only sent to those"},
	}, {
		name: "wrong kind",
		ref:  credref.Ref{Kind: credref.KindGCP},
		want: []string{"azure: cannot serve credentials of kind gcp"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startAzure(t)
			if tt.setup != nil {
				tt.setup(t, a)
			}
			host, ref := cmp.Or(tt.host, testRegistry), tt.ref
			if ref.IsZero() {
				ref = azureRef
			}
			_, _, err := newProvider(withTransport(a.Transport())).Credential(t.Context(), ref, credentials.Target{Host: host})
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if errors.Is(err, credentials.ErrNoNative) != tt.native {
				t.Errorf("errors.Is(err, ErrNoNative) = %v", !tt.native)
			}
			checkNoSecrets(t, a, err)
			if tt.host != "" || !tt.ref.IsZero() {
				if n := len(a.Calls()); n != 0 {
					t.Errorf("%d requests sent", n)
				}
			}
		})
	}
}

// checkNoSecrets fails the test if err quotes any token the stand-in
// received or handed out.
func checkNoSecrets(t *testing.T, a *testenv.Azure, err error) {
	t.Helper()
	msg := err.Error()
	secrets := []string{a.FederatedToken(), "entra-access-token-", "eyJ"}
	for _, c := range a.Calls() {
		secrets = append(secrets, c.Form.Get("client_assertion"), c.Form.Get("access_token"))
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Errorf("the error quotes a token (%.12s...): %s", s, msg)
		}
	}
}

// Endpoints that misbehave: an answer without end is read no further than
// the bound, one that never comes is given up on, a redirect is not
// followed (it would carry the token elsewhere), and a message quoting
// the token sent has it blanked out.
func TestAzureProviderMisbehavingEndpoints(t *testing.T) {
	for _, endpoint := range []string{testenv.AzureEntra, testenv.AzureExchange} {
		for _, tt := range []struct{ how, want string }{
			{"endless", "Azure answer is larger than 1 MiB"},
			{"stall", "deadline exceeded"},
			{"redirect", "status 307: a redirect, which is not followed"},
			{"echo", "<redacted>"},
		} {
			t.Run(endpoint+" "+tt.how, func(t *testing.T) {
				a := startAzure(t)
				a.Misbehave(endpoint, tt.how)
				p := newProvider(withTransport(a.Transport()))
				p.http.Timeout = 3 * time.Second
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				var err error
				start := time.Now()
				grew := allocated(func() {
					_, _, err = p.Credential(ctx, azureRef, credentials.Target{Host: testRegistry})
				})
				if took := time.Since(start); took > 10*time.Second {
					t.Errorf("took %s", took)
				}
				if err == nil || !(strings.Contains(err.Error(), tt.want) || tt.want == "deadline exceeded" && timedOut(err)) {
					t.Fatalf("got %.300v, want an error with %q", err, tt.want)
				}
				if len(err.Error()) > 1000 {
					t.Errorf("the error is %d characters long", len(err.Error()))
				}
				if strings.Contains(err.Error(), "AAAA") {
					t.Errorf("the error quotes the answer: %.200s", err)
				}
				checkNoSecrets(t, a, err)
				if grew > 16<<20 {
					t.Errorf("allocated %d MiB", grew>>20)
				}
			})
		}
	}
}

// The provider's own transport refuses metadata addresses, wherever a
// name points.
func TestAzureProviderRefusesMetadataAddresses(t *testing.T) {
	a := startAzure(t)
	t.Setenv("AZURE_AUTHORITY_HOST", "https://169.254.169.254/")
	_, _, err := NewProvider().Credential(t.Context(), azureRef, credentials.Target{Host: testRegistry})
	if !errors.Is(err, netguard.ErrInternal) {
		t.Fatalf("error = %v, want the dial refused", err)
	}
	checkNoSecrets(t, a, err)
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// timedOut tells whether err is a request given up on at a deadline: the
// caller's, or the client's own.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() ||
		strings.Contains(err.Error(), "Client.Timeout exceeded")
}
