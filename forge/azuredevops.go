package forge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// azureDevOps speaks the Git REST API of Azure DevOps for pull requests
// (https://learn.microsoft.com/rest/api/azure/devops/git/pull-requests).
type azureDevOps struct {
	*caller
	// repo is {organization}/{project}/_apis/git/repositories/{repository},
	// escaped; web is the repository's web page.
	repo, web  string
	apiVersion string
}

// Azure DevOps Services takes the newest API version; a server 7.0, the
// newest Azure DevOps Server 2022 serves.
const (
	azureServicesAPIVersion = "7.1"
	azureServerAPIVersion   = "7.0"
)

// azureMaxDescription is the most characters a description may have.
const azureMaxDescription = 4000

func newAzureDevOps(c *caller, project string) (Client, error) {
	parts := strings.Split(project, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return nil, fmt.Errorf("Azure DevOps repository %q is not <organization>/<project>/<repository>", project)
	}
	org, proj, name := url.PathEscape(parts[0]), url.PathEscape(parts[1]), url.PathEscape(parts[2])
	a := &azureDevOps{
		caller:     c,
		repo:       "/" + org + "/" + proj + "/_apis/git/repositories/" + name,
		web:        c.base + "/" + org + "/" + proj + "/_git/" + name,
		apiVersion: azureServerAPIVersion,
	}
	if u, err := url.Parse(c.base); err == nil && strings.EqualFold(u.Host, "dev.azure.com") {
		a.apiVersion = azureServicesAPIVersion
	}
	return a, nil
}

// azureAuth sends a personal access token as basic authentication with an
// empty user name, as Azure DevOps documents.
func azureAuth(h http.Header, token string) {
	h.Set("Accept", "application/json")
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(":"+token)))
}

// azurePull is what a pull request's JSON holds of use here.
type azurePull struct {
	PullRequestID int    `json:"pullRequestId"`
	Status        string `json:"status"`
	Title         string `json:"title"`
	Description   string `json:"description"`
	SourceRefName string `json:"sourceRefName"`
	TargetRefName string `json:"targetRefName"`
	Repository    struct {
		WebURL string `json:"webUrl"`
	} `json:"repository"`
}

func (a *azureDevOps) request(p azurePull) Request {
	r := Request{Number: p.PullRequestID, Title: p.Title, Body: p.Description, State: StateOpen}
	web := a.web
	if p.Repository.WebURL != "" {
		web = p.Repository.WebURL
	}
	r.URL = web + "/pullrequest/" + strconv.Itoa(p.PullRequestID)
	switch p.Status {
	case "completed":
		r.State = StateMerged
	case "abandoned":
		r.State = StateClosed
	}
	return r
}

// path is the pull requests' path, or one's, with the API version.
func (a *azureDevOps) path(number int, q url.Values) string {
	p := a.repo + "/pullrequests"
	if number > 0 {
		p += "/" + strconv.Itoa(number)
	}
	if q == nil {
		q = url.Values{}
	}
	q.Set("api-version", a.apiVersion)
	return p + "?" + q.Encode()
}

// azurePageSize is how many requests a page of Find asks for.
const azurePageSize = 100

// Find is GET .../pullrequests?searchCriteria.sourceRefName=refs/heads/
// {head}&searchCriteria.targetRefName=refs/heads/{base}
// &searchCriteria.status=all, newest first, page by page ($top, $skip).
// The list cuts descriptions at 400 characters, so an active request is
// read whole (GET .../pullrequests/{id}).
func (a *azureDevOps) Find(ctx context.Context, head, base string) ([]Request, error) {
	var out []Request
	for page := 0; page < maxPages; page++ {
		q := url.Values{
			"searchCriteria.sourceRefName": {"refs/heads/" + head},
			"searchCriteria.targetRefName": {"refs/heads/" + base},
			"searchCriteria.status":        {"all"},
			"$top":                         {strconv.Itoa(azurePageSize)},
			"$skip":                        {strconv.Itoa(page * azurePageSize)},
		}
		var answer struct {
			Value []azurePull `json:"value"`
		}
		if err := a.call(ctx, http.MethodGet, a.path(0, q), nil, &answer); err != nil {
			return nil, err
		}
		for _, p := range answer.Value {
			if p.SourceRefName != "refs/heads/"+head || p.TargetRefName != "refs/heads/"+base {
				continue
			}
			if p.Status == "active" {
				if err := a.call(ctx, http.MethodGet, a.path(p.PullRequestID, nil), nil, &p); err != nil {
					return nil, err
				}
			}
			out = append(out, a.request(p))
		}
		if len(answer.Value) < azurePageSize {
			break
		}
	}
	return out, nil
}

// Open is POST .../pullrequests, with the labels by name.
func (a *azureDevOps) Open(ctx context.Context, head, base, title, body string, labels []string) (Request, error) {
	in := map[string]any{
		"sourceRefName": "refs/heads/" + head, "targetRefName": "refs/heads/" + base,
		"title": title, "description": azureDescription(body),
	}
	if len(labels) > 0 {
		tags := make([]map[string]string, 0, len(labels))
		for _, l := range labels {
			tags = append(tags, map[string]string{"name": l})
		}
		in["labels"] = tags
	}
	var p azurePull
	if err := a.call(ctx, http.MethodPost, a.path(0, nil), in, &p); err != nil {
		if statusOf(err) == http.StatusConflict && strings.Contains(err.Error(), "GitPullRequestExistsException") {
			return Request{}, fmt.Errorf("%w: %w", ErrAlreadyExists, err)
		}
		return Request{}, err
	}
	return a.request(p), nil
}

// Update is PATCH .../pullrequests/{id}.
func (a *azureDevOps) Update(ctx context.Context, number int, title, body string) (Request, error) {
	var p azurePull
	if err := a.call(ctx, http.MethodPatch, a.path(number, nil), map[string]string{"title": title, "description": azureDescription(body)}, &p); err != nil {
		return Request{}, err
	}
	return a.request(p), nil
}

// azureDescription cuts a description to the length Azure DevOps takes.
func azureDescription(s string) string {
	if utf8.RuneCountInString(s) <= azureMaxDescription {
		return s
	}
	return string([]rune(s)[:azureMaxDescription-1]) + "…"
}

// azureMessage reads Azure DevOps' error answer: "message", with its
// "typeKey" (GitPullRequestExistsException).
func azureMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
		TypeKey string `json:"typeKey"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	if e.TypeKey != "" {
		return strings.TrimSpace(e.Message + " (" + e.TypeKey + ")")
	}
	return e.Message
}
