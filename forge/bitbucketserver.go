package forge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// bitbucketServer speaks the REST API 1.0 of Bitbucket Data Center for
// pull requests
// (https://developer.atlassian.com/server/bitbucket/rest/, "Pull Requests").
type bitbucketServer struct {
	*caller
	key, slug string
}

func newBitbucketServer(c *caller, project string) (Client, error) {
	key, slug, ok := strings.Cut(project, "/")
	if !ok || key == "" || slug == "" || strings.Contains(slug, "/") {
		return nil, fmt.Errorf("Bitbucket Data Center repository %q is not <project key>/<repository>", project)
	}
	return &bitbucketServer{caller: c, key: key, slug: slug}, nil
}

// bitbucketServerAuth sends an HTTP access token (personal, project or
// repository) as Bitbucket Data Center documents it.
func bitbucketServerAuth(h http.Header, token string) {
	h.Set("Accept", "application/json")
	h.Set("Authorization", "Bearer "+token)
}

// bitbucketServerPull is what a pull request's JSON holds of use here.
type bitbucketServerPull struct {
	ID          int    `json:"id"`
	Version     int    `json:"version"`
	Title       string `json:"title"`
	Description string `json:"description"`
	State       string `json:"state"`
	FromRef     struct {
		ID string `json:"id"`
	} `json:"fromRef"`
	ToRef struct {
		ID string `json:"id"`
	} `json:"toRef"`
	// Reviewers are sent back as they are with an update, which sets
	// them all.
	Reviewers json.RawMessage `json:"reviewers"`
	Links     struct {
		Self []struct {
			Href string `json:"href"`
		} `json:"self"`
	} `json:"links"`
}

func (p bitbucketServerPull) request() Request {
	r := Request{Number: p.ID, Title: p.Title, Body: p.Description, State: StateOpen}
	if len(p.Links.Self) > 0 {
		r.URL = p.Links.Self[0].Href
	}
	switch p.State {
	case "MERGED":
		r.State = StateMerged
	case "DECLINED":
		r.State = StateClosed
	}
	return r
}

func (b *bitbucketServer) pulls() string {
	return "/projects/" + url.PathEscape(b.key) + "/repos/" + url.PathEscape(b.slug) + "/pull-requests"
}

// ref is the repository's branch as a pull request names it.
func (b *bitbucketServer) ref(branch string) map[string]any {
	return map[string]any{
		"id":         "refs/heads/" + branch,
		"repository": map[string]any{"slug": b.slug, "project": map[string]string{"key": b.key}},
	}
}

// Find is GET /projects/{key}/repos/{slug}/pull-requests?state=ALL
// &direction=OUTGOING&at=refs/heads/{head}&order=NEWEST: the requests
// from head, of which those into base are kept, page by page.
func (b *bitbucketServer) Find(ctx context.Context, head, base string) ([]Request, error) {
	var out []Request
	start := 0
	for page := 0; page < maxPages; page++ {
		q := url.Values{
			"state": {"ALL"}, "direction": {"OUTGOING"}, "at": {"refs/heads/" + head},
			"order": {"NEWEST"}, "limit": {"100"}, "start": {strconv.Itoa(start)},
		}
		var answer struct {
			Values        []bitbucketServerPull `json:"values"`
			IsLastPage    bool                  `json:"isLastPage"`
			NextPageStart *int                  `json:"nextPageStart"`
		}
		if err := b.call(ctx, http.MethodGet, b.pulls()+"?"+q.Encode(), nil, &answer); err != nil {
			return nil, err
		}
		for _, p := range answer.Values {
			if p.FromRef.ID == "refs/heads/"+head && p.ToRef.ID == "refs/heads/"+base {
				out = append(out, p.request())
			}
		}
		if answer.IsLastPage || answer.NextPageStart == nil || *answer.NextPageStart <= start {
			break
		}
		start = *answer.NextPageStart
	}
	return out, nil
}

// Open is POST /projects/{key}/repos/{slug}/pull-requests. Bitbucket Data
// Center's pull requests have no labels.
func (b *bitbucketServer) Open(ctx context.Context, head, base, title, body string, labels []string) (Request, error) {
	var p bitbucketServerPull
	in := map[string]any{"title": title, "description": body, "fromRef": b.ref(head), "toRef": b.ref(base)}
	if err := b.call(ctx, http.MethodPost, b.pulls(), in, &p); err != nil {
		if statusOf(err) == http.StatusConflict && strings.Contains(err.Error(), "DuplicatePullRequestException") {
			return Request{}, fmt.Errorf("%w: %w", ErrAlreadyExists, err)
		}
		return Request{}, err
	}
	if len(labels) > 0 {
		return p.request(), fmt.Errorf("%w: Bitbucket Data Center pull requests have no labels", ErrLabels)
	}
	return p.request(), nil
}

// Update reads the request (GET .../pull-requests/{id}) for its version,
// which an update must name, then sets the title and description with
// PUT .../pull-requests/{id}, keeping its reviewers. Should someone have
// changed it in between, it does so once more.
func (b *bitbucketServer) Update(ctx context.Context, number int, title, body string) (Request, error) {
	path := fmt.Sprintf("%s/%d", b.pulls(), number)
	var err error
	for range 2 {
		var cur bitbucketServerPull
		if err = b.call(ctx, http.MethodGet, path, nil, &cur); err != nil {
			return Request{}, err
		}
		in := map[string]any{"version": cur.Version, "title": title, "description": body}
		if len(cur.Reviewers) > 0 {
			in["reviewers"] = cur.Reviewers
		}
		var p bitbucketServerPull
		if err = b.call(ctx, http.MethodPut, path, in, &p); err == nil {
			return p.request(), nil
		}
		if statusOf(err) != http.StatusConflict {
			break
		}
	}
	return Request{}, err
}

// bitbucketServerMessage reads Bitbucket Data Center's error answer: the
// message of each of "errors", with the short name of its exception.
func bitbucketServerMessage(body []byte) string {
	var e struct {
		Errors []struct {
			Message       string `json:"message"`
			ExceptionName string `json:"exceptionName"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	var parts []string
	for _, d := range e.Errors {
		msg := d.Message
		if d.ExceptionName != "" {
			msg += " (" + d.ExceptionName[strings.LastIndex(d.ExceptionName, ".")+1:] + ")"
		}
		parts = append(parts, msg)
	}
	return strings.TrimSpace(strings.Join(parts, "; "))
}
