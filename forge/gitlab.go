package forge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// gitLab speaks GitLab's REST API v4 for merge requests
// (https://docs.gitlab.com/api/merge_requests/).
type gitLab struct {
	*caller
	project string // group/.../project
}

// gitlabAuth sends the token in GitLab's own header, which takes
// personal, project and group access tokens.
func gitlabAuth(h http.Header, token string) {
	h.Set("Accept", "application/json")
	h.Set("PRIVATE-TOKEN", token)
}

// gitlabMergeRequest is what a merge request's JSON holds of use here.
type gitlabMergeRequest struct {
	IID         int    `json:"iid"`
	WebURL      string `json:"web_url"`
	State       string `json:"state"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

func (m gitlabMergeRequest) request() Request {
	r := Request{Number: m.IID, URL: m.WebURL, Title: m.Title, Body: m.Description}
	switch m.State {
	case "merged":
		r.State = StateMerged
	case "closed":
		r.State = StateClosed
	default:
		// "opened", and "locked" while a merge is under way.
		r.State = StateOpen
	}
	return r
}

// mergeRequests is the project's merge requests; the project is
// addressed by its URL-encoded path.
func (g *gitLab) mergeRequests() string {
	return "/projects/" + url.PathEscape(g.project) + "/merge_requests"
}

// Find is GET /projects/:id/merge_requests?source_branch=&target_branch=
// &state=all, newest first (GitLab's default order).
func (g *gitLab) Find(ctx context.Context, head, base string) ([]Request, error) {
	q := url.Values{"source_branch": {head}, "target_branch": {base}, "state": {"all"}, "per_page": {"100"}}
	var mrs []gitlabMergeRequest
	if err := g.call(ctx, http.MethodGet, g.mergeRequests()+"?"+q.Encode(), nil, &mrs); err != nil {
		return nil, err
	}
	out := make([]Request, 0, len(mrs))
	for _, m := range mrs {
		out = append(out, m.request())
	}
	return out, nil
}

// Open is POST /projects/:id/merge_requests, labels given as GitLab takes
// them, comma-separated.
func (g *gitLab) Open(ctx context.Context, head, base, title, body string, labels []string) (Request, error) {
	var m gitlabMergeRequest
	in := map[string]string{"source_branch": head, "target_branch": base, "title": title, "description": body}
	if len(labels) > 0 {
		in["labels"] = strings.Join(labels, ",")
	}
	if err := g.call(ctx, http.MethodPost, g.mergeRequests(), in, &m); err != nil {
		if statusOf(err) == http.StatusConflict {
			return Request{}, fmt.Errorf("%w: %w", ErrAlreadyExists, err)
		}
		return Request{}, err
	}
	return m.request(), nil
}

// Update is PUT /projects/:id/merge_requests/:merge_request_iid.
func (g *gitLab) Update(ctx context.Context, number int, title, body string) (Request, error) {
	var m gitlabMergeRequest
	if err := g.call(ctx, http.MethodPut, fmt.Sprintf("%s/%d", g.mergeRequests(), number), map[string]string{"title": title, "description": body}, &m); err != nil {
		return Request{}, err
	}
	return m.request(), nil
}

// gitlabMessage reads GitLab's error answer: "message" (a string, a list
// of strings, or an object of field → messages) or "error".
func gitlabMessage(body []byte) string {
	var e struct {
		Message json.RawMessage `json:"message"`
		Error   string          `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	var s string
	var list []string
	var fields map[string][]string
	switch {
	case json.Unmarshal(e.Message, &s) == nil:
		return s
	case json.Unmarshal(e.Message, &list) == nil:
		return strings.Join(list, "; ")
	case json.Unmarshal(e.Message, &fields) == nil:
		var parts []string
		for k, v := range fields {
			parts = append(parts, k+" "+strings.Join(v, ", "))
		}
		slices.Sort(parts)
		return strings.Join(parts, "; ")
	}
	return e.Error
}
