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

// bitbucket speaks Bitbucket Cloud's REST API 2.0 for pull requests
// (https://developer.atlassian.com/cloud/bitbucket/rest/api-group-pullrequests/).
type bitbucket struct {
	*caller
	project string // workspace/repo_slug
}

// bitbucketTokenUsers are the user names that go with an access token
// (x-token-auth, as Bitbucket documents for repository, project and
// workspace access tokens, and the static name of API tokens), or that
// the git write-back sends when the credentials name none.
var bitbucketTokenUsers = []string{"", "x-token-auth", "x-bitbucket-api-token-auth", "x-access-token"}

// bitbucketAuth sends an access token as a bearer token, and the app
// password or API token of a named user with the user's name, as basic
// authentication.
func bitbucketAuth(user string) func(http.Header, string) {
	return func(h http.Header, token string) {
		h.Set("Accept", "application/json")
		if slices.Contains(bitbucketTokenUsers, user) {
			h.Set("Authorization", "Bearer "+token)
			return
		}
		r := http.Request{Header: h}
		r.SetBasicAuth(user, token)
	}
}

// bitbucketPull is what a pull request's JSON holds of use here.
type bitbucketPull struct {
	ID          int    `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Summary     struct {
		Raw string `json:"raw"`
	} `json:"summary"`
	State string `json:"state"`
	Links struct {
		HTML struct {
			Href string `json:"href"`
		} `json:"html"`
	} `json:"links"`
	Source      bitbucketEndpoint `json:"source"`
	Destination bitbucketEndpoint `json:"destination"`
}

type bitbucketEndpoint struct {
	Branch struct {
		Name string `json:"name"`
	} `json:"branch"`
}

func branchEndpoint(name string) map[string]any {
	return map[string]any{"branch": map[string]string{"name": name}}
}

func (p bitbucketPull) request() Request {
	r := Request{Number: p.ID, URL: p.Links.HTML.Href, Title: p.Title, Body: p.Summary.Raw, State: StateOpen}
	if r.Body == "" {
		r.Body = p.Description
	}
	switch p.State {
	case "MERGED":
		r.State = StateMerged
	case "DECLINED", "SUPERSEDED":
		r.State = StateClosed
	}
	return r
}

func (b *bitbucket) pulls() string { return "/repositories/" + b.project + "/pullrequests" }

// bbqlString quotes s as a string of Bitbucket's query language.
func bbqlString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// Find is GET /repositories/{workspace}/{repo_slug}/pullrequests with
// every state, filtered by q on the source and destination branches,
// newest first, following the answer's next page.
func (b *bitbucket) Find(ctx context.Context, head, base string) ([]Request, error) {
	q := url.Values{
		"state":   {"OPEN", "MERGED", "DECLINED", "SUPERSEDED"},
		"q":       {"source.branch.name = " + bbqlString(head) + " AND destination.branch.name = " + bbqlString(base)},
		"sort":    {"-created_on"},
		"pagelen": {"50"},
	}
	next := b.base + b.pulls() + "?" + q.Encode()
	var out []Request
	for page := 0; next != "" && page < maxPages; page++ {
		if err := b.onAPI(next); err != nil {
			return nil, err
		}
		var answer struct {
			Values []bitbucketPull `json:"values"`
			Next   string          `json:"next"`
		}
		if err := b.callURL(ctx, http.MethodGet, next, nil, &answer); err != nil {
			return nil, err
		}
		for _, p := range answer.Values {
			if p.Source.Branch.Name == head && p.Destination.Branch.Name == base {
				out = append(out, p.request())
			}
		}
		next = answer.Next
	}
	return out, nil
}

// Open is POST /repositories/{workspace}/{repo_slug}/pullrequests.
// Bitbucket answers a second request for a branch with the open one,
// updated. Bitbucket's pull requests have no labels.
func (b *bitbucket) Open(ctx context.Context, head, base, title, body string, labels []string) (Request, error) {
	var p bitbucketPull
	in := map[string]any{"title": title, "description": body, "source": branchEndpoint(head), "destination": branchEndpoint(base)}
	if err := b.call(ctx, http.MethodPost, b.pulls(), in, &p); err != nil {
		return Request{}, err
	}
	if len(labels) > 0 {
		return p.request(), fmt.Errorf("%w: Bitbucket Cloud pull requests have no labels", ErrLabels)
	}
	return p.request(), nil
}

// Update is PUT /repositories/{workspace}/{repo_slug}/pullrequests/{id}
// with the title and description; the fields left out keep their value.
func (b *bitbucket) Update(ctx context.Context, number int, title, body string) (Request, error) {
	var p bitbucketPull
	if err := b.call(ctx, http.MethodPut, fmt.Sprintf("%s/%d", b.pulls(), number), map[string]string{"title": title, "description": body}, &p); err != nil {
		return Request{}, err
	}
	return p.request(), nil
}

// bitbucketMessage reads Bitbucket Cloud's error answer: error.message,
// error.detail and the messages of error.fields.
func bitbucketMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string          `json:"message"`
			Detail  json.RawMessage `json:"detail"`
			Fields  json.RawMessage `json:"fields"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	parts := []string{e.Error.Message}
	var detail string
	if json.Unmarshal(e.Error.Detail, &detail) == nil && detail != "" {
		parts = append(parts, detail)
	}
	var byField map[string][]string
	_ = json.Unmarshal(e.Error.Fields, &byField)
	var fields []string
	for k, v := range byField {
		fields = append(fields, k+": "+strings.Join(v, ", "))
	}
	slices.Sort(fields)
	return strings.TrimSpace(strings.Join(append(parts, fields...), ": "))
}
