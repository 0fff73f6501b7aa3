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
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"k8s.io/utils/lru"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
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
	Manifest(ctx context.Context, ref imageref.Reference, creds credentials.Ref) (registry.Manifest, error)
	Blob(ctx context.Context, ref imageref.Reference, creds credentials.Ref, digest string, maxBytes int64) ([]byte, error)
}

// Verifier checks cosign signatures made with a key. It is safe for
// concurrent use.
//
// A signature that verifies is remembered by repository, digest and key
// fingerprint: no request is made for it again. A verdict against an image
// is remembered with the digest of the signature manifest it came from, so
// that checking again costs one manifest request, and a signature added
// since is seen.
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
	repo, digest, key, manifest string
}

// Verify checks that digest, of the repository of image, has a cosign
// signature made with key: a layer of the signature manifest whose
// signature verifies over its payload with key, and whose payload names
// digest. Signatures are read from the image's own repository with creds.
// An error wrapping ErrNotVerified (a *Rejection) says why none does.
func (v *Verifier) Verify(ctx context.Context, image imageref.Reference, creds credentials.Ref, digest string, key *PublicKey) error {
	repo := image.WithoutVersion()
	ok := verdictKey{repo: repo.Name(), digest: digest, key: key.Fingerprint()}
	if _, hit := v.verdicts.Get(ok); hit {
		return nil
	}
	tag, err := layout.Tag(digest)
	if err != nil {
		return reject("%v", err)
	}
	sigRef, err := repo.WithTag(tag)
	if err != nil {
		return reject("%v", err)
	}
	m, err := v.reg.Manifest(ctx, sigRef, creds)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return reject("no signature (the repository has no tag %s)", tag)
	case errors.Is(err, registry.ErrTooLarge):
		return reject("signature manifest %s is too large", tag)
	case err != nil:
		return err
	}
	seen := ok
	seen.manifest = m.Digest
	if e, hit := v.verdicts.Get(seen); hit {
		return e.(error)
	}
	_, err = v.calls.Do(ctx, fmt.Sprint(seen), nil, func(ctx context.Context) (struct{}, error) {
		err := v.check(ctx, repo, creds, digest, tag, m, key)
		if err == nil {
			v.verdicts.Add(ok, nil)
		} else if errors.Is(err, ErrNotVerified) {
			v.verdicts.Add(seen, err)
		}
		return struct{}{}, err
	})
	return err
}

// check looks for a signature layer of m that verifies.
func (v *Verifier) check(ctx context.Context, repo imageref.Reference, creds credentials.Ref, digest, tag string, m registry.Manifest, key *PublicKey) error {
	mf, err := v1.ParseManifest(bytes.NewReader(m.Body))
	if err != nil {
		return reject("signature manifest %s is not an image manifest: %v", tag, err)
	}
	var reasons []string
	checked := 0
	for i, l := range mf.Layers {
		if l.MediaType != layout.SimpleSigningMediaType {
			continue
		}
		if checked == maxSignatures {
			reasons = append(reasons, fmt.Sprintf("more than %d signatures; the rest were not checked", maxSignatures))
			break
		}
		checked++
		err := v.checkLayer(ctx, repo, creds, digest, l, key)
		if err == nil {
			return nil
		}
		var r *Rejection
		if !errors.As(err, &r) {
			return err
		}
		reasons = append(reasons, fmt.Sprintf("signature %d: %s", i+1, r.Reason))
	}
	if checked == 0 {
		return reject("signature manifest %s holds no cosign signature", tag)
	}
	return reject("no signature verifies with key %s (%s)", key.Fingerprint(), strings.Join(dedupe(reasons), "; "))
}

func (v *Verifier) checkLayer(ctx context.Context, repo imageref.Reference, creds credentials.Ref, digest string, l v1.Descriptor, key *PublicKey) error {
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
	if err := key.verify(sig, body); err != nil {
		return reject("not signed by the key")
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
		_, rest, _ := strings.Cut(x, ": ")
		if seen[rest] {
			continue
		}
		seen[rest] = true
		out = append(out, x)
	}
	return out
}
