package forge

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// Public services every Hosts knows.
const (
	GitHubComAPI = "https://api.github.com"
	GitLabComURL = "https://gitlab.com"
)

// Hosts says which API serves the requests of a repository, by the
// repository's host name: github.com and gitlab.com, and the GitHub
// Enterprise Servers and GitLab instances the operator names.
type Hosts struct {
	// apis maps kind and lower-case host name to the API's base URL.
	apis map[hostKey]*url.URL
}

type hostKey struct {
	kind Kind
	host string
}

// NewHosts knows github.com and gitlab.com, the GitHub Enterprise Servers
// whose API base URLs are githubAPIs (https://github.example.com/api/v3),
// and the GitLab instances at gitlabURLs (https://gitlab.example.com).
// Each serves the repositories of its URL's host name, whatever their
// port or protocol (HTTPS or SSH).
func NewHosts(githubAPIs, gitlabURLs []string) (*Hosts, error) {
	h := &Hosts{apis: map[hostKey]*url.URL{}}
	gh, _ := url.Parse(GitHubComAPI)
	h.apis[hostKey{GitHub, "github.com"}] = gh
	gl, _ := url.Parse(GitLabComURL + "/api/v4")
	h.apis[hostKey{GitLab, "gitlab.com"}] = gl
	for _, raw := range githubAPIs {
		u, err := parseAPIURL(raw)
		if err != nil {
			return nil, fmt.Errorf("GitHub Enterprise API URL: %w", err)
		}
		h.apis[hostKey{GitHub, strings.ToLower(u.Hostname())}] = u
	}
	for _, raw := range gitlabURLs {
		u, err := parseAPIURL(raw)
		if err != nil {
			return nil, fmt.Errorf("GitLab URL: %w", err)
		}
		u.Path += "/api/v4"
		h.apis[hostKey{GitLab, strings.ToLower(u.Hostname())}] = u
	}
	return h, nil
}

// parseAPIURL checks an operator's API URL: https (http only to loopback,
// for tests and port forwards: a token must not cross a network in clear
// text), no user, query or fragment.
func parseAPIURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSpace(raw), "/"))
	switch {
	case err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q is not a URL such as https://git.example.com", raw)
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return nil, fmt.Errorf("%q: tokens go only over https (http only to localhost)", raw)
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("%q is not an http(s) URL", raw)
	}
	return u, nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Repository is one repository on a service: where its API is and the
// path the API names it by.
type Repository struct {
	Kind Kind
	// API is the base URL of the REST API (https://api.github.com,
	// https://gitlab.example.com/api/v4).
	API string
	// Project is owner/name on GitHub, the full path with its groups on
	// GitLab.
	Project string
}

// Lookup finds the API of kind that serves repoURL (https://, ssh:// or
// user@host:path). Credentials in the URL are ignored.
func (h *Hosts) Lookup(kind Kind, repoURL string) (Repository, error) {
	host, path, err := splitRepoURL(repoURL)
	if err != nil {
		return Repository{}, err
	}
	api, ok := h.apis[hostKey{kind, host}]
	if !ok {
		return Repository{}, fmt.Errorf("no %s API is configured for host %s (known hosts: %s)", kind, host, strings.Join(h.known(kind), ", "))
	}
	r := Repository{Kind: kind, API: api.String()}
	switch kind {
	case GitHub:
		// The path goes into the API's URL as it is: GitHub's names, of
		// letters, digits, '-', '_' and '.', need no escaping.
		parts := strings.Split(path, "/")
		if len(parts) != 2 || !githubName(parts[0]) || !githubName(parts[1]) {
			return Repository{}, fmt.Errorf("repository path %q on %s is not <owner>/<repository>", path, host)
		}
	case GitLab:
		// An instance under a path (https://example.com/gitlab) serves its
		// projects under that path over HTTPS.
		if root := strings.TrimSuffix(api.Path, "/api/v4"); root != "" {
			path = strings.TrimPrefix(path, strings.TrimPrefix(root, "/")+"/")
		}
		parts := strings.Split(path, "/")
		if len(parts) < 2 || slices.Contains(parts, "") {
			return Repository{}, fmt.Errorf("repository path %q on %s is not <group>/<project>", path, host)
		}
	default:
		return Repository{}, fmt.Errorf("unknown pull request service %q", kind)
	}
	r.Project = path
	return r, nil
}

// githubName tells whether s can name a GitHub owner or repository.
func githubName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	})
}

// APIURL finds the API of kind whose URL is raw: the same scheme, host,
// port and path as one the operator allows (github.com's and gitlab.com's
// included), whatever the case of the host or a final slash. Credentials
// that name their own API (a GitHub App's githubAppEnterpriseBaseUrl) may
// only name one of these: the hosts the controller sends tokens to, and
// whose answers it reads, are the operator's choice alone.
func (h *Hosts) APIURL(kind Kind, raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSpace(raw), "/"))
	if err == nil {
		for k, api := range h.apis {
			if k.kind == kind && sameAPI(api, u) {
				return api, nil
			}
		}
	}
	var known []string
	for k, api := range h.apis {
		if k.kind == kind {
			known = append(known, api.String())
		}
	}
	slices.Sort(known)
	return nil, fmt.Errorf("not a %s API the controller may use (%s)", kind, strings.Join(known, ", "))
}

// sameAPI tells whether u is api, with a port left out meaning the
// scheme's default.
func sameAPI(api, u *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if u.Scheme == "http" {
			return "80"
		}
		return "443"
	}
	return u.Scheme == api.Scheme && u.User == nil && u.RawQuery == "" && u.Fragment == "" &&
		strings.EqualFold(u.Hostname(), api.Hostname()) && port(u) == port(api) &&
		strings.TrimSuffix(u.Path, "/") == strings.TrimSuffix(api.Path, "/")
}

func (h *Hosts) known(kind Kind) []string {
	var out []string
	for k := range h.apis {
		if k.kind == kind {
			out = append(out, k.host)
		}
	}
	slices.Sort(out)
	return out
}

// splitRepoURL returns the lower-case host name and the path without
// slashes around it and without ".git".
func splitRepoURL(raw string) (host, path string, err error) {
	s := strings.TrimSpace(raw)
	if !strings.Contains(s, "://") {
		// user@host:path, as git reads it.
		at := strings.LastIndex(s, "@")
		hostPath := s[at+1:]
		h, p, ok := strings.Cut(hostPath, ":")
		if !ok || h == "" || strings.Contains(h, "/") {
			return "", "", fmt.Errorf("repository URL %q is neither a URL nor user@host:path", redact(raw))
		}
		host, path = h, p
	} else {
		u, perr := url.Parse(s)
		if perr != nil || u.Hostname() == "" {
			return "", "", fmt.Errorf("repository URL %q cannot be parsed", redact(raw))
		}
		host, path = u.Hostname(), u.Path
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	return strings.ToLower(host), path, nil
}

// redact drops whatever precedes the last '@' of a URL's authority, where
// a password or token could be written.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	} else {
		scheme += "://"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return scheme + "xxxxx" + rest[at:]
	}
	return raw
}
