package forge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// gitHub speaks GitHub's REST API for pull requests
// (https://docs.github.com/rest/pulls/pulls).
type gitHub struct {
	*caller
	project string // owner/repo
}

// githubAPIVersion is the REST API version the calls follow.
const githubAPIVersion = "2022-11-28"

// githubAuth sends the token as GitHub documents for installation and
// personal access tokens alike.
func githubAuth(h http.Header, token string) {
	h.Set("Accept", "application/vnd.github+json")
	h.Set("X-GitHub-Api-Version", githubAPIVersion)
	h.Set("Authorization", "Bearer "+token)
}

// githubPull is what a pull request's JSON holds of use here.
type githubPull struct {
	Number   int        `json:"number"`
	HTMLURL  string     `json:"html_url"`
	State    string     `json:"state"`
	Title    string     `json:"title"`
	Body     *string    `json:"body"`
	MergedAt *time.Time `json:"merged_at"`
}

func (p githubPull) request() Request {
	r := Request{Number: p.Number, URL: p.HTMLURL, Title: p.Title, State: StateOpen}
	if p.Body != nil {
		r.Body = *p.Body
	}
	switch {
	case p.State == "open":
	case p.MergedAt != nil:
		r.State = StateMerged
	default:
		r.State = StateClosed
	}
	return r
}

func (g *gitHub) pulls() string { return "/repos/" + g.project + "/pulls" }

// Find lists with GET /repos/{owner}/{repo}/pulls?state=all&head=
// {owner}:{branch}&base={base}; GitHub sorts by creation, newest first.
// The head filter needs the owner of the branch's repository, which for a
// branch pushed to the repository itself is the repository's owner.
func (g *gitHub) Find(ctx context.Context, head, base string) ([]Request, error) {
	owner, _, _ := strings.Cut(g.project, "/")
	q := url.Values{"state": {"all"}, "head": {owner + ":" + head}, "base": {base}, "per_page": {"100"}}
	var pulls []githubPull
	if err := g.call(ctx, http.MethodGet, g.pulls()+"?"+q.Encode(), nil, &pulls); err != nil {
		return nil, err
	}
	out := make([]Request, 0, len(pulls))
	for _, p := range pulls {
		out = append(out, p.request())
	}
	return out, nil
}

// Open is POST /repos/{owner}/{repo}/pulls, then, with labels, POST
// /repos/{owner}/{repo}/issues/{number}/labels: a pull request takes its
// labels as an issue does.
func (g *gitHub) Open(ctx context.Context, head, base, title, body string, labels []string) (Request, error) {
	var p githubPull
	err := g.call(ctx, http.MethodPost, g.pulls(), map[string]string{"head": head, "base": base, "title": title, "body": body}, &p)
	if err != nil {
		if statusOf(err) == http.StatusUnprocessableEntity && strings.Contains(err.Error(), "A pull request already exists") {
			return Request{}, fmt.Errorf("%w: %w", ErrAlreadyExists, err)
		}
		return Request{}, err
	}
	req := p.request()
	if len(labels) > 0 {
		path := fmt.Sprintf("/repos/%s/issues/%d/labels", g.project, req.Number)
		if err := g.call(ctx, http.MethodPost, path, map[string][]string{"labels": labels}, nil); err != nil {
			return req, fmt.Errorf("%w: %w", ErrLabels, err)
		}
	}
	return req, nil
}

// Update is PATCH /repos/{owner}/{repo}/pulls/{number}.
func (g *gitHub) Update(ctx context.Context, number int, title, body string) (Request, error) {
	var p githubPull
	if err := g.call(ctx, http.MethodPatch, fmt.Sprintf("%s/%d", g.pulls(), number), map[string]string{"title": title, "body": body}, &p); err != nil {
		return Request{}, err
	}
	return p.request(), nil
}

// githubMessage reads GitHub's error answer: "message", and the messages
// of a 422's "errors" ("A pull request already exists for o:b.").
func githubMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
		Errors  []struct {
			Message string `json:"message"`
			Code    string `json:"code"`
			Field   string `json:"field"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	parts := []string{e.Message}
	for _, d := range e.Errors {
		switch {
		case d.Message != "":
			parts = append(parts, d.Message)
		case d.Code != "":
			parts = append(parts, d.Field+" "+d.Code)
		}
	}
	return strings.TrimSpace(strings.Join(parts, ": "))
}
