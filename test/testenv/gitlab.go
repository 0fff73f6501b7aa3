package testenv

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// GitLabAPI stands in for the merge request calls of GitLab's REST API
// v4: GET and POST /api/v4/projects/:id/merge_requests (with labels,
// comma-separated) and PUT
// /api/v4/projects/:id/merge_requests/:merge_request_iid, where :id is the
// project's URL-encoded path, authenticated with a PRIVATE-TOKEN header or
// "Authorization: Bearer". It answers with the fields and status codes
// GitLab documents; there is no GitLab to run here.
type GitLabAPI struct {
	reviewsAPI
	// URL is the instance's base URL (the API is under /api/v4), served
	// with a certificate of the CA given to StartGitLabAPI.
	URL string
}

// StartGitLabAPI serves the stand-in over HTTPS with a certificate from
// ca; it accepts the tokens given.
func StartGitLabAPI(t testing.TB, ca *CA, tokens ...string) *GitLabAPI {
	t.Helper()
	g := &GitLabAPI{reviewsAPI: reviewsAPI{newReviews()}}
	for _, tok := range tokens {
		g.AcceptToken(tok)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(g.serve))
	srv.TLS = ca.serverTLS(t)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	return g
}

// gitlabMR is a merge request in GitLab's JSON, the fields the stand-in
// fills.
type gitlabMR struct {
	IID          int      `json:"iid"`
	WebURL       string   `json:"web_url"`
	State        string   `json:"state"`
	Title        string   `json:"title"`
	Description  string   `json:"description"`
	SourceBranch string   `json:"source_branch"`
	TargetBranch string   `json:"target_branch"`
	Labels       []string `json:"labels"`
}

func (g *GitLabAPI) mrJSON(project string, m Review) gitlabMR {
	state := m.State
	if state == "open" {
		state = "opened"
	}
	return gitlabMR{
		IID: m.Number, State: state, Title: m.Title, Description: m.Body,
		SourceBranch: m.Head, TargetBranch: m.Base, Labels: append([]string{}, m.Labels...),
		WebURL: fmt.Sprintf("https://gitlab.example.com/%s/-/merge_requests/%d", project, m.Number),
	}
}

func gitlabError(w http.ResponseWriter, status int, message any) {
	writeJSON(w, status, map[string]any{"message": message})
}

func (g *GitLabAPI) serve(w http.ResponseWriter, r *http.Request) {
	s := g.s
	s.record(r)
	refuse := func(status int, why string) {
		s.problem(r, why)
		gitlabError(w, status, fmt.Sprintf("%d %s", status, http.StatusText(status)))
	}
	// The project is one path segment, its path URL-encoded (group%2Fproject):
	// an unencoded path is another route, which does not exist.
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v4/projects/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 2 || len(parts) > 3 || parts[1] != "merge_requests" {
		refuse(http.StatusNotFound, "unknown path "+r.URL.EscapedPath()+" (is the project path URL-encoded?)")
		return
	}
	project, err := url.PathUnescape(parts[0])
	if err != nil || !strings.Contains(project, "/") {
		refuse(http.StatusNotFound, "project "+parts[0]+" is not a URL-encoded path")
		return
	}
	token := r.Header.Get("PRIVATE-TOKEN")
	if token == "" {
		token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if !s.accepted(token) {
		gitlabError(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	if status := s.failing(); status != 0 {
		gitlabError(w, status, fmt.Sprintf("%d %s", status, http.StatusText(status)))
		return
	}

	if len(parts) == 3 {
		iid, err := strconv.Atoi(parts[2])
		if err != nil || r.Method != http.MethodPut {
			refuse(http.StatusNotFound, "want PUT .../merge_requests/:iid")
			return
		}
		var in map[string]string
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusBadRequest, err.Error())
			return
		}
		m, ok := s.edit(project, iid, in, "description")
		if !ok {
			gitlabError(w, http.StatusNotFound, "404 Not found")
			return
		}
		writeJSON(w, http.StatusOK, g.mrJSON(project, m))
		return
	}

	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		state := q.Get("state")
		switch state {
		case "", "all":
			state = ""
		case "opened":
			state = "open"
		case "closed", "merged":
		default:
			refuse(http.StatusBadRequest, "state "+state)
			return
		}
		out := []gitlabMR{}
		for _, m := range s.list(project, q.Get("source_branch"), q.Get("target_branch"), state) {
			out = append(out, g.mrJSON(project, m))
		}
		writeJSON(w, http.StatusOK, out)
	case http.MethodPost:
		var in map[string]string
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusBadRequest, err.Error())
			return
		}
		for _, f := range []string{"source_branch", "target_branch", "title"} {
			if in[f] == "" {
				s.problem(r, f+" is missing")
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": f + " is missing"})
				return
			}
		}
		if !s.exists(project, in["source_branch"]) {
			gitlabError(w, http.StatusUnprocessableEntity, []string{"Source branch does not exist"})
			return
		}
		// GitLab takes labels as one comma-separated string.
		var labels []string
		for l := range strings.SplitSeq(in["labels"], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) {
				labels = append(labels, l)
			}
		}
		m, created := s.open(project, Review{Head: in["source_branch"], Base: in["target_branch"], Title: in["title"], Body: in["description"], Labels: labels})
		if !created {
			gitlabError(w, http.StatusConflict, []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", m.Number)})
			return
		}
		writeJSON(w, http.StatusCreated, g.mrJSON(project, m))
	default:
		refuse(http.StatusMethodNotAllowed, "want GET or POST .../merge_requests")
	}
}
