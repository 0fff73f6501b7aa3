package gcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// neverOnGCE is a detection that fails the test if it is consulted: it
// stands for the metadata probe, which must not leave the machine in tests.
func neverOnGCE(t *testing.T) option {
	return withGCEDetection(func(context.Context) bool {
		t.Error("the metadata server detection was consulted")
		return false
	})
}

// Workload Identity: the metadata server at GCE_METADATA_HOST hands out the
// token, found by the library's own detection (which trusts that variable
// without probing anything).
func TestGCPProviderMetadataServer(t *testing.T) {
	setGoogleTestEnv(t)
	md := newGCEMetadataStandIn(t)
	t.Setenv("GCE_METADATA_HOST", md.Host)
	p := NewProvider()

	before := time.Now()
	cred, expiry, err := p.Credential(t.Context(), credref.Ref{Kind: credref.KindGCP}, credentials.Target{Host: "europe-docker.pkg.dev"})
	if err != nil {
		t.Fatalf("Credential: %v", err)
	}
	if want := (credentials.Credential{Username: "oauth2accesstoken", Password: md.AccessToken}); cred != want {
		t.Errorf("credential = %#v, want oauth2accesstoken and the metadata token", cred)
	}
	if lo, hi := before.Add(3598*time.Second), time.Now().Add(3600*time.Second); expiry.Before(lo) || expiry.After(hi) {
		t.Errorf("expiry = %v, want about an hour from now (expires_in 3599)", expiry)
	}
	calls := md.TokenCalls()
	if len(calls) != 1 {
		t.Fatalf("%d token requests, want 1", len(calls))
	}
	if got := calls[0].Header.Get("Metadata-Flavor"); got != "Google" {
		t.Errorf("Metadata-Flavor = %q", got)
	}
	if got := calls[0].URL.Query().Get("scopes"); got != cloudPlatformScope {
		t.Errorf("scopes = %q, want %q", got, cloudPlatformScope)
	}

	// Another Google registry shares the token.
	cred2, _, err := p.Credential(t.Context(), credref.Ref{Kind: credref.KindGCP}, credentials.Target{Host: "gcr.io"})
	if err != nil {
		t.Fatalf("Credential for gcr.io: %v", err)
	}
	if cred2 != cred || len(md.TokenCalls()) != 1 {
		t.Errorf("gcr.io: %v after %d token requests; want the same token and no new request", cred2, len(md.TokenCalls()))
	}
}

// No file, no metadata server: the error says so with credentials.ErrNoNative,
// also through the resolver, so a caller can fall back to anonymous.
func TestGCPProviderNoCredentials(t *testing.T) {
	setGoogleTestEnv(t)
	var asked atomic.Int32
	p := newProvider(withGCEDetection(func(context.Context) bool { asked.Add(1); return false }))

	_, _, err := p.Credential(t.Context(), credref.Ref{Kind: credref.KindGCP}, credentials.Target{Host: "gcr.io"})
	if !errors.Is(err, credentials.ErrNoNative) {
		t.Fatalf("error = %v, want credentials.ErrNoNative", err)
	}
	if !strings.Contains(err.Error(), "gcp: credentials for gcr.io") {
		t.Errorf("error %q does not name the registry", err)
	}
	if asked.Load() != 1 {
		t.Errorf("detection asked %d times, want 1", asked.Load())
	}

	r := credentials.NewResolver(credentials.WithNative(credref.KindGCP, p))
	_, err = r.ResolveCached(t.Context(), credref.Ref{Kind: credref.KindGCP}, credentials.Target{Host: "us-docker.pkg.dev"}, 0)
	var ce *credentials.Error
	if !errors.Is(err, credentials.ErrNoNative) || !errors.As(err, &ce) {
		t.Errorf("resolver error = %v, want a credentials.Error wrapping credentials.ErrNoNative", err)
	}
}

// authorizedUserJSON is a gcloud-style user credentials file whose token
// endpoint is the local stand-in.
func authorizedUserJSON(tokenURL string) string {
	return fmt.Sprintf(`{
  "type": "authorized_user",
  "client_id": "764086051850-test.apps.googleusercontent.com",
  "client_secret": "test-client-secret",
  "refresh_token": "1//test-refresh-token",
  "token_uri": %q
}`, tokenURL)
}

// Credentials files: named by GOOGLE_APPLICATION_CREDENTIALS, or gcloud's
// application default credentials under HOME. Neither needs the metadata
// server, so the detection is never consulted.
func TestGCPProviderCredentialsFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		place func(t *testing.T, home, content string)
	}{{
		name: "GOOGLE_APPLICATION_CREDENTIALS",
		place: func(t *testing.T, _, content string) {
			f := filepath.Join(t.TempDir(), "sa.json")
			writeCloudTestFile(t, f, content)
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", f)
		},
	}, {
		name: "gcloud application default credentials",
		place: func(t *testing.T, home, content string) {
			writeCloudTestFile(t, filepath.Join(home, ".config", "gcloud", "application_default_credentials.json"), content)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			home := setGoogleTestEnv(t)
			oauth := newOAuthTokenStandIn(t)
			tc.place(t, home, authorizedUserJSON(oauth.URL))

			cred, expiry, err := newProvider(neverOnGCE(t)).Credential(t.Context(), credref.Ref{Kind: credref.KindGCP}, credentials.Target{Host: "us-docker.pkg.dev"})
			if err != nil {
				t.Fatalf("Credential: %v", err)
			}
			if want := (credentials.Credential{Username: "oauth2accesstoken", Password: oauth.AccessToken}); cred != want {
				t.Errorf("credential = %#v, want the refreshed access token", cred)
			}
			if time.Until(expiry) < 59*time.Minute {
				t.Errorf("expiry = %v, want about an hour from now", expiry)
			}
			forms := oauth.Forms()
			if len(forms) != 1 || forms[0].Get("grant_type") != "refresh_token" || forms[0].Get("refresh_token") != "1//test-refresh-token" {
				t.Errorf("token requests = %v, want one refresh-token grant", forms)
			}
		})
	}
}

func TestGCPProviderErrors(t *testing.T) {
	t.Run("credentials file missing", func(t *testing.T) {
		setGoogleTestEnv(t)
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "absent.json"))
		_, _, err := newProvider(neverOnGCE(t)).Credential(t.Context(), credref.Ref{Kind: credref.KindGCP}, credentials.Target{Host: "gcr.io"})
		if err == nil || errors.Is(err, credentials.ErrNoNative) || !strings.Contains(err.Error(), "absent.json") {
			t.Errorf("error = %v, want one about the missing file that is not credentials.ErrNoNative", err)
		}
	})
	t.Run("token endpoint refuses", func(t *testing.T) {
		home := setGoogleTestEnv(t)
		writeCloudTestFile(t, filepath.Join(home, ".config", "gcloud", "application_default_credentials.json"),
			authorizedUserJSON("http://127.0.0.1:1/token")) // nothing listens on port 1
		_, _, err := newProvider(neverOnGCE(t)).Credential(t.Context(), credref.Ref{Kind: credref.KindGCP}, credentials.Target{Host: "gcr.io"})
		if err == nil || !strings.Contains(err.Error(), "gcp: get access token for gcr.io") || strings.Contains(err.Error(), "test-refresh-token") {
			t.Errorf("error = %v, want a token error for gcr.io without the refresh token", err)
		}
	})
	t.Run("not a Google host", func(t *testing.T) {
		setGoogleTestEnv(t)
		_, _, err := newProvider(neverOnGCE(t)).Credential(t.Context(), credref.Ref{Kind: credref.KindGCP}, credentials.Target{Host: "registry.example.com"})
		if err == nil || !strings.Contains(err.Error(), "registry.example.com is not a Google registry host") {
			t.Errorf("error = %v", err)
		}
	})
	t.Run("wrong kind", func(t *testing.T) {
		_, _, err := newProvider(neverOnGCE(t)).Credential(t.Context(), credref.Ref{Kind: credref.KindECR}, credentials.Target{Host: "gcr.io"})
		if err == nil || !strings.Contains(err.Error(), "gcp: cannot serve credentials of kind ecr") {
			t.Errorf("error = %v", err)
		}
	})
}

func writeCloudTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestGCPProviderMisbehavingMetadataServer: a metadata server whose token
// answer never ends is read no further than the bound, one that never
// answers is given up on, and one that fails with a long message is
// quoted within a length.
func TestGCPProviderMisbehavingMetadataServer(t *testing.T) {
	tests := []struct{ how, want string }{
		{"endless", "Google answer is larger than 1 MiB"},
		{"stall", "deadline exceeded"},
		{"error", `status 500: "internal error detail detail`},
	}
	for _, tt := range tests {
		t.Run(tt.how, func(t *testing.T) {
			setGoogleTestEnv(t)
			md := newGCEMetadataStandIn(t)
			md.Misbehave = tt.how
			t.Setenv("GCE_METADATA_HOST", md.Host)
			p := NewProvider()
			p.http.Timeout = time.Second
			var err error
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, _, err = p.Credential(t.Context(), credref.Ref{Kind: credref.KindGCP}, credentials.Target{Host: "europe-docker.pkg.dev"})
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil || !(strings.Contains(err.Error(), tt.want) || tt.want == "deadline exceeded" && timedOut(err)) {
				t.Fatalf("got %.300v, want an error with %q", err, tt.want)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("the error is %d characters long", len(err.Error()))
			}
			// The metadata library tries a failed request again, a few times.
			if took > 30*time.Second {
				t.Errorf("took %s", took)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("allocated %d MiB", grew>>20)
			}
		})
	}
}

// timedOut tells whether err is a request given up on at a deadline: the
// caller's, or the client's own (whose message names no deadline when it
// ends the wait for the headers).
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() ||
		strings.Contains(err.Error(), "Client.Timeout exceeded")
}
