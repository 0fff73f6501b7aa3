package registry

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// A registry whose token realm is on another loopback port is refused
// its token exchange unless its registries.conf entry lists the realm's
// host under internal_hosts: the token server sees no request at all.
func TestTokenRealmOnAnInternalHost(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithTokenAuth("updater", "realm-password"))
	reg.PushTags(t, "team/app", []string{"1.0"})
	ref := imageRef(t, reg.Host+"/team/app:1.0")
	resolver := envResolver(map[string]string{"REG_CREDS": reg.Username + ":" + reg.Password})

	seen := func() int64 { return reg.Tokens.Issued.Load() + reg.Tokens.Refused.Load() }
	before := seen() // the push's

	c := NewClient(WithConfig(testConfig(t, reg.Host, "credentials: env:REG_CREDS")), WithCredentialResolver(resolver))
	_, err := c.Tags(t.Context(), ref, credref.Ref{})
	want := "refusing to connect to the internal host " + reg.Tokens.Host()
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "internal_hosts") {
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
	if n := seen() - before; n != 0 {
		t.Errorf("the token server saw %d requests", n)
	}

	c = NewClient(WithConfig(testConfig(t, reg.Host, regFields(reg, "credentials: env:REG_CREDS")...)), WithCredentialResolver(resolver))
	if tags, err := c.Tags(t.Context(), ref, credref.Ref{}); err != nil || len(tags) != 1 {
		t.Fatalf("with internal_hosts: %v, %v", tags, err)
	}
}

// Whatever a realm answers, its text never reaches the error, which
// events show to the Application's owner; and with no internal_hosts,
// the internal service it names is not asked at all.
func TestTokenRealmAnswerNotQuoted(t *testing.T) {
	const secret = "internal-service-data-7f3a"
	var asked atomic.Int64
	status := new(atomic.Int64)
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		fmt.Fprintf(w, `{"instance":%q,"details":%q}`, secret, secret)
	}))
	defer internal.Close()
	internalHost := strings.Replace(strings.TrimPrefix(internal.URL, "http://"), "127.0.0.1", "localhost", 1)
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/latest/meta-data",service="x"`, internalHost))
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer hostile.Close()
	host := strings.TrimPrefix(hostile.URL, "http://")
	ref := imageRef(t, host+"/team/app:1.0")

	for _, tc := range []struct {
		name   string
		fields []string
		status int
		asked  bool
		want   string
	}{
		{"not allowed", nil, http.StatusOK, false, "refusing to connect to the internal host " + internalHost},
		{"allowed, an answer without a token", []string{"internal_hosts: [" + internalHost + "]"}, http.StatusOK, true, "answered 200 OK with no token the client can read"},
		{"allowed, a refusal", []string{"internal_hosts: [" + internalHost + "]"}, http.StatusNotFound, true, "unexpected status code 404 Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status.Store(int64(tc.status))
			before := asked.Load()
			c := NewClient(WithConfig(testConfig(t, host, tc.fields...)), withRetry(1, 0, 0))
			_, err := c.Tags(t.Context(), ref, credref.Ref{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error quotes the internal answer: %v", err)
			}
			if got := asked.Load() > before; got != tc.asked {
				t.Errorf("the internal service was asked: %v, want %v", got, tc.asked)
			}
		})
	}
}
