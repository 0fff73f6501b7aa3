package signature_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/signature/layout"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

func TestParsePublicKey(t *testing.T) {
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	smallRSA, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(k any) string {
		b, err := cryptoutils.MarshalPublicKeyToPEM(k)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name, pem, wantErr string
	}{
		{name: "cosign default", pem: string(testenv.NewSigningKey(t).PublicPEM)},
		{name: "P-384", pem: pemOf(p384.Public())},
		{name: "surrounding blank lines", pem: "\n\n" + string(testenv.NewSigningKey(t).PublicPEM) + "\n"},
		{name: "empty", pem: "", wantErr: "not a PEM public key"},
		{name: "private key", pem: "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n", wantErr: "not a PEM public key"},
		{name: "garbage DER", pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", wantErr: "not a PEM public key"},
		{name: "small RSA", pem: pemOf(smallRSA.Public()), wantErr: "1024 bits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := signature.ParsePublicKey([]byte(tt.pem))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(k.Fingerprint(), "sha256:") || len(k.Fingerprint()) != len("sha256:")+64 {
					t.Errorf("fingerprint %q", k.Fingerprint())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzParsePublicKey(f *testing.F) {
	f.Add(string(testenv.NewSigningKey(f).PublicPEM))
	f.Add("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
	f.Add("-----BEGIN RSA PUBLIC KEY-----\nMAA=\n-----END RSA PUBLIC KEY-----\n")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := signature.ParsePublicKey([]byte(s))
		if err == nil && k.Fingerprint() == "" {
			t.Error("a key without a fingerprint")
		}
	})
}

func TestTag(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	if got, err := layout.Tag("sha256:" + hex); err != nil || got != "sha256-"+hex+".sig" {
		t.Errorf("Tag = %q, %v", got, err)
	}
	for _, bad := range []string{"", "sha256:abc", "sha512:" + hex + hex, "latest"} {
		if _, err := layout.Tag(bad); err == nil {
			t.Errorf("Tag(%q) accepted", bad)
		}
	}
}
