package git

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/writeback/gitsign"
)

// gnupgHome makes a GnuPG home holding one signing key without a
// passphrase, made by gpg itself, and returns it with the key's long ID
// and fingerprint.
func gnupgHome(t *testing.T, userID string) (home, keyID, fingerprint string) {
	t.Helper()
	if _, err := exec.LookPath("gpg"); err != nil {
		t.Fatalf("gpg not found (%v): run `make testbin`, which installs gnupg", err)
	}
	home = t.TempDir()
	gpg := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("gpg", append([]string{"--homedir", home, "--batch", "--no-tty"}, args...)...)
		cmd.Env = append(os.Environ(), "GNUPGHOME="+home)
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("gpg %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command("gpgconf", "--homedir", home, "--kill", "gpg-agent").Run() })
	gpg("--passphrase", "", "--quick-generate-key", userID, "ed25519", "sign", "never")
	for _, line := range strings.Split(gpg("--list-secret-keys", "--with-colons"), "\n") {
		f := strings.Split(line, ":")
		switch {
		case len(f) > 9 && f[0] == "sec":
			keyID = f[4]
		case len(f) > 9 && f[0] == "fpr" && fingerprint == "":
			fingerprint = f[9]
		}
	}
	if keyID == "" || fingerprint == "" {
		t.Fatal("gpg listed no secret key")
	}
	return home, keyID, fingerprint
}

// testGnuPGKeyID signs with a key named as the old updater named it: by
// ID, from a GnuPG keyring, and lets git and gpg check the signature.
func (e *gitEnv) testGnuPGKeyID(t *testing.T) {
	home, keyID, fingerprint := gnupgHome(t, "Image Bot <bot@example.com>")
	for i, key := range []string{keyID, fingerprint, "0x" + strings.ToLower(keyID), "bot@example.com"} {
		t.Run(key, func(t *testing.T) {
			ns := e.argoNamespace(t, fmt.Sprintf("signing-gnupg-%d", i), true)
			url := e.repo(t, ns, nil)
			w := e.writer(t, ns, WithSigningKey(key, gitsign.MethodOpenPGP), WithGnuPGHome(home))
			r := mustWrite(t, w, appUpdate("main", url))[0]
			cmd := exec.Command("git", "verify-commit", "--raw", r.Commit)
			cmd.Dir = e.bare(ns)
			cmd.Env = append(os.Environ(), "GNUPGHOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "GOODSIG "+keyID) {
				t.Errorf("git verify-commit: %v\n%s", err, out)
			}
		})
	}
}

// secretMount lays out the files of a GnuPG home the way the kubelet
// mounts a Secret whose items put the key files into private-keys-v1.d:
// the files live in a dated folder, reached through the link ..data, and
// each top-level name is a link into ..data.
func secretMount(t *testing.T, home string) string {
	t.Helper()
	mount := t.TempDir()
	dated := filepath.Join(mount, "..2026_03_04_05_06_07.000000001")
	for _, name := range []string{"pubring.kbx", "private-keys-v1.d"} {
		if err := os.CopyFS(filepath.Join(dated, name), os.DirFS(filepath.Join(home, name))); err != nil {
			// A file, not a folder.
			data, err := os.ReadFile(filepath.Join(home, name))
			if err != nil {
				t.Fatal(err)
			}
			writeTestFile(t, filepath.Join(dated, name), string(data))
		}
	}
	if err := os.Symlink(filepath.Base(dated), filepath.Join(mount, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pubring.kbx", "private-keys-v1.d"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(mount, name)); err != nil {
			t.Fatal(err)
		}
	}
	return mount
}

// TestGnuPGKeyring reads signing keys named by ID at start, from keyrings
// laid out as they are mounted, and checks the errors when that fails.
func TestGnuPGKeyring(t *testing.T) {
	home, keyID, _ := gnupgHome(t, "Image Bot <bot@example.com>")
	locked := t.TempDir()
	cmd := exec.Command("gpg", "--homedir", locked, "--batch", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", "secret",
		"--quick-generate-key", "Locked <locked@example.com>", "ed25519", "sign", "never")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gpg: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("gpgconf", "--homedir", locked, "--kill", "gpg-agent").Run() })
	missing := filepath.Join(t.TempDir(), "missing")

	tests := []struct {
		name, key, method, home string
		want                    []string // in the error; none: no error
	}{
		{name: "key ID", key: keyID, home: home},
		{name: "keyring mounted from a Secret", key: keyID, home: secretMount(t, home)},
		{name: "unknown key ID", key: "3AA5C34371567BD2", home: home, want: []string{`signing key "3AA5C34371567BD2"`, home, "GNUPGHOME", "no secret key"}},
		{name: "no such GnuPG home", key: "3AA5C34371567BD2", home: missing, want: []string{`signing key "3AA5C34371567BD2"`, missing, "does not exist"}},
		{name: "key protected by a passphrase", key: "locked@example.com", home: locked, want: []string{`"locked@example.com"`, locked, "protected by a passphrase"}},
		{name: "a name is no SSH key", key: keyID, method: gitsign.MethodSSH, home: home, want: []string{"read signing key"}},
		{name: "a missing path is no key ID", key: missing, home: home, want: []string{"read signing key", missing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = gitsign.MethodOpenPGP
			}
			_, err := NewWriter(noObjects{}, noObjects{}, WithSigningKey(tt.key, method), WithGnuPGHome(tt.home), WithWorkDir(t.TempDir()))
			if len(tt.want) == 0 && err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.want {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("got %v, want an error containing %q", err, s)
				}
			}
		})
	}
}
