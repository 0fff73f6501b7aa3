package registry

import (
	"net/http"
	"testing"

	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// pings counts the pings (GET /v2/) rec saw.
func pings(rec *recorder) int {
	n := 0
	for _, r := range rec.requests() {
		if r == http.MethodGet+" /v2/" {
			n++
		}
	}
	return n
}

// The ping that learns how a registry authenticates is sent once per
// registry and credentials, however many repositories are listed; a token
// is still fetched per repository, whose scope it carries. New
// credentials, and credentials the registry refuses, ping again.
func TestPingOncePerRegistryAndCredentials(t *testing.T) {
	repos := []string{"team/a", "team/b", "team/c", "team/d", "team/e"}
	for _, tc := range []struct {
		name string
		opts []testenv.RegistryOption
	}{
		{"htpasswd", nil},
		{"token", []testenv.RegistryOption{testenv.WithTokenAuth("updater", "token-server-password")}},
		{"anonymous", []testenv.RegistryOption{testenv.WithoutAuth()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := testenv.StartRegistry(t, tc.opts...)
			for _, repo := range repos {
				reg.PushTags(t, repo, []string{"1.0.0"})
			}
			if reg.Tokens != nil {
				reg.Tokens.AddUser("robot", "robot-password", "team")
			}
			vars := map[string]string{"REG_CREDS": reg.Username + ":" + reg.Password, "ROBOT": "robot:robot-password", "WRONG": reg.Username + ":not-the-password"}
			rec := newRecorder()
			c := NewClient(
				WithConfig(testConfig(t, reg.Host, regFields(reg)...)),
				WithCredentialResolver(envResolver(vars)),
				withBaseTransport(rec),
			)
			creds := credref.Ref{}
			if reg.Username != "" {
				creds = envRef("REG_CREDS")
			}
			list := func(creds credref.Ref, repos ...string) {
				t.Helper()
				for _, repo := range repos {
					if tags, err := c.Tags(t.Context(), imageRef(t, reg.Host+"/"+repo), creds); err != nil || len(tags) != 1 {
						t.Fatalf("%s: %v, %v", repo, tags, err)
					}
				}
			}

			var issued int64 // the pushes' tokens aside
			if reg.Tokens != nil {
				issued = reg.Tokens.Issued.Load()
			}
			list(creds, repos...)
			if n := pings(rec); n != 1 {
				t.Errorf("%d pings for %d repositories with one set of credentials, want 1: %v", n, len(repos), rec.requests())
			}
			if reg.Tokens != nil {
				if n := reg.Tokens.Issued.Load() - issued; n != int64(len(repos)) {
					t.Errorf("%d tokens issued for %d repositories, want one each", n, len(repos))
				}
			}
			// Again, as the next cycle lists them: no request but the listings.
			rec.reset()
			list(creds, repos...)
			if n := pings(rec); n != 0 {
				t.Errorf("%d pings when listing again, want 0: %v", n, rec.requests())
			}
			if reg.Username == "" {
				return
			}

			if reg.Tokens != nil {
				// Other credentials for the same registry: one ping more.
				rec.reset()
				list(envRef("ROBOT"), repos...)
				if n := pings(rec); n != 1 {
					t.Errorf("%d pings for other credentials, want 1: %v", n, rec.requests())
				}
			}

			// A refusal pings again: the credentials are fetched anew and
			// tried once more, after a ping of their own.
			rec.reset()
			for _, repo := range repos[:2] {
				_, err := c.Tags(t.Context(), imageRef(t, reg.Host+"/"+repo), envRef("WRONG"))
				checkUnauthorized(t, err, reg.Host, repo, "not-the-password")
			}
			if n := pings(rec); n != 4 {
				t.Errorf("%d pings for refused credentials, tried twice on each of 2 repositories, want 4: %v", n, rec.requests())
			}
		})
	}
}
