package registry

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

// dockerHubNamespace is where single-element Docker Hub names live.
const dockerHubNamespace = "library"

// isDockerHub reports whether host is one of the names Docker Hub goes by.
func isDockerHub(host string) bool {
	switch host {
	case DockerHub, "index.docker.io", "registry-1.docker.io":
		return true
	}
	return false
}

// ErrInvalidReference is matched (errors.Is) by every error ParseReference,
// WithTag and WithDigest return for bad input.
var ErrInvalidReference = errors.New("invalid image reference")

// ReferenceError describes an image reference that could not be parsed.
type ReferenceError struct {
	Input string // the reference as given
	Err   error  // why it was rejected
}

func (e *ReferenceError) Error() string {
	return fmt.Sprintf("invalid image reference %q: %v", e.Input, e.Err)
}

func (e *ReferenceError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalidReference) true.
func (e *ReferenceError) Is(target error) bool { return target == ErrInvalidReference }

// The grammar below follows the distribution reference grammar, which is
// stricter than go-containerregistry (it rejects "a//b", "-tag", "a..b").
// Registries enforce it, so a name outside it can never be found anyway.
var (
	pathComponentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	tagRE           = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
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
}

// ReferenceOption adjusts how ParseReference treats names without a
// registry host.
type ReferenceOption func(*referenceOptions)

type referenceOptions struct {
	defaultRegistry  string
	defaultNamespace string
}

// WithDefaultRegistry sets the registry for names that do not start with a
// registry host (Docker Hub otherwise). The value is a host, optionally
// followed by a path that is put in front of such names, as the prefix of
// the `default: true` entry of registries.conf may be.
func WithDefaultRegistry(host string) ReferenceOption {
	return func(o *referenceOptions) { o.defaultRegistry = host }
}

// WithDefaultNamespace sets the namespace put in front of single-element
// names that carry no registry host ("nginx" becomes "<ns>/nginx"). Docker
// Hub's "library" is always applied for Docker Hub, with or without it.
func WithDefaultNamespace(ns string) ReferenceOption {
	return func(o *referenceOptions) { o.defaultNamespace = ns }
}

// ParseReference parses an image reference as users write it: "nginx",
// "org/app:1.2", "ghcr.io/org/app@sha256:...", "localhost:5000/app:v1@sha256:...".
// Docker Hub names are normalised ("nginx" is docker.io/library/nginx), the
// registry host is lower-cased, and a tag given together with a digest is
// kept. No default tag is filled in.
func ParseReference(s string, opts ...ReferenceOption) (Reference, error) {
	o := referenceOptions{defaultRegistry: DockerHub}
	for _, opt := range opts {
		opt(&o)
	}
	fail := func(err error) (Reference, error) {
		return Reference{}, &ReferenceError{Input: s, Err: err}
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
		if !tagRE.MatchString(tag) {
			return fail(fmt.Errorf("invalid tag %q: a tag is 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'", tag))
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
	host = strings.ToLower(host)
	if isDockerHub(host) {
		host = DockerHub
	}
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
	if err := checkRepositoryPath(repository); err != nil {
		return fail(err)
	}

	if hasDigest {
		if _, err := name.NewDigest(host + "/" + repository + "@" + dig); err != nil {
			return fail(fmt.Errorf("invalid digest %q: %w", dig, err))
		}
	}

	return Reference{
		registry:   host,
		repository: repository,
		tag:        tag,
		digest:     dig,
		original:   s,
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
	s := r.Name()
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

// Original is the reference as it was written, before normalisation; for
// references made by WithTag or WithDigest it is their canonical form.
func (r Reference) Original() string { return r.original }

// IsZero reports whether r is the zero Reference.
func (r Reference) IsZero() bool { return r == Reference{} }

// Equal reports whether r and o name the same thing, however they were
// written.
func (r Reference) Equal(o Reference) bool {
	return r.registry == o.registry && r.repository == o.repository &&
		r.tag == o.tag && r.digest == o.digest
}

// WithTag returns the reference with its tag set to tag. Any digest is
// dropped, because it belonged to the old tag.
func (r Reference) WithTag(tag string) (Reference, error) {
	if r.IsZero() {
		return Reference{}, &ReferenceError{Input: ":" + tag, Err: errors.New("empty reference")}
	}
	if !tagRE.MatchString(tag) {
		return Reference{}, &ReferenceError{
			Input: r.Name() + ":" + tag,
			Err:   fmt.Errorf("invalid tag %q", tag),
		}
	}
	r.tag, r.digest = tag, ""
	r.original = r.String()
	return r, nil
}

// WithDigest returns the reference pinned to digest; the tag is kept, giving
// the "tag@digest" form.
func (r Reference) WithDigest(digest string) (Reference, error) {
	if r.IsZero() {
		return Reference{}, &ReferenceError{Input: "@" + digest, Err: errors.New("empty reference")}
	}
	if _, err := name.NewDigest(r.Name() + "@" + digest); err != nil || digest == "" {
		if err == nil {
			err = errors.New("empty digest")
		}
		return Reference{}, &ReferenceError{
			Input: r.Name() + "@" + digest,
			Err:   fmt.Errorf("invalid digest %q: %w", digest, err),
		}
	}
	r.digest = digest
	r.original = r.String()
	return r, nil
}
