package gitsign

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func testSSHKey(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// TestSSHSignerVerifiesWithSSHKeygen checks our SSHSIG signatures with
// OpenSSH's own verifier for each key type git users sign with.
func TestSSHSignerVerifiesWithSSHKeygen(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("ssh-keygen not installed")
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]any{"ed25519": edKey, "ecdsa": ecKey, "rsa": rsaKey} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			block, err := ssh.MarshalPrivateKey(key, "")
			if err != nil {
				t.Fatal(err)
			}
			keyFile := filepath.Join(dir, "key")
			if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
				t.Fatal(err)
			}
			signer, err := Load(keyFile, MethodSSH, "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			message := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbbfe04a\nauthor a <a@b> 0 +0000\n\nmsg\n")
			sig, err := signer.Sign(bytes.NewReader(message))
			if err != nil {
				t.Fatal(err)
			}
			pub := signer.(sshSigner).key.PublicKey()
			allowed := filepath.Join(dir, "allowed")
			if err := os.WriteFile(allowed, []byte("bot@example.com "+string(ssh.MarshalAuthorizedKey(pub))), 0o600); err != nil {
				t.Fatal(err)
			}
			sigFile := filepath.Join(dir, "sig")
			if err := os.WriteFile(sigFile, sig, 0o600); err != nil {
				t.Fatal(err)
			}
			verify := func(msg []byte) error {
				cmd := exec.Command(keygen, "-Y", "verify", "-f", allowed, "-I", "bot@example.com", "-n", "git", "-s", sigFile)
				cmd.Stdin = bytes.NewReader(msg)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Logf("ssh-keygen: %s", out)
				}
				return err
			}
			if err := verify(message); err != nil {
				t.Errorf("signature rejected: %v", err)
			}
			if err := verify(append(message, '!')); err == nil {
				t.Error("signature accepted for another message")
			}
		})
	}
}

func TestLoadSignerErrors(t *testing.T) {
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("pass"))
	if err != nil {
		t.Fatal(err)
	}
	protected := filepath.Join(dir, "protected")
	if err := os.WriteFile(protected, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, method, want string }{
		{protected, MethodSSH, "protected by a passphrase"},
		{garbage, MethodSSH, "SSH signing key"},
		{garbage, MethodOpenPGP, "OpenPGP signing key"},
		{garbage, "x509", `unknown signing method "x509"`},
		{filepath.Join(dir, "missing"), MethodSSH, "read signing key"},
	}
	for _, tt := range tests {
		if _, err := Load(tt.path, tt.method, "", time.Now()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s: got %v, want an error containing %q", tt.method, filepath.Base(tt.path), err, tt.want)
		}
	}
}

func TestHexKeyID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"3AA5C34371567BD2", "3AA5C34371567BD2"},
		{"0x3aa5c34371567bd2", "3AA5C34371567BD2"},
		{"3AA5C343", "3AA5C343"},
		{"8CEB A79A 1D6C 9182 2D14  2E69 5C26 991D 7C14 913D", "8CEBA79A1D6C91822D142E695C26991D7C14913D"},
		{"3AA5C34371567BD2!", "3AA5C34371567BD2"},
		{"bot@example.com", ""},
		{"3AA5C34371567BD", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := hexKeyID(tt.in); got != tt.want {
			t.Errorf("hexKeyID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
