// Package layout is how cosign stores signatures made with a key in a
// registry: a manifest tagged sha256-<hex>.sig in the signed image's
// repository, one layer per signature, each layer a simple signing
// payload with the signature in an annotation. It is what the verifier
// reads and what tests write.
package layout

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const (
	// SimpleSigningMediaType is the media type of a signature layer.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds a layer's signature, base64-encoded.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
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
