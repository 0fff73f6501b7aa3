package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// PublicLimit is the number of requests per second the controller sends to
// one of the big public registries (Docker Hub, GCR, GHCR, Quay) when no
// registries.conf entry sets a limit for it: low enough to stay within
// their anonymous quotas while scanning many images. Other registries
// without a limit get no fixed cap; the client's bound on requests in
// flight and its slow-down on 429 and 503 answers keep it polite.
const PublicLimit = 20

// publicAPIHosts are the API hosts PublicLimit applies to, as the old
// updater's built-in registries.
var publicAPIHosts = []string{"registry-1.docker.io", "gcr.io", "ghcr.io", "quay.io", "docker.pkg.github.com"}

// dockerHubAPI is where Docker Hub's registry API actually lives; docker.io
// itself only redirects.
const dockerHubAPI = "https://registry-1.docker.io"

// TagSortMode says in which order a registry returns tags, when it returns
// them sorted by creation date; strategies can then skip fetching metadata.
type TagSortMode int

// Tag sort modes, as written in the tagsortmode field.
const (
	TagSortNone        TagSortMode = iota // "none": no useful order
	TagSortLatestFirst                    // "latest-first": newest tag first
	TagSortLatestLast                     // "latest-last": newest tag last
)

var tagSortModeNames = [...]string{
	TagSortNone:        "none",
	TagSortLatestFirst: "latest-first",
	TagSortLatestLast:  "latest-last",
}

// String is the mode as written in registries.conf.
func (m TagSortMode) String() string {
	if m >= 0 && int(m) < len(tagSortModeNames) {
		return tagSortModeNames[m]
	}
	return fmt.Sprintf("TagSortMode(%d)", int(m))
}

// parseTagSortMode reads a tagsortmode value; "" means none.
func parseTagSortMode(s string) (TagSortMode, error) {
	if s == "" {
		return TagSortNone, nil
	}
	for m, n := range tagSortModeNames {
		if s == n {
			return TagSortMode(m), nil
		}
	}
	return TagSortNone, fmt.Errorf("invalid tagsortmode %q (want none, latest-first or latest-last)", s)
}

// Endpoint describes one registry, from registries.conf or inferred from a
// host name.
type Endpoint struct {
	Name        string        // informational
	Prefix      string        // the image prefix it serves, as written
	APIURL      string        // registry API base without trailing slash, "https://ghcr.io"
	Credentials string        // raw credential reference; "" = anonymous
	CredsExpire time.Duration // reuse of registry-level credentials; 0 = until they fail
	Insecure    bool          // skip TLS verification
	Limit       float64       // requests per second; 0 = see RateLimit
	DefaultNS   string        // namespace for single-element names
	Default     bool          // serves names without a registry host
	TagSortMode TagSortMode
	// MutableTags says tags of this registry are pushed again to new
	// images: the client then asks a tag's digest every time instead of
	// trusting what it learnt while the listing stays the same.
	MutableTags bool
	TLS         *TLS // ca_file, ca_data and the client certificate; nil: the defaults
	// InternalHosts are the hosts in the operator's own network that the
	// registry may send the client to, as its token realm or in a
	// redirect: other hosts must be public.
	InternalHosts Hosts
	// PushTimes and PushTimesURL are the pushtimes and pushtimes_url
	// fields: see PushTimesAPI.
	PushTimes    PushTimes
	PushTimesURL string
}

// Hosts is a list of host or host:port, kept in one string (joined by
// commas) so that an Endpoint stays comparable.
type Hosts string

// List is the hosts one by one.
func (h Hosts) List() []string {
	if h == "" {
		return nil
	}
	return strings.Split(string(h), ",")
}

// RateLimit is the endpoint's rate limit in requests per second: Limit
// when set, else PublicLimit when its API is that of a public registry,
// else 0, no fixed cap.
func (e Endpoint) RateLimit() float64 {
	if e.Limit > 0 {
		return e.Limit
	}
	if u, err := url.Parse(e.APIURL); err == nil && slices.Contains(publicAPIHosts, strings.ToLower(u.Host)) {
		return PublicLimit
	}
	return 0
}

// inferEndpoint is the endpoint of a registry host without an entry: the
// host itself over HTTPS, with Docker Hub's API host and namespace.
func inferEndpoint(host string) Endpoint {
	if host == imageref.DockerHub {
		return Endpoint{Name: "Docker Hub", Prefix: imageref.DockerHub, APIURL: dockerHubAPI, DefaultNS: imageref.DockerHubNamespace}
	}
	return Endpoint{Name: host, Prefix: host, APIURL: "https://" + host}
}

// Config is a parsed registries.conf. It does not change after parsing and
// is safe for concurrent use. A nil *Config behaves as an empty one.
type Config struct {
	entries []configEntry
	files   []string // read for the entries (ca_file, ...), which Watch watches too
}

type configEntry struct {
	ep    Endpoint
	match string // canonical prefix: lower-case host, Docker Hub folded, no trailing slash
}

// ErrInvalid is matched (errors.Is) by every error about the content
// of a registries.conf.
var ErrInvalid = errors.New("invalid registries configuration")

// Error is one problem of a registries.conf, with its place.
// Parse joins all it finds (errors.Join); errors.As finds the first.
type Error struct {
	File  string
	Line  int    // 0 when unknown
	Field string // "registries[1].credsexpire"; "" for the whole file
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// endpoints lists the configured entries in file order.
func (c *Config) endpoints() []Endpoint {
	if c == nil {
		return nil
	}
	out := make([]Endpoint, len(c.entries))
	for i, e := range c.entries {
		out[i] = e.ep
	}
	return out
}

// match finds the entry with the longest prefix of target ("host" or
// "host/repository", canonical) that ends at a path-segment boundary.
func (c *Config) match(target string) (Endpoint, bool) {
	if c == nil {
		return Endpoint{}, false
	}
	best := -1
	for i, e := range c.entries {
		if target != e.match && !strings.HasPrefix(target, e.match+"/") {
			continue
		}
		if best < 0 || len(e.match) > len(c.entries[best].match) {
			best = i
		}
	}
	if best < 0 {
		return Endpoint{}, false
	}
	return c.entries[best].ep, true
}

// endpoint returns the endpoint for a registry host: the entry whose prefix
// is that host, else one inferred from the host (https://<host>; Docker Hub
// and its aliases get https://registry-1.docker.io and namespace library).
// Entries whose prefix has a path only apply through EndpointFor. An empty
// host means the default registry.
func (c *Config) endpoint(registryHost string) Endpoint {
	if registryHost == "" {
		ep, _ := c.defaultEndpoint()
		return ep
	}
	host := imageref.CanonicalHost(registryHost)
	if ep, ok := c.match(host); ok {
		return ep
	}
	return inferEndpoint(host)
}

// EndpointFor returns the endpoint for an image: the entry with the longest
// prefix of registry/repository, cut at a path-segment boundary (so
// "ghcr.io/org" serves "ghcr.io/org/app" but not "ghcr.io/organic/app"),
// else the inferred endpoint of its registry.
func (c *Config) EndpointFor(ref imageref.Reference) Endpoint {
	if ref.IsZero() {
		ep, _ := c.defaultEndpoint()
		return ep
	}
	if ep, ok := c.match(imageref.CanonicalHost(ref.Registry()) + "/" + ref.Repository()); ok {
		return ep
	}
	return inferEndpoint(imageref.CanonicalHost(ref.Registry()))
}

// defaultEndpoint returns the entry marked default and true. Without one,
// Docker Hub is the default: its endpoint (configured or inferred) is
// returned with false.
func (c *Config) defaultEndpoint() (Endpoint, bool) {
	if c != nil {
		for _, e := range c.entries {
			if e.ep.Default {
				return e.ep, true
			}
		}
	}
	return c.endpoint(imageref.DockerHub), false
}

// ReferenceOptions returns the options that make imageref.Parse resolve
// names without a registry host to the configured default registry. It is
// empty when Docker Hub is the default.
func (c *Config) ReferenceOptions() []imageref.Option {
	ep, ok := c.defaultEndpoint()
	if !ok {
		return nil
	}
	opts := []imageref.Option{imageref.WithDefaultRegistry(ep.Prefix)}
	if ep.DefaultNS != "" {
		opts = append(opts, imageref.WithDefaultNamespace(ep.DefaultNS))
	}
	return opts
}
