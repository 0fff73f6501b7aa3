package git

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/testenv"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
)

// reviewAPI is a stand-in of GitHub's or GitLab's API as the write-back
// tests drive it.
type reviewAPI interface {
	Reviews(repo string) []testenv.Review
	SetState(repo string, number int, state string)
	Calls() []string
	FailReviewsWith(status int)
	ReviewProblems() []string
	AcceptToken(token string)
	RequireBranches(exists func(project, branch string) bool)
}

// reviewEnv is one service's stand-in with a writer that knows it.
type reviewEnv struct {
	kind  forge.Kind
	api   reviewAPI
	hosts *forge.Hosts
	// list is the path of a repository's requests, %s the repository.
	list func(repo string) string
	// labelled is the calls that label a new request (GitHub's own call).
	labelled func(repo string, number int) []string
}

func (e *gitEnv) reviewEnvs(t *testing.T, ca *testenv.CA) []reviewEnv {
	gh := testenv.StartGitHubAPI(t, ca, nil)
	gl := testenv.StartGitLabAPI(t, ca)
	// Both serve the git server's host, 127.0.0.1; each writer is told
	// which one the Applications name.
	hosts, err := forge.NewHosts([]string{gh.URL}, []string{gl.URL})
	if err != nil {
		t.Fatal(err)
	}
	exists := func(project, branch string) bool { return slices.Contains(e.git.Branches(t, project), branch) }
	var envs []reviewEnv
	for _, api := range []reviewAPI{gh, gl} {
		// The repo-creds Secret's password is the API token too.
		api.AcceptToken(e.git.Password)
		api.RequireBranches(exists)
	}
	envs = append(envs,
		reviewEnv{kind: forge.GitHub, api: gh, hosts: hosts, list: func(repo string) string { return "/api/v3/repos/" + repo + "/pulls" },
			labelled: func(repo string, number int) []string {
				return []string{fmt.Sprintf("POST /api/v3/repos/%s/issues/%d/labels", repo, number)}
			}},
		reviewEnv{kind: forge.GitLab, api: gl, hosts: hosts, list: func(repo string) string {
			return "/api/v4/projects/" + strings.ReplaceAll(repo, "/", "%2F") + "/merge_requests"
		}, labelled: func(string, int) []string { return nil }},
	)
	return envs
}

// reviewUpdate is an Application of repository url moving app to tag on
// the branch image-updates, with a request of kind.
func reviewUpdate(name, url, tag string, kind forge.Kind) update {
	u := appUpdate(name, url)
	u.Branch = "main:image-updates"
	u.PullRequest = kind
	u.Images[0].New = imageref.Version{Tag: tag}
	return u
}

func (e *gitEnv) testPullRequests(t *testing.T) {
	ca := testenv.NewCA(t, "forge CA")
	for _, r := range e.reviewEnvs(t, ca) {
		t.Run(string(r.kind), func(t *testing.T) {
			ns := e.argoNamespace(t, "reviews-"+string(r.kind), true)
			e.configMap(t, ns, gitauth.TLSCertsConfigMap, map[string]string{"127.0.0.1": string(ca.PEM)})
			repo := "example/reviews-" + string(r.kind)
			url := e.repo(t, repo, nil)
			w := e.writer(t, ns, WithForgeHosts(r.hosts))
			list := r.list(repo)
			patch := map[forge.Kind]string{forge.GitHub: "PATCH", forge.GitLab: "PUT"}[r.kind]

			// One cycle, two Applications of one repository, one branch: one
			// request listing both, with the labels of both.
			billing, shop := reviewUpdate("billing", url, "v0.0.2", r.kind), reviewUpdate("shop", url, "v0.0.2", r.kind)
			billing.PullRequestLabels, shop.PullRequestLabels = []string{"image-update"}, []string{"image-update", "team-shop"}
			results := mustWrite(t, w, billing, shop)
			reviews := r.api.Reviews(repo)
			if len(reviews) != 1 {
				t.Fatalf("requests %+v, want one", reviews)
			}
			got := reviews[0]
			wantBody := "billing:\n- updates image eks-app tag 'v0.0.1' to 'v0.0.2'\n\nshop:\n- updates image eks-app tag 'v0.0.1' to 'v0.0.2'"
			if got.Head != "image-updates" || got.Base != "main" || got.Title != "build: automatic update of 2 applications" || got.Body != wantBody || got.State != "open" {
				t.Errorf("request %+v\nwant body %q", got, wantBody)
			}
			if !slices.Equal(got.Labels, []string{"image-update", "team-shop"}) {
				t.Errorf("labels %q", got.Labels)
			}
			for _, res := range results {
				if res.Branch != "image-updates" || res.PullRequest == "" || !strings.HasSuffix(res.PullRequest, "/1") || len(res.Changed) != 1 {
					t.Errorf("result %+v", res)
				}
			}
			if n := len(e.git.Log(t, repo, "main")); n != 1 {
				t.Errorf("main has %d commits, want the initial one only", n)
			}
			if diff := cmp.Diff(append([]string{"GET " + list, "POST " + list}, r.labelled(repo, 1)...), r.api.Calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}

			// The same changes again: the branch holds them, the request
			// says so; nothing is sent but the lookup.
			mustWrite(t, w, reviewUpdate("billing", url, "v0.0.2", r.kind), reviewUpdate("shop", url, "v0.0.2", r.kind))
			if diff := cmp.Diff([]string{"GET " + list}, r.api.Calls()); diff != "" {
				t.Errorf("unchanged: calls (-want +got):\n%s", diff)
			}

			// A newer version: one more commit on the branch, the open
			// request updated, not duplicated.
			res := mustWrite(t, w, reviewUpdate("billing", url, "v0.0.3", r.kind))[0]
			if diff := cmp.Diff([]string{"GET " + list, patch + " " + list + "/1"}, r.api.Calls()); diff != "" {
				t.Errorf("update: calls (-want +got):\n%s", diff)
			}
			reviews = r.api.Reviews(repo)
			if len(reviews) != 1 || reviews[0].Title != "build: automatic update of billing" || !strings.Contains(reviews[0].Body, "to 'v0.0.3'") || len(reviews[0].Labels) != 2 {
				t.Errorf("requests after an update: %+v", reviews)
			}
			if log := e.git.Log(t, repo, "image-updates"); len(log) != 4 || log[0].Hash != res.Commit {
				t.Errorf("branch history %v, want three commits on the initial one", subjects(log))
			}

			// Closed without merging: its branch gets nothing more; the next
			// change goes to a new branch from main, with a new request.
			r.api.SetState(repo, 1, "closed")
			res = mustWrite(t, w, reviewUpdate("billing", url, "v0.0.4", r.kind))[0]
			if res.Branch != "image-updates-2" || !strings.HasSuffix(res.PullRequest, "/2") {
				t.Errorf("after closing: result %+v", res)
			}
			if diff := cmp.Diff([]string{"GET " + list, "GET " + list, "POST " + list}, r.api.Calls()); diff != "" {
				t.Errorf("after closing: calls (-want +got):\n%s", diff)
			}
			if log := e.git.Log(t, repo, "image-updates-2"); len(log) != 2 || log[1].Subject != "initial commit" {
				t.Errorf("new branch history %v, want one commit on main", subjects(log))
			}
			if log := e.git.Log(t, repo, "image-updates"); len(log) != 4 {
				t.Errorf("the closed request's branch changed: %v", subjects(log))
			}
			// Merged: the same again, on the next free name.
			r.api.SetState(repo, 2, "merged")
			res = mustWrite(t, w, reviewUpdate("billing", url, "v0.0.5", r.kind))[0]
			if res.Branch != "image-updates-3" || len(r.api.Reviews(repo)) != 3 {
				t.Errorf("after merging: result %+v, requests %+v", res, r.api.Reviews(repo))
			}
			r.api.Calls()

			// Dry run: nothing pushed, nothing asked.
			dry := e.writer(t, ns, WithForgeHosts(r.hosts), WithDryRun(true))
			if res := mustWrite(t, dry, reviewUpdate("billing", url, "v0.0.6", r.kind))[0]; len(res.Changed) != 1 || res.PullRequest != "" {
				t.Errorf("dry run: %+v", res)
			}
			if calls := r.api.Calls(); len(calls) > 0 {
				t.Errorf("dry run called %v", calls)
			}
			if p := r.api.ReviewProblems(); len(p) > 0 {
				t.Errorf("the service would refuse: %v", p)
			}
		})
	}
}

func (e *gitEnv) testPullRequestErrors(t *testing.T) {
	ca := testenv.NewCA(t, "forge CA")
	envs := e.reviewEnvs(t, ca)
	tests := []struct {
		name    string
		status  int
		noHosts bool
		want    map[forge.Kind]string
	}{
		{name: "401", status: http.StatusUnauthorized, want: map[forge.Kind]string{
			forge.GitHub: `401 Unauthorized: "Bad credentials"`, forge.GitLab: `401 Unauthorized: "401 Unauthorized"`}},
		{name: "403", status: http.StatusForbidden, want: map[forge.Kind]string{
			forge.GitHub: `403 Forbidden: "Resource not accessible by integration"`, forge.GitLab: "403 Forbidden"}},
		{name: "422", status: http.StatusUnprocessableEntity, want: map[forge.Kind]string{
			forge.GitHub: `422 Unprocessable Entity: "Validation Failed"`, forge.GitLab: "422 Unprocessable Entity"}},
		{name: "503", status: http.StatusServiceUnavailable, want: map[forge.Kind]string{
			forge.GitHub: "503 Service Unavailable", forge.GitLab: "503 Service Unavailable"}},
		{name: "host not configured", noHosts: true, want: map[forge.Kind]string{
			forge.GitHub: "no github API is configured for host 127.0.0.1 (known hosts: github.com)",
			forge.GitLab: "no gitlab API is configured for host 127.0.0.1 (known hosts: gitlab.com)"}},
	}
	for _, r := range envs {
		for i, tt := range tests {
			t.Run(string(r.kind)+" "+tt.name, func(t *testing.T) {
				ns := e.argoNamespace(t, fmt.Sprintf("review-errors-%s-%d", r.kind, i), true)
				e.configMap(t, ns, gitauth.TLSCertsConfigMap, map[string]string{"127.0.0.1": string(ca.PEM)})
				repo := fmt.Sprintf("example/review-errors-%s-%d", r.kind, i)
				url := e.repo(t, repo, nil)
				var opts []Option
				if !tt.noHosts {
					opts = append(opts, WithForgeHosts(r.hosts))
				}
				w := e.writer(t, ns, opts...)
				r.api.FailReviewsWith(tt.status)
				t.Cleanup(func() { r.api.FailReviewsWith(0); r.api.Calls() })
				res := w.write(context.Background(), []update{reviewUpdate("billing", url, "v0.0.2", r.kind)})[0]
				if res.Err == nil || !strings.Contains(res.Err.Error(), tt.want[r.kind]) || !strings.Contains(res.Err.Error(), "Application argocd/billing") {
					t.Fatalf("got %v, want an error naming the Application with %q", res.Err, tt.want[r.kind])
				}
				if strings.Contains(res.Err.Error(), e.git.Password) {
					t.Errorf("the error shows the token: %v", res.Err)
				}
				if len(r.api.Reviews(repo)) != 0 {
					t.Errorf("requests %+v", r.api.Reviews(repo))
				}
			})
		}
	}
}
