//go:build unix

package registry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// writeScript writes an executable shell script into a fresh directory.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "creds.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// runs counts the lines a script appended to its log.
func runs(t *testing.T, log string) int {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestExtScriptCredentialsFromConfig(t *testing.T) {
	reg := testenv.StartRegistry(t)
	reg.PushTags(t, "app", []string{"1.0"})
	ref := imageRef(t, reg.Host+"/app")

	t.Run("cached for credsexpire", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "runs")
		script := writeScript(t, fmt.Sprintf("echo run >> %s\necho '%s:%s'", log, reg.Username, reg.Password))
		c := NewClient(WithConfig(testConfig(t, reg.Host, "credentials: ext:"+script, "credsexpire: 1h")))
		for range 3 {
			if _, err := c.Tags(t.Context(), ref, credref.Ref{}); err != nil {
				t.Fatal(err)
			}
		}
		if n := runs(t, log); n != 1 {
			t.Errorf("the script ran %d times, want once within credsexpire", n)
		}
	})

	t.Run("garbage output", func(t *testing.T) {
		const garbage = "this-is-no-credential-XYZZY"
		script := writeScript(t, "echo "+garbage)
		c := NewClient(WithConfig(testConfig(t, reg.Host, "credentials: ext:"+script, "credsexpire: 1h")))
		_, err := c.Tags(t.Context(), ref, credref.Ref{})
		if err == nil {
			t.Fatal("want an error for a script that prints no credentials")
		}
		if strings.Contains(err.Error(), garbage) {
			t.Errorf("error contains the script's output: %v", err)
		}
		var se *credentials.ScriptError
		if !errors.As(err, &se) || !errors.Is(err, credentials.ErrMalformed) {
			t.Errorf("want a *credentials.ScriptError wrapping credentials.ErrMalformed, got %v", err)
		}
		for _, want := range []string{script, reg.Host + "/app"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not mention %q: %v", want, err)
			}
		}
	})
}

// A script that hands out a stale password first and the right one after,
// as a token helper does when its cache is out of date.
func staleThenFreshScript(t *testing.T, reg *testenv.Registry) (script, log string) {
	dir := t.TempDir()
	log = filepath.Join(dir, "runs")
	state := filepath.Join(dir, "served-stale")
	script = writeScript(t, fmt.Sprintf(`echo run >> %[1]s
if [ -e %[2]s ]; then echo '%[3]s:%[4]s'; else touch %[2]s; echo '%[3]s:stale-password'; fi`,
		log, state, reg.Username, reg.Password))
	return script, log
}

func TestUnauthorizedRefetchesCachedCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []testenv.RegistryOption
	}{
		{"htpasswd", nil},
		{"token", []testenv.RegistryOption{testenv.WithTokenAuth("updater", "token-server-password")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := testenv.StartRegistry(t, tc.opts...)
			reg.PushTags(t, "app", []string{"1.0"})
			ref := imageRef(t, reg.Host+"/app:1.0")

			script, log := staleThenFreshScript(t, reg)
			c := NewClient(WithConfig(testConfig(t, reg.Host, regFields(reg, "credentials: ext:"+script, "credsexpire: 10h")...)))
			if _, err := c.Tags(t.Context(), ref, credref.Ref{}); err != nil {
				t.Fatalf("the client should have fetched the credentials again after a 401: %v", err)
			}
			if n := runs(t, log); n != 2 {
				t.Errorf("the script ran %d times, want 2 (stale, then fresh)", n)
			}
			// The fresh credentials are cached now.
			if _, err := c.Metadata(t.Context(), ref, credref.Ref{}, nil); err != nil {
				t.Fatal(err)
			}
			if n := runs(t, log); n != 2 {
				t.Errorf("the script ran %d times, want the fresh credentials reused", n)
			}

			// Image-level credentials are not cached, so a 401 is final.
			script, log = staleThenFreshScript(t, reg)
			_, err := NewClient(WithConfig(testConfig(t, reg.Host, regFields(reg)...))).Tags(t.Context(), ref, credref.Ref{Kind: credref.KindExt, Path: script})
			checkUnauthorized(t, err, reg.Host, "app", "stale-password")
			if n := runs(t, log); n != 1 {
				t.Errorf("the script ran %d times for image-level credentials, want once", n)
			}
		})
	}
}
