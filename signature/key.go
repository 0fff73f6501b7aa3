package signature

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigstore "github.com/sigstore/sigstore/pkg/signature"

	"github.com/image-updater/argocd-image-updater/registry/credentials"
)

// PublicKey is a public key signatures are checked with: ECDSA (cosign's
// default, P-256), RSA (PKCS #1 v1.5) or ed25519, hashed with SHA-256 as
// cosign signs.
type PublicKey struct {
	verifier    sigstore.Verifier
	bundles     *verify.Verifier // sigstore bundles signed with the key
	fingerprint string
}

// ParsePublicKey reads a PEM public key, as cosign writes cosign.pub.
func ParsePublicKey(pemBytes []byte) (*PublicKey, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(bytes.TrimSpace(pemBytes))
	if err != nil {
		return nil, fmt.Errorf("not a PEM public key: %w", err)
	}
	// A tenant chooses the key: a huge RSA modulus would make every
	// check slow.
	if rk, ok := pub.(*rsa.PublicKey); ok && (rk.N.BitLen() < 2048 || rk.N.BitLen() > 4096) {
		return nil, fmt.Errorf("RSA keys of %d bits are not accepted: use 2048 to 4096 bits", rk.N.BitLen())
	}
	v, err := sigstore.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("unsupported public key: %w", err)
	}
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	// The key is trusted whatever hint a bundle gives and at any time: as
	// `cosign verify --key` does offline, a transparency-log entry or
	// timestamp the bundle may carry is neither needed nor looked up.
	key := root.NewExpiringKey(v, time.Time{}, time.Time{})
	material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
	bundles, err := verify.NewVerifier(material, verify.WithNoObserverTimestamps(), verify.WithoutStatementPredicate())
	if err != nil {
		return nil, err
	}
	return &PublicKey{verifier: v, bundles: bundles, fingerprint: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

// Fingerprint names the key in logs and caches: the SHA-256 of its DER
// encoding.
func (k *PublicKey) Fingerprint() string { return k.fingerprint }

func (k *PublicKey) cacheKey() string { return "key " + k.fingerprint }
func (k *PublicKey) String() string   { return "key " + k.fingerprint }

// verifySimple checks sig over message.
func (k *PublicKey) verifySimple(sig, message []byte) error {
	if k.verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(message)) != nil {
		return fmt.Errorf("not signed by the %s", k)
	}
	return nil
}

func (k *PublicKey) verifyBundle(b verify.SignedEntity, artifact verify.ArtifactPolicyOption) (*verify.VerificationResult, error) {
	return k.bundles.Verify(b, verify.NewPolicy(artifact, verify.WithKey()))
}

// ErrBadKey is wrapped by LoadKey's error when the Secret exists but its
// field holds no usable key: a setting to fix, not a passing failure.
var ErrBadKey = errors.New("no usable public key")

// LoadKey reads the PEM public key in field of the Secret namespace/name.
func LoadKey(ctx context.Context, secrets credentials.SecretGetter, namespace, name, field string) (*PublicKey, error) {
	what := "secret:" + namespace + "/" + name + "#" + field
	if secrets == nil {
		return nil, fmt.Errorf("%s: the controller has no access to Secrets", what)
	}
	data, err := secrets.GetSecret(ctx, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	pemBytes, ok := data[field]
	if !ok {
		return nil, fmt.Errorf("%s: %w: the Secret has no field %q", what, ErrBadKey, field)
	}
	k, err := ParsePublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", what, ErrBadKey, err)
	}
	return k, nil
}
