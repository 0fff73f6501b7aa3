package imageref

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// DockerHub is the canonical registry host of Docker Hub. References to
// index.docker.io and registry-1.docker.io are normalised to it, so that one
// registries.conf entry and one credential match every spelling.
const DockerHub = "docker.io"

// maxRepositoryLength is the distribution grammar's limit on a repository
// path.
const maxRepositoryLength = 255

// DockerHubNamespace is where single-element Docker Hub names live.
const DockerHubNamespace = "library"

// CanonicalHost lower-cases a registry host and folds Docker Hub's aliases
// (index.docker.io, registry-1.docker.io) into DockerHub.
func CanonicalHost(host string) string {
	h := strings.ToLower(host)
	switch h {
	case "index.docker.io", "registry-1.docker.io":
		return DockerHub
	}
	return h
}

// ParsePrefix checks a registry prefix as registries.conf writes it,
// "host[/path]", and returns its canonical form: the host made canonical
// (CanonicalHost) and no trailing '/'.
func ParsePrefix(prefix string) (string, error) {
	if strings.Contains(prefix, "://") {
		return "", fmt.Errorf("prefix %q must not have a URL scheme; write the registry host, as in image names", prefix)
	}
	host, path, _ := strings.Cut(strings.TrimRight(prefix, "/"), "/")
	host = CanonicalHost(host)
	if err := checkHost(host); err != nil || !looksLikeHost(host) {
		return "", fmt.Errorf("prefix %q does not start with a registry host (a name with '.' or ':', or localhost)", prefix)
	}
	if path == "" {
		return host, nil
	}
	if err := checkRepositoryPath(path); err != nil {
		return "", fmt.Errorf("prefix %q: %v", prefix, err)
	}
	return host + "/" + path, nil
}

// ErrInvalid is matched (errors.Is) by every error Parse, WithTag,
// WithDigest and WithVersion return for bad input.
var ErrInvalid = errors.New("invalid image reference")

// Error describes an image reference that could not be parsed.
type Error struct {
	Input string // the reference as given
	Err   error  // why it was rejected
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid image reference %q: %v", e.Input, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// The grammar below follows the distribution reference grammar, which is
// stricter than go-containerregistry (it rejects "a//b", "-tag", "a..b").
// Registries enforce it, so a name outside it can never be found anyway.
var (
	pathComponentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	hostRE          = regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?$`)
)

// Reference is a parsed, normalised image reference. It is a value: the
// zero Reference is empty, and the methods that change it return a copy.
type Reference struct {
	registry   string
	repository string
	tag        string
	digest     string
	original   string
	// originalName is original without its tag and digest: the spelling
	// written back into manifests, so a user's "nginx" stays "nginx".
	originalName string
	// opts are the defaults r was parsed with; MatchesName applies them
	// to the names it compares r with.
	opts options
}

// Option adjusts how ParseReference treats names without a
// registry host.
type Option func(*options)

type options struct {
	defaultRegistry  string
	defaultNamespace string
}

// WithDefaultRegistry sets the registry for names that do not start with a
// registry host (Docker Hub otherwise). The value is a host, optionally
// followed by a path that is put in front of such names, as the prefix of
// the `default: true` entry of registries.conf may be.
func WithDefaultRegistry(host string) Option {
	return func(o *options) { o.defaultRegistry = host }
}

// OptionsKey is a string equal for two option lists exactly when they
// read names alike, so that what was read with one can be kept for the
// other.
func OptionsKey(opts ...Option) string {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o.defaultRegistry + "\x00" + o.defaultNamespace
}

// WithDefaultNamespace sets the namespace put in front of single-element
// names that carry no registry host ("nginx" becomes "<ns>/nginx"). Docker
// Hub's "library" is always applied for Docker Hub, with or without it.
func WithDefaultNamespace(ns string) Option {
	return func(o *options) { o.defaultNamespace = ns }
}

// Parse parses an image reference as users write it: "nginx",
// "org/app:1.2", "ghcr.io/org/app@sha256:...", "localhost:5000/app:v1@sha256:...".
// Docker Hub names are normalised ("nginx" is docker.io/library/nginx), the
// registry host is lower-cased, and a tag given together with a digest is
// kept. No default tag is filled in.
func Parse(s string, opts ...Option) (Reference, error) {
	o := options{defaultRegistry: DockerHub}
	for _, opt := range opts {
		opt(&o)
	}
	return parse(s, o)
}

func parse(s string, o options) (Reference, error) {
	fail := func(err error) (Reference, error) {
		return Reference{}, &Error{Input: s, Err: err}
	}

	if s == "" {
		return fail(errors.New("empty reference"))
	}
	if strings.Contains(s, "://") {
		return fail(errors.New("an image reference has no URL scheme"))
	}

	rest, dig, hasDigest := strings.Cut(s, "@")
	if hasDigest {
		if strings.Contains(dig, "@") {
			return fail(errors.New("more than one '@'"))
		}
		if dig == "" {
			return fail(errors.New("missing digest after '@'"))
		}
	}

	// A colon after the last slash starts the tag; one before it belongs to
	// the host's port.
	base, tag := rest, ""
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.Contains(rest[i+1:], "/") {
		base, tag = rest[:i], rest[i+1:]
		if tag == "" {
			return fail(errors.New("missing tag after ':'"))
		}
		if !ValidTag(tag) {
			return fail(fmt.Errorf("invalid tag %q: %s", tag, tagRule))
		}
	}

	host, path := splitHost(base)
	if host == "" {
		defHost, defPath := splitHost(o.defaultRegistry)
		if defHost == "" {
			defHost, defPath = o.defaultRegistry, ""
		}
		if err := checkHost(defHost); err != nil || !looksLikeHost(defHost) {
			return fail(fmt.Errorf("default registry %q is not a registry host (it needs a '.' or ':' or to be localhost)", o.defaultRegistry))
		}
		if o.defaultNamespace != "" && !strings.Contains(path, "/") && path != "" {
			path = o.defaultNamespace + "/" + path
		}
		if defPath != "" && path != "" {
			path = strings.TrimSuffix(defPath, "/") + "/" + path
		}
		host = defHost
	}
	host = CanonicalHost(host)
	if err := checkHost(host); err != nil {
		return fail(err)
	}
	if path == "" {
		return fail(errors.New("missing repository name"))
	}

	repo, err := name.NewRepository(host+"/"+path, name.WeakValidation)
	if err != nil {
		return fail(err)
	}
	repository := repo.RepositoryStr()
	// The length limit applies to the full path, "library/" included, or
	// the canonical form would not parse again.
	if len(repository) > maxRepositoryLength {
		return fail(fmt.Errorf("repository %q is longer than %d characters", repository, maxRepositoryLength))
	}
	if err := checkRepositoryPath(repository); err != nil {
		return fail(err)
	}

	if hasDigest {
		if _, err := name.NewDigest(host + "/" + repository + "@" + dig); err != nil {
			return fail(fmt.Errorf("invalid digest %q: %w", dig, err))
		}
	}

	return Reference{
		registry:     host,
		repository:   repository,
		tag:          tag,
		digest:       dig,
		original:     s,
		originalName: base,
		opts:         o,
	}, nil
}

// splitHost splits "host/path" when the first element is a registry host, by
// the rule every container tool uses: it is "localhost" or contains '.' or ':'.
// Otherwise the whole input is a path and host is empty.
func splitHost(s string) (host, path string) {
	first, rest, ok := strings.Cut(s, "/")
	if ok && looksLikeHost(first) {
		return first, rest
	}
	return "", s
}

func looksLikeHost(s string) bool {
	return s == "localhost" || strings.ContainsAny(s, ".:")
}

func checkHost(host string) error {
	if _, err := name.NewRegistry(host, name.WeakValidation); err != nil {
		return err
	}
	if !hostRE.MatchString(strings.ToLower(host)) {
		return fmt.Errorf("invalid registry host %q", host)
	}
	return nil
}

// CheckPath checks a repository path or namespace ("library/nginx",
// "team"): lower-case path elements separated by '/'.
func CheckPath(path string) error { return checkRepositoryPath(path) }

func checkRepositoryPath(repo string) error {
	for _, c := range strings.Split(repo, "/") {
		if !pathComponentRE.MatchString(c) {
			return fmt.Errorf("invalid repository %q: each path element is lower-case letters and digits, separated by '.', '_', '__' or dashes", repo)
		}
	}
	return nil
}

// Registry is the registry host, with port if any ("docker.io",
// "localhost:5000").
func (r Reference) Registry() string { return r.registry }

// Repository is the repository path within the registry ("library/nginx").
func (r Reference) Repository() string { return r.repository }

// Tag is the tag, or "" when the reference has none.
func (r Reference) Tag() string { return r.tag }

// Digest is the digest ("sha256:..."), or "" when the reference has none.
func (r Reference) Digest() string { return r.digest }

// Name is registry/repository, without tag or digest.
func (r Reference) Name() string {
	if r.registry == "" {
		return r.repository
	}
	return r.registry + "/" + r.repository
}

// String is the canonical form: Name, then ":tag" and "@digest" when set.
// Parsing it gives back an equal Reference.
func (r Reference) String() string {
	return r.Name() + r.Version().suffix()
}

// Original is the reference as it was written, before normalisation; for
// references made by WithTag, WithDigest or WithVersion it is the original
// name followed by the new version.
func (r Reference) Original() string { return r.original }

// OriginalName is the name as it was written, without tag or digest
// ("nginx" for "nginx:1.25"). Write-back keeps this spelling, so the
// manifests a user wrote keep matching what Kustomize and Helm render.
func (r Reference) OriginalName() string { return r.originalName }

// MatchesName reports whether s, a name or reference as written in a
// manifest, an override or a running Pod, names the same repository as r
// when read with the defaults r was read with. A value that does not parse
// matches only when spelt exactly as r's name was.
func (r Reference) MatchesName(s string) bool {
	name, _ := Split(s)
	if name == r.originalName {
		return true
	}
	// Spellings of one repository differ in the host and the namespaces
	// before its last path element, never in that: a name ending otherwise
	// is no match, without the cost of parsing it (a write-back compares
	// every entry of a file with every image).
	if lastElement(name) != lastElement(r.repository) {
		return false
	}
	o, err := parse(s, r.opts)
	return err == nil && r.SameName(o)
}

func lastElement(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// Version is the tag and digest of the reference.
func (r Reference) Version() Version { return Version{Tag: r.tag, Digest: r.digest} }

// SameName reports whether r and o name the same repository, whatever
// their versions and however they were spelt ("nginx",
// "docker.io/library/nginx" and "index.docker.io/library/nginx" do).
func (r Reference) SameName(o Reference) bool {
	return r.registry == o.registry && r.repository == o.repository
}

// IsZero reports whether r is the zero Reference.
func (r Reference) IsZero() bool { return r.registry == "" && r.repository == "" }

// Equal reports whether r and o name the same thing, however they were
// written.
func (r Reference) Equal(o Reference) bool {
	return r.registry == o.registry && r.repository == o.repository &&
		r.tag == o.tag && r.digest == o.digest
}

// WithTag returns the reference with its tag set to tag. Any digest is
// dropped, because it belonged to the old tag.
func (r Reference) WithTag(tag string) (Reference, error) {
	if r.registry == "" {
		return Reference{}, &Error{Input: ":" + tag, Err: errors.New("empty reference")}
	}
	if !ValidTag(tag) {
		return Reference{}, &Error{
			Input: r.Name() + ":" + tag,
			Err:   fmt.Errorf("invalid tag %q: %s", tag, tagRule),
		}
	}
	r.tag, r.digest = tag, ""
	r.original = r.originalName + ":" + tag
	return r, nil
}

// WithDigest returns the reference pinned to digest; the tag is kept, giving
// the "tag@digest" form.
func (r Reference) WithDigest(digest string) (Reference, error) {
	if r.registry == "" {
		return Reference{}, &Error{Input: "@" + digest, Err: errors.New("empty reference")}
	}
	if _, err := name.NewDigest(r.Name() + "@" + digest); err != nil || digest == "" {
		if err == nil {
			err = errors.New("empty digest")
		}
		return Reference{}, &Error{
			Input: r.Name() + "@" + digest,
			Err:   fmt.Errorf("invalid digest %q: %w", digest, err),
		}
	}
	r.digest = digest
	r.original = r.originalName + Version{Tag: r.tag, Digest: digest}.suffix()
	return r, nil
}

// WithoutVersion returns the reference with no tag and no digest: the
// repository alone.
func (r Reference) WithoutVersion() Reference {
	r.tag, r.digest, r.original = "", "", r.originalName
	return r
}

// WithVersion returns the reference with its tag and digest replaced by v;
// v needs a tag, a digest or both.
func (r Reference) WithVersion(v Version) (Reference, error) {
	if v.IsZero() {
		return Reference{}, &Error{Input: r.Name(), Err: errors.New("empty version")}
	}
	out := r
	if v.Tag != "" {
		var err error
		if out, err = r.WithTag(v.Tag); err != nil {
			return Reference{}, err
		}
	} else {
		out.tag, out.digest, out.original = "", "", r.originalName
	}
	if v.Digest == "" {
		return out, nil
	}
	return out.WithDigest(v.Digest)
}
