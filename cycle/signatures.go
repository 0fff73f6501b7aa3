package cycle

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// Signatures checks cosign signatures; see signature.Verifier.
type Signatures interface {
	Verify(ctx context.Context, image imageref.Reference, creds credref.Ref, digest string, t signature.Trust) error
}

// WithSignatures checks the signatures of images that name a key
// (verify-signature), reading the keys from Secrets with secrets, and
// keyless signatures against root, the operator's; nil refuses keyless
// verification. Without it such images are reported as errors and never
// updated.
func WithSignatures(v Signatures, secrets credentials.SecretGetter, root *signature.TrustedRoot) Option {
	return func(u *Updater) { u.signatures, u.keySecrets, u.trustedRoot = v, secrets, root }
}

// MaxSignatureSkips is how many new versions without a valid signature
// ChooseVerified passes over for one image before it gives up: each costs
// registry requests.
const MaxSignatureSkips = 25

// SignatureCheck is what ChooseVerified needs to check a version.
type SignatureCheck struct {
	// Digest tells the digest a tag points at.
	Digest func(ctx context.Context, tag string) (string, error)
	// Verify checks the signatures of a digest; an error wrapping
	// signature.ErrNotVerified rejects it, any other is a failure to
	// check.
	Verify func(ctx context.Context, digest string) error
}

// Skipped is a version passed over for its signature.
type Skipped struct {
	Tag    string `json:"tag"`
	Digest string `json:"digest,omitempty"`
	Reason string `json:"reason"`
}

func (s Skipped) String() string { return s.Tag + " (" + s.Reason + ")" }

// ChooseVerified chooses as policy does, among the versions with a valid
// signature: while the strategy's choice is a new version whose digest
// check rejects, that tag is set aside and the strategy asked again, so
// the best verified version wins. The version running now is never
// checked, and is kept when no better one verifies: a rejected new digest
// of the running tag (digest, newest-build) ends the search. Each check
// asks the registry: a signature may be a referrer, which no tag lists.
//
// An error that is not a rejection (the registry failed) fails the
// choice: an older version must not win because a newer one could not be
// checked.
//
// The choice goes through c as Choose's does: a pinned choice is checked
// at the digest it is pinned to, and a version too young is no candidate.
func ChooseVerified(ctx context.Context, policy *strategy.Policy, tags []string, current imageref.Version, meta strategy.MetadataFunc, check SignatureCheck, c Choice) (strategy.Result, []Skipped, *Waiting, error) {
	var skipped []Skipped
	var waiting *Waiting
	remaining := tags
	for {
		res, w, err := Choose(ctx, policy, remaining, current, meta, c)
		if waiting == nil {
			waiting = w
		}
		if err != nil || !res.Update {
			if len(skipped) > 0 && err == nil {
				res.Reason = skippedReason(skipped) + "; then " + res.Reason
			}
			return res, skipped, waiting, err
		}
		digest := res.Digest
		if digest == "" {
			if digest, err = check.Digest(ctx, res.Tag); err != nil {
				return strategy.Result{}, skipped, waiting, err
			}
		}
		err = check.Verify(ctx, digest)
		if err == nil {
			return res, skipped, waiting, nil
		}
		var r *signature.Rejection
		if !errors.As(err, &r) {
			return strategy.Result{}, skipped, waiting, fmt.Errorf("checking the signature of %s (%s): %w", res.Tag, digest, err)
		}
		skipped = append(skipped, Skipped{Tag: res.Tag, Digest: digest, Reason: r.Reason})
		if res.Tag == current.Tag || len(skipped) >= MaxSignatureSkips {
			out := strategy.Result{Seen: res.Seen, Considered: res.Considered, Tag: current.Tag, Reason: skippedReason(skipped)}
			if len(skipped) >= MaxSignatureSkips {
				out.Reason += fmt.Sprintf("; gave up after %d", MaxSignatureSkips)
			}
			return out, skipped, waiting, nil
		}
		remaining = without(remaining, res.Tag)
	}
}

func skippedReason(s []Skipped) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = x.String()
	}
	return fmt.Sprintf("%d new version(s) skipped for their signatures: %s", len(s), strings.Join(parts, "; "))
}

func without(tags []string, tag string) []string {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if t != tag {
			out = append(out, t)
		}
	}
	return out
}

type loadedKey struct {
	key signature.Trust
	err error
}

// keyID is a public key's Secret field, by which loadKeys reads it once
// however many images, under whatever annotations or fields, name it; or
// a keyless identity.
type keyID struct {
	namespace, name, field string
	keyless                settings.KeylessIdentity
}

func keyOf(k settings.SignatureKey) keyID {
	if k.Keyless != nil {
		return keyID{keyless: *k.Keyless}
	}
	return keyID{namespace: k.Namespace, name: k.Name, field: k.Field}
}

// loadKeys reads, once per cycle, each public key the jobs name, and
// makes each keyless identity's verifier. A key that cannot be read fails
// only the images that name it.
func (u *Updater) loadKeys(ctx context.Context, jobs []*job) map[keyID]loadedKey {
	keys := map[keyID]loadedKey{}
	if u.signatures == nil {
		return keys // chooseOne fails the images that name a key
	}
	for _, j := range jobs {
		if j.sigKey.IsZero() {
			continue
		}
		id := keyOf(j.sigKey)
		if _, done := keys[id]; done {
			continue
		}
		keys[id] = u.loadKey(ctx, j.sigKey, id)
	}
	return keys
}

func (u *Updater) loadKey(ctx context.Context, k settings.SignatureKey, id keyID) loadedKey {
	if k.Keyless != nil {
		if u.trustedRoot == nil {
			return loadedKey{err: configError{fmt.Errorf("%s asks for keyless signatures, and the controller was given no Sigstore trusted root to check them against (--sigstore-trusted-root)", k.Origin)}}
		}
		id := k.Keyless
		kl, err := u.trustedRoot.Keyless(signature.Identity{Subject: id.Subject, SubjectRegexp: id.SubjectRegexp, Issuer: id.Issuer, IssuerRegexp: id.IssuerRegexp})
		if err != nil {
			return loadedKey{err: configError{fmt.Errorf("%s: %w", k.Origin, err)}}
		}
		return loadedKey{key: kl}
	}
	kctx, cancel := u.withImageTimeout(ctx)
	defer cancel()
	key, err := signature.LoadKey(kctx, u.keySecrets, id.namespace, id.name, id.field)
	if errors.Is(err, signature.ErrBadKey) || errors.Is(err, credentials.ErrSecretNotFound) {
		err = configError{fmt.Errorf("signature key: %w", err)}
	}
	if err != nil {
		return loadedKey{err: err}
	}
	return loadedKey{key: key}
}

// reportSkipped tells of the new versions an image passed over for their
// signatures: in the log each cycle, as an event when first seen.
func (u *Updater) reportSkipped(j *job, skipped []Skipped) {
	for _, s := range skipped {
		u.logger.Warn("version skipped: no valid signature", "application", j.app.Key(), "image", j.spec.Key(),
			"tag", s.Tag, "digest", s.Digest, "reason", s.Reason)
	}
	u.events.signaturesSkipped(j.app, j.spec.Key(), skipped)
}
