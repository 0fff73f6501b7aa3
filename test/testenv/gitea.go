package testenv

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// GiteaAPI stands in for the pull request calls of the REST API v1 of
// Gitea and Forgejo: GET and POST /api/v1/repos/{owner}/{repo}/pulls,
// PATCH /api/v1/repos/{owner}/{repo}/pulls/{index}, GET and POST
// /api/v1/repos/{owner}/{repo}/labels, authenticated with
// "Authorization: token" (or Bearer). Requests take labels by ID. It
// answers with the fields, status codes, pages (page, limit,
// X-Total-Count) and error bodies Gitea documents; there is no Gitea to
// run here.
type GiteaAPI struct {
	reviewsAPI
	// URL is the instance's base URL (the API is under /api/v1), served
	// with a certificate of the CA given to StartGiteaAPI.
	URL string

	mu     sync.Mutex
	labels map[string][]giteaLabel // by repository
	repoID map[string]int64
	// labelStatus, when set, answers the label calls, as for a token
	// without the right to labels.
	labelStatus int
}

// giteaMaxPage is Gitea's default MAX_RESPONSE_ITEMS.
const giteaMaxPage = 50

type giteaLabel struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Color string `json:"color"`
}

// StartGiteaAPI serves the stand-in over HTTPS with a certificate from
// ca; it accepts the tokens given.
func StartGiteaAPI(t testing.TB, ca *CA, tokens ...string) *GiteaAPI {
	t.Helper()
	g := &GiteaAPI{reviewsAPI: reviewsAPI{newReviews()}, labels: map[string][]giteaLabel{}, repoID: map[string]int64{}}
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

// Labels lists the names of a repository's labels, in the order they
// were created.
func (g *GiteaAPI) Labels(repo string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, l := range g.labels[repo] {
		out = append(out, l.Name)
	}
	return out
}

// FailLabelsWith answers the label calls with status and Gitea's error
// body for it (0: answer them again).
func (g *GiteaAPI) FailLabelsWith(status int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.labelStatus = status
}

// CreateLabel creates a label in a repository, as a person would, and
// returns its ID.
func (g *GiteaAPI) CreateLabel(repo, name string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addLabel(repo, name, "#00aabb").ID
}

func (g *GiteaAPI) addLabel(repo, name, color string) giteaLabel {
	// IDs are unique across the instance, as Gitea's are.
	var n int64 = 1
	for _, ls := range g.labels {
		n += int64(len(ls))
	}
	l := giteaLabel{ID: 100 + n, Name: name, Color: strings.TrimPrefix(color, "#")}
	g.labels[repo] = append(g.labels[repo], l)
	return l
}

func (g *GiteaAPI) id(repo string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.repoID[repo]; !ok {
		g.repoID[repo] = int64(len(g.repoID) + 1)
	}
	return g.repoID[repo]
}

// giteaPull is a pull request in Gitea's JSON, the fields the stand-in
// fills.
type giteaPull struct {
	ID      int64          `json:"id"`
	Number  int            `json:"number"`
	HTMLURL string         `json:"html_url"`
	State   string         `json:"state"`
	Title   string         `json:"title"`
	Body    string         `json:"body"`
	Merged  bool           `json:"merged"`
	Labels  []giteaLabel   `json:"labels"`
	Head    map[string]any `json:"head"`
	Base    map[string]any `json:"base"`
}

func (g *GiteaAPI) pullJSON(repo string, p Review) giteaPull {
	id := g.id(repo)
	out := giteaPull{
		ID: int64(p.Number) + 1000*id, Number: p.Number, Title: p.Title, Body: p.Body, State: p.State,
		HTMLURL: fmt.Sprintf("%s/%s/pulls/%d", g.URL, repo, p.Number),
		Head:    map[string]any{"ref": p.Head, "label": p.Head, "repo_id": id},
		Base:    map[string]any{"ref": p.Base, "label": p.Base, "repo_id": id},
		Labels:  []giteaLabel{},
	}
	g.mu.Lock()
	for _, name := range p.Labels {
		for _, l := range g.labels[repo] {
			if l.Name == name {
				out.Labels = append(out.Labels, l)
			}
		}
	}
	g.mu.Unlock()
	if p.State == "merged" {
		// Gitea has two states; a merged pull request is closed and merged.
		out.State, out.Merged = "closed", true
	}
	return out
}

// giteaError writes an error the way Gitea's API does.
func (g *GiteaAPI) giteaError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]string{"message": message, "url": g.URL + "/api/swagger"})
}

var giteaColor = regexp.MustCompile(`^#?[0-9a-fA-F]{6}$`)

func (g *GiteaAPI) serve(w http.ResponseWriter, r *http.Request) {
	s := g.s
	s.record(r)
	refuse := func(status int, why string) {
		s.problem(r, why)
		g.giteaError(w, status, why)
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/repos/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 3 || len(parts) > 4 || parts[0] == "" || parts[1] == "" || (parts[2] != "pulls" && parts[2] != "labels") {
		refuse(http.StatusNotFound, "unknown path "+r.URL.Path)
		return
	}
	repo := parts[0] + "/" + parts[1]
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "token ")
	if !ok {
		token, _ = strings.CutPrefix(auth, "Bearer ")
	}
	if !s.accepted(token) {
		g.giteaError(w, http.StatusUnauthorized, "user does not exist [uid: 0, name: ]")
		return
	}
	if status := s.failing(); status != 0 {
		g.giteaError(w, status, http.StatusText(status))
		return
	}
	if parts[2] == "labels" {
		g.serveLabels(w, r, repo, len(parts) == 3, refuse)
		return
	}

	if len(parts) == 4 {
		number, err := strconv.Atoi(parts[3])
		if err != nil || r.Method != http.MethodPatch {
			refuse(http.StatusNotFound, "want PATCH .../pulls/{index}")
			return
		}
		var in map[string]any
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusUnprocessableEntity, err.Error())
			return
		}
		p, ok := s.edit(repo, number, stringFields(in), "body")
		if !ok {
			g.giteaError(w, http.StatusNotFound, "The target couldn't be found.")
			return
		}
		// Gitea answers an edit with 201 Created.
		writeJSON(w, http.StatusCreated, g.pullJSON(repo, p))
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
			refuse(http.StatusUnprocessableEntity, "state "+state)
			return
		}
		var all []giteaPull
		for _, p := range s.list(repo, "", q.Get("base_branch"), "") {
			if state == "all" || (state == "open") == (p.State == "open") {
				all = append(all, g.pullJSON(repo, p))
			}
		}
		pageNo, _ := strconv.Atoi(q.Get("page"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		n := s.pageLen(limit, 30, giteaMaxPage)
		pageNo = max(pageNo, 1)
		out, _ := page(all, (pageNo-1)*n, n)
		w.Header().Set("X-Total-Count", strconv.Itoa(len(all)))
		writeJSON(w, http.StatusOK, out)
	case http.MethodPost:
		var in struct {
			Head, Base, Title, Body string
			Labels                  []int64
		}
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusUnprocessableEntity, err.Error())
			return
		}
		if in.Head == "" || in.Base == "" || in.Title == "" {
			refuse(http.StatusUnprocessableEntity, "head, base and title are required")
			return
		}
		if !s.exists(repo, in.Head) {
			g.giteaError(w, http.StatusNotFound, "The target couldn't be found.")
			return
		}
		var labels []string
		g.mu.Lock()
		for _, id := range in.Labels {
			i := slices.IndexFunc(g.labels[repo], func(l giteaLabel) bool { return l.ID == id })
			if i < 0 {
				s.problem(r, fmt.Sprintf("label %d is not a label of %s", id, repo))
				continue
			}
			labels = append(labels, g.labels[repo][i].Name)
		}
		g.mu.Unlock()
		p, created := s.open(repo, Review{Head: in.Head, Base: in.Base, Title: in.Title, Body: in.Body, Labels: labels})
		if !created {
			id := g.id(repo)
			g.giteaError(w, http.StatusConflict, fmt.Sprintf("pull request already exists for these targets [id: %d, issue_id: %d, head_repo_id: %d, base_repo_id: %d, head_branch: %s, base_branch: %s]",
				int64(p.Number)+1000*id, p.Number, id, id, p.Head, p.Base))
			return
		}
		writeJSON(w, http.StatusCreated, g.pullJSON(repo, p))
	default:
		refuse(http.StatusMethodNotAllowed, "want GET or POST .../pulls")
	}
}

// serveLabels answers GET (page, limit) and POST
// /api/v1/repos/{owner}/{repo}/labels.
func (g *GiteaAPI) serveLabels(w http.ResponseWriter, r *http.Request, repo string, list bool, refuse func(int, string)) {
	g.mu.Lock()
	status := g.labelStatus
	g.mu.Unlock()
	if status != 0 {
		g.giteaError(w, status, "token does not have at least one of required scope(s): [write:issue]")
		return
	}
	switch {
	case list && r.Method == http.MethodGet:
		q := r.URL.Query()
		pageNo, _ := strconv.Atoi(q.Get("page"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		n := g.s.pageLen(limit, 30, giteaMaxPage)
		g.mu.Lock()
		all := slices.Clone(g.labels[repo])
		g.mu.Unlock()
		out, _ := page(all, (max(pageNo, 1)-1)*n, n)
		w.Header().Set("X-Total-Count", strconv.Itoa(len(all)))
		writeJSON(w, http.StatusOK, out)
	case list && r.Method == http.MethodPost:
		var in struct{ Name, Color, Description string }
		if err := decodeJSON(r, &in); err != nil {
			refuse(http.StatusUnprocessableEntity, err.Error())
			return
		}
		if in.Name == "" || !giteaColor.MatchString(in.Color) {
			refuse(http.StatusUnprocessableEntity, fmt.Sprintf("a label needs a name and a color #rrggbb, got %q %q", in.Name, in.Color))
			return
		}
		g.mu.Lock()
		l := g.addLabel(repo, in.Name, in.Color)
		g.mu.Unlock()
		writeJSON(w, http.StatusCreated, l)
	default:
		refuse(http.StatusNotFound, "want GET or POST .../labels")
	}
}

// stringFields keeps the string fields of a JSON object.
func stringFields(in map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
