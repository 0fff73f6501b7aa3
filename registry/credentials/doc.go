// Package credentials turns credential references (pullsecret:, secret:,
// env:, ext:, ecr, gcp, azure) into a username and password for a
// registry. Each kind of reference is served by a Source; the Resolver
// picks the Source, keeps registry-level credentials for reuse and shares
// concurrent lookups. Errors name the reference and the registry, never a
// secret.
package credentials
