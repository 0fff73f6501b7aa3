package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"cloud.google.com/go/compute/metadata"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/registry/cloudhost"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// accessTokenUser is the user name Google's registries expect along with an
// OAuth2 access token as the password.
const accessTokenUser = "oauth2accesstoken"

const cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// maxAnswer bounds each answer read from Google's token endpoints and the
// metadata server: theirs are a few KiB; an endpoint that sends without
// end must not grow the heap.
const maxAnswer = 1 << 20

// requestTimeout bounds each request to them: a token refresh takes no
// context of the caller's.
const requestTimeout = 30 * time.Second

// option configures a Provider in tests.
type option func(*Provider)

// withGCEDetection replaces the check for a metadata server, which by
// default is the metadata library's own (it trusts GCE_METADATA_HOST when
// set, else probes 169.254.169.254 and metadata.google.internal once per
// process). It is asked only when no credentials file is found.
func withGCEDetection(onGCE func(ctx context.Context) bool) option {
	return func(p *Provider) { p.onGCE = onGCE }
}

// Provider is the credentials.Source for gcp references, that is native
// Google credentials for Artifact Registry (<location>-docker.pkg.dev)
// and Container Registry (gcr.io, *.gcr.io). In registries.conf (or wherever
// a credential reference is accepted):
//
//	credentials: gcp
//	    Google application default credentials: a credentials file named by
//	    GOOGLE_APPLICATION_CREDENTIALS, else gcloud's application default
//	    credentials file, else the metadata server (GKE Workload Identity,
//	    Compute Engine). The registry sees the user oauth2accesstoken and an
//	    access token for the cloud-platform scope.
//
// The reference takes no argument: the environment chooses the Google
// service account (on GKE, the iam.gke.io/gcp-service-account annotation of
// the pod's Kubernetes ServiceAccount).
//
// The provider finds the default credentials once and then shares one token
// source among all Google registries, since one access token serves them
// all. It is safe for concurrent use.
type Provider struct {
	onGCE func(ctx context.Context) bool
	http  *http.Client

	mu sync.Mutex
	ts oauth2.TokenSource
}

var _ credentials.Source = (*Provider)(nil)

// NewProvider builds a Provider. Nothing is looked up until the first
// Credential call.
func NewProvider() *Provider { return newProvider() }

func newProvider(opts ...option) *Provider {
	p := &Provider{
		// The library memoizes its answer for the process; a caller's
		// deadline must not end the probe early and pin a false "not on GCE".
		onGCE: func(context.Context) bool { return metadata.OnGCE() },
		http: &http.Client{
			Transport: bounded.Transport(http.DefaultTransport.(*http.Transport).Clone(), maxAnswer, "Google answer"),
			Timeout:   requestTimeout,
		},
	}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// Credential returns the user oauth2accesstoken and a Google access token
// for the registry t.Host, which must be a Google registry (the token is
// good for every Google API the identity may use, so it is sent nowhere
// else), with the token's expiry. When the environment holds no Google
// credentials at all, the error wraps credentials.ErrNoNative.
func (p *Provider) Credential(ctx context.Context, ref credref.Ref, t credentials.Target) (credentials.Credential, time.Time, error) {
	registryHost := t.Host
	if ref.Kind != credref.KindGCP {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("gcp: cannot serve credentials of kind %s", ref.Kind)
	}
	if !cloudhost.Google(registryHost) {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("gcp: %s is not a Google registry host (gcr.io, *.gcr.io, <location>-docker.pkg.dev); a Google access token is only sent to those", registryHost)
	}
	ts, err := p.tokenSource(ctx)
	if err != nil {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("gcp: credentials for %s: %w", registryHost, err)
	}
	tok, err := tokenWithContext(ctx, ts)
	if err != nil {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("gcp: get access token for %s: %w", registryHost, err)
	}
	if tok == nil || tok.AccessToken == "" {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("gcp: get access token for %s: the answer holds no access token", registryHost)
	}
	return credentials.Credential{Username: accessTokenUser, Password: tok.AccessToken}, tok.Expiry, nil
}

// tokenSource finds the default credentials on first use and keeps their
// token source. A failed lookup is not kept, so credentials that appear
// later (a mounted file) are picked up.
func (p *Provider) tokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ts != nil {
		return p.ts, nil
	}
	// FindDefaultCredentials would end with its own metadata probe and
	// report "nothing found" only as text; checking its sources here, in the
	// same order, gives a sentinel and routes the probe through p.onGCE.
	if !googleCredentialsFilePresent() {
		if !p.onGCE(ctx) {
			return nil, fmt.Errorf("%w: no Google credentials file (GOOGLE_APPLICATION_CREDENTIALS or gcloud application default credentials) and no metadata server", credentials.ErrNoNative)
		}
		// The library's own metadata token source reads through a client
		// of its own, without a bound on the answer.
		p.ts = oauth2.ReuseTokenSource(nil, &metadataTokens{client: metadata.NewClient(p.http), scope: cloudPlatformScope})
		return p.ts, nil
	}
	// The token source keeps this context for later refreshes, so it must
	// outlive the current call; the token endpoint is read through p.http.
	ctx = context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, p.http)
	creds, err := google.FindDefaultCredentials(ctx, cloudPlatformScope)
	if err != nil {
		return nil, err
	}
	p.ts = oauth2.ReuseTokenSource(nil, creds.TokenSource)
	return p.ts, nil
}

// metadataTokens fetches access tokens of the instance's default service
// account from the metadata server (on GKE, the Workload Identity
// server), as the metadata server documents the request.
type metadataTokens struct {
	client *metadata.Client
	scope  string
}

func (m *metadataTokens) Token() (*oauth2.Token, error) {
	body, err := m.client.GetWithContext(context.Background(), "instance/service-accounts/default/token?scopes="+url.QueryEscape(m.scope))
	var me *metadata.Error
	if errors.As(err, &me) {
		// Its message is the server's answer, quoted within a length.
		return nil, fmt.Errorf("metadata server token: status %d: %s", me.Code, bounded.Excerpt(me.Message, bounded.MessageLength))
	}
	if err != nil {
		return nil, fmt.Errorf("metadata server token: %w", err)
	}
	var answer struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil {
		return nil, errors.New("metadata server token: the answer is not the token's JSON")
	}
	if answer.AccessToken == "" || answer.ExpiresIn <= 0 {
		return nil, errors.New("metadata server token: the answer holds no access token or no lifetime")
	}
	return &oauth2.Token{AccessToken: answer.AccessToken, TokenType: answer.TokenType, Expiry: time.Now().Add(time.Duration(answer.ExpiresIn) * time.Second)}, nil
}

// googleCredentialsFilePresent reports whether FindDefaultCredentials will
// use a credentials file: one named by GOOGLE_APPLICATION_CREDENTIALS
// (even a missing one, so that its error is reported rather than hidden),
// or gcloud's application default credentials.
func googleCredentialsFilePresent() bool {
	if os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") != "" {
		return true
	}
	_, err := os.Stat(gcloudADCFile())
	return err == nil
}

// gcloudADCFile is where gcloud stores application default credentials,
// as the oauth2/google package looks for them.
func gcloudADCFile() string {
	const name = "application_default_credentials.json"
	if runtime.GOOS == "windows" {
		return filepath.Join(os.Getenv("APPDATA"), "gcloud", name)
	}
	home := os.Getenv("HOME")
	if home == "" {
		if u, err := user.Current(); err == nil {
			home = u.HomeDir
		}
	}
	return filepath.Join(home, ".config", "gcloud", name)
}

// tokenWithContext lets the caller stop waiting for a token source, which
// takes no context. A fetch that is given up on still completes in the
// background and is kept by the reusing token source.
func tokenWithContext(ctx context.Context, ts oauth2.TokenSource) (*oauth2.Token, error) {
	type result struct {
		tok *oauth2.Token
		err error
	}
	ch := make(chan result, 1)
	go func() {
		tok, err := safe.Value(ts.Token)
		ch <- result{tok, err}
	}()
	select {
	case r := <-ch:
		return r.tok, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
