// Package signature checks cosign signatures: whether an image digest has
// a signature, in its own repository, that verifies with a given public
// key (or, keyless, whose certificate names a given identity under a
// trusted root) and signs that digest. It reads both layouts cosign
// writes (see layout): sigstore bundles among the digest's referrers, and
// the classic sha256-<hex>.sig tag. It reads through the registry client,
// so signatures are fetched with the image's credentials, within the
// client's limits, and it remembers its verdicts. Verification is
// offline: nothing is asked of a transparency log, a certificate or
// timestamp authority.
package signature
