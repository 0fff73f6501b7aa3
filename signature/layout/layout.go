// Package layout is how cosign stores signatures in a registry, in the
// signed image's repository, in two layouts:
//
//   - the classic one, for signatures made with a key: a manifest tagged
//     sha256-<hex>.sig, one layer per signature, each layer a simple
//     signing payload with the signature in an annotation;
//   - the sigstore bundle, which current cosign writes: an artifact
//     manifest whose subject is the image, found through the Referrers
//     API (or the index tagged sha256-<hex> on a registry without it),
//     its one layer a bundle holding a DSSE envelope over an in-toto
//     statement whose subject is the image digest.
//
// It is what the verifier reads and what tests write.
package layout

import (
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const (
	// SimpleSigningMediaType is the media type of a signature layer.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds a layer's signature, base64-encoded.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"

	// BundleMediaType is the artifact type of a bundle's manifest and the
	// media type of its layer: a sigstore bundle, version 0.3.
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// PredicateTypeAnnotation, on a bundle's manifest, repeats the
	// predicate type of the statement it signs, so that signatures can be
	// told from attestations without reading them.
	PredicateTypeAnnotation = "dev.sigstore.bundle.predicateType"
	// SignPredicateType is the predicate type of the statement `cosign
	// sign` signs: it says the image is signed, nothing more.
	SignPredicateType = "https://sigstore.dev/cosign/sign/v1"
)

// Tag is the tag the signatures of digest are stored under:
// sha256-<hex>.sig.
func Tag(digest string) (string, error) {
	h, err := v1.NewHash(digest)
	if err != nil || h.Algorithm != "sha256" {
		return "", fmt.Errorf("digest %q is not a sha256 digest", digest)
	}
	return "sha256-" + h.Hex + ".sig", nil
}

// IsBundle reports whether a media type or artifact type names a sigstore
// bundle, of any version.
func IsBundle(mediaType string) bool {
	return strings.HasPrefix(mediaType, "application/vnd.dev.sigstore.bundle")
}

// emptyMediaType is the media type of the empty config of an artifact
// manifest.
const emptyMediaType = "application/vnd.oci.empty.v1+json"

// MayBeBundle reports whether a referrer of artifactType may hold a
// bundle: a bundle's type, or none but the empty config's, which some
// registries report in place of the manifest's own artifactType.
func MayBeBundle(artifactType string) bool {
	return IsBundle(artifactType) || artifactType == "" || artifactType == emptyMediaType
}
