package testenv

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// AzureDevOpsAPI stands in for the pull request calls of the Git REST
// API of Azure DevOps, as a server (or dev.azure.com) serves it: GET and
// POST /{organization}/{project}/_apis/git/repositories/{repository}/
// pullrequests (with searchCriteria, $top and $skip; labels by name at
// creation), GET and PATCH .../pullrequests/{id}, each with an
// api-version, authenticated with a personal access token as the
// password of basic authentication. It answers with the fields, status
// codes and error bodies Azure DevOps documents, and a request without
// credentials with its sign-in page; there is no Azure DevOps to run
// here.
type AzureDevOpsAPI struct {
	reviewsAPI
	// URL is the server's URL, under which the organizations (or
	// collections) are, served with a certificate of the CA given to
	// StartAzureDevOpsAPI.
	URL string
}

// Azure DevOps' bounds: the description of a request, and the length a
// listing cuts descriptions to.
const (
	azureMaxDescription  = 4000
	azureListDescription = 400
)

// StartAzureDevOpsAPI serves the stand-in over HTTPS with a certificate
// from ca; it accepts the personal access tokens given.
func StartAzureDevOpsAPI(t testing.TB, ca *CA, tokens ...string) *AzureDevOpsAPI {
	t.Helper()
	a := &AzureDevOpsAPI{reviewsAPI: reviewsAPI{newReviews()}}
	for _, tok := range tokens {
		a.AcceptToken(tok)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	srv.TLS = ca.serverTLS(t)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// azureError writes an error the way Azure DevOps does.
func azureError(w http.ResponseWriter, status int, message, typeKey string) {
	writeJSON(w, status, map[string]any{
		"$id": "1", "innerException": nil, "message": message,
		"typeName": "Microsoft.TeamFoundation.Git.Server." + typeKey + ", Microsoft.TeamFoundation.Git.Server",
		"typeKey":  typeKey, "errorCode": 0, "eventId": 3000,
	})
}

// azureRepo is a repository's path segments, unescaped.
type azureRepo struct{ org, project, name string }

func (r azureRepo) key() string { return r.org + "/" + r.project + "/" + r.name }

func (a *AzureDevOpsAPI) pullJSON(r azureRepo, p Review, list bool) map[string]any {
	status := map[string]string{"open": "active", "closed": "abandoned", "merged": "completed"}[p.State]
	desc := p.Body
	if list && utf8.RuneCountInString(desc) > azureListDescription {
		desc = string([]rune(desc)[:azureListDescription])
	}
	labels := []map[string]any{}
	for _, l := range p.Labels {
		labels = append(labels, map[string]any{"name": l, "active": true})
	}
	web := a.URL + "/" + url.PathEscape(r.org) + "/" + url.PathEscape(r.project) + "/_git/" + url.PathEscape(r.name)
	return map[string]any{
		"pullRequestId": p.Number, "codeReviewId": p.Number, "status": status,
		"title": p.Title, "description": desc,
		"sourceRefName": "refs/heads/" + p.Head, "targetRefName": "refs/heads/" + p.Base,
		"labels": labels,
		"repository": map[string]any{
			"name": r.name, "webUrl": web,
			"project": map[string]string{"name": r.project},
		},
		"url": fmt.Sprintf("%s/%s/%s/_apis/git/repositories/%s/pullRequests/%d", a.URL, url.PathEscape(r.org), url.PathEscape(r.project), url.PathEscape(r.name), p.Number),
	}
}

func (a *AzureDevOpsAPI) serve(w http.ResponseWriter, r *http.Request) {
	s := a.s
	s.record(r)
	refuse := func(status int, why string) {
		s.problem(r, why)
		azureError(w, status, why, "ArgumentException")
	}
	// /{org}/{project}/_apis/git/repositories/{repo}/pullrequests[/{id}],
	// each segment escaped.
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	if len(parts) < 7 || len(parts) > 8 || parts[2] != "_apis" || parts[3] != "git" || parts[4] != "repositories" || !strings.EqualFold(parts[6], "pullrequests") {
		refuse(http.StatusNotFound, "unknown path "+r.URL.EscapedPath())
		return
	}
	var seg [3]string
	for i, p := range []string{parts[0], parts[1], parts[5]} {
		v, err := url.PathUnescape(p)
		if err != nil || v == "" {
			refuse(http.StatusNotFound, "bad path segment "+p)
			return
		}
		seg[i] = v
	}
	repo := azureRepo{seg[0], seg[1], seg[2]}
	user, pat, ok := r.BasicAuth()
	switch {
	case !ok:
		// Without credentials Azure DevOps answers its sign-in page.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNonAuthoritativeInfo)
		_, _ = io.WriteString(w, "<html><head><title>Azure DevOps Services | Sign In</title></head></html>")
		return
	case !s.accepted(pat):
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusUnauthorized)
		return
	case user != "":
		s.problem(r, "a personal access token goes with an empty user name, not "+user)
	}
	if v := r.URL.Query().Get("api-version"); v != "7.0" && v != "7.1" {
		refuse(http.StatusBadRequest, "api-version "+v+": the stand-in serves 7.0 and 7.1")
		return
	}
	if status := s.failing(); status != 0 {
		azureError(w, status, fmt.Sprintf("TF400813: %s", http.StatusText(status)), "UnauthorizedRequestException")
		return
	}

	if len(parts) == 8 {
		number, err := strconv.Atoi(parts[7])
		if err != nil {
			refuse(http.StatusNotFound, "unknown path "+r.URL.EscapedPath())
			return
		}
		cur, ok := s.find(repo.key(), number)
		if !ok {
			azureError(w, http.StatusNotFound, "TF401180: The requested pull request was not found.", "GitPullRequestNotFoundException")
			return
		}
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, a.pullJSON(repo, cur, false))
		case http.MethodPatch:
			var in map[string]any
			if err := decodeJSON(r, &in); err != nil {
				refuse(http.StatusBadRequest, err.Error())
				return
			}
			fields := stringFields(in)
			if utf8.RuneCountInString(fields["description"]) > azureMaxDescription {
				refuse(http.StatusBadRequest, "the description is longer than 4000 characters")
				return
			}
			p, _ := s.edit(repo.key(), number, fields, "description")
			writeJSON(w, http.StatusOK, a.pullJSON(repo, p, false))
		default:
			refuse(http.StatusMethodNotAllowed, "want GET or PATCH .../pullrequests/{id}")
		}
		return
	}

	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		status := q.Get("searchCriteria.status")
		state := map[string]string{"": "open", "active": "open", "abandoned": "closed", "completed": "merged", "all": ""}
		want, known := state[status]
		if !known {
			refuse(http.StatusBadRequest, "searchCriteria.status "+status)
			return
		}
		head, hok := strings.CutPrefix(q.Get("searchCriteria.sourceRefName"), "refs/heads/")
		base, bok := strings.CutPrefix(q.Get("searchCriteria.targetRefName"), "refs/heads/")
		if !hok && head != "" || !bok && base != "" {
			refuse(http.StatusBadRequest, "refs are named in full, refs/heads/<branch>")
			return
		}
		var all []map[string]any
		for _, p := range s.list(repo.key(), head, base, want) {
			all = append(all, a.pullJSON(repo, p, true))
		}
		top, _ := strconv.Atoi(q.Get("$top"))
		skip, _ := strconv.Atoi(q.Get("$skip"))
		n := s.pageLen(top, 101, 1000)
		values, _ := page(all, skip, n)
		writeJSON(w, http.StatusOK, map[string]any{"value": values, "count": len(values)})
	case http.MethodPost:
		var in struct {
			SourceRefName, TargetRefName, Title, Description string
			Labels                                           []struct{ Name string }
		}
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusBadRequest, err.Error())
			return
		}
		head, hok := strings.CutPrefix(in.SourceRefName, "refs/heads/")
		base, bok := strings.CutPrefix(in.TargetRefName, "refs/heads/")
		if !hok || !bok || in.Title == "" {
			refuse(http.StatusBadRequest, "sourceRefName and targetRefName (refs/heads/<branch>) and title are required")
			return
		}
		if utf8.RuneCountInString(in.Description) > azureMaxDescription {
			refuse(http.StatusBadRequest, "the description is longer than 4000 characters")
			return
		}
		if !s.exists(repo.key(), head) {
			azureError(w, http.StatusNotFound, "TF401398: The pull request cannot be activated because the source and/or the target branch no longer exists, or the requested refs are not branches", "GitPullRequestCannotBeActivated")
			return
		}
		var labels []string
		for _, l := range in.Labels {
			if l.Name == "" {
				refuse(http.StatusBadRequest, "a label without a name")
				return
			}
			labels = append(labels, l.Name)
		}
		p, created := s.open(repo.key(), Review{Head: head, Base: base, Title: in.Title, Body: in.Description, Labels: labels})
		if !created {
			azureError(w, http.StatusConflict, fmt.Sprintf("TF401179: An active pull request for the source and target branch already exists. (Pull request %d)", p.Number), "GitPullRequestExistsException")
			return
		}
		writeJSON(w, http.StatusCreated, a.pullJSON(repo, p, false))
	default:
		refuse(http.StatusMethodNotAllowed, "want GET or POST .../pullrequests")
	}
}
