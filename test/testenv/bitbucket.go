package testenv

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// BitbucketAPI stands in for the pull request calls of Bitbucket Cloud's
// REST API 2.0: GET and POST /2.0/repositories/{workspace}/{repo_slug}/
// pullrequests (with state, q, sort, pagelen and page) and PUT
// .../pullrequests/{id}, authenticated with a bearer access token, or with
// a user name and app password as basic authentication. It answers with
// the fields, status codes, pages (next) and error bodies Bitbucket
// documents; there is no Bitbucket to run here. Bitbucket's pull requests
// have no labels.
type BitbucketAPI struct {
	reviewsAPI
	// URL is the API's base URL in api.bitbucket.org's form,
	// https://HOST/2.0, served with a certificate of the CA given to
	// StartBitbucketAPI.
	URL string

	mu    sync.Mutex
	users map[string]string // user → app password
}

// bitbucketMaxPage is Bitbucket Cloud's largest pagelen for pull requests.
const bitbucketMaxPage = 50

// StartBitbucketAPI serves the stand-in over HTTPS with a certificate from
// ca; it accepts the access tokens given.
func StartBitbucketAPI(t testing.TB, ca *CA, tokens ...string) *BitbucketAPI {
	t.Helper()
	b := &BitbucketAPI{reviewsAPI: reviewsAPI{newReviews()}, users: map[string]string{}}
	for _, tok := range tokens {
		b.AcceptToken(tok)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(b.serve))
	srv.TLS = ca.serverTLS(t)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	b.URL = srv.URL + "/2.0"
	return b
}

// AcceptAppPassword makes the API take user's app password (or API
// token) as basic authentication.
func (b *BitbucketAPI) AcceptAppPassword(user, password string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.users[user] = password
}

func (b *BitbucketAPI) authorized(r *http.Request) bool {
	if user, pass, ok := r.BasicAuth(); ok {
		b.mu.Lock()
		defer b.mu.Unlock()
		want, known := b.users[user]
		return known && pass != "" && pass == want
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return b.s.accepted(token)
}

// bitbucketError writes an error the way Bitbucket Cloud does.
func bitbucketError(w http.ResponseWriter, status int, message string, fields map[string][]string) {
	e := map[string]any{"message": message}
	if fields != nil {
		e["fields"] = fields
	}
	writeJSON(w, status, map[string]any{"type": "error", "error": e})
}

func (b *BitbucketAPI) pullJSON(repo string, p Review) map[string]any {
	state := strings.ToUpper(p.State)
	if state == "CLOSED" {
		state = "DECLINED"
	}
	return map[string]any{
		"type": "pullrequest", "id": p.Number, "title": p.Title, "description": p.Body, "state": state,
		"summary":     map[string]string{"type": "rendered", "raw": p.Body, "markup": "markdown"},
		"source":      map[string]any{"branch": map[string]string{"name": p.Head}},
		"destination": map[string]any{"branch": map[string]string{"name": p.Base}},
		"links": map[string]any{
			"self": map[string]string{"href": fmt.Sprintf("%s/repositories/%s/pullrequests/%d", b.URL, repo, p.Number)},
			"html": map[string]string{"href": fmt.Sprintf("https://bitbucket.org/%s/pull-requests/%d", repo, p.Number)},
		},
	}
}

// bbqlTerm is one condition of the queries the stand-in reads.
var bbqlTerm = regexp.MustCompile(`^(source|destination)\.branch\.name\s*=\s*"((?:[^"\\]|\\.)*)"$`)

// parseBBQL reads a query of "source.branch.name = "x"" and
// "destination.branch.name = "y"" joined by AND.
func parseBBQL(q string) (head, base string, err error) {
	if q == "" {
		return "", "", nil
	}
	for term := range strings.SplitSeq(q, " AND ") {
		m := bbqlTerm.FindStringSubmatch(strings.TrimSpace(term))
		if m == nil {
			return "", "", fmt.Errorf("the stand-in does not read the query term %q", term)
		}
		v := strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[2])
		if m[1] == "source" {
			head = v
		} else {
			base = v
		}
	}
	return head, base, nil
}

func (b *BitbucketAPI) serve(w http.ResponseWriter, r *http.Request) {
	s := b.s
	s.record(r)
	refuse := func(status int, why string) {
		s.problem(r, why)
		bitbucketError(w, status, why, nil)
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/2.0/repositories/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 3 || len(parts) > 4 || parts[0] == "" || parts[1] == "" || parts[2] != "pullrequests" {
		refuse(http.StatusNotFound, "unknown path "+r.URL.Path)
		return
	}
	repo := parts[0] + "/" + parts[1]
	if !b.authorized(r) {
		bitbucketError(w, http.StatusUnauthorized, "Access token expired or invalid", nil)
		return
	}
	if status := s.failing(); status != 0 {
		bitbucketError(w, status, http.StatusText(status), nil)
		return
	}

	if len(parts) == 4 {
		number, err := strconv.Atoi(parts[3])
		if err != nil || r.Method != http.MethodPut {
			refuse(http.StatusNotFound, "want PUT .../pullrequests/{id}")
			return
		}
		var in map[string]any
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusBadRequest, err.Error())
			return
		}
		switch cur, ok := s.find(repo, number); {
		case !ok:
			bitbucketError(w, http.StatusNotFound, "Pull request not found", nil)
			return
		case cur.State != "open":
			bitbucketError(w, http.StatusBadRequest, "Only open pull requests can be updated", nil)
			return
		}
		p, _ := s.edit(repo, number, stringFields(in), "description")
		writeJSON(w, http.StatusOK, b.pullJSON(repo, p))
		return
	}

	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		states := q["state"]
		if len(states) == 0 {
			states = []string{"OPEN"}
		}
		head, base, err := parseBBQL(q.Get("q"))
		if err != nil {
			refuse(http.StatusBadRequest, err.Error())
			return
		}
		if sort := q.Get("sort"); sort != "" && sort != "-created_on" {
			refuse(http.StatusBadRequest, "the stand-in sorts by -created_on only, not "+sort)
			return
		}
		var all []map[string]any
		for _, p := range s.list(repo, head, base, "") {
			j := b.pullJSON(repo, p)
			if slices.Contains(states, j["state"].(string)) {
				all = append(all, j)
			}
		}
		pagelen, _ := strconv.Atoi(q.Get("pagelen"))
		n := s.pageLen(pagelen, 10, bitbucketMaxPage)
		pageNo, _ := strconv.Atoi(q.Get("page"))
		pageNo = max(pageNo, 1)
		values, more := page(all, (pageNo-1)*n, n)
		out := map[string]any{"size": len(all), "page": pageNo, "pagelen": n, "values": values}
		if more {
			next := url.Values{}
			for k, v := range q {
				next[k] = v
			}
			next.Set("page", strconv.Itoa(pageNo+1))
			out["next"] = b.URL + "/repositories/" + repo + "/pullrequests?" + next.Encode()
		}
		writeJSON(w, http.StatusOK, out)
	case http.MethodPost:
		var in struct {
			Title, Description  string
			Source, Destination struct {
				Branch struct{ Name string }
			}
			Labels any
		}
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusBadRequest, err.Error())
			return
		}
		if in.Labels != nil {
			s.problem(r, "Bitbucket pull requests have no labels")
		}
		head, base := in.Source.Branch.Name, in.Destination.Branch.Name
		if in.Title == "" || head == "" || base == "" {
			refuse(http.StatusBadRequest, "title, source.branch.name and destination.branch.name are required")
			return
		}
		if !s.exists(repo, head) {
			bitbucketError(w, http.StatusBadRequest, "There are no changes to be pulled", map[string][]string{"source": {"branch not found: " + head}})
			return
		}
		p, created := s.open(repo, Review{Head: head, Base: base, Title: in.Title, Body: in.Description})
		if !created {
			// Bitbucket brings the open request of the branch up to date.
			p, _ = s.edit(repo, p.Number, map[string]string{"title": in.Title, "description": in.Description}, "description")
			writeJSON(w, http.StatusOK, b.pullJSON(repo, p))
			return
		}
		writeJSON(w, http.StatusCreated, b.pullJSON(repo, p))
	default:
		refuse(http.StatusMethodNotAllowed, "want GET or POST .../pullrequests")
	}
}
