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

	"github.com/image-updater/argocd-image-updater/settings"
)

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
	Service    settings.Forge
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
