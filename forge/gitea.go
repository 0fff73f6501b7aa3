package forge

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// gitea speaks the REST API v1 of Gitea and Forgejo for pull requests
// (https://docs.gitea.com/api/, https://forgejo.org/docs/latest/user/api-usage/).
type gitea struct {
	*caller
	project string // owner/repo
}

// giteaAuth sends an access token in the header both Gitea and Forgejo
// document.
func giteaAuth(h http.Header, token string) {
	h.Set("Accept", "application/json")
	h.Set("Authorization", "token "+token)
}

// giteaPageSize is Gitea's default bound on a page (MAX_RESPONSE_ITEMS).
const giteaPageSize = 50

// giteaPull is what a pull request's JSON holds of use here.
type giteaPull struct {
	Number  int        `json:"number"`
	HTMLURL string     `json:"html_url"`
	State   string     `json:"state"`
	Title   string     `json:"title"`
	Body    string     `json:"body"`
	Merged  bool       `json:"merged"`
	Head    giteaPRRef `json:"head"`
	Base    giteaPRRef `json:"base"`
}

type giteaPRRef struct {
	Ref    string `json:"ref"`
	RepoID int64  `json:"repo_id"`
}

func (p giteaPull) request() Request {
	r := Request{Number: p.Number, URL: p.HTMLURL, Title: p.Title, Body: p.Body, State: StateOpen}
	switch {
	case p.Merged:
		r.State = StateMerged
	case p.State == "closed":
		r.State = StateClosed
	}
	return r
}

func (g *gitea) repo() string { return "/repos/" + g.project }

// Find pages through GET /repos/{owner}/{repo}/pulls?state=all
// &base_branch={base}, newest first, and keeps the requests from head in
// the repository itself: the list takes no head filter, and Gitea before
// 1.24 no base filter either.
func (g *gitea) Find(ctx context.Context, head, base string) ([]Request, error) {
	var out []Request
	seen := 0
	for page := 1; page <= maxPages; page++ {
		q := url.Values{"state": {"all"}, "base_branch": {base}, "page": {strconv.Itoa(page)}, "limit": {strconv.Itoa(giteaPageSize)}}
		var pulls []giteaPull
		hdr, err := g.do(ctx, http.MethodGet, g.base+g.repo()+"/pulls?"+q.Encode(), nil, &pulls)
		if err != nil {
			return nil, err
		}
		for _, p := range pulls {
			if p.Head.Ref == head && p.Base.Ref == base && (p.Head.RepoID == 0 || p.Head.RepoID == p.Base.RepoID) {
				out = append(out, p.request())
			}
		}
		seen += len(pulls)
		// X-Total-Count is the whole list's length; a server may serve
		// fewer than asked per page.
		total, err := strconv.Atoi(hdr.Get("X-Total-Count"))
		if len(pulls) == 0 || err != nil && len(pulls) < giteaPageSize || err == nil && seen >= total {
			break
		}
	}
	slices.SortFunc(out, func(a, b Request) int { return cmp.Compare(b.Number, a.Number) })
	return out, nil
}

// Open is POST /repos/{owner}/{repo}/pulls, with the IDs of the labels,
// which are looked up by name and created where missing. When that
// fails, the request is opened without them.
func (g *gitea) Open(ctx context.Context, head, base, title, body string, labels []string) (Request, error) {
	ids, labelErr := g.labelIDs(ctx, labels)
	in := map[string]any{"head": head, "base": base, "title": title, "body": body}
	if labelErr == nil && len(ids) > 0 {
		in["labels"] = ids
	}
	var p giteaPull
	if err := g.call(ctx, http.MethodPost, g.repo()+"/pulls", in, &p); err != nil {
		if statusOf(err) == http.StatusConflict {
			return Request{}, fmt.Errorf("%w: %w", ErrAlreadyExists, err)
		}
		return Request{}, err
	}
	if labelErr != nil {
		return p.request(), fmt.Errorf("%w: %w", ErrLabels, labelErr)
	}
	return p.request(), nil
}

// giteaLabel is a label as GET /repos/{owner}/{repo}/labels lists it.
type giteaLabel struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// giteaLabelColor is the color of the labels created here: Gitea
// requires one.
const giteaLabelColor = "#ededed"

// labelIDs finds the repository's labels of these names, creating those
// that do not exist (POST /repos/{owner}/{repo}/labels).
func (g *gitea) labelIDs(ctx context.Context, names []string) ([]int64, error) {
	if len(names) == 0 {
		return nil, nil
	}
	byName := map[string]int64{}
	for page := 1; page <= maxPages; page++ {
		q := url.Values{"page": {strconv.Itoa(page)}, "limit": {strconv.Itoa(giteaPageSize)}}
		var list []giteaLabel
		if err := g.call(ctx, http.MethodGet, g.repo()+"/labels?"+q.Encode(), nil, &list); err != nil {
			return nil, err
		}
		for _, l := range list {
			if _, ok := byName[l.Name]; !ok {
				byName[l.Name] = l.ID
			}
		}
		if len(list) < giteaPageSize {
			break
		}
	}
	ids := make([]int64, 0, len(names))
	for _, name := range names {
		id, ok := byName[name]
		if !ok {
			var l giteaLabel
			if err := g.call(ctx, http.MethodPost, g.repo()+"/labels", map[string]string{"name": name, "color": giteaLabelColor}, &l); err != nil {
				return nil, err
			}
			id = l.ID
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Update is PATCH /repos/{owner}/{repo}/pulls/{index}.
func (g *gitea) Update(ctx context.Context, number int, title, body string) (Request, error) {
	var p giteaPull
	if err := g.call(ctx, http.MethodPatch, fmt.Sprintf("%s/pulls/%d", g.repo(), number), map[string]string{"title": title, "body": body}, &p); err != nil {
		return Request{}, err
	}
	return p.request(), nil
}

// giteaMessage reads Gitea's error answer: "message", and the "errors"
// of a validation error.
func giteaMessage(body []byte) string {
	var e struct {
		Message string            `json:"message"`
		Errors  []json.RawMessage `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	parts := []string{e.Message}
	for _, raw := range e.Errors {
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			parts = append(parts, s)
		}
	}
	return strings.TrimSpace(strings.Join(parts, ": "))
}
