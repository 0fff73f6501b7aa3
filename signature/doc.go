// Package signature checks cosign signatures made with a key: whether an
// image digest has a signature, in its own repository, that verifies with
// a given public key and names that digest. It reads through the
// registry client, so signatures are fetched with the image's
// credentials, within the client's limits, and it remembers its verdicts.
// Keyless signatures (Fulcio certificates, Rekor entries) are not checked.
package signature
