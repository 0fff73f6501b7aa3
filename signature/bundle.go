package signature

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/signature/layout"
)

// maxBundleSize bounds one bundle blob: cosign's are a few KiB (an
// envelope, a certificate, a log entry with its inclusion proof, a
// timestamp).
const maxBundleSize = 256 << 10

// checkBundle checks the bundle of the referrer d of digest: its
// manifest, the bundle it holds, the bundle's signature with t, that its
// statement's subject is digest, and that it is a statement of `cosign
// sign`.
func (v *Verifier) checkBundle(ctx context.Context, repo imageref.Reference, creds credref.Ref, digest string, d v1.Descriptor, t Trust) error {
	ref, err := repo.WithDigest(d.Digest.String())
	if err != nil {
		return reject("%v", err)
	}
	m, err := v.reg.Manifest(ctx, ref, creds)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return reject("its manifest is missing")
	case errors.Is(err, registry.ErrTooLarge):
		return reject("its manifest is too large")
	case err != nil:
		return err
	}
	mf, err := v1.ParseManifest(bytes.NewReader(m.Body))
	if err != nil {
		return reject("not an image manifest")
	}
	var layer *v1.Descriptor
	for i := range mf.Layers {
		if layout.IsBundle(string(mf.Layers[i].MediaType)) {
			layer = &mf.Layers[i]
			break
		}
	}
	if layer == nil {
		return reject("its manifest holds no bundle")
	}
	if layer.Size > maxBundleSize {
		return reject("bundle of %d bytes is larger than %d", layer.Size, maxBundleSize)
	}
	body, err := v.reg.Blob(ctx, repo, creds, layer.Digest.String(), maxBundleSize)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return reject("bundle %s is missing", layer.Digest)
	case errors.Is(err, registry.ErrTooLarge):
		return reject("bundle is larger than %d bytes", maxBundleSize)
	case err != nil:
		return err
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(body); err != nil {
		return reject("not a sigstore bundle: %s", bounded.Excerpt(err.Error(), bounded.MessageLength))
	}
	if b.GetDsseEnvelope() == nil {
		return reject("the bundle signs no statement (it holds no DSSE envelope)")
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return reject("%v", err)
	}
	raw, err := hex.DecodeString(h.Hex)
	if err != nil {
		return reject("%v", err)
	}
	res, err := t.verifyBundle(&b, verify.WithArtifactDigest(h.Algorithm, raw))
	if err != nil {
		return reject("does not verify: %s", bounded.Excerpt(err.Error(), bounded.MessageLength))
	}
	// Signed, and for this digest: now what it says counts. An
	// attestation (an SBOM, a provenance) signed with the same key is not
	// a signature of the image.
	if res.Statement == nil || res.Statement.GetPredicateType() != layout.SignPredicateType {
		return reject("the statement is of predicate type %q, not %q", bounded.Excerpt(res.Statement.GetPredicateType(), 100), layout.SignPredicateType)
	}
	return nil
}
