package settings

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// ImageSpec is one image of an Application with its settings: an entry of the
// image-list annotation, or of an ImageUpdater's images. Every value is
// parsed here, once, when the settings are read: the image names, the
// update policy and the credential reference. The cycle only uses them.
type ImageSpec struct {
	// Alias names the image in per-image annotation keys and messages; may
	// be empty.
	Alias string
	// Image is the image without the constraint ("nginx",
	// "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app"); its
	// OriginalName is the spelling written back.
	Image imageref.Reference
	// Constraint is what followed the image's last ':' (a semver range, or
	// the tag the digest strategy follows).
	Constraint string

	// Policy is the update strategy with its constraint, tag filters and
	// the image's own platforms, compiled once and shared by every image
	// with the same ones (strategy.Shared); the cycle applies its default
	// platforms when Platforms is empty. Never nil in Settings.Images.
	Policy      *strategy.Policy
	ForceUpdate bool
	// PullSecret is the image's own credential reference (pull-secret,
	// pullSecret); zero when unset.
	PullSecret credref.Ref
	// PullSecretOrigin is where PullSecret is written; "" when it is unset.
	PullSecretOrigin Origin
	// Platforms are those the image must be built for; empty means the
	// controller's default.
	Platforms []v1.Platform
	// SignatureKey, when set, restricts the candidates to versions with a
	// cosign signature made with this key.
	SignatureKey SignatureKey
	// HealthGate is how long a version written for the image is followed
	// once Argo CD deployed it, to be written back if it breaks the
	// Application; 0 when the gate is off.
	HealthGate time.Duration
	// HealthGateOrigin is where HealthGate is set; "" when it is unset.
	HealthGateOrigin Origin

	// MinReleaseAge is how old a version must be to be chosen, by when
	// the updater first saw it (see package firstseen); 0 for none.
	MinReleaseAge time.Duration
	// MinReleaseAgeOrigin is where MinReleaseAge is set; "" when it is
	// unset, and the controller's default applies.
	MinReleaseAgeOrigin Origin

	// PromoteFrom is the Application whose verified version of the same
	// image this image takes, and only that one (promotion from a stage);
	// zero when unset. It is always in the image's own Application's
	// namespace (see ParseStage).
	PromoteFrom Stage

	// PinDigest says whether the version written carries the digest of
	// its tag; PinNever when unset. The digest strategy pins always,
	// whatever it says.
	PinDigest DigestPin
	// PinDigestOrigin is where PinDigest is set; "" when it is unset.
	PinDigestOrigin Origin

	HelmImageName string // Helm parameter receiving the image name (see HelmParameters)
	HelmImageTag  string // Helm parameter receiving the tag (see HelmParameters)
	HelmImageSpec string // one Helm parameter receiving name:tag; overrides the two above
	// HelmImageDigest is the Helm parameter receiving a pinned version's
	// digest; the tag parameter then receives the tag alone. Unused when
	// HelmImageSpec is set.
	HelmImageDigest string
	// KustomizeImageName is the image name a Kustomize override replaces,
	// when it is not Image (see KustomizeName).
	KustomizeImageName imageref.Reference
	// The plugin environment variables receiving the image name, its
	// version, or both as name:version (which overrides the other two).
	// Set, they make the image's target a config management plugin's
	// spec.source.plugin.env (see PluginTarget).
	PluginEnvName, PluginEnvTag, PluginEnvSpec string
}

// PluginTarget tells whether the image is written into a config
// management plugin's environment.
func (s ImageSpec) PluginTarget() bool {
	return s.PluginEnvName != "" || s.PluginEnvTag != "" || s.PluginEnvSpec != ""
}

// Paused tells whether ignore-tags holds a lone "*", which stops the
// image's updates.
func (s ImageSpec) Paused() bool { return s.Policy != nil && s.Policy.Paused() }

// policySettings are the raw values an image's Policy is compiled from,
// each with where it is written.
type policySettings struct {
	strategy.Settings
	strategyAt, constraintAt, allowTagsAt, ignoreTagsAt Origin
}

// compilePolicy sets spec's Policy from raw, or returns the problem that
// names the bad value where it is written.
func compilePolicy(spec *ImageSpec, raw policySettings) (Problem, bool) {
	raw.Constraint, raw.Platforms = spec.Constraint, spec.Platforms
	p, err := strategy.Shared(raw.Settings)
	if err == nil {
		spec.Policy = p
		return Problem{}, true
	}
	return Problem{Image: spec.Key(), Origin: raw.origin(err), Message: err.Error()}, false
}

// origin is where the setting a policy's error names is written.
func (raw policySettings) origin(err error) Origin {
	var se *strategy.SettingError
	if errors.As(err, &se) {
		switch se.Field {
		case strategy.FieldConstraint:
			return raw.constraintAt
		case strategy.FieldAllowTags:
			return raw.allowTagsAt
		case strategy.FieldIgnoreTags:
			return raw.ignoreTagsAt
		}
	}
	return raw.strategyAt
}

// readPullSecret sets spec's credential reference from the value at at.
func readPullSecret(spec *ImageSpec, v string, at Origin) (Problem, bool) {
	ref, err := credref.ParseRef(v)
	if err != nil {
		return Problem{Image: spec.Key(), Origin: at, Message: err.Error()}, false
	}
	spec.PullSecret, spec.PullSecretOrigin = ref, at
	return Problem{}, true
}

// Key is how messages name the image: its alias, or the image as written.
func (s ImageSpec) Key() string {
	if s.Alias != "" {
		return s.Alias
	}
	return s.Image.OriginalName()
}

// HelmParameters names the Helm parameters receiving the image name and
// its version: helm.image-name and helm.image-tag, each defaulting on its
// own to the names most charts use. Unused when HelmImageSpec is set.
func (s ImageSpec) HelmParameters() (name, tag string) {
	name, tag = s.HelmImageName, s.HelmImageTag
	if name == "" {
		name = DefaultHelmImageName
	}
	if tag == "" {
		tag = DefaultHelmImageTag
	}
	return name, tag
}

// KustomizeName is the image name whose Kustomize override the image's
// version goes into: kustomize.image-name, else the image itself.
func (s ImageSpec) KustomizeName() imageref.Reference {
	if !s.KustomizeImageName.IsZero() {
		return s.KustomizeImageName
	}
	return s.Image
}

// RenamesInKustomize tells whether the image's Kustomize override gives
// another image name a new one (kustomize.image-name differs).
func (s ImageSpec) RenamesInKustomize() bool {
	return !s.KustomizeImageName.IsZero() && !s.KustomizeImageName.SameName(s.Image)
}

// KustomizeEntry finds the image's entry among an Application's kustomize
// images ("[<orig>=]<name>[:<tag>]"), as Argo CD Image Updater matches
// them: the entry whose original name is the image's Kustomize name in
// any spelling; else a plain entry naming the image's repository path on
// another registry (the image has moved there, and the entry is replaced).
// byName tells which of the two was found.
func (s ImageSpec) KustomizeEntry(entries []string) (i int, byName, ok bool) {
	k := s.KustomizeName()
	for i, e := range entries {
		if orig, _, _ := SplitKustomizeImage(e); k.MatchesName(orig) {
			return i, true, true
		}
	}
	for i, e := range entries {
		orig, name, _ := SplitKustomizeImage(e)
		if orig != name || strings.Contains(e, "=") {
			continue
		}
		if ref, err := imageref.Parse(name); err == nil && ref.Repository() == s.Image.Repository() {
			return i, false, true
		}
	}
	return -1, false, false
}

// KustomizeEntryStale tells whether an entry found by KustomizeEntry must
// be rewritten whatever its version: it does not yet name the image under
// the name it overrides (a new registry through kustomize.image-name, or
// the image moved to another registry), which Argo CD Image Updater
// writes at once rather than at the next new tag.
func (s ImageSpec) KustomizeEntryStale(entry string) bool {
	orig, name, _ := SplitKustomizeImage(entry)
	if !s.Image.MatchesName(name) {
		return true
	}
	return s.RenamesInKustomize() && orig == name
}

// ParseImage reads "<image>[:<constraint>]", an image-list entry without
// its alias, as an ImageUpdater's imageName is written too. The constraint
// is what follows the first ':' of the last path element, so a registry
// port ("localhost:5000/app") is not mistaken for one.
func ParseImage(entry string, opts ...imageref.Option) (ImageSpec, error) {
	var spec ImageSpec
	name := entry
	if at := strings.LastIndex(name, "@"); at >= 0 {
		// A digest pins the image; what runs is looked up by name anyway.
		name = name[:at]
	}
	lastSlash := strings.LastIndex(name, "/")
	if colon := strings.Index(name[lastSlash+1:], ":"); colon >= 0 {
		colon += lastSlash + 1
		spec.Constraint = strings.TrimSpace(name[colon+1:])
		name = name[:colon]
	}
	if name == "" || strings.ContainsAny(name, " \t") {
		return spec, fmt.Errorf("%q is not an image name", entry)
	}
	ref, err := imageref.Parse(name, opts...)
	if err != nil {
		return spec, err
	}
	spec.Image = ref
	return spec, nil
}

// SignatureKey names what the signatures of an image's new versions must
// verify with: a public key, a field of a Secret holding it in PEM (as
// cosign.pub), or, keyless, the identity of the signing certificate under
// the trusted root the operator configures.
type SignatureKey struct {
	// Namespace is the Secret's; "" means the Application's own.
	Namespace string
	Name      string
	Field     string
	// Keyless, when set instead of a Secret, is the identity.
	Keyless *KeylessIdentity
	// Origin is where the key is named.
	Origin Origin
}

// KeylessIdentity is who must have signed, keyless: the subject of the
// signing certificate (an e-mail address, a URI such as a CI workflow's)
// and the OIDC issuer that vouched for it, each given exactly or as a
// regular expression (Go syntax, unanchored, as cosign's
// --certificate-identity-regexp), as `cosign verify` takes them.
type KeylessIdentity struct {
	Subject, SubjectRegexp string
	Issuer, IssuerRegexp   string
}

// MaxIdentityRegexp bounds an identity's regular expressions; the
// subjects they match are a certificate's, some tens of characters.
const MaxIdentityRegexp = 1024

// Check says what is wrong with id, naming the setting in the words of
// the annotations (the resource's fields are named alike).
func (id KeylessIdentity) Check() error {
	if (id.Subject == "") == (id.SubjectRegexp == "") {
		return errors.New("keyless verification needs the signer's certificate identity, either exactly (certificate-identity) or as a regular expression (certificate-identity-regexp), not both")
	}
	if (id.Issuer == "") == (id.IssuerRegexp == "") {
		return errors.New("keyless verification needs the certificate's OIDC issuer, either exactly (certificate-oidc-issuer) or as a regular expression (certificate-oidc-issuer-regexp), not both")
	}
	for _, re := range []struct{ name, expr string }{{"certificate-identity-regexp", id.SubjectRegexp}, {"certificate-oidc-issuer-regexp", id.IssuerRegexp}} {
		if re.expr == "" {
			continue
		}
		if len(re.expr) > MaxIdentityRegexp {
			return fmt.Errorf("%s: %d characters, more than %d", re.name, len(re.expr), MaxIdentityRegexp)
		}
		if _, err := regexp.Compile(re.expr); err != nil {
			return fmt.Errorf("%s: %v", re.name, err)
		}
	}
	return nil
}

// IsZero reports whether no key is set: versions need no signature.
func (k SignatureKey) IsZero() bool { return k.Name == "" && k.Keyless == nil }

// String is the key as written in the annotation.
func (k SignatureKey) String() string {
	switch {
	case k.Keyless != nil:
		return Keyless
	case k.Namespace == "":
		return "secret:" + k.Name + "#" + k.Field
	}
	return "secret:" + k.Namespace + "/" + k.Name + "#" + k.Field
}

// Keyless is the verify-signature value that asks for keyless signatures;
// the certificate-* keys name the identity.
const Keyless = "keyless"

// ParseSignatureKey reads a verify-signature value:
// secret:[<namespace>/]<name>#<field>, or keyless (whose identity the
// caller sets). "false" or "none" set no key, so that one image can opt
// out of an Application-wide setting.
func ParseSignatureKey(s string) (SignatureKey, error) {
	switch s {
	case "false", "none":
		return SignatureKey{}, nil
	case Keyless:
		return SignatureKey{Keyless: &KeylessIdentity{}}, nil
	}
	rest, ok := strings.CutPrefix(s, "secret:")
	secret, field, hasField := strings.Cut(rest, "#")
	ns, name, hasNS := strings.Cut(secret, "/")
	if !hasNS {
		ns, name = "", secret
	}
	if !ok || !hasField || field == "" || name == "" || (hasNS && ns == "") || strings.Contains(name, "/") {
		return SignatureKey{}, fmt.Errorf("%q must name the public key as secret:[<namespace>/]<name>#<field>, or be keyless or none", s)
	}
	return SignatureKey{Namespace: ns, Name: name, Field: field}, nil
}

// SplitKustomizeImage splits a kustomize images entry
// "[<orig>=]<name>[:<tag>][@<digest>]" into the original name, the new name
// and the version.
func SplitKustomizeImage(entry string) (orig, name string, version imageref.Version) {
	if o, rest, ok := strings.Cut(entry, "="); ok {
		name, version = imageref.Split(rest)
		return o, name, version
	}
	name, version = imageref.Split(entry)
	return name, name, version
}

// Bounds of a health gate's window.
const (
	// DefaultHealthGateWindow is the window of a gate turned on without
	// one ("true", or a healthGate block without window).
	DefaultHealthGateWindow = 5 * time.Minute
	MinHealthGateWindow     = time.Second
	MaxHealthGateWindow     = 24 * time.Hour
)

// ParseHealthGate reads a health-gate value: "true" (the default window),
// "false" or "" (off), or the window as a duration from 1s to 24h ("5m",
// "90s").
func ParseHealthGate(s string) (time.Duration, error) {
	switch strings.ToLower(s) {
	case "", "false":
		return 0, nil
	case "true":
		return DefaultHealthGateWindow, nil
	}
	return parseWindow(s)
}

// parseWindow reads a health gate's window.
func parseWindow(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < MinHealthGateWindow || d > MaxHealthGateWindow {
		return 0, fmt.Errorf("%.40q is not a window from %s to %s (\"5m\", \"90s\"), nor true or false", s, MinHealthGateWindow, MaxHealthGateWindow)
	}
	return d, nil
}
