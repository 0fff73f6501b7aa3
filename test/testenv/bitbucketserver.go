package testenv

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// BitbucketServerAPI stands in for the pull request calls of Bitbucket
// Data Center's REST API 1.0, under a context path as many installations
// are: GET and POST /bitbucket/rest/api/1.0/projects/{key}/repos/{slug}/
// pull-requests (with state, direction, at, order, start and limit), GET
// and PUT .../pull-requests/{id} (an update names the version it
// changes), authenticated with a bearer HTTP access token. It answers
// with the fields, status codes, pages and error bodies Bitbucket
// documents; there is no Bitbucket to run here. Bitbucket's pull
// requests have no labels.
type BitbucketServerAPI struct {
	reviewsAPI
	// URL is the instance's URL, with its context path /bitbucket (the
	// API is under /rest/api/1.0 below it), served with a certificate of
	// the CA given to StartBitbucketServerAPI.
	URL string
}

// bitbucketServerContext is the stand-in's context path.
const bitbucketServerContext = "/bitbucket"

// bitbucketServerMaxPage bounds a page, as Bitbucket's page.max settings
// do (theirs are larger).
const bitbucketServerMaxPage = 100

// StartBitbucketServerAPI serves the stand-in over HTTPS with a
// certificate from ca; it accepts the tokens given.
func StartBitbucketServerAPI(t testing.TB, ca *CA, tokens ...string) *BitbucketServerAPI {
	t.Helper()
	b := &BitbucketServerAPI{reviewsAPI: reviewsAPI{newReviews()}}
	for _, tok := range tokens {
		b.AcceptToken(tok)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(b.serve))
	srv.TLS = ca.serverTLS(t)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	b.URL = srv.URL + bitbucketServerContext
	return b
}

// bitbucketServerError writes an error the way Bitbucket Data Center
// does, with the exception's class name.
func bitbucketServerError(w http.ResponseWriter, status int, message, exception string, extra map[string]any) {
	e := map[string]any{"context": nil, "message": message, "exceptionName": exception}
	for k, v := range extra {
		e[k] = v
	}
	writeJSON(w, status, map[string]any{"errors": []any{e}})
}

func (b *BitbucketServerAPI) pullJSON(key, slug string, p Review) map[string]any {
	ref := func(branch string) map[string]any {
		return map[string]any{
			"id": "refs/heads/" + branch, "displayId": branch, "type": "BRANCH",
			"repository": map[string]any{"slug": slug, "project": map[string]string{"key": key}},
		}
	}
	state := strings.ToUpper(p.State)
	if state == "CLOSED" {
		state = "DECLINED"
	}
	return map[string]any{
		"id": p.Number, "version": p.Version, "title": p.Title, "description": p.Body, "state": state,
		"open": p.State == "open", "closed": p.State != "open",
		"fromRef": ref(p.Head), "toRef": ref(p.Base), "reviewers": []any{},
		"links": map[string]any{"self": []map[string]string{{
			"href": fmt.Sprintf("%s/projects/%s/repos/%s/pull-requests/%d", b.URL, key, slug, p.Number),
		}}},
	}
}

func (b *BitbucketServerAPI) serve(w http.ResponseWriter, r *http.Request) {
	s := b.s
	s.record(r)
	refuse := func(status int, why string) {
		s.problem(r, why)
		bitbucketServerError(w, status, why, "com.atlassian.bitbucket.validation.ArgumentValidationException", nil)
	}
	rest, ok := strings.CutPrefix(r.URL.Path, bitbucketServerContext+"/rest/api/1.0/projects/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 4 || len(parts) > 5 || parts[0] == "" || parts[1] != "repos" || parts[2] == "" || parts[3] != "pull-requests" {
		refuse(http.StatusNotFound, "unknown path "+r.URL.Path)
		return
	}
	key, slug := parts[0], parts[2]
	repo := key + "/" + slug
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !s.accepted(token) {
		bitbucketServerError(w, http.StatusUnauthorized, "Authentication failed. Please check your credentials and try again.", "com.atlassian.bitbucket.auth.IncorrectPasswordAuthenticationException", nil)
		return
	}
	if status := s.failing(); status != 0 {
		bitbucketServerError(w, status, http.StatusText(status), "com.atlassian.bitbucket.ServiceException", nil)
		return
	}

	if len(parts) == 5 {
		number, err := strconv.Atoi(parts[4])
		if err != nil {
			refuse(http.StatusNotFound, "unknown path "+r.URL.Path)
			return
		}
		cur, ok := s.find(repo, number)
		if !ok {
			bitbucketServerError(w, http.StatusNotFound, fmt.Sprintf("Pull request %d does not exist in %s/%s.", number, key, slug), "com.atlassian.bitbucket.pull.NoSuchPullRequestException", nil)
			return
		}
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, b.pullJSON(key, slug, cur))
		case http.MethodPut:
			var in struct {
				Version            *int
				Title, Description *string
				Reviewers          any
			}
			if err := decodeJSON(r, &in); err != nil {
				refuse(http.StatusBadRequest, err.Error())
				return
			}
			if in.Version == nil {
				refuse(http.StatusBadRequest, "an update must name the version it changes")
				return
			}
			if in.Reviewers == nil {
				s.problem(r, "an update without reviewers removes them all")
			}
			if *in.Version != cur.Version {
				bitbucketServerError(w, http.StatusConflict, "You are attempting to modify a pull request based on out-of-date information.",
					"com.atlassian.bitbucket.pull.PullRequestOutOfDateException", map[string]any{"currentVersion": cur.Version})
				return
			}
			if cur.State != "open" {
				bitbucketServerError(w, http.StatusConflict, "The pull request is not open.", "com.atlassian.bitbucket.pull.IllegalPullRequestStateException", nil)
				return
			}
			p, _ := s.update(repo, number, func(p *Review) {
				if in.Title != nil {
					p.Title = *in.Title
				}
				if in.Description != nil {
					p.Body = *in.Description
				}
			})
			writeJSON(w, http.StatusOK, b.pullJSON(key, slug, p))
		default:
			refuse(http.StatusMethodNotAllowed, "want GET or PUT .../pull-requests/{id}")
		}
		return
	}

	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		state := strings.ToUpper(q.Get("state"))
		switch state {
		case "":
			state = "OPEN"
		case "OPEN", "DECLINED", "MERGED", "ALL":
		default:
			refuse(http.StatusBadRequest, "state "+state)
			return
		}
		at := q.Get("at")
		if at != "" && !strings.HasPrefix(at, "refs/") {
			// Bitbucket reads a short name as a branch too; the client
			// names the ref in full.
			s.problem(r, "at "+at+" is not a full ref")
		}
		branch := strings.TrimPrefix(at, "refs/heads/")
		var head, base string
		switch strings.ToUpper(q.Get("direction")) {
		case "", "INCOMING":
			base = branch
		case "OUTGOING":
			head = branch
		default:
			refuse(http.StatusBadRequest, "direction "+q.Get("direction"))
			return
		}
		list := s.list(repo, head, base, "")
		if strings.ToUpper(q.Get("order")) == "OLDEST" {
			for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
				list[i], list[j] = list[j], list[i]
			}
		}
		var all []map[string]any
		for _, p := range list {
			j := b.pullJSON(key, slug, p)
			if state == "ALL" || j["state"] == state {
				all = append(all, j)
			}
		}
		start, _ := strconv.Atoi(q.Get("start"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		n := s.pageLen(limit, 25, bitbucketServerMaxPage)
		values, more := page(all, start, n)
		out := map[string]any{"size": len(values), "limit": n, "start": start, "isLastPage": !more, "values": values}
		if more {
			out["nextPageStart"] = start + len(values)
		}
		writeJSON(w, http.StatusOK, out)
	case http.MethodPost:
		type ref struct {
			ID         string
			Repository struct {
				Slug    string
				Project struct{ Key string }
			}
		}
		var in struct {
			Title, Description string
			FromRef, ToRef     ref
		}
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusBadRequest, err.Error())
			return
		}
		for _, rf := range []ref{in.FromRef, in.ToRef} {
			if !strings.HasPrefix(rf.ID, "refs/heads/") || rf.Repository.Slug != slug || rf.Repository.Project.Key != key {
				refuse(http.StatusBadRequest, fmt.Sprintf("ref %+v is not a branch of %s/%s", rf, key, slug))
				return
			}
		}
		head, base := strings.TrimPrefix(in.FromRef.ID, "refs/heads/"), strings.TrimPrefix(in.ToRef.ID, "refs/heads/")
		if in.Title == "" {
			refuse(http.StatusBadRequest, "title is required")
			return
		}
		if !s.exists(repo, head) {
			bitbucketServerError(w, http.StatusNotFound, fmt.Sprintf("Repository \"%s\" of project with key \"%s\" has no branch \"%s\"", slug, key, in.FromRef.ID), "com.atlassian.bitbucket.commit.NoSuchCommitException", nil)
			return
		}
		p, created := s.open(repo, Review{Head: head, Base: base, Title: in.Title, Body: in.Description})
		if !created {
			bitbucketServerError(w, http.StatusConflict, "Only one pull request may be open for a given source and target branch",
				"com.atlassian.bitbucket.pull.DuplicatePullRequestException", map[string]any{"existingPullRequest": b.pullJSON(key, slug, p)})
			return
		}
		writeJSON(w, http.StatusCreated, b.pullJSON(key, slug, p))
	default:
		refuse(http.StatusMethodNotAllowed, "want GET or POST .../pull-requests")
	}
}
