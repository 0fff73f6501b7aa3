package gcp

// Local stand-ins for the Google services the provider talks to: the
// metadata server and an OAuth2 token endpoint, close enough to the real
// ones for the real libraries to run unchanged against them.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
)

// unsetenvForTest removes an environment variable for the duration of the test.
func unsetenvForTest(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // records the old value for restoring
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}

// gceMetadataStandIn answers the metadata server requests the Google
// libraries make for default credentials.
type gceMetadataStandIn struct {
	t    *testing.T
	Host string // host:port, the value for GCE_METADATA_HOST

	mu          sync.Mutex
	tokenCalls  []*http.Request
	AccessToken string
	// Misbehave makes the token answer never end ("endless"), never come
	// ("stall"), or a 500 with a long message ("error").
	Misbehave string
}

func newGCEMetadataStandIn(t *testing.T) *gceMetadataStandIn {
	t.Helper()
	s := &gceMetadataStandIn{t: t, AccessToken: "ya29.metadata-access-token-0123456789"}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.Host = strings.TrimPrefix(srv.URL, "http://")
	return s
}

// TokenCalls returns the token requests received so far.
func (s *gceMetadataStandIn) TokenCalls() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.tokenCalls...)
}

func (s *gceMetadataStandIn) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Metadata-Flavor", "Google")
	if r.Header.Get("Metadata-Flavor") != "Google" {
		s.t.Errorf("metadata stand-in: %s %s without Metadata-Flavor: Google", r.Method, r.URL)
		http.Error(w, "Missing Metadata-Flavor:Google header.", http.StatusForbidden)
		return
	}
	switch r.URL.Path {
	case "/computeMetadata/v1/instance/service-accounts/default/token":
		s.mu.Lock()
		s.tokenCalls = append(s.tokenCalls, r.Clone(context.Background()))
		s.mu.Unlock()
		switch s.Misbehave {
		case "stall":
			<-r.Context().Done()
			return
		case "endless":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"`)
			chunk := strings.Repeat("y", 64<<10)
			for r.Context().Err() == nil {
				if _, err := fmt.Fprint(w, chunk); err != nil {
					return
				}
			}
			return
		case "error":
			http.Error(w, "internal error\n"+strings.Repeat("detail ", 100000), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"expires_in":3599,"token_type":"Bearer"}`, s.AccessToken)
	case "/computeMetadata/v1/project/project-id":
		w.Header().Set("Content-Type", "application/text")
		fmt.Fprint(w, "image-updater-test")
	default:
		s.t.Logf("metadata stand-in: no answer for %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	}
}

// oauthTokenStandIn is an OAuth2 token endpoint answering the refresh-token
// grant that authorized_user credentials files use.
type oauthTokenStandIn struct {
	URL         string
	AccessToken string

	mu    sync.Mutex
	forms []url.Values
}

func newOAuthTokenStandIn(t *testing.T) *oauthTokenStandIn {
	t.Helper()
	s := &oauthTokenStandIn{AccessToken: "ya29.refreshed-user-access-token"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.forms = append(s.forms, r.PostForm)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"expires_in":3599,"token_type":"Bearer","scope":"https://www.googleapis.com/auth/cloud-platform"}`, s.AccessToken)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/token"
	return s
}

// Forms returns the form bodies of the token requests received so far.
func (s *oauthTokenStandIn) Forms() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]url.Values(nil), s.forms...)
}

// setGoogleTestEnv clears every source of Google default credentials:
// no credentials file variable, a HOME without gcloud configuration, no
// metadata host.
func setGoogleTestEnv(t *testing.T) (home string) {
	t.Helper()
	for _, k := range []string{"GOOGLE_APPLICATION_CREDENTIALS", "GCE_METADATA_HOST", "GCE_METADATA_IP", "CLOUDSDK_CONFIG"} {
		unsetenvForTest(t, k)
	}
	home = t.TempDir()
	t.Setenv("HOME", home)
	return home
}
