package settings

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/image-updater/argocd-image-updater/window"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/platform"
)

// AnnotationPrefix starts every annotation the updater reads.
const AnnotationPrefix = "argocd-image-updater.argoproj.io/"

// Annotation keys, without the prefix.
const (
	KeyImageList       = "image-list"
	KeyWriteBackMethod = "write-back-method"
	KeyWriteBackTarget = "write-back-target"
	KeyGitBranch       = "git-branch"
	KeyGitRepository   = "git-repository"
	KeyGitPullRequest  = "git-pull-request"
	// KeyGitPullRequestLabels is "label,label...": the labels of the
	// request git-pull-request opens (pullRequest.labels of the resource).
	KeyGitPullRequestLabels = "git-pull-request-labels"

	// Per-image keys: "<alias>.<key>", falling back to "<key>".
	KeyUpdateStrategy  = "update-strategy"
	KeyAllowTags       = "allow-tags"
	KeyIgnoreTags      = "ignore-tags"
	KeyForceUpdate     = "force-update"
	KeyPullSecret      = "pull-secret"
	KeyPlatforms       = "platforms"
	KeyVerifySignature = "verify-signature"
	// With verify-signature: keyless, the signer's identity, as cosign
	// verify's flags of the same names.
	KeyCertificateIdentity         = "certificate-identity"
	KeyCertificateIdentityRegexp   = "certificate-identity-regexp"
	KeyCertificateOIDCIssuer       = "certificate-oidc-issuer"
	KeyCertificateOIDCIssuerRegexp = "certificate-oidc-issuer-regexp"
	// KeyHealthGate is "true", "false" or a window ("5m"): follow each
	// version written for the image, and write back one that breaks the
	// Application (see ParseHealthGate).
	KeyHealthGate = "health-gate"
	// KeyMinReleaseAge is an age ("7d", "36h"): a version is chosen only
	// once the updater has known it that long.
	KeyMinReleaseAge = "minimum-release-age"
	// KeyPromoteFrom names the stage the image is promoted from:
	// "<application>" of the same namespace; KeyPromoteSoak how long the
	// stage must have run the version.
	KeyPromoteFrom = "promote-from"
	KeyPromoteSoak = "promote-soak"
	// KeyPinDigest is never, if-not-present or always: write the chosen
	// tag with the digest it points at (see DigestPin).
	KeyPinDigest = "pin-digest"

	// Per-image only: "<alias>.<key>".
	KeyHelmImageName = "helm.image-name"
	KeyHelmImageTag  = "helm.image-tag"
	KeyHelmImageSpec = "helm.image-spec"
	// KeyHelmImageDigest names the Helm parameter receiving the digest of
	// a pinned version (pin-digest); helm.image-tag then gets the tag.
	KeyHelmImageDigest    = "helm.image-digest"
	KeyKustomizeImageName = "kustomize.image-name"
	// The environment variables of a config management plugin receiving
	// the image (manifestTargets.plugin of an ImageUpdater).
	KeyPluginImageName = "plugin.image-name"
	KeyPluginImageTag  = "plugin.image-tag"
	KeyPluginImage     = "plugin.image-spec"

	// Written by the controller, not read as settings: the health gate's
	// state of an annotated Application (JSON), and what a person sets
	// to clear its skipped versions ("all", or "<version>" or
	// "<alias>:<version>" entries separated by commas).
	KeyHealthGateState = "health-gate-state"
	KeyHealthGateClear = "health-gate-clear"
	// Written by the controller for Argo CD Notifications (see package
	// notice): the last write, failure, revert and wait of the
	// Application, as JSON.
	KeyLastUpdate  = "last-update"
	KeyLastFailure = "last-failure"
	KeyLastRevert  = "last-revert"
	KeyLastWait    = "last-wait"

	// KeyUpdateWindows, of the Application: windows separated by ";",
	// "<allow|deny> <5 cron fields> <duration> [<time zone>]" (see
	// window.Parse), when new versions may be written.
	KeyUpdateWindows = "update-windows"
	// KeyUseSyncWindows, of the Application: "true" also applies its
	// AppProject's sync windows that match it.
	KeyUseSyncWindows = "use-sync-windows"

	// KeyRollbackHold, of the Application: "false" writes again a version
	// someone else rolled back; by default it is held (skipped).
	KeyRollbackHold = "rollback-hold"

	// KeyTagMatch is the deprecated name of allow-tags, per image only;
	// existing Applications still carry it.
	KeyTagMatch = "tag-match"
)

var (
	imageKeys = []string{KeyUpdateStrategy, KeyAllowTags, KeyIgnoreTags, KeyForceUpdate, KeyPullSecret, KeyPlatforms, KeyVerifySignature,
		KeyCertificateIdentity, KeyCertificateIdentityRegexp, KeyCertificateOIDCIssuer, KeyCertificateOIDCIssuerRegexp, KeyHealthGate, KeyPinDigest, KeyMinReleaseAge, KeyPromoteFrom, KeyPromoteSoak}
	imageOnlyKeys = []string{KeyHelmImageName, KeyHelmImageTag, KeyHelmImageSpec, KeyHelmImageDigest, KeyKustomizeImageName, KeyPluginImageName, KeyPluginImageTag, KeyPluginImage, KeyTagMatch}
	appKeys       = []string{KeyImageList, KeyWriteBackMethod, KeyWriteBackTarget, KeyGitBranch, KeyGitRepository, KeyGitPullRequest, KeyGitPullRequestLabels, KeyHealthGateState, KeyHealthGateClear, KeyLastUpdate, KeyLastFailure, KeyLastRevert, KeyLastWait, KeyRollbackHold, KeyUpdateWindows, KeyUseSyncWindows}
)

// Default Helm parameter names, as Helm charts commonly name them.
const (
	DefaultHelmImageName = "image.name"
	DefaultHelmImageTag  = "image.tag"
)

// Settings are an Application's settings: what the updater understands of
// its annotations (ParseAnnotations), or of the ImageUpdater that selected
// it (ParseImageUpdater).
type Settings struct {
	Images []ImageSpec
	// Charts are the Helm charts whose version is kept up to date
	// (chart-list); a chart with a non-warning problem is not in Charts.
	Charts    []ChartSpec
	WriteBack WriteBack
	// Problems lists what could not be understood. Images with a
	// non-warning problem are not in Images.
	Problems []Problem
	// FromAnnotations is true when an ImageUpdater selected the
	// Application and reads its annotations (useAnnotations).
	FromAnnotations bool
	// RollbackHoldOff writes again a version a person rolled back: the
	// ImageUpdater's rollbackHold false. The Application's rollback-hold
	// annotation "false" does the same, whatever configures it, and is
	// read where the hold is decided.
	RollbackHoldOff bool
	// Windows say when the Application's new versions may be written;
	// none: always. WindowsOrigin is where they are written; "" when
	// nowhere. With WindowsInvalid (windows written and not understood)
	// nothing is written.
	Windows        window.Set
	WindowsOrigin  Origin
	WindowsInvalid bool
	// UseSyncWindows also applies the AppProject's sync windows that
	// match the Application.
	UseSyncWindows bool
}

// Managed reports whether an Application carries the image-list, the
// chart-list or the git-tag-list annotation.
func Managed(annotations map[string]string) bool {
	for _, key := range ListAnnotations() {
		if _, ok := annotations[key]; ok {
			return true
		}
	}
	return false
}

// ListAnnotations are the annotations that name what an Application has
// updated: one of them makes it managed (see Managed). Constants, so
// that the informers' filter builds no string.
func ListAnnotations() [3]string {
	return [3]string{AnnotationPrefix + KeyImageList, AnnotationPrefix + KeyChartList, AnnotationPrefix + KeyGitTagList}
}

// ParseAnnotations reads the updater's annotations; image names are read
// with opts (registries.conf's default registry and namespace). It never
// fails as a whole: a bad entry is a Problem that disables only what it
// concerns.
func ParseAnnotations(annotations map[string]string, opts ...imageref.Option) Settings {
	var a Settings
	get := func(key string) (string, bool) {
		v, ok := annotations[AnnotationPrefix+key]
		return strings.TrimSpace(v), ok
	}

	a.WriteBack = parseWriteBack(get, &a.Problems)
	if v, ok := get(KeyUpdateWindows); ok {
		a.readWindows(v, AnnotationOrigin(KeyUpdateWindows))
	}
	if v, ok := get(KeyUseSyncWindows); ok {
		switch strings.ToLower(v) {
		case "true":
			a.UseSyncWindows = true
		case "false", "":
		default:
			// Fail closed: whoever asked for the project's windows must
			// not get writes outside them.
			a.Problems = append(a.Problems, Problem{Origin: AnnotationOrigin(KeyUseSyncWindows), Message: fmt.Sprintf("value %.40q is not true or false; nothing is written", v)})
			a.WindowsInvalid = true
		}
	}

	list, listed := get(KeyImageList)
	if p, ok := tooManyImages(countEntries(list), AnnotationOrigin(KeyImageList)); !ok {
		a.Problems = append(a.Problems, p)
		return a
	}
	entries := strings.Split(list, ",")
	named := slices.ContainsFunc(entries, func(e string) bool { return strings.TrimSpace(e) != "" })
	_, charts := get(KeyChartList)
	_, gitTags := get(KeyGitTagList)
	if listed && !named && !charts && !gitTags {
		// As v1.3.0 reports it: an Application marked for updates whose
		// list names nothing is a mistake, not a silent no-op.
		a.Problems = append(a.Problems, Problem{Origin: AnnotationOrigin(KeyImageList), Message: "is empty: it names no image to update"})
	}
	seenAlias := map[string]bool{}
	for i, entry := range entries {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			if named {
				a.Problems = append(a.Problems, Problem{
					Origin:  AnnotationOrigin(KeyImageList),
					Message: fmt.Sprintf("entry %d is empty", i+1), Warning: true,
				})
			}
			continue
		}
		spec, err := parseImageEntry(entry, opts)
		if err != nil {
			a.Problems = append(a.Problems, Problem{Image: entry, Origin: AnnotationOrigin(KeyImageList), Message: err.Error()})
			continue
		}
		if spec.Alias != "" {
			if seenAlias[spec.Alias] {
				a.Problems = append(a.Problems, Problem{
					Image: spec.Alias, Origin: AnnotationOrigin(KeyImageList),
					Message: fmt.Sprintf("alias %q is used twice; aliases must be unique within an Application", spec.Alias),
				})
				continue
			}
			seenAlias[spec.Alias] = true
		}
		if ok := readImageSettings(&spec, get, opts, &a.Problems); ok {
			a.Images = append(a.Images, spec)
		}
	}
	imageAliases := len(seenAlias)
	a.Charts = parseChartList(get, seenAlias, &a.Problems)
	if gitTags {
		a.Charts = append(a.Charts, parseGitTagList(get, seenAlias, &a.Problems)...)
	}
	chartAliases := map[string]bool{}
	if len(seenAlias) > imageAliases {
		for _, c := range a.Charts {
			if c.Alias != "" {
				chartAliases[c.Alias] = true
			}
		}
	}
	a.Problems = append(a.Problems, unknownKeys(annotations, seenAlias, chartAliases)...)
	return a
}

// MaxImages bounds the images of one Application (image-list entries, or
// an applicationRef's images). Each image costs a registry listing, a
// choice and an edit of the write-back target every cycle, and an
// Application's annotations hold thousands of entries: without a bound
// one Application could make a cycle outlast --stall-timeout.
const MaxImages = 200

// tooManyImages is the problem of an Application with more than
// MaxImages images; none of them is then updated, so that the cost is
// known before any entry is read.
func tooManyImages(n int, at Origin) (Problem, bool) {
	if n <= MaxImages {
		return Problem{}, true
	}
	return Problem{Origin: at, Message: fmt.Sprintf("%d images, more than the %d one Application may have; none of its images is updated (split the images among several Applications or ImageUpdater refs)", n, MaxImages)}, false
}

// countEntries counts the non-empty entries of a comma-separated list.
func countEntries(list string) int {
	n := 0
	for e := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(e) != "" {
			n++
		}
	}
	return n
}

// parseImageEntry splits "[<alias>=]<image>[:<constraint>]" (see
// ParseImage).
func parseImageEntry(entry string, opts []imageref.Option) (ImageSpec, error) {
	var spec ImageSpec
	if alias, rest, ok := strings.Cut(entry, "="); ok {
		// An empty alias ("=nginx:1.21") is no alias, as v1.3.0 reads it.
		spec.Alias = strings.TrimSpace(alias)
		entry = strings.TrimSpace(rest)
		if strings.ContainsAny(spec.Alias, " .:@") {
			return spec, fmt.Errorf("alias %q must not contain spaces, '.', ':' or '@'", spec.Alias)
		}
	}
	if entry == "" {
		return spec, fmt.Errorf("alias %q names no image", spec.Alias)
	}
	img, err := ParseImage(entry, opts...)
	img.Alias = spec.Alias
	return img, err
}

// readKeylessIdentity reads the certificate-* keys into a keyless
// signature key. Each pair (the identity exactly or as a regular
// expression; the issuer likewise) is read as one setting: from the
// image's keys when it sets either, else from the Application's. Set
// while verify-signature is not set at all they are refused rather than
// ignored: whoever wrote them wants signed versions only.
func readKeylessIdentity(spec *ImageSpec, verifyKey string, get func(string) (string, bool), fail func(key, format string, args ...any)) {
	var id KeylessIdentity
	var named string // a certificate-* key that is set
	pair := func(exact, re string, toExact, toRe *string) {
		prefixes := []string{""}
		if spec.Alias != "" {
			prefixes = []string{aliasKey(spec.Alias) + ".", ""}
		}
		for _, p := range prefixes {
			e, okE := get(p + exact)
			r, okR := get(p + re)
			if !okE && !okR {
				continue
			}
			*toExact, *toRe = strings.TrimSpace(e), strings.TrimSpace(r)
			if named == "" {
				named = p + exact
				if !okE {
					named = p + re
				}
			}
			return
		}
	}
	pair(KeyCertificateIdentity, KeyCertificateIdentityRegexp, &id.Subject, &id.SubjectRegexp)
	pair(KeyCertificateOIDCIssuer, KeyCertificateOIDCIssuerRegexp, &id.Issuer, &id.IssuerRegexp)
	k := &spec.SignatureKey
	switch {
	case k.Keyless != nil:
		if err := id.Check(); err != nil {
			fail(verifyKey, "%v", err)
			return
		}
		*k.Keyless = id
	case named != "" && k.Origin == "":
		fail(named, "names a keyless signer, and %s is not set: set it to keyless to check keyless signatures", KeyVerifySignature)
	}
}

// aliasKey is how an alias appears in annotation keys: '/' is written '_'.
func aliasKey(alias string) string { return strings.ReplaceAll(alias, "/", "_") }

func readImageSettings(spec *ImageSpec, get func(string) (string, bool), opts []imageref.Option, problems *[]Problem) bool {
	// value reads "<alias>.<key>", falling back to the Application-wide
	// "<key>", and tells which it read.
	value := func(key string) (string, string) {
		if spec.Alias != "" {
			k := aliasKey(spec.Alias) + "." + key
			if v, ok := get(k); ok {
				return v, k
			}
		}
		v, _ := get(key)
		return v, key
	}
	ok := true
	fail := func(key, format string, args ...any) {
		*problems = append(*problems, Problem{Image: spec.Key(), Origin: AnnotationOrigin(key), Message: fmt.Sprintf(format, args...)})
		ok = false
	}

	var raw policySettings
	var key string
	raw.Strategy, key = value(KeyUpdateStrategy)
	raw.strategyAt = AnnotationOrigin(key)
	raw.constraintAt = AnnotationOrigin(KeyImageList)
	raw.AllowTags, key = value(KeyAllowTags)
	raw.allowTagsAt = AnnotationOrigin(key)
	if spec.Alias != "" {
		readTagMatch(spec, &raw, key, get, problems)
	}
	if v, key := value(KeyIgnoreTags); v != "" {
		raw.ignoreTagsAt = AnnotationOrigin(key)
		for _, g := range strings.Split(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				raw.IgnoreTags = append(raw.IgnoreTags, g)
			}
		}
	}
	if v, key := value(KeyForceUpdate); v != "" {
		switch strings.ToLower(v) {
		case "true":
			spec.ForceUpdate = true
		case "false":
		default:
			fail(key, "value %q is not true or false", v)
		}
	}
	if v, key := value(KeyPullSecret); v != "" {
		if p, good := readPullSecret(spec, v, AnnotationOrigin(key)); !good {
			*problems = append(*problems, p)
			ok = false
		}
	}
	if v, key := value(KeyPlatforms); v != "" {
		ps, err := platform.Parse(v)
		if err != nil {
			fail(key, "%v", err)
		}
		spec.Platforms = ps
	}
	if p, good := compilePolicy(spec, raw); !good {
		*problems = append(*problems, p)
		ok = false
	}

	v, key := value(KeyVerifySignature)
	if v != "" {
		k, err := ParseSignatureKey(v)
		if err != nil {
			fail(key, "%v", err)
		}
		k.Origin = AnnotationOrigin(key)
		spec.SignatureKey = k
	}
	readKeylessIdentity(spec, key, get, fail)
	if v, key := value(KeyHealthGate); v != "" {
		// A gate asked for and not understood stops the image, as a
		// signature key does: it must not be updated without it.
		d, err := ParseHealthGate(v)
		if err != nil {
			fail(key, "%v", err)
		}
		spec.HealthGate, spec.HealthGateOrigin = d, AnnotationOrigin(key)
	}
	if v, key := value(KeyMinReleaseAge); v != "" {
		// An age asked for and not understood stops the image: it must
		// not take a version younger than its owner wants.
		d, err := ParseReleaseAge(v)
		if err != nil {
			fail(key, "%v", err)
		}
		spec.MinReleaseAge, spec.MinReleaseAgeOrigin = d, AnnotationOrigin(key)
	}
	if v, key := value(KeyPromoteFrom); v != "" {
		soak, _ := value(KeyPromoteSoak)
		st, err := ParseStage(v, soak)
		if err != nil {
			fail(key, "%v", err)
		}
		st.Origin = AnnotationOrigin(key)
		spec.PromoteFrom = st
	}
	if v, key := value(KeyPinDigest); v != "" {
		// A pin asked for and not understood stops the image: it must
		// not be written by tag alone.
		p, err := ParseDigestPin(v)
		if err != nil {
			fail(key, "%v", err)
		}
		spec.PinDigest, spec.PinDigestOrigin = p, AnnotationOrigin(key)
	}

	if spec.Alias != "" {
		prefix := aliasKey(spec.Alias) + "."
		spec.HelmImageName, _ = get(prefix + KeyHelmImageName)
		spec.HelmImageTag, _ = get(prefix + KeyHelmImageTag)
		spec.HelmImageSpec, _ = get(prefix + KeyHelmImageSpec)
		spec.HelmImageDigest, _ = get(prefix + KeyHelmImageDigest)
		spec.PluginEnvName, _ = get(prefix + KeyPluginImageName)
		spec.PluginEnvTag, _ = get(prefix + KeyPluginImageTag)
		spec.PluginEnvSpec, _ = get(prefix + KeyPluginImage)
		if name, _ := get(prefix + KeyKustomizeImageName); name != "" {
			ref, err := imageref.Parse(name, opts...)
			if err != nil {
				fail(prefix+KeyKustomizeImageName, "%v", err)
			}
			spec.KustomizeImageName = ref
		}
	}
	return ok
}

// readTagMatch applies "<alias>.tag-match", the old name of allow-tags with
// the same values: without it a filter users still rely on would silently
// stop filtering. allow-tags, per image or Application-wide, wins.
func readTagMatch(spec *ImageSpec, raw *policySettings, allowKey string, get func(string) (string, bool), problems *[]Problem) {
	key := aliasKey(spec.Alias) + "." + KeyTagMatch
	v, ok := get(key)
	if !ok {
		return
	}
	p := Problem{Image: spec.Key(), Origin: AnnotationOrigin(key), Warning: true}
	if raw.AllowTags != "" {
		p.Message = fmt.Sprintf("ignored: %s%s is set and takes precedence; remove %s", AnnotationPrefix, allowKey, key)
	} else {
		raw.AllowTags, raw.allowTagsAt = v, AnnotationOrigin(key)
		p.Message = fmt.Sprintf("deprecated: read as allow-tags; rename it to %s.%s", aliasKey(spec.Alias), KeyAllowTags)
	}
	*problems = append(*problems, p)
}

func parseWriteBack(get func(string) (string, bool), problems *[]Problem) WriteBack {
	wb := WriteBack{MethodOrigin: AnnotationOrigin(KeyWriteBackMethod)}
	method, _ := get(KeyWriteBackMethod)
	var err error
	if wb.Method, wb.GitSecret, err = ParseWriteBackMethod(method); err != nil {
		*problems = append(*problems, Problem{Origin: AnnotationOrigin(KeyWriteBackMethod), Message: err.Error()})
	}
	target, _ := get(KeyWriteBackTarget)
	wb.GitBranch, _ = get(KeyGitBranch)
	wb.GitRepository, _ = get(KeyGitRepository)
	if v, _ := get(KeyGitPullRequest); v != "" && wb.Method == WriteBackGit {
		kind, err := ParseForge(v)
		switch {
		case err != nil:
			*problems = append(*problems, Problem{Origin: AnnotationOrigin(KeyGitPullRequest), Message: err.Error()})
		case !strings.Contains(wb.GitBranch, ":"):
			*problems = append(*problems, Problem{
				Origin:  AnnotationOrigin(KeyGitPullRequest),
				Message: fmt.Sprintf("a pull request needs a branch of its own: set %s%s to <base>:<branch> or :<branch>", AnnotationPrefix, KeyGitBranch),
			})
		default:
			wb.PullRequest = kind
		}
	}
	if v, _ := get(KeyGitPullRequestLabels); v != "" {
		labels, err := ParsePullRequestLabels(v)
		switch {
		case err != nil:
			*problems = append(*problems, Problem{Origin: AnnotationOrigin(KeyGitPullRequestLabels), Message: err.Error()})
		case wb.PullRequest != "" && !wb.PullRequest.Labels():
			*problems = append(*problems, Problem{Origin: AnnotationOrigin(KeyGitPullRequestLabels), Warning: true,
				Message: fmt.Sprintf("ignored: %s pull requests have no labels", wb.PullRequest)})
		case wb.PullRequest != "":
			wb.PullRequestLabels = labels
		case wb.Method == WriteBackGit:
			*problems = append(*problems, Problem{Origin: AnnotationOrigin(KeyGitPullRequestLabels), Warning: true,
				Message: "has no effect without " + AnnotationPrefix + KeyGitPullRequest})
		}
	}
	if wb.Method == WriteBackArgoCD {
		for _, k := range []string{KeyWriteBackTarget, KeyGitBranch, KeyGitRepository, KeyGitPullRequest, KeyGitPullRequestLabels} {
			if v, ok := get(k); ok && v != "" {
				*problems = append(*problems, Problem{
					Origin:  AnnotationOrigin(k),
					Message: "has no effect with write-back-method argocd (it applies to git write-back only)",
					Warning: true,
				})
			}
		}
	}
	if wb.Target, err = ParseWriteBackTarget(target); err != nil {
		*problems = append(*problems, Problem{Origin: AnnotationOrigin(KeyWriteBackTarget), Message: err.Error()})
	}
	return wb
}

// unknownKeys warns about annotations with our prefix that nothing reads,
// which are usually typos ("app.update-stratgey") or aliases missing from
// image-list.
func unknownKeys(annotations map[string]string, aliases, chartAliases map[string]bool) []Problem {
	known := map[string]bool{}
	for _, k := range slices.Concat(appKeys, imageKeys, chartAppKeys) {
		known[k] = true
	}
	var problems []Problem
	for full := range annotations {
		key, ok := strings.CutPrefix(full, AnnotationPrefix)
		if !ok || known[key] {
			continue
		}
		if alias, rest, ok := strings.Cut(key, "."); ok && (slices.Contains(imageKeys, rest) || slices.Contains(imageOnlyKeys, rest)) {
			if aliasKnown(chartAliases, alias) && !slices.Contains(chartKeys, rest) {
				problems = append(problems, Problem{
					Origin: Origin("annotation " + full), Warning: true,
					Message: fmt.Sprintf("%q is the alias of a chart, which reads only %s", alias, strings.Join(chartKeys, ", ")),
				})
				continue
			}
			if !aliasKnown(aliases, alias) {
				problems = append(problems, Problem{
					Origin: Origin("annotation " + full), Warning: true,
					Message: fmt.Sprintf("no image in image-list has the alias %q", alias),
				})
			}
			continue
		}
		msg := "unknown annotation"
		if key == KeyTagMatch {
			msg += ": tag-match exists only per image (<alias>.tag-match) and is deprecated; use allow-tags"
		}
		problems = append(problems, Problem{Origin: Origin("annotation " + full), Warning: true, Message: msg})
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Origin < problems[j].Origin })
	return problems
}

func aliasKnown(aliases map[string]bool, key string) bool {
	for a := range aliases {
		if aliasKey(a) == key {
			return true
		}
	}
	return false
}

// readWindows sets the Application's windows from v, written at at; a
// value not understood writes nothing, rather than at any time.
func (a *Settings) readWindows(v string, at Origin) {
	set, err := window.Parse(v)
	if err != nil {
		a.Problems = append(a.Problems, Problem{Origin: at, Message: err.Error() + "; nothing is written"})
		a.WindowsInvalid = true
		return
	}
	a.Windows, a.WindowsOrigin = set, at
}
