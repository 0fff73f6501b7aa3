// Package strategy decides which tag an image should be updated to.
//
// It is pure: it takes the tags of a repository, the image's settings and
// what runs now, and returns a Result. Registry access is the caller's, passed
// in as a MetadataFunc for the strategies that need image metadata. Nothing
// here keeps state between calls but the table of policies Shared hands
// out, which are immutable, so the same inputs always give the same answer
// and a choice never flaps between update cycles.
//
// Use New to validate Settings once, then Policy.Choose for each cycle;
// Shared is New for settings that many images repeat, one Policy for all.
//
// # Filters
//
// Before any strategy, tags are filtered, in this order:
//   - empty strings are dropped;
//   - cosign/sigstore signature, attestation and SBOM tags
//     (sha256-<64 hex>.sig, .att, .sbom) are dropped, whatever allow-tags says;
//   - allow-tags "regexp:<re>" keeps only tags the expression matches
//     (unanchored, Go regexp syntax); "any" or "" keeps all;
//   - ignore-tags globs (filepath.Match syntax) drop matching tags. A lone
//     "*" pauses the image: Choose reports no update and asks for no metadata.
//
// An allow-tags expression that does not compile makes New fail instead of
// matching nothing, so the image is left alone and the user is told why.
//
// # Strategies
//
// semver (default): the highest semantic version satisfying the constraint, a
// github.com/Masterminds/semver/v3 range such as "~1.26", "^2", ">=1.2 <2" or
// "1.x". Tags are read as that library's NewVersion reads them: an optional
// "v" prefix, leading zeros allowed, and missing minor or patch parts taken as
// 0, so "1.2", "1.2.0" and "v1.2.0" are the same version. Tags that are not
// versions are ignored; note that a suffix such as "1.2.3-alpine" reads as a
// pre-release.
//   - Pre-releases are chosen only when the constraint admits them, which in
//     that library means a comparison in the range carries a pre-release part
//     (">=1.0.0-0"). With no constraint the highest release is chosen and
//     pre-releases are skipped.
//   - Tags of equal precedence (different spellings, or versions differing
//     only in build metadata) are ranked by plain byte order of the tag, and
//     the greatest wins: "v1.2.0" over "1.2.0" over "1.2", and
//     "1.2.3+build.2" over "1.2.3+build.1". Byte order is used for metadata
//     too, so "+build.9" ranks above "+build.10".
//   - If the running tag parses to the same version as the winner, it is kept
//     (no update), however it is spelled.
//   - A running tag outside the constraint is replaced by the highest tag
//     inside it, even if that is a lower version.
//
// newest-build (alias "latest"): the candidate whose image was created most
// recently. Metadata is requested once per distinct candidate; any failed
// request fails the choice. Tags with an unknown creation time, and tags whose
// known platforms include none of the requested ones, are skipped. Equal
// creation times go to the tag greatest in byte order. The result carries the
// winner's digest; it is an update when the tag differs from the running one,
// or when it is the same tag and both digests are known and differ.
//
// digest: follows the tag named by the constraint ("latest", "stable"). The
// tag must be listed and pass the filters. It is an update when its digest
// differs from the running digest; the result is then "tag@digest".
//
// alphabetical (alias "name"): the candidate last in byte order.
//
// # Platforms
//
// When platforms are requested, an image matches if any platform it offers
// has the same OS and architecture as a requested one, and the same variant
// if the request names one ("arm64" without a variant counts as "v8"). An
// image whose platforms are unknown (a single manifest) is not ruled out.
package strategy
