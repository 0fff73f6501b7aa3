package signature_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/signature/layout"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// countingRegistry counts the requests verification makes through the
// real client.
type countingRegistry struct {
	*registry.Client
	manifests, referrers, blobs atomic.Int32
}

func (c *countingRegistry) Referrers(ctx context.Context, ref imageref.Reference, creds credref.Ref, digest string) (registry.Manifest, error) {
	c.referrers.Add(1)
	return c.Client.Referrers(ctx, ref, creds, digest)
}

func (c *countingRegistry) requests() int32 {
	return c.manifests.Load() + c.referrers.Load() + c.blobs.Load()
}

func (c *countingRegistry) Manifest(ctx context.Context, ref imageref.Reference, creds credref.Ref) (registry.Manifest, error) {
	c.manifests.Add(1)
	return c.Client.Manifest(ctx, ref, creds)
}

func (c *countingRegistry) Blob(ctx context.Context, ref imageref.Reference, creds credref.Ref, digest string, maxBytes int64) ([]byte, error) {
	c.blobs.Add(1)
	return c.Client.Blob(ctx, ref, creds, digest, maxBytes)
}

func newClient(t *testing.T, reg *testenv.Registry) *countingRegistry {
	t.Helper()
	cfg, err := config.Parse("registries.conf", fmt.Appendf(nil,
		"registries:\n- name: test\n  prefix: %s\n  api_url: http://%s\n  credentials: env:REG\n", reg.Host, reg.Host))
	if err != nil {
		t.Fatal(err)
	}
	env := func(string) (string, bool) { return reg.Username + ":" + reg.Password, true }
	return &countingRegistry{Client: registry.NewClient(
		registry.WithConfig(func() *config.Config { return cfg }),
		registry.WithCredentialResolver(credentials.NewResolver(credentials.WithEnv(env))),
	)}
}

func parseKey(t *testing.T, k testenv.SigningKey) *signature.PublicKey {
	t.Helper()
	pk, err := signature.ParsePublicKey(k.PublicPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

func TestVerify(t *testing.T) {
	reg := testenv.StartRegistry(t)
	key, other := testenv.NewSigningKey(t), testenv.NewSigningKey(t)
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	rsaKey, edKey := testenv.NewSigningKeyFrom(t, rsaPriv), testenv.NewSigningKeyFrom(t, edPriv)
	const repo = "team/app"

	tests := []struct {
		name string
		// prepare pushes an image, signs it or not, and returns its digest.
		prepare func(t *testing.T) v1.Hash
		key     testenv.SigningKey
		// wantReason is "" when the signature verifies.
		wantReason string
	}{
		{name: "signed with the key", key: key, prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"signed"})
			reg.SignImage(t, repo, d, key)
			return d
		}},
		{name: "RSA key", key: rsaKey, prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"rsa"})
			reg.SignImage(t, repo, d, rsaKey)
			return d
		}},
		{name: "ed25519 key", key: edKey, prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"ed25519"})
			reg.SignImage(t, repo, d, edKey)
			return d
		}},
		{name: "another key's signature, then the key's", key: key, prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"both"})
			reg.SignImage(t, repo, d, other)
			reg.SignImage(t, repo, d, key)
			return d
		}},
		{name: "unsigned", key: key, wantReason: "no signature", prepare: func(t *testing.T) v1.Hash {
			return reg.PushImage(t, repo, []string{"unsigned"})
		}},
		{name: "signed by another key", key: key, wantReason: "not signed by the key", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"other"})
			reg.SignImage(t, repo, d, other)
			return d
		}},
		{name: "payload for another digest", key: key, wantReason: "is for digest", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"replayed"})
			elsewhere := reg.PushImage(t, repo, []string{"elsewhere"})
			p := reg.SignaturePayload(t, repo, elsewhere)
			sig, err := key.Signer.SignMessage(bytes.NewReader(p))
			if err != nil {
				t.Fatal(err)
			}
			reg.PushSignature(t, repo, d, p, sig)
			return d
		}},
		{name: "signed payload of another type", key: key, wantReason: "of type", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"othertype"})
			p := []byte(`{"critical":{"type":"atomic container signature","image":{"docker-manifest-digest":"` + d.String() + `"}}}`)
			sig, err := key.Signer.SignMessage(bytes.NewReader(p))
			if err != nil {
				t.Fatal(err)
			}
			reg.PushSignature(t, repo, d, p, sig)
			return d
		}},
		{name: "signature not base64", key: key, wantReason: "not base64", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"notbase64"})
			p := reg.SignaturePayload(t, repo, d)
			reg.PushSignature(t, repo, d, p, nil)
			pushManifest(t, reg, repo, d, fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
				"config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,"digest":"%s"},
				"layers":[{"mediaType":"%s","size":%d,"digest":"%s","annotations":{"%s":"%%%%not base64"}}]}`,
				reg.PushBlob(t, repo, []byte("{}")), layout.SimpleSigningMediaType, len(p), reg.PushBlob(t, repo, p), layout.SignatureAnnotation))
			return d
		}},
		{name: "an index at the signature tag", key: key, wantReason: "holds no cosign signature", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"index"})
			reg.PushRawManifest(t, repo, testenv.SignatureTag(t, d), "application/vnd.oci.image.index.v1+json",
				[]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`))
			return d
		}},
		{name: "no signature layers", key: key, wantReason: "holds no cosign signature", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"nolayers"})
			pushManifest(t, reg, repo, d, fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
				"config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,"digest":"%s"},"layers":[]}`, reg.PushBlob(t, repo, []byte("{}"))))
			return d
		}},
		{name: "oversized payload, declared", key: key, wantReason: "larger than", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"bigdeclared"})
			big := bytes.Repeat([]byte("x"), 1<<20)
			pushManifest(t, reg, repo, d, fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
				"config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,"digest":"%s"},
				"layers":[{"mediaType":"%s","size":%d,"digest":"%s","annotations":{"%s":"AAAA"}}]}`,
				reg.PushBlob(t, repo, []byte("{}")), layout.SimpleSigningMediaType, len(big), reg.PushBlob(t, repo, big), layout.SignatureAnnotation))
			return d
		}},
		{name: "oversized payload, declared small", key: key, wantReason: "larger than", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"bighidden"})
			big := bytes.Repeat([]byte("y"), 1<<20)
			pushManifest(t, reg, repo, d, fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
				"config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,"digest":"%s"},
				"layers":[{"mediaType":"%s","size":100,"digest":"%s","annotations":{"%s":"AAAA"}}]}`,
				reg.PushBlob(t, repo, []byte("{}")), layout.SimpleSigningMediaType, reg.PushBlob(t, repo, big), layout.SignatureAnnotation))
			return d
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.prepare(t)
			c := newClient(t, reg)
			v := signature.NewVerifier(c)
			img := mustParse(t, reg.Repo(repo))
			err := v.Verify(t.Context(), img, credref.Ref{}, d.String(), parseKey(t, tt.key))
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("want verified, got %v", err)
				}
				// Remembered: no request the second time.
				before := c.requests()
				if err := v.Verify(t.Context(), img, credref.Ref{}, d.String(), parseKey(t, tt.key)); err != nil {
					t.Fatal(err)
				}
				if after := c.requests(); after != before {
					t.Errorf("a verified digest was checked again: %d requests", after-before)
				}
				return
			}
			var r *signature.Rejection
			if !errors.Is(err, signature.ErrNotVerified) || !errors.As(err, &r) {
				t.Fatalf("want a rejection, got %v", err)
			}
			if !strings.Contains(r.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", r.Reason, tt.wantReason)
			}
			// A rejection is remembered for the same signature manifest:
			// one manifest request, no blob.
			blobs := c.blobs.Load()
			if err := v.Verify(t.Context(), img, credref.Ref{}, d.String(), parseKey(t, tt.key)); !errors.Is(err, signature.ErrNotVerified) {
				t.Fatalf("second check: %v", err)
			}
			if c.blobs.Load() != blobs {
				t.Error("a rejected signature manifest was read again")
			}
		})
	}
}

// TestVerifySignedLater: a signature pushed after a rejection is found.
func TestVerifySignedLater(t *testing.T) {
	reg := testenv.StartRegistry(t)
	key, other := testenv.NewSigningKey(t), testenv.NewSigningKey(t)
	d := reg.PushImage(t, "app", []string{"1.0"})
	reg.SignImage(t, "app", d, other)
	v := signature.NewVerifier(newClient(t, reg))
	img := mustParse(t, reg.Repo("app"))
	if err := v.Verify(t.Context(), img, credref.Ref{}, d.String(), parseKey(t, key)); !errors.Is(err, signature.ErrNotVerified) {
		t.Fatalf("want rejection, got %v", err)
	}
	reg.SignImage(t, "app", d, key)
	if err := v.Verify(t.Context(), img, credref.Ref{}, d.String(), parseKey(t, key)); err != nil {
		t.Fatalf("signed since: %v", err)
	}
}

// TestVerifyRegistryFailure: a registry that cannot answer says nothing
// about signatures.
func TestVerifyRegistryFailure(t *testing.T) {
	reg := testenv.StartRegistry(t)
	key := testenv.NewSigningKey(t)
	c := newClient(t, reg)
	v := signature.NewVerifier(c)
	img := mustParse(t, "127.0.0.1:1/app")
	err := v.Verify(t.Context(), img, credref.Ref{}, "sha256:"+strings.Repeat("a", 64), parseKey(t, key))
	if err == nil || errors.Is(err, signature.ErrNotVerified) {
		t.Fatalf("want a registry error, got %v", err)
	}
}

// TestVerifySignatureCount: a signature manifest holding more signatures
// than the bound is checked no further, each costing a blob request: the
// key's signature past it is not looked at, and the rejection says so.
func TestVerifySignatureCount(t *testing.T) {
	reg := testenv.StartRegistry(t)
	key, other := testenv.NewSigningKey(t), testenv.NewSigningKey(t)
	const repo = "team/app"
	d := reg.PushImage(t, repo, []string{"many"})
	p := reg.SignaturePayload(t, repo, d)
	layer := func(signer testenv.SigningKey) string {
		sig, err := signer.Signer.SignMessage(bytes.NewReader(p))
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf(`{"mediaType":"%s","size":%d,"digest":"%s","annotations":{"%s":"%s"}}`,
			layout.SimpleSigningMediaType, len(p), reg.PushBlob(t, repo, p), layout.SignatureAnnotation, base64.StdEncoding.EncodeToString(sig))
	}
	var layers []string
	for range signature.MaxSignatures {
		layers = append(layers, layer(other))
	}
	layers = append(layers, layer(key))
	pushManifest(t, reg, repo, d, fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
		"config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,"digest":"%s"},"layers":[%s]}`,
		reg.PushBlob(t, repo, []byte("{}")), strings.Join(layers, ",")))

	c := newClient(t, reg)
	err := signature.NewVerifier(c).Verify(t.Context(), mustParse(t, reg.Repo(repo)), credref.Ref{}, d.String(), parseKey(t, key))
	var r *signature.Rejection
	if !errors.As(err, &r) || !strings.Contains(r.Reason, fmt.Sprintf("more than %d signatures", signature.MaxSignatures)) {
		t.Fatalf("got %v, want a rejection that names the bound", err)
	}
	if n := c.blobs.Load(); n != signature.MaxSignatures {
		t.Errorf("%d payloads read, want %d", n, signature.MaxSignatures)
	}
}

// unsignedRegistry answers every signature tag with a manifest that holds
// no signature, a distinct one for each tag.
type unsignedRegistry struct{}

func (unsignedRegistry) Manifest(_ context.Context, ref imageref.Reference, _ credref.Ref) (registry.Manifest, error) {
	d := sha256.Sum256([]byte(ref.Tag()))
	return registry.Manifest{Digest: "sha256:" + hex.EncodeToString(d[:]), MediaType: "application/vnd.oci.image.manifest.v1+json",
		Body: []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,"digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},"layers":[]}`)}, nil
}

func (unsignedRegistry) Blob(context.Context, imageref.Reference, credref.Ref, string, int64) ([]byte, error) {
	return nil, registry.ErrNotFound
}

// Referrers answers that the digest has none.
func (unsignedRegistry) Referrers(context.Context, imageref.Reference, credref.Ref, string) (registry.Manifest, error) {
	return registry.Manifest{MediaType: "application/vnd.oci.image.index.v1+json",
		Body: []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)}, nil
}

// TestVerdictsAreBounded: the verdicts a verifier keeps are bounded by
// their count, however many digests are checked.
func TestVerdictsAreBounded(t *testing.T) {
	v := signature.NewVerifier(unsignedRegistry{})
	key := parseKey(t, testenv.NewSigningKey(t))
	img := mustParse(t, "registry.test/team/app")
	n := signature.CacheSize + 10
	for i := range n {
		d := sha256.Sum256(fmt.Appendf(nil, "image %d", i))
		if err := v.Verify(t.Context(), img, credref.Ref{}, "sha256:"+hex.EncodeToString(d[:]), key); !errors.Is(err, signature.ErrNotVerified) {
			t.Fatalf("digest %d: %v, want a rejection", i, err)
		}
	}
	if got := v.Verdicts(); got > signature.CacheSize {
		t.Errorf("%d verdicts kept for %d digests, want at most %d", got, n, signature.CacheSize)
	}
}

func pushManifest(t *testing.T, reg *testenv.Registry, repo string, d v1.Hash, body string) {
	t.Helper()
	reg.PushRawManifest(t, repo, testenv.SignatureTag(t, d), "application/vnd.oci.image.manifest.v1+json", []byte(body))
}

func mustParse(t *testing.T, s string) imageref.Reference {
	t.Helper()
	ref, err := imageref.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
