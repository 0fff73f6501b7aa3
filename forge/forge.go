// Package forge opens and updates the review requests of a Git hosting
// service: pull requests on GitHub (and GitHub Enterprise Server), Gitea
// and Forgejo, Bitbucket Cloud, Bitbucket Data Center and Azure DevOps;
// merge requests on GitLab. It speaks the few REST calls this needs, as
// each service documents them: find the requests of a branch, open one,
// change its title and description.
//
// Which API serves a repository is the operator's choice (Hosts): the
// tokens sent there are the repository's credentials, so an Application
// must not be able to send them anywhere else.
package forge

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Kind names a hosting service's API.
type Kind string

const (
	// GitHub is GitHub's REST API, at api.github.com or a GitHub
	// Enterprise Server's /api/v3.
	GitHub Kind = "github"
	// GitLab is GitLab's REST API v4.
	GitLab Kind = "gitlab"
	// Gitea is the REST API v1 of Gitea and of Forgejo, its fork.
	Gitea Kind = "gitea"
	// Bitbucket is Bitbucket Cloud's REST API 2.0, at api.bitbucket.org.
	Bitbucket Kind = "bitbucket"
	// BitbucketServer is the REST API 1.0 of Bitbucket Data Center (once
	// Bitbucket Server).
	BitbucketServer Kind = "bitbucket-server"
	// AzureDevOps is the Git REST API of Azure DevOps Services
	// (dev.azure.com) and Azure DevOps Server.
	AzureDevOps Kind = "azure-devops"
)

// Kinds lists the services, as settings name them.
var Kinds = []Kind{GitHub, GitLab, Gitea, Bitbucket, BitbucketServer, AzureDevOps}

// aliases are other names of a service: Forgejo speaks Gitea's API, and
// Bitbucket Server is now called Bitbucket Data Center.
var aliases = map[string]Kind{
	"forgejo":               Gitea,
	"bitbucket-datacenter":  BitbucketServer,
	"bitbucket-data-center": BitbucketServer,
}

// ParseKind reads a service's name: one of Kinds, or "forgejo" (Gitea),
// "bitbucket-datacenter" or "bitbucket-data-center" (BitbucketServer).
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if a, ok := aliases[s]; ok {
		k = a
	}
	for _, known := range Kinds {
		if k == known {
			return k, nil
		}
	}
	names := make([]string, 0, len(Kinds)+len(aliases))
	for _, known := range Kinds {
		names = append(names, string(known))
	}
	names = append(names, "forgejo", "bitbucket-datacenter")
	return "", fmt.Errorf("unknown pull request service %q: use one of %s", s, strings.Join(names, ", "))
}

// Labels tells whether the service's requests take labels: Bitbucket's,
// Cloud and Data Center alike, do not.
func (k Kind) Labels() bool { return k != Bitbucket && k != BitbucketServer }

// State is where a request stands.
type State string

const (
	StateOpen   State = "open"
	StateClosed State = "closed"
	StateMerged State = "merged"
)

// Request is a pull request or merge request.
type Request struct {
	// Number is what the web page and the API address the request by:
	// GitHub's and Gitea's pull request number, GitLab's merge request
	// IID, Bitbucket's pull request ID, Azure DevOps' pullRequestId.
	Number int
	// URL is its web page.
	URL   string
	State State
	Title string
	Body  string
}

// Client reaches the requests of one repository.
type Client interface {
	// Find lists the requests from branch head into branch base, newest
	// first, whatever their state.
	Find(ctx context.Context, head, base string) ([]Request, error)
	// Open opens a request from head into base, with labels. When the
	// service refuses it because one is open already, the error wraps
	// ErrAlreadyExists. When the request was opened but its labels could
	// not be set, the request is returned with an error wrapping
	// ErrLabels.
	Open(ctx context.Context, head, base, title, body string, labels []string) (Request, error)
	// Update sets the title and body of the request with that number.
	Update(ctx context.Context, number int, title, body string) (Request, error)
}

// ErrAlreadyExists is wrapped by Open's error when the branch already has
// an open request (GitHub's 422 "A pull request already exists", GitLab's,
// Gitea's, Bitbucket Data Center's and Azure DevOps' 409 Conflict).
var ErrAlreadyExists = errors.New("an open request for this branch already exists")

// ErrLabels is wrapped by Open's error when the request was opened but
// without its labels: the service refused them (GitHub sets them in a
// call of their own, Gitea needs each label to exist), or it has none
// (Bitbucket).
var ErrLabels = errors.New("the request was opened without its labels")

// Error is a refusal by the service: its method, URL, status and message.
// It never holds the token, which travels in a header only.
type Error struct {
	Service    Kind
	Method     string
	URL        string
	StatusCode int
	Status     string
	// Message is what the service said, cut short.
	Message string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s %s: %s", e.Method, e.URL, e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}
