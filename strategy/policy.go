package strategy

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/platform"
)

// Settings are the image settings as the user wrote them (annotation values or
// command-line flags). New validates them.
type Settings struct {
	// Strategy is the raw update-strategy value; see ParseName.
	Strategy string
	// Constraint is a semver range for SemVer and the tag to follow for
	// Digest. Other strategies ignore it.
	Constraint string
	// AllowTags is "regexp:<expression>", "any" or "".
	AllowTags string
	// IgnoreTags holds filepath.Match globs. Entries may themselves be
	// comma-separated. A lone "*" pauses updates of the image.
	IgnoreTags []string
	// Platforms are the platforms an image must offer, for strategies that
	// read image metadata. Empty means the caller applies its default when
	// fetching metadata and no platform check happens here.
	Platforms []v1.Platform
	// ChartVersions: the candidates are Helm chart versions, not image
	// tags, whose grammar also admits '+' before build metadata (an OCI
	// tag writes it '_').
	ChartVersions bool
}

// Policy is a validated Settings. It is immutable and safe for concurrent use.
type Policy struct {
	name       Name
	constraint *semver.Constraints // SemVer; nil when no constraint was given
	rangeText  string              // the constraint as written, for messages
	rangePts   []uint64            // see rangeCheck
	follow     string              // Digest: the tag to follow
	allow      *regexp.Regexp      // nil keeps every tag
	group      int                 // allow's VersionGroup, 0 when it has none
	ignore     []glob
	paused     bool
	platforms  []v1.Platform
	charts     bool
}

// New parses and validates s. Every error is a *SettingError naming the field
// and value:
//   - an unknown strategy (wrapping ErrUnknownStrategy);
//   - an invalid semver constraint for SemVer (wrapping the semver error);
//   - a missing or malformed tag to follow for Digest (ErrNoFollowTag,
//     ErrInvalidTag);
//   - an allow-tags value of the wrong form (ErrAllowTagsSyntax) or an
//     expression that does not compile (wrapping the regexp error);
//   - an ignore-tags glob that filepath.Match rejects (filepath.ErrBadPattern).
//
// An allow-tags expression that does not compile would match no tag. Rather
// than silently choosing nothing, New fails: the caller reports the error and
// leaves the image as it is, which has the same effect on the image but tells
// the user why.
func New(s Settings) (*Policy, error) {
	name, err := ParseName(s.Strategy)
	if err != nil {
		return nil, err
	}
	p := &Policy{name: name, charts: s.ChartVersions}

	constraint := strings.TrimSpace(s.Constraint)
	switch name {
	case SemVer:
		if constraint != "" {
			c, err := semver.NewConstraint(constraint)
			if err != nil {
				return nil, &SettingError{Field: FieldConstraint, Value: s.Constraint, Err: err}
			}
			p.constraint = c
			p.rangeText = constraint
			p.rangePts = constraintPoints(constraint)
		}
	case Digest:
		if constraint == "" {
			return nil, &SettingError{Field: FieldConstraint, Value: s.Constraint, Err: ErrNoFollowTag}
		}
		if !imageref.ValidTag(constraint) {
			return nil, &SettingError{Field: FieldConstraint, Value: s.Constraint, Err: ErrInvalidTag}
		}
		p.follow = constraint
	}

	if p.allow, err = parseAllowTags(s.AllowTags); err != nil {
		return nil, err
	}
	if p.allow != nil {
		p.group = max(p.allow.SubexpIndex(VersionGroup), 0)
	}
	if p.ignore, p.paused, err = parseIgnoreTags(s.IgnoreTags); err != nil {
		return nil, err
	}
	if len(s.Platforms) > maxPlatforms {
		return nil, fmt.Errorf("%d platforms, more than the %d an image may ask for: %w", len(s.Platforms), maxPlatforms, ErrFilterTooLarge)
	}
	p.platforms = slices.Clone(s.Platforms)
	return p, nil
}

// VersionGroup names the group of an allow-tags expression that holds the
// part of a tag semver, alphabetical and numeric order by, as in
// regexp:^build-(?P<version>[0-9]+)$. The tag written is still the whole
// tag. Only a group of this name counts: an expression with other groups,
// as users write them today, keeps ordering whole tags.
const VersionGroup = "version"

// The filters are a tenant's input, matched against every tag of the image
// (up to 100,000) each cycle: their size is bounded here, and the
// matching stops at the image's deadline (checkEvery). The bounds are far
// above what filters are written for: a version pattern is some tens of
// characters, an ignore list a few entries.
const (
	// maxAllowTags bounds an allow-tags expression's text, and
	// maxAllowTagsProgram the program it compiles to, which is what a
	// match costs per character of a tag (a{1000} is short to write).
	maxAllowTags        = 1024
	maxAllowTagsProgram = 2048
	// maxIgnoreTags bounds the ignore-tags patterns of an image, and
	// maxIgnoreTag each one's length.
	maxIgnoreTags = 100
	maxIgnoreTag  = 256
	// maxPlatforms bounds the platforms an image asks for.
	maxPlatforms = 32
)

func parseAllowTags(raw string) (*regexp.Regexp, error) {
	v := strings.TrimSpace(raw)
	switch {
	// The keyword and the prefix are matched in any case, as upstream does
	// ("ANY", "RegExp:").
	case v == "" || strings.EqualFold(v, "any"):
		return nil, nil
	case len(v) >= len("regexp:") && strings.EqualFold(v[:len("regexp:")], "regexp:"):
		expr := v[len("regexp:"):]
		if len(expr) > maxAllowTags {
			return nil, &SettingError{Field: FieldAllowTags, Value: shortened(expr), Err: fmt.Errorf("%d characters, more than %d: %w", len(expr), maxAllowTags, ErrFilterTooLarge)}
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, &SettingError{Field: FieldAllowTags, Value: raw, Err: err}
		}
		if n := programSize(expr); n > maxAllowTagsProgram {
			return nil, &SettingError{Field: FieldAllowTags, Value: shortened(raw), Err: fmt.Errorf("it compiles to %d instructions, more than %d: %w", n, maxAllowTagsProgram, ErrFilterTooLarge)}
		}
		return re, nil
	default:
		return nil, &SettingError{Field: FieldAllowTags, Value: raw, Err: ErrAllowTagsSyntax}
	}
}

// shortened is a filter cut for an error message.
func shortened(v string) string {
	if len(v) <= 64 {
		return v
	}
	return strings.ToValidUTF8(v[:64], "") + "..."
}

// programSize is the number of instructions of expr's compiled program,
// as the regexp package builds it (an expression that compiled with
// regexp.Compile parses here too).
func programSize(expr string) int {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}

func parseIgnoreTags(raw []string) (globs []glob, paused bool, err error) {
	for _, entry := range raw {
		for g := range strings.SplitSeq(entry, ",") {
			g = strings.TrimSpace(g)
			if g == "" {
				continue
			}
			if len(globs) == maxIgnoreTags {
				return nil, false, &SettingError{Field: FieldIgnoreTags, Value: g, Err: fmt.Errorf("more than %d patterns: %w", maxIgnoreTags, ErrFilterTooLarge)}
			}
			if len(g) > maxIgnoreTag {
				return nil, false, &SettingError{Field: FieldIgnoreTags, Value: shortened(g), Err: fmt.Errorf("%d characters, more than %d: %w", len(g), maxIgnoreTag, ErrFilterTooLarge)}
			}
			if g == "*" {
				paused = true
			}
			cg, err := compileGlob(g)
			if err != nil {
				return nil, false, &SettingError{Field: FieldIgnoreTags, Value: g, Err: err}
			}
			globs = append(globs, cg)
		}
	}
	return globs, paused, nil
}

// Name returns the strategy.
func (p *Policy) Name() Name { return p.name }

// NeedsMetadata reports whether Choose calls the MetadataFunc.
func (p *Policy) NeedsMetadata() bool { return p.name == NewestBuild || p.name == Digest }

// Paused reports whether ignore-tags holds a lone "*", which stops updates.
func (p *Policy) Paused() bool { return p.paused }

// Platforms returns the requested platforms (a copy).
func (p *Policy) Platforms() []v1.Platform { return slices.Clone(p.platforms) }

// String describes the policy for logs.
func (p *Policy) String() string {
	var b strings.Builder
	b.WriteString(string(p.name))
	switch {
	case p.rangeText != "":
		fmt.Fprintf(&b, " constraint=%q", p.rangeText)
	case p.follow != "":
		fmt.Fprintf(&b, " tag=%q", p.follow)
	}
	if p.allow != nil {
		fmt.Fprintf(&b, " allow-tags=%q", "regexp:"+p.allow.String())
	}
	if len(p.ignore) > 0 {
		s := make([]string, len(p.ignore))
		for i, g := range p.ignore {
			s[i] = g.pattern
		}
		fmt.Fprintf(&b, " ignore-tags=%q", strings.Join(s, ","))
	}
	if len(p.platforms) > 0 {
		fmt.Fprintf(&b, " platforms=%q", strings.ReplaceAll(platform.Join(p.platforms), " ", ""))
	}
	return b.String()
}

// filterStats counts why tags were dropped, for "no update" reasons.
type filterStats struct {
	seen      int
	kept      int
	invalid   int
	signature int
	notAllow  int
	ignored   int
}

// keep applies the tag filters to one tag, counting drops.
func (p *Policy) keep(tag string, st *filterStats) bool {
	switch {
	case !imageref.ValidTag(tag) && !(p.charts && imageref.ValidTag(strings.ReplaceAll(tag, "+", "_"))):
		// A registry's answer is input like any other: a tag outside the
		// OCI grammar (a newline, a slash) must never reach a commit
		// message, a file or a patch.
		st.invalid++
		return false
	case isSignatureTag(tag):
		st.signature++
		return false
	case p.allow != nil && !p.allow.MatchString(tag):
		st.notAllow++
		return false
	case p.ignored(tag):
		st.ignored++
		return false
	}
	st.kept++
	return true
}

// sortKey is the part of tag the strategy orders by: the VersionGroup's
// match, or the whole tag when allow-tags has no such group. ok is false
// when the group took no part in the match.
func (p *Policy) sortKey(tag string) (key string, ok bool) {
	if p.group == 0 {
		return tag, true
	}
	m := p.allow.FindStringSubmatchIndex(tag)
	if m == nil || m[2*p.group] < 0 {
		return "", false
	}
	return tag[m[2*p.group]:m[2*p.group+1]], true
}

func (p *Policy) ignored(tag string) bool {
	for i := range p.ignore {
		if p.ignore[i].match(tag) {
			return true
		}
	}
	return false
}

// Candidates returns the tags that pass the filters, in input order. The
// filters drop, in this order: tags outside the OCI tag grammar
// ([A-Za-z0-9_][A-Za-z0-9._-]{0,127}), signature tags, tags not
// matching allow-tags, and tags matching ignore-tags. Duplicates are kept;
// every strategy is insensitive to them. It returns nil when the image is
// paused.
func (p *Policy) Candidates(tags []string) []string {
	if p.paused {
		return nil
	}
	var st filterStats
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if p.keep(t, &st) {
			out = append(out, t)
		}
	}
	return out
}

// isSignatureTag reports whether tag names a cosign/sigstore signature,
// attestation or SBOM: sha256-<64 lowercase hex>.sig|.att|.sbom. Those are
// attached to images by digest and are never deployable images themselves.
func isSignatureTag(tag string) bool {
	const prefix, hexLen = "sha256-", 64
	if len(tag) < len(prefix)+hexLen+4 || tag[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(prefix)+hexLen; i++ {
		c := tag[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	switch tag[len(prefix)+hexLen:] {
	case ".sig", ".att", ".sbom":
		return true
	}
	return false
}
