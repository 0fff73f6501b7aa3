package signature

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"k8s.io/utils/lru"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/signature/layout"
)

// Bounds on what is read of a signature manifest: a registry, or whoever
// may push to the repository, chooses it.
const (
	// maxPayloadSize bounds one payload blob; cosign's are a few hundred
	// bytes.
	maxPayloadSize = 64 << 10
	// maxSignatures bounds the signature layers checked for one digest;
	// each costs a blob request.
	maxSignatures = 32
	// cacheSize bounds the verdicts kept.
	cacheSize = 4096
)

// ErrNotVerified is wrapped by Verify's error when the image has no
// signature that verifies with the key: no signature, signatures by other
// keys, or signatures that are not for the image. Other errors (a registry
// that cannot be reached) say nothing about the signatures.
var ErrNotVerified = errors.New("no valid signature")

// Rejection is Verify's error for an image without a valid signature.
type Rejection struct {
	// Reason says what was found, for logs and events.
	Reason string
}

func (r *Rejection) Error() string        { return r.Reason }
func (r *Rejection) Is(target error) bool { return target == ErrNotVerified }

func reject(format string, args ...any) error {
	return &Rejection{Reason: fmt.Sprintf(format, args...)}
}

// Registry is what the signatures are read through.
type Registry interface {
	Manifest(ctx context.Context, ref imageref.Reference, creds credref.Ref) (registry.Manifest, error)
	Referrers(ctx context.Context, ref imageref.Reference, creds credref.Ref, digest string) (registry.Manifest, error)
	Blob(ctx context.Context, ref imageref.Reference, creds credref.Ref, digest string, maxBytes int64) ([]byte, error)
}

// Trust is what signatures must verify with: a *PublicKey, or a
// *Keyless identity under a trusted root.
type Trust interface {
	// cacheKey tells trusts apart in the verdicts kept.
	cacheKey() string
	// String names it in reasons.
	String() string
	// verifySimple checks a signature of the classic layout over its
	// payload.
	verifySimple(sig, payload []byte) error
	// verifyBundle checks a bundle, and that it signs artifact.
	verifyBundle(b verify.SignedEntity, artifact verify.ArtifactPolicyOption) (*verify.VerificationResult, error)
}

// Verifier checks cosign signatures: those made with a key, in either
// layout, and keyless sigstore bundles. It is safe for concurrent use.
//
// A signature that verifies is remembered by repository, digest and key
// (or identity): no request is made for it again. A verdict against an
// image is remembered with the digests of the referrers index and the
// signature manifest it came from, so that checking again costs those two
// requests, and a signature added since is seen.
type Verifier struct {
	reg      Registry
	verdicts *lru.Cache // verdictKey → error (nil: verified)
	calls    coalesce.Group[struct{}]
}

// NewVerifier reads signatures through reg.
func NewVerifier(reg Registry) *Verifier {
	return &Verifier{reg: reg, verdicts: lru.New(cacheSize)}
}

type verdictKey struct {
	repo, digest, trust, seen string
}

// Verify checks that digest, of the repository of image, has a cosign
// signature that t accepts, in the image's own repository, read with
// creds. With a key: either a sigstore bundle among the digest's referrers
// whose envelope verifies with the key and signs a statement of `cosign
// sign` whose subject is digest, or a layer of the manifest tagged
// sha256-<hex>.sig whose signature verifies over its payload with the key
// and whose payload names digest. Keyless: a sigstore bundle among the
// digest's referrers whose certificate chains to the trusted root at a
// time the bundle's proofs vouch for, names the identity, and whose
// envelope signs such a statement; nothing is fetched but from the
// registry. An error wrapping ErrNotVerified (a *Rejection) says why none
// does.
func (v *Verifier) Verify(ctx context.Context, image imageref.Reference, creds credref.Ref, digest string, t Trust) error {
	return v.verify(ctx, image, creds, digest, t)
}

// sources are what the registry holds of a digest's signatures.
type sources struct {
	referrers *v1.IndexManifest // nil: none could be read
	sig       *registry.Manifest
	notes     []string // what could not be read, for the reason
}

func (v *Verifier) verify(ctx context.Context, image imageref.Reference, creds credref.Ref, digest string, t Trust) error {
	repo := image.WithoutVersion()
	ok := verdictKey{repo: repo.Name(), digest: digest, trust: t.cacheKey()}
	if _, hit := v.verdicts.Get(ok); hit {
		return nil
	}
	tag, err := layout.Tag(digest)
	if err != nil {
		return reject("%v", err)
	}
	src, seen, err := v.read(ctx, repo, creds, digest, tag)
	if err != nil {
		return err
	}
	key := ok
	key.seen = seen
	if e, hit := v.verdicts.Get(key); hit {
		return e.(error)
	}
	_, err = v.calls.Do(ctx, fmt.Sprint(key), nil, func(ctx context.Context) (struct{}, error) {
		err := v.check(ctx, repo, creds, digest, tag, src, t)
		if err == nil {
			v.verdicts.Add(ok, nil)
		} else if errors.Is(err, ErrNotVerified) {
			v.verdicts.Add(key, err)
		}
		return struct{}{}, err
	})
	return err
}

// read fetches the digest's referrers index and its signature manifest,
// and says what was seen, by their digests.
func (v *Verifier) read(ctx context.Context, repo imageref.Reference, creds credref.Ref, digest, tag string) (sources, string, error) {
	var src sources
	idx, err := v.reg.Referrers(ctx, repo, creds, digest)
	var re *registry.Error
	switch {
	case errors.Is(err, registry.ErrTooLarge):
		src.notes = append(src.notes, "the referrers index is too large")
	case errors.As(err, &re) && refused(re.StatusCode()):
		// A registry that refuses the Referrers API (and has no index
		// under the tag schema) may still hold the classic layout.
		src.notes = append(src.notes, fmt.Sprintf("the registry refused the referrers (HTTP %d)", re.StatusCode()))
	case err != nil:
		return src, "", err
	default:
		im, perr := v1.ParseIndexManifest(bytes.NewReader(idx.Body))
		if perr != nil {
			src.notes = append(src.notes, "the referrers index is not an index")
		} else {
			src.referrers = im
		}
	}
	sigRef, err := repo.WithTag(tag)
	if err != nil {
		return src, "", reject("%v", err)
	}
	m, err := v.reg.Manifest(ctx, sigRef, creds)
	switch {
	case errors.Is(err, registry.ErrNotFound):
	case errors.Is(err, registry.ErrTooLarge):
		src.notes = append(src.notes, fmt.Sprintf("signature manifest %s is too large", tag))
	case err != nil:
		return src, "", err
	default:
		src.sig = &m
	}
	seen := idx.Digest + " " + m.Digest + " " + strings.Join(src.notes, ";")
	return src, seen, nil
}

// refused is an answer to a referrers request that means the registry
// does not serve it, rather than that it failed: a 4xx other than those
// about credentials or the rate.
func refused(status int) bool {
	return status >= 400 && status < 500 && status != 401 && status != 429
}

// search is one look for a signature that verifies: how many were
// checked, and why each failed.
type search struct {
	checked int
	reasons []string
}

// full says whether maxSignatures were checked, and notes it once.
func (s *search) full() bool {
	if s.checked < maxSignatures {
		return false
	}
	if s.checked == maxSignatures {
		s.checked++
		s.reasons = append(s.reasons, fmt.Sprintf("more than %d signatures; the rest were not checked", maxSignatures))
	}
	return true
}

// try checks one signature: true when it verifies; a rejection is noted
// under what, any other error returned.
func (s *search) try(what string, check func() error) (bool, error) {
	s.checked++
	err := check()
	if err == nil {
		return true, nil
	}
	var r *Rejection
	if !errors.As(err, &r) {
		return false, err
	}
	s.reasons = append(s.reasons, what+": "+r.Reason)
	return false, nil
}

// check looks for a signature that verifies: bundles among the referrers
// first, then layers of the signature manifest, maxSignatures in all.
func (v *Verifier) check(ctx context.Context, repo imageref.Reference, creds credref.Ref, digest, tag string, src sources, t Trust) error {
	s := &search{reasons: src.notes}
	var candidates []v1.Descriptor
	if src.referrers != nil {
		for _, d := range src.referrers.Manifests {
			if !layout.MayBeBundle(d.ArtifactType) {
				continue // other artifacts: SBOMs, other tools' attestations
			}
			if p, ok := d.Annotations[layout.PredicateTypeAnnotation]; ok && p != layout.SignPredicateType {
				continue // an attestation, not a signature
			}
			candidates = append(candidates, d)
		}
	}
	for _, d := range candidates {
		if s.full() {
			break
		}
		done, err := s.try("bundle "+d.Digest.String(), func() error { return v.checkBundle(ctx, repo, creds, digest, d, t) })
		if done || err != nil {
			return err
		}
	}
	if src.sig != nil {
		layers := 0
		if mf, err := v1.ParseManifest(bytes.NewReader(src.sig.Body)); err != nil {
			s.reasons = append(s.reasons, fmt.Sprintf("signature manifest %s is not an image manifest", tag))
		} else {
			for _, l := range mf.Layers {
				if l.MediaType != layout.SimpleSigningMediaType {
					continue
				}
				layers++
				if s.full() {
					break
				}
				done, err := s.try(fmt.Sprintf("signature %d", layers), func() error { return v.checkLayer(ctx, repo, creds, digest, l, t) })
				if done || err != nil {
					return err
				}
			}
			if layers == 0 {
				s.reasons = append(s.reasons, fmt.Sprintf("signature manifest %s holds no cosign signature", tag))
			}
		}
	}
	if s.checked == 0 {
		return reject("%s", strings.Join(append([]string{"no signature (no sigstore bundle among the referrers, no signature in tag " + tag + ")"}, s.reasons...), "; "))
	}
	return reject("no signature verifies with %s (%s)", t, strings.Join(dedupe(s.reasons), "; "))
}

func (v *Verifier) checkLayer(ctx context.Context, repo imageref.Reference, creds credref.Ref, digest string, l v1.Descriptor, t Trust) error {
	b64, ok := l.Annotations[layout.SignatureAnnotation]
	if !ok {
		return reject("no %s annotation", layout.SignatureAnnotation)
	}
	sig, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return reject("the signature is not base64")
	}
	if l.Size > maxPayloadSize {
		return reject("payload of %d bytes is larger than %d", l.Size, maxPayloadSize)
	}
	body, err := v.reg.Blob(ctx, repo, creds, l.Digest.String(), maxPayloadSize)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return reject("payload %s is missing", l.Digest)
	case errors.Is(err, registry.ErrTooLarge):
		return reject("payload is larger than %d bytes", maxPayloadSize)
	case err != nil:
		return err
	}
	if err := t.verifySimple(sig, body); err != nil {
		return reject("%v", err)
	}
	// Signed by the key: now what it says counts.
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(body, &p); err != nil {
		return reject("the payload is not a signing payload: %v", err)
	}
	if p.Critical.Type != payload.CosignSignatureType {
		return reject("the payload is of type %q, not %q", p.Critical.Type, payload.CosignSignatureType)
	}
	if got := p.Critical.Image.DockerManifestDigest; got != digest {
		return reject("the payload is for digest %s, not this image", got)
	}
	return nil
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, x := range s {
		// "signature 3: not signed by the key" repeated for each layer
		// says no more than once.
		rest := x
		if _, r, ok := strings.Cut(x, ": "); ok {
			rest = r
		}
		if seen[rest] {
			continue
		}
		seen[rest] = true
		out = append(out, x)
	}
	return out
}
