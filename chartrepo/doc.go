// Package chartrepo reads the versions of Helm charts in HTTP(S) Helm
// repositories: which repository an Application may read, with which of
// Argo CD's credentials (repoaccess's rules, as for git), and each
// repository's index.yaml, streamed within a bound and kept with its ETag
// so that a cycle whose repository did not change costs one conditional
// request. Charts in OCI registries are listed as image tags, by the
// registry client.
package chartrepo
