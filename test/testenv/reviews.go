package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Review is a pull request (GitHub, Gitea, Bitbucket, Azure DevOps) or
// merge request (GitLab) as a stand-in holds it.
type Review struct {
	// Number is GitHub's and Gitea's number, GitLab's IID, Bitbucket's
	// and Azure DevOps' ID.
	Number     int
	Head, Base string
	Title      string
	Body       string
	// State is "open", "closed" or "merged", whatever the service calls
	// them on the wire.
	State string
	// Labels are the request's labels, in the order they were added.
	Labels []string
	// Version counts the changes since the request was opened, as
	// Bitbucket Data Center's updates must name it.
	Version int
}

// reviews is the pull or merge requests of a stand-in, with the calls
// made and the tokens it accepts. Every method locks.
type reviews struct {
	mu       sync.Mutex
	byRepo   map[string][]*Review
	calls    []string
	tokens   map[string]bool
	status   int
	problems []string
	// branchExists, when set, is asked before a request is opened, as the
	// services refuse a request from a branch that was not pushed.
	branchExists func(project, branch string) bool
	// merge, when set, merges a request's branch into its base.
	merge func(project, head, base string) error
	// pageSize, when set, bounds the pages of listings below the
	// service's own bound.
	pageSize int
}

func newReviews() *reviews {
	return &reviews{byRepo: map[string][]*Review{}, tokens: map[string]bool{}}
}

func (s *reviews) acceptToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = true
}

func (s *reviews) accepted(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return token != "" && s.tokens[token]
}

func (s *reviews) record(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, r.Method+" "+r.URL.EscapedPath())
}

func (s *reviews) problem(r *http.Request, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, r.Method+" "+r.URL.Path+": "+why)
}

func (s *reviews) failing() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// list returns copies of a repository's requests, newest first, that
// match the filters ("" matches all).
func (s *reviews) list(repo, head, base, state string) []Review {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Review
	for _, r := range slices.Backward(s.byRepo[repo]) {
		if (head == "" || r.Head == head) && (base == "" || r.Base == base) && (state == "" || r.State == state) {
			out = append(out, *r)
		}
	}
	return out
}

// open adds a request unless head already has an open one into base, in
// which case it returns that one and false.
func (s *reviews) open(repo string, r Review) (Review, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.byRepo[repo] {
		if o.Head == r.Head && o.Base == r.Base && o.State == "open" {
			return *o, false
		}
	}
	r.Number = len(s.byRepo[repo]) + 1
	r.State = "open"
	r.Labels = slices.Clone(r.Labels)
	s.byRepo[repo] = append(s.byRepo[repo], &r)
	return r, true
}

// find returns a copy of request number of repo.
func (s *reviews) find(repo string, number int) (Review, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.byRepo[repo] {
		if o.Number == number {
			return *o, true
		}
	}
	return Review{}, false
}

// update applies change to request number of repo.
func (s *reviews) update(repo string, number int, change func(*Review)) (Review, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.byRepo[repo] {
		if o.Number == number {
			change(o)
			o.Version++
			return *o, true
		}
	}
	return Review{}, false
}

// edit sets the title and body of request number of repo from an update's
// JSON fields "title" and bodyField (GitHub's "body", GitLab's
// "description"); a field left out keeps its value.
func (s *reviews) edit(repo string, number int, in map[string]string, bodyField string) (Review, bool) {
	return s.update(repo, number, func(r *Review) {
		if v, ok := in["title"]; ok {
			r.Title = v
		}
		if v, ok := in[bodyField]; ok {
			r.Body = v
		}
	})
}

// label adds labels to request number of repo, each once.
func (s *reviews) label(repo string, number int, labels []string) (Review, bool) {
	return s.update(repo, number, func(r *Review) {
		for _, l := range labels {
			if !slices.Contains(r.Labels, l) {
				r.Labels = append(r.Labels, l)
			}
		}
	})
}

func (s *reviews) exists(project, branch string) bool {
	s.mu.Lock()
	f := s.branchExists
	s.mu.Unlock()
	return f == nil || f(project, branch)
}

// reviewsAPI is what tests do with either stand-in.
type reviewsAPI struct{ s *reviews }

// AcceptToken makes the API take token (personal access tokens, say).
func (a reviewsAPI) AcceptToken(token string) { a.s.acceptToken(token) }

// Reviews lists the requests of a repository (owner/name on GitHub, the
// project path on GitLab), oldest first.
func (a reviewsAPI) Reviews(repo string) []Review {
	out := a.s.list(repo, "", "", "")
	slices.Reverse(out)
	return out
}

// SetState closes ("closed") or merges ("merged") a request, as a
// reviewer would.
func (a reviewsAPI) SetState(repo string, number int, state string) {
	a.s.update(repo, number, func(r *Review) { r.State = state })
}

// Calls lists the calls made, as "METHOD path", and forgets them.
func (a reviewsAPI) Calls() []string {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	out := a.s.calls
	a.s.calls = nil
	return out
}

// FailReviewsWith answers every request call with status and the
// service's error body for it (0: answer them again).
func (a reviewsAPI) FailReviewsWith(status int) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	a.s.status = status
}

// ReviewProblems lists the calls the service would have refused as
// malformed, and why.
func (a reviewsAPI) ReviewProblems() []string {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	return append([]string(nil), a.s.problems...)
}

// MergeBranches sets how Merge merges a request's branch into its base
// (for example GitServer.FastForward), as the service's merge button
// would.
func (a reviewsAPI) MergeBranches(merge func(project, head, base string) error) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	a.s.merge = merge
}

// Merge merges open request number of repo as a reviewer would: its
// branch into its base (with the function of MergeBranches, if any), and
// the request is merged.
func (a reviewsAPI) Merge(repo string, number int) error {
	a.s.mu.Lock()
	merge := a.s.merge
	a.s.mu.Unlock()
	r, ok := a.s.find(repo, number)
	switch {
	case !ok:
		return fmt.Errorf("%s has no request %d", repo, number)
	case r.State != "open":
		return fmt.Errorf("request %d of %s is %s", number, repo, r.State)
	}
	if merge != nil {
		if err := merge(repo, r.Head, r.Base); err != nil {
			return fmt.Errorf("merge request %d of %s: %w", number, repo, err)
		}
	}
	a.SetState(repo, number, "merged")
	return nil
}

// SetPageSize makes listings answer at most n items a page (0: as many
// as the service's own bound), so that tests see several pages.
func (a reviewsAPI) SetPageSize(n int) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	a.s.pageSize = n
}

// pageLen is how many items a listing answers a page: asked, within the
// service's bound max and the test's.
func (s *reviews) pageLen(asked, def, max int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := asked
	if n <= 0 {
		n = def
	}
	n = min(n, max)
	if s.pageSize > 0 {
		n = min(n, s.pageSize)
	}
	return n
}

// page returns items[start:start+n], within bounds, and whether more
// follow.
func page[T any](items []T, start, n int) ([]T, bool) {
	if start >= len(items) || start < 0 {
		return []T{}, false
	}
	end := min(start+n, len(items))
	return items[start:end], end < len(items)
}

// RequireBranches makes opening a request from a branch that exists
// nowhere fail, as on the services; exists tells.
func (a reviewsAPI) RequireBranches(exists func(project, branch string) bool) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	a.s.branchExists = exists
}

// decodeJSON reads a JSON body of at most 1 MiB into v.
func decodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("Content-Type %q, want application/json", ct)
	}
	return json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
