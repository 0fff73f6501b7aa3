package signature

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
)

// maxTrustedRootSize bounds a trusted root file: the public Sigstore
// instance's is about 10 KiB.
const maxTrustedRootSize = 1 << 20

// TrustedRoot is the Sigstore trust the operator configures for keyless
// signatures: the certificate authorities that issue signing certificates
// (Fulcio), and the transparency logs (Rekor), certificate transparency
// logs and timestamp authorities whose proofs a bundle carries, as
// `cosign trusted-root create` writes it or the Sigstore TUF repository
// distributes it (trusted_root.json). Verification reads nothing else:
// no request goes to any of them.
type TrustedRoot struct {
	verifier    *verify.Verifier
	fingerprint string
}

// ParseTrustedRoot reads a trusted root in its JSON form.
//
// What a bundle must carry follows from it, as `cosign verify` requires
// by default: a time of signing vouched for by a timestamp authority or a
// transparency log, for the certificate is valid for minutes only; an
// entry in a transparency log when the root lists one; a signed
// certificate timestamp when it lists a certificate transparency log.
func ParseTrustedRoot(data []byte) (*TrustedRoot, error) {
	if len(data) > maxTrustedRootSize {
		return nil, fmt.Errorf("the trusted root is larger than %d bytes", maxTrustedRootSize)
	}
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not a Sigstore trusted root: %w", err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 {
		return nil, errors.New("the trusted root names no certificate authority")
	}
	opts := []verify.VerifierOption{verify.WithObserverTimestamps(1), verify.WithoutStatementPredicate()}
	if len(tr.RekorLogs()) > 0 {
		opts = append(opts, verify.WithTransparencyLog(1))
	}
	if len(tr.CTLogs()) > 0 {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	v, err := verify.NewVerifier(tr, opts...)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	return &TrustedRoot{verifier: v, fingerprint: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

// Fingerprint names the trusted root: the SHA-256 of its file.
func (r *TrustedRoot) Fingerprint() string { return r.fingerprint }

// Identity is who must have signed, keyless: the subject of the signing
// certificate (an e-mail address, a URI such as a CI workflow's) and the
// OIDC issuer that vouched for it, each given exactly or as a regular
// expression (Go syntax; unanchored, as cosign's
// --certificate-identity-regexp: anchor it with ^ and $).
type Identity struct {
	Subject, SubjectRegexp string
	Issuer, IssuerRegexp   string
}

func (id Identity) String() string {
	subject, issuer := id.Subject, id.Issuer
	if subject == "" {
		subject = "~" + id.SubjectRegexp
	}
	if issuer == "" {
		issuer = "~" + id.IssuerRegexp
	}
	return fmt.Sprintf("identity %q from issuer %q", subject, issuer)
}

// Keyless is a trusted root and the identity whose signatures count.
type Keyless struct {
	root     *TrustedRoot
	identity verify.CertificateIdentity
	name     string
}

// Keyless checks signatures of id under r. Both the subject and the
// issuer must be given, each either exactly or as a regular expression.
func (r *TrustedRoot) Keyless(id Identity) (*Keyless, error) {
	if (id.Subject == "") == (id.SubjectRegexp == "") {
		return nil, errors.New("give the certificate identity either exactly or as a regular expression")
	}
	if (id.Issuer == "") == (id.IssuerRegexp == "") {
		return nil, errors.New("give the certificate's OIDC issuer either exactly or as a regular expression")
	}
	ci, err := verify.NewShortCertificateIdentity(id.Issuer, id.IssuerRegexp, id.Subject, id.SubjectRegexp)
	if err != nil {
		return nil, err
	}
	return &Keyless{root: r, identity: ci, name: id.String()}, nil
}

func (k *Keyless) String() string { return k.name }

func (k *Keyless) cacheKey() string { return "keyless " + k.root.fingerprint + " " + k.name }

// verifySimple: signatures in the classic layout are checked with keys
// only.
func (k *Keyless) verifySimple([]byte, []byte) error {
	return errors.New("a signature in the classic layout, which is checked with keys only")
}

func (k *Keyless) verifyBundle(b verify.SignedEntity, artifact verify.ArtifactPolicyOption) (*verify.VerificationResult, error) {
	return k.root.verifier.Verify(b, verify.NewPolicy(artifact, verify.WithCertificateIdentity(k.identity)))
}
