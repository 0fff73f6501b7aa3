package sigstoretest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net/http"
	"sync"
	"testing"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// CertKeypair is a sign.Keypair over the private key of a certificate a
// virtual Sigstore issued, as `cosign sign` gets one from Fulcio for a
// keyless signature; it remembers its last signature, which the virtual
// timestamp authority stamps.
type CertKeypair struct {
	priv *ecdsa.PrivateKey
	cert []byte
	mu   sync.Mutex
	last []byte
}

// NewCertKeypair has vs issue a short-lived certificate for identity from
// the OIDC issuer.
func NewCertKeypair(t testing.TB, vs *ca.VirtualSigstore, identity, issuer string) *CertKeypair {
	t.Helper()
	cert, priv, err := vs.GenerateLeafCert(identity, issuer)
	if err != nil {
		t.Fatal(err)
	}
	return &CertKeypair{priv: priv.(*ecdsa.PrivateKey), cert: cert.Raw}
}

func (k *CertKeypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}
func (k *CertKeypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}
func (k *CertKeypair) GetHint() []byte                { return nil }
func (k *CertKeypair) GetKeyAlgorithm() string        { return "ECDSA" }
func (k *CertKeypair) GetPublicKey() crypto.PublicKey { return k.priv.Public() }
func (k *CertKeypair) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.priv.Public())
	return string(b), err
}
func (k *CertKeypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, k.priv, sum[:])
	k.mu.Lock()
	k.last = sig
	k.mu.Unlock()
	return sig, sum[:], err
}

// GetCertificate is the virtual Fulcio: the certificate issued for the key.
func (k *CertKeypair) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return k.cert, nil
}

// tsa answers timestamp requests with the virtual timestamp authority's
// stamp of the keypair's last signature.
type tsa struct {
	vs *ca.VirtualSigstore
	kp *CertKeypair
}

func (s tsa) RoundTrip(*http.Request) (*http.Response, error) {
	s.kp.mu.Lock()
	sig := s.kp.last
	s.kp.mu.Unlock()
	resp, err := s.vs.TimestampResponse(sig)
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(resp)), Header: http.Header{}}, nil
}

// KeylessBundle signs statement as `cosign sign` does keyless: a
// short-lived certificate from the virtual Sigstore vs for identity from
// issuer, and, when stamper is not nil, a timestamp of the signature by
// its timestamp authority.
func KeylessBundle(t testing.TB, vs, stamper *ca.VirtualSigstore, identity, issuer string, statement []byte) []byte {
	t.Helper()
	kp := NewCertKeypair(t, vs, identity, issuer)
	opts := sign.BundleOptions{CertificateProvider: kp}
	if stamper != nil {
		opts.TimestampAuthorities = []*sign.TimestampAuthority{sign.NewTimestampAuthority(&sign.TimestampAuthorityOptions{
			URL: "https://tsa.invalid/api/v1/timestamp", Transport: tsa{vs: stamper, kp: kp},
		})}
	}
	return SignBundle(t, statement, kp, opts)
}

// TrustedRootJSON is the trusted root of vs as an operator would write it
// (trusted_root.json): its certificate authority and timestamp authority,
// and its transparency log when withLog.
func TrustedRootJSON(t testing.TB, vs *ca.VirtualSigstore, withLog bool) []byte {
	t.Helper()
	var logs map[string]*root.TransparencyLog
	if withLog {
		logs = vs.RekorLogs()
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), nil, vs.TimestampingAuthorities(), logs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
