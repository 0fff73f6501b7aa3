package testenv

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// SigningKey is a key pair for signing images in tests.
type SigningKey struct {
	Signer signature.Signer
	// PublicPEM is the public key as cosign writes cosign.pub.
	PublicPEM []byte
}

// NewSigningKey generates an ECDSA P-256 key pair, cosign's default kind.
func NewSigningKey(t testing.TB) SigningKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey(t, priv)
}

// NewSigningKeyFrom wraps an existing private key (RSA, ECDSA, ed25519).
func NewSigningKeyFrom(t testing.TB, priv crypto.Signer) SigningKey {
	t.Helper()
	return signingKey(t, priv)
}

func signingKey(t testing.TB, priv crypto.Signer) SigningKey {
	t.Helper()
	signer, err := signature.LoadSigner(priv, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return SigningKey{Signer: signer, PublicPEM: pub}
}

// SignaturePayload is the simple signing payload cosign signs for digest
// of repo.
func (r *Registry) SignaturePayload(t testing.TB, repo string, digest v1.Hash) []byte {
	t.Helper()
	d, err := name.NewDigest(r.Repo(repo) + "@" + digest.String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := payload.Cosign{Image: d}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SignImage signs digest of repo with key as `cosign sign --key` does.
func (r *Registry) SignImage(t testing.TB, repo string, digest v1.Hash, key SigningKey) {
	t.Helper()
	p := r.SignaturePayload(t, repo, digest)
	sig, err := key.Signer.SignMessage(bytes.NewReader(p))
	if err != nil {
		t.Fatal(err)
	}
	r.PushSignature(t, repo, digest, p, sig)
}

// PushSignature adds a signature layer holding payload, with sig as its
// signature annotation, to the signatures of digest: the manifest tagged
// sha256-<hex>.sig in repo, created when there is none.
func (r *Registry) PushSignature(t testing.TB, repo string, digest v1.Hash, payload, sig []byte) {
	t.Helper()
	ref := r.tagRef(t, repo, SignatureTag(t, digest))
	base, err := remote.Image(ref, remote.WithAuth(r.Auth()))
	var te *ggcr.Error
	switch {
	case errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	case err != nil:
		t.Fatalf("read signatures %s: %v", ref, err)
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(payload, cosignSimpleSigningMediaType),
		Annotations: map[string]string{cosignSignatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(r.Auth())); err != nil {
		t.Fatalf("push signature %s: %v", ref, err)
	}
}

// PushRawManifest pushes body as the manifest tagged tag in repo, with
// the given media type, whatever it holds.
func (r *Registry) PushRawManifest(t testing.TB, repo, tag, mediaType string, body []byte) {
	t.Helper()
	if err := remote.Put(r.tagRef(t, repo, tag), rawManifest{body: body, mediaType: types.MediaType(mediaType)}, remote.WithAuth(r.Auth())); err != nil {
		t.Fatalf("push manifest %s:%s: %v", repo, tag, err)
	}
}

// PushBlob uploads body as a blob of repo and returns its digest.
func (r *Registry) PushBlob(t testing.TB, repo string, body []byte) v1.Hash {
	t.Helper()
	l := static.NewLayer(body, types.OCILayer)
	repoRef, err := name.NewRepository(r.Repo(repo))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteLayer(repoRef, l, remote.WithAuth(r.Auth())); err != nil {
		t.Fatalf("push blob to %s: %v", repo, err)
	}
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// SignatureTag is the tag cosign stores the signatures of digest under.
func SignatureTag(t testing.TB, digest v1.Hash) string {
	t.Helper()
	tag, err := cosignTag(digest.String())
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

type rawManifest struct {
	body      []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.body, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }
