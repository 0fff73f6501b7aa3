package forge

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
)

// Public services every Hosts knows.
const (
	GitHubComAPI    = "https://api.github.com"
	GitLabComURL    = "https://gitlab.com"
	BitbucketOrgAPI = "https://api.bitbucket.org/2.0"
	AzureDevOpsURL  = "https://dev.azure.com"
)

// publicGitea are the Gitea and Forgejo instances open to all, known as
// github.com and gitlab.com are.
var publicGitea = []string{"https://gitea.com", "https://codeberg.org"}

// apiPath is where each service's REST API lies below an instance's URL;
// the operator names GitHub Enterprise Servers (and Bitbucket Cloud's
// stand-ins) by their API URL itself.
var apiPath = map[settings.Forge]string{
	settings.ForgeGitLab:          "/api/v4",
	settings.ForgeGitea:           "/api/v1",
	settings.ForgeBitbucketServer: "/rest/api/1.0",
}

// Hosts says which API serves the requests of a repository, by the
// repository's host name: the public services (github.com, gitlab.com,
// gitea.com, codeberg.org, bitbucket.org, dev.azure.com and
// *.visualstudio.com) and the instances the operator names.
type Hosts struct {
	apis map[hostKey]instance
}

type hostKey struct {
	kind settings.Forge
	host string
}

// instance is one service's API and the path its repositories are served
// under on its host ("" at the root, "/gitlab" for an instance under a
// path).
type instance struct {
	api  *url.URL
	root string
	// host is api's host as repository URLs are compared.
	host string
}

// HostsOption adds instances to a Hosts.
type HostsOption func(*Hosts) error

// WithInstances adds instances of kind by their URLs: for GitLab, Gitea
// and Forgejo, Bitbucket Data Center and Azure DevOps Server the URL the
// repositories are served under (https://git.example.com, or with a path,
// https://example.com/bitbucket); for GitHub Enterprise Server its API
// URL (https://github.example.com/api/v3); for Bitbucket an API URL in
// api.bitbucket.org's form (https://HOST/2.0), which only a stand-in
// serves. Each serves the repositories of its URL's host name, whatever
// their port or protocol (HTTPS or SSH).
func WithInstances(kind settings.Forge, urls ...string) HostsOption {
	return func(h *Hosts) error {
		for _, raw := range urls {
			u, err := parseAPIURL(raw)
			if err != nil {
				return fmt.Errorf("%s URL: %w", serviceName[kind], err)
			}
			in := instance{api: u.URL, host: u.host}
			if p, ok := apiPath[kind]; ok {
				in.root = u.Path
				api := *u.URL
				api.Path += p
				in.api = &api
			} else if kind == settings.ForgeAzureDevOps {
				in.root = u.Path
			}
			h.apis[hostKey{kind, u.host}] = in
		}
		return nil
	}
}

// serviceName names each service in messages.
var serviceName = map[settings.Forge]string{
	settings.ForgeGitHub:          "GitHub Enterprise API",
	settings.ForgeGitLab:          "GitLab",
	settings.ForgeGitea:           "Gitea",
	settings.ForgeBitbucket:       "Bitbucket API",
	settings.ForgeBitbucketServer: "Bitbucket Data Center",
	settings.ForgeAzureDevOps:     "Azure DevOps Server",
}

// NewHosts knows the public services, the GitHub Enterprise Servers whose
// API base URLs are githubAPIs (https://github.example.com/api/v3), the
// GitLab instances at gitlabURLs (https://gitlab.example.com), and the
// instances opts add.
func NewHosts(githubAPIs, gitlabURLs []string, opts ...HostsOption) (*Hosts, error) {
	h := &Hosts{apis: map[hostKey]instance{}}
	public := []HostsOption{
		WithInstances(settings.ForgeGitLab, GitLabComURL),
		WithInstances(settings.ForgeGitea, publicGitea...),
		WithInstances(settings.ForgeAzureDevOps, AzureDevOpsURL),
	}
	for _, opt := range public {
		if err := opt(h); err != nil {
			return nil, err
		}
	}
	gh, _ := parseAPIURL(GitHubComAPI)
	h.apis[hostKey{settings.ForgeGitHub, "github.com"}] = instance{api: gh.URL, host: gh.host}
	bb, _ := parseAPIURL(BitbucketOrgAPI)
	h.apis[hostKey{settings.ForgeBitbucket, "bitbucket.org"}] = instance{api: bb.URL, host: bb.host}
	opts = append([]HostsOption{WithInstances(settings.ForgeGitHub, githubAPIs...), WithInstances(settings.ForgeGitLab, gitlabURLs...)}, opts...)
	for _, opt := range opts {
		if err := opt(h); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// parseAPIURL checks an operator's API URL: https (http only to loopback,
// for tests and port forwards: a token must not cross a network in clear
// text), no user, query or fragment.
func parseAPIURL(raw string) (apiURL, error) {
	s := strings.TrimSuffix(strings.TrimSpace(raw), "/")
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return apiURL{}, fmt.Errorf("%q is not a URL such as https://git.example.com", repourl.RedactURL(raw))
	}
	id, err := repourl.ParseURL(s)
	switch {
	case err != nil:
		return apiURL{}, err
	case id.Scheme() == "http" && !id.Loopback():
		return apiURL{}, fmt.Errorf("%q: tokens go only over https (http only to localhost)", raw)
	case id.Scheme() != "https" && id.Scheme() != "http":
		return apiURL{}, fmt.Errorf("%q is not an http(s) URL", raw)
	}
	return apiURL{URL: u, host: id.Host()}, nil
}

// apiURL is an API's URL with its host as compared, parsed once.
type apiURL struct {
	*url.URL
	host string
}

// Repository is one repository on a service: where its API is and the
// path the API names it by.
type Repository struct {
	Kind settings.Forge
	// API is the base URL of the REST API (https://api.github.com,
	// https://gitlab.example.com/api/v4, https://dev.azure.com).
	API string
	// Project is owner/name on GitHub and Gitea, the full path with its
	// groups on GitLab, workspace/slug on Bitbucket Cloud, key/slug on
	// Bitbucket Data Center, organization/project/repository on Azure
	// DevOps (collection/project/repository on a server).
	Project string
}

// Lookup finds the API of kind that serves repoURL (https://, ssh:// or
// user@host:path). Credentials in the URL are ignored.
func (h *Hosts) Lookup(kind settings.Forge, repoURL string) (Repository, error) {
	repo, err := repourl.ParseURL(repoURL)
	if err != nil {
		return Repository{}, err
	}
	host, path := repo.Host(), repo.Path()
	if kind == settings.ForgeAzureDevOps {
		host, path = azureCloudHost(host, path)
	}
	in, ok := h.apis[hostKey{kind, host}]
	if !ok {
		if _, known := serviceName[kind]; !known {
			return Repository{}, fmt.Errorf("unknown pull request service %q", kind)
		}
		known := strings.Join(h.known(kind), ", ")
		if known == "" {
			known = "none"
		}
		return Repository{}, fmt.Errorf("no %s API is configured for host %s (known hosts: %s)", kind, host, known)
	}
	// An instance under a path (https://example.com/gitlab) serves its
	// repositories under that path over HTTPS, at the root over SSH.
	if root := strings.Trim(in.root, "/"); root != "" {
		path = strings.TrimPrefix(path, root+"/")
	}
	project, err := projectPath(kind, path)
	if err != nil {
		return Repository{}, fmt.Errorf("repository path %q on %s is not %w", path, host, err)
	}
	return Repository{Kind: kind, API: in.api.String(), Project: project}, nil
}

// projectPath reads the path by which the API of kind names the
// repository at path, or says what path should be.
func projectPath(kind settings.Forge, path string) (string, error) {
	parts := strings.Split(path, "/")
	switch kind {
	case settings.ForgeGitHub, settings.ForgeGitea, settings.ForgeBitbucket:
		// The path goes into the API's URL as it is: these services'
		// names, of letters, digits, '-', '_' and '.', need no escaping.
		if len(parts) != 2 || !plainName(parts[0]) || !plainName(parts[1]) {
			return "", errors.New("<owner>/<repository>")
		}
	case settings.ForgeGitLab:
		if len(parts) < 2 || slices.Contains(parts, "") {
			return "", errors.New("<group>/<project>")
		}
	case settings.ForgeBitbucketServer:
		// HTTPS clones are under /scm/, SSH ones at the root; a personal
		// repository's project key is ~user.
		if len(parts) == 3 && parts[0] == "scm" {
			parts = parts[1:]
		}
		if len(parts) != 2 || !plainName(strings.TrimPrefix(parts[0], "~")) || !plainName(parts[1]) {
			return "", errors.New("[scm/]<project key>/<repository>")
		}
	case settings.ForgeAzureDevOps:
		// HTTPS: organization/project/_git/repository, or
		// organization/_git/repository for the project's namesake; SSH:
		// v3/organization/project/repository.
		switch {
		case len(parts) == 4 && parts[0] == "v3":
			// SSH URLs keep the escapes of names with spaces.
			parts = parts[1:]
			for i, p := range parts {
				if u, err := url.PathUnescape(p); err == nil {
					parts[i] = u
				}
			}
		case len(parts) == 4 && parts[2] == "_git":
			parts = []string{parts[0], parts[1], parts[3]}
		case len(parts) == 3 && parts[1] == "_git":
			parts = []string{parts[0], parts[2], parts[2]}
		default:
			parts = nil
		}
		if len(parts) != 3 || slices.ContainsFunc(parts, func(p string) bool { return p == "" || p == "." || p == ".." || strings.HasPrefix(p, "_") }) {
			return "", errors.New("<organization>/<project>/_git/<repository>")
		}
	}
	return strings.Join(parts, "/"), nil
}

// azureCloudHost maps the hosts of Azure DevOps Services to dev.azure.com,
// whose API serves them all: ssh.dev.azure.com, and the older
// {organization}.visualstudio.com (HTTPS, with or without
// DefaultCollection) and vs-ssh.visualstudio.com (SSH).
func azureCloudHost(host, path string) (string, string) {
	switch org, ok := strings.CutSuffix(host, ".visualstudio.com"); {
	case host == "ssh.dev.azure.com" || host == "vs-ssh.visualstudio.com":
		return "dev.azure.com", path
	case ok && org != "" && !strings.Contains(org, "."):
		return "dev.azure.com", org + "/" + strings.TrimPrefix(path, "DefaultCollection/")
	}
	return host, path
}

// plainName tells whether s can name an owner or repository on GitHub,
// Gitea or Bitbucket, or a Bitbucket Data Center project: letters,
// digits, '-', '_' and '.', and neither "." nor "..".
func plainName(s string) bool {
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
func (h *Hosts) APIURL(kind settings.Forge, raw string) (*url.URL, error) {
	if u, err := parseAPIURL(raw); err == nil {
		for k, in := range h.apis {
			if k.kind == kind && in.host == u.host && sameAPI(in.api, u.URL) {
				return in.api, nil
			}
		}
	}
	var known []string
	for k, in := range h.apis {
		if k.kind == kind {
			known = append(known, in.api.String())
		}
	}
	slices.Sort(known)
	return nil, fmt.Errorf("not a %s API the controller may use (%s)", kind, strings.Join(known, ", "))
}

// sameAPI tells whether u is api, whose hosts are compared already, with
// a port left out meaning the scheme's default.
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
	return u.Scheme == api.Scheme && u.User == nil && u.RawQuery == "" && u.Fragment == "" && port(u) == port(api) &&
		strings.TrimSuffix(u.Path, "/") == strings.TrimSuffix(api.Path, "/")
}

func (h *Hosts) known(kind settings.Forge) []string {
	var out []string
	for k := range h.apis {
		if k.kind == kind {
			out = append(out, k.host)
		}
	}
	slices.Sort(out)
	return out
}
