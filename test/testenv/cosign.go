package testenv

import (
	"fmt"
	"strings"
)

// Where and how cosign stores signatures, as cosign writes them. The test
// servers state the format apart from the controller's signature/layout:
// they are a second account of it, so that a mistake there is not passed
// over by being copied here.
const (
	cosignSimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	cosignSignatureAnnotation    = "dev.cosignproject.cosign/signature"
	sigstoreBundleMediaType      = "application/vnd.dev.sigstore.bundle.v0.3+json"
	sigstorePredicateAnnotation  = "dev.sigstore.bundle.predicateType"
)

// cosignTag is the tag cosign stores the signatures of a sha256 digest under.
func cosignTag(digest string) (string, error) {
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hex) != 64 {
		return "", fmt.Errorf("digest %q is not a sha256 digest", digest)
	}
	return "sha256-" + hex + ".sig", nil
}
