package testenv

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// githubPull is a pull request in GitHub's JSON, the fields the stand-in
// fills.
type githubPull struct {
	Number   int               `json:"number"`
	HTMLURL  string            `json:"html_url"`
	State    string            `json:"state"`
	Title    string            `json:"title"`
	Body     string            `json:"body"`
	Head     map[string]string `json:"head"`
	Base     map[string]string `json:"base"`
	MergedAt *string           `json:"merged_at"`
}

func (g *GitHubAPI) pullJSON(repo string, p Review) githubPull {
	out := githubPull{
		Number: p.Number, Title: p.Title, Body: p.Body, State: p.State,
		HTMLURL: fmt.Sprintf("https://github.example.com/%s/pull/%d", repo, p.Number),
		Head:    map[string]string{"ref": p.Head}, Base: map[string]string{"ref": p.Base},
	}
	if p.State == "merged" {
		// GitHub has two states; a merged pull request is closed with a
		// merge time.
		out.State = "closed"
		at := time.Now().UTC().Format(time.RFC3339)
		out.MergedAt = &at
	}
	return out
}

// servePulls answers /api/v3/repos/{owner}/{repo}/pulls[/{number}].
func (g *GitHubAPI) servePulls(w http.ResponseWriter, r *http.Request) {
	s := g.s
	s.record(r)
	refuse := func(status int, message, why string) {
		s.problem(r, why)
		githubError(w, status, message)
	}
	rest := strings.TrimPrefix(r.URL.Path, githubAPIPrefix+"/repos/")
	parts := strings.Split(rest, "/")
	labels := len(parts) == 5 && parts[2] == "issues" && parts[4] == "labels"
	if !labels && (len(parts) < 3 || len(parts) > 4 || parts[2] != "pulls") || parts[0] == "" || parts[1] == "" {
		refuse(http.StatusNotFound, "Not Found", "unknown path")
		return
	}
	owner, repo := parts[0], parts[0]+"/"+parts[1]
	if accept := r.Header.Get("Accept"); accept != "application/vnd.github+json" {
		refuse(http.StatusUnsupportedMediaType, "Unsupported 'Accept' header", fmt.Sprintf("Accept %q, want application/vnd.github+json", accept))
		return
	}
	if v := r.Header.Get("X-GitHub-Api-Version"); v != "" && v != "2022-11-28" {
		refuse(http.StatusBadRequest, "Invalid API version", "X-GitHub-Api-Version "+v)
		return
	}
	if r.Header.Get("User-Agent") == "" {
		refuse(http.StatusForbidden, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header", "no User-Agent")
		return
	}
	// GitHub takes "Bearer <token>" and the older "token <token>".
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		token, _ = strings.CutPrefix(auth, "token ")
	}
	if !s.accepted(token) {
		githubError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	switch status := s.failing(); status {
	case 0:
	case http.StatusUnauthorized:
		githubError(w, status, "Bad credentials")
		return
	case http.StatusForbidden:
		githubError(w, status, "Resource not accessible by integration")
		return
	case http.StatusUnprocessableEntity:
		githubError(w, status, "Validation Failed")
		return
	default:
		githubError(w, status, http.StatusText(status))
		return
	}

	if labels {
		// POST /repos/{owner}/{repo}/issues/{number}/labels: a pull
		// request takes labels as an issue; the answer is its labels.
		number, err := strconv.Atoi(parts[3])
		var in struct {
			Labels []string `json:"labels"`
		}
		if err != nil || r.Method != http.MethodPost {
			refuse(http.StatusNotFound, "Not Found", "want POST .../issues/{number}/labels")
			return
		}
		if err := decodeJSON(r, &in); err != nil || len(in.Labels) == 0 || slices.Contains(in.Labels, "") {
			refuse(http.StatusUnprocessableEntity, "Validation Failed", "labels must be a list of names")
			return
		}
		p, ok := s.label(repo, number, in.Labels)
		if !ok {
			githubError(w, http.StatusNotFound, "Not Found")
			return
		}
		out := []map[string]string{}
		for _, l := range p.Labels {
			out = append(out, map[string]string{"name": l})
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	if len(parts) == 4 {
		number, err := strconv.Atoi(parts[3])
		if err != nil || r.Method != http.MethodPatch {
			refuse(http.StatusNotFound, "Not Found", "want PATCH .../pulls/{number}")
			return
		}
		var in map[string]string
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusBadRequest, "Problems parsing JSON", err.Error())
			return
		}
		p, ok := s.edit(repo, number, in, "body")
		if !ok {
			githubError(w, http.StatusNotFound, "Not Found")
			return
		}
		writeJSON(w, http.StatusOK, g.pullJSON(repo, p))
		return
	}

	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		state := q.Get("state")
		switch state {
		case "", "open":
			state = "open"
		case "closed", "all":
		default:
			refuse(http.StatusUnprocessableEntity, "Validation Failed", "state "+state)
			return
		}
		head := q.Get("head")
		if head != "" {
			// GitHub reads head as user:ref-name or organization:ref-name.
			user, ref, ok := strings.Cut(head, ":")
			if !ok {
				refuse(http.StatusUnprocessableEntity, "Validation Failed", "head "+head+" is not <owner>:<branch>")
				return
			}
			if user != owner {
				writeJSON(w, http.StatusOK, []githubPull{})
				return
			}
			head = ref
		}
		out := []githubPull{}
		for _, p := range s.list(repo, head, q.Get("base"), "") {
			if state == "all" || (state == "open") == (p.State == "open") {
				out = append(out, g.pullJSON(repo, p))
			}
		}
		writeJSON(w, http.StatusOK, out)
	case http.MethodPost:
		var in map[string]string
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusBadRequest, "Problems parsing JSON", err.Error())
			return
		}
		head := strings.TrimPrefix(in["head"], owner+":")
		if head == "" || in["base"] == "" || in["title"] == "" {
			refuse(http.StatusUnprocessableEntity, "Validation Failed", "head, base and title are required")
			return
		}
		if !s.exists(repo, head) {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
				"message": "Validation Failed",
				"errors":  []map[string]string{{"resource": "PullRequest", "field": "head", "code": "invalid"}},
			})
			return
		}
		p, created := s.open(repo, Review{Head: head, Base: in["base"], Title: in["title"], Body: in["body"]})
		if !created {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
				"message": "Validation Failed",
				"errors": []map[string]string{{
					"resource": "PullRequest", "code": "custom",
					"message": fmt.Sprintf("A pull request already exists for %s:%s.", owner, head),
				}},
				"documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
			})
			return
		}
		writeJSON(w, http.StatusCreated, g.pullJSON(repo, p))
	default:
		refuse(http.StatusNotFound, "Not Found", "want GET or POST .../pulls")
	}
}
