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
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// reviewAPI is a forge's stand-in as the write-back tests drive it.
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
	kind  settings.Forge
	api   reviewAPI
	hosts *forge.Hosts
	// gitPath is where the git server keeps the repository the service
	// names name (example/deploy): under the service's own path form.
	gitPath func(name string) string
	// list is the path of a repository's requests.
	list func(name string) string
	// find, open and update are the calls that find a branch's requests
	// (when it has an open one: Azure DevOps reads it whole), open one
	// with labels, and update one.
	find   func(name string, open bool) []string
	open   func(name string, number int, labels []string) []string
	update func(name string, number int) []string
}

func (e *gitEnv) reviewEnvs(t *testing.T, ca *testenv.CA) []reviewEnv {
	gh := testenv.StartGitHubAPI(t, ca, nil)
	gl := testenv.StartGitLabAPI(t, ca)
	gt := testenv.StartGiteaAPI(t, ca)
	bb := testenv.StartBitbucketAPI(t, ca)
	bbs := testenv.StartBitbucketServerAPI(t, ca)
	az := testenv.StartAzureDevOpsAPI(t, ca)
	// All serve the git server's host, 127.0.0.1; each writer is told
	// which one the Applications name.
	hosts, err := forge.NewHosts([]string{gh.URL}, []string{gl.URL},
		forge.WithInstances(settings.ForgeGitea, gt.URL), forge.WithInstances(settings.ForgeBitbucket, bb.URL),
		forge.WithInstances(settings.ForgeBitbucketServer, bbs.URL), forge.WithInstances(settings.ForgeAzureDevOps, az.URL))
	if err != nil {
		t.Fatal(err)
	}
	same := func(name string) string { return name }
	one := func(method string) func(string) func(string, int) []string {
		return func(list string) func(string, int) []string {
			return func(_ string, n int) []string { return []string{fmt.Sprintf("%s %s/%d", method, list, n)} }
		}
	}
	get := func(list func(string) string) func(string, bool) []string {
		return func(name string, _ bool) []string { return []string{"GET " + list(name)} }
	}
	post := func(list func(string) string) func(string, int, []string) []string {
		return func(name string, _ int, _ []string) []string { return []string{"POST " + list(name)} }
	}
	ghList := func(name string) string { return "/api/v3/repos/" + name + "/pulls" }
	glList := func(name string) string {
		return "/api/v4/projects/" + strings.ReplaceAll(name, "/", "%2F") + "/merge_requests"
	}
	gtList := func(name string) string { return "/api/v1/repos/" + name + "/pulls" }
	bbList := func(name string) string { return "/2.0/repositories/" + name + "/pullrequests" }
	bbsList := func(name string) string {
		key, slug, _ := strings.Cut(name, "/")
		return "/bitbucket/rest/api/1.0/projects/" + key + "/repos/" + slug + "/pull-requests"
	}
	azList := func(name string) string {
		org, rest, _ := strings.Cut(name, "/")
		proj, repo, _ := strings.Cut(rest, "/")
		return "/" + org + "/" + proj + "/_apis/git/repositories/" + repo + "/pullrequests"
	}
	envs := []reviewEnv{
		{kind: settings.ForgeGitHub, api: gh, gitPath: same, list: ghList, find: get(ghList),
			open: func(name string, n int, labels []string) []string {
				calls := []string{"POST " + ghList(name)}
				if len(labels) > 0 {
					calls = append(calls, fmt.Sprintf("POST /api/v3/repos/%s/issues/%d/labels", name, n))
				}
				return calls
			},
			update: func(name string, n int) []string { return one("PATCH")(ghList(name))(name, n) }},
		{kind: settings.ForgeGitLab, api: gl, gitPath: same, list: glList, find: get(glList), open: post(glList),
			update: func(name string, n int) []string { return one("PUT")(glList(name))(name, n) }},
		{kind: settings.ForgeGitea, api: gt, gitPath: same, list: gtList, find: get(gtList),
			open: func(name string, _ int, labels []string) []string {
				var calls []string
				if len(labels) > 0 {
					calls = append(calls, "GET /api/v1/repos/"+name+"/labels")
					for range labels {
						calls = append(calls, "POST /api/v1/repos/"+name+"/labels")
					}
				}
				return append(calls, "POST "+gtList(name))
			},
			update: func(name string, n int) []string { return one("PATCH")(gtList(name))(name, n) }},
		{kind: settings.ForgeBitbucket, api: bb, gitPath: same, list: bbList, find: get(bbList), open: post(bbList),
			update: func(name string, n int) []string { return one("PUT")(bbList(name))(name, n) }},
		{kind: settings.ForgeBitbucketServer, api: bbs, list: bbsList, find: get(bbsList), open: post(bbsList),
			gitPath: func(name string) string { return "bitbucket/scm/" + name },
			update: func(name string, n int) []string {
				return append(one("GET")(bbsList(name))(name, n), one("PUT")(bbsList(name))(name, n)...)
			}},
		{kind: settings.ForgeAzureDevOps, api: az, list: azList, open: post(azList),
			gitPath: func(name string) string {
				org, rest, _ := strings.Cut(name, "/")
				proj, repo, _ := strings.Cut(rest, "/")
				return org + "/" + proj + "/_git/" + repo
			},
			find: func(name string, open bool) []string {
				calls := []string{"GET " + azList(name)}
				if open {
					// The open request, whose description the list cuts.
					for _, r := range az.Reviews(name) {
						if r.State == "open" {
							calls = append(calls, fmt.Sprintf("GET %s/%d", azList(name), r.Number))
						}
					}
				}
				return calls
			},
			update: func(name string, n int) []string { return one("PATCH")(azList(name))(name, n) }},
	}
	// The credentials name a user: Bitbucket Cloud takes the password as
	// that user's app password.
	bb.AcceptAppPassword(e.git.Username, e.git.Password)
	for i := range envs {
		r := &envs[i]
		r.hosts = hosts
		// The repo-creds Secret's password is the API token too.
		r.api.AcceptToken(e.git.Password)
		gitPath := r.gitPath
		r.api.RequireBranches(func(project, branch string) bool {
			return slices.Contains(e.git.Branches(t, gitPath(project)), branch)
		})
	}
	return envs
}

// reviewName is the repository a test of kind names name on that
// service: Bitbucket Data Center's project keys are upper case, Azure
// DevOps' repositories belong to an organization's project.
func reviewName(kind settings.Forge, name string) string {
	switch kind {
	case settings.ForgeBitbucketServer:
		return "PRJ/" + name
	case settings.ForgeAzureDevOps:
		return "org/project/" + name
	}
	return "example/" + name
}

// reviewUpdate is an Application of repository url moving app to tag on
// the branch image-updates, with a request of kind.
func reviewUpdate(name, url, tag string, kind settings.Forge) update {
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
			e.configMap(t, ns, repoaccess.TLSCertsConfigMap, map[string]string{"127.0.0.1": string(ca.PEM)})
			repo := reviewName(r.kind, "reviews-"+string(r.kind))
			gitRepo := r.gitPath(repo)
			url := e.repo(t, gitRepo, nil)
			w := e.writer(t, ns, WithForgeHosts(r.hosts))
			list := r.list(repo)
			labels := []string{"image-update", "team-shop"}
			if !r.kind.Labels() {
				labels = nil
			}

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
			if !slices.Equal(got.Labels, labels) {
				t.Errorf("labels %q, want %q", got.Labels, labels)
			}
			for _, res := range results {
				if res.Branch != "image-updates" || res.PullRequest == "" || !strings.HasSuffix(res.PullRequest, "/1") || len(res.Changed) != 1 {
					t.Errorf("result %+v", res)
				}
			}
			if n := len(e.git.Log(t, gitRepo, "main")); n != 1 {
				t.Errorf("main has %d commits, want the initial one only", n)
			}
			if diff := cmp.Diff(append(r.find(repo, false), r.open(repo, 1, labels)...), r.api.Calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}

			// The same changes again: the branch holds them, the request
			// says so; nothing is sent but the lookup.
			mustWrite(t, w, reviewUpdate("billing", url, "v0.0.2", r.kind), reviewUpdate("shop", url, "v0.0.2", r.kind))
			if diff := cmp.Diff(r.find(repo, true), r.api.Calls()); diff != "" {
				t.Errorf("unchanged: calls (-want +got):\n%s", diff)
			}

			// A newer version: one more commit on the branch, the open
			// request updated, not duplicated.
			res := mustWrite(t, w, reviewUpdate("billing", url, "v0.0.3", r.kind))[0]
			if diff := cmp.Diff(append(r.find(repo, true), r.update(repo, 1)...), r.api.Calls()); diff != "" {
				t.Errorf("update: calls (-want +got):\n%s", diff)
			}
			reviews = r.api.Reviews(repo)
			if len(reviews) != 1 || reviews[0].Title != "build: automatic update of billing" || !strings.Contains(reviews[0].Body, "to 'v0.0.3'") || len(reviews[0].Labels) != len(labels) {
				t.Errorf("requests after an update: %+v", reviews)
			}
			if log := e.git.Log(t, gitRepo, "image-updates"); len(log) != 4 || log[0].Hash != res.Commit {
				t.Errorf("branch history %v, want three commits on the initial one", subjects(log))
			}

			// Closed without merging: its branch gets nothing more; the next
			// change goes to a new branch from main, with a new request.
			r.api.SetState(repo, 1, "closed")
			res = mustWrite(t, w, reviewUpdate("billing", url, "v0.0.4", r.kind))[0]
			if res.Branch != "image-updates-2" || !strings.HasSuffix(res.PullRequest, "/2") {
				t.Errorf("after closing: result %+v", res)
			}
			if diff := cmp.Diff(append([]string{"GET " + list, "GET " + list}, r.open(repo, 2, nil)...), r.api.Calls()); diff != "" {
				t.Errorf("after closing: calls (-want +got):\n%s", diff)
			}
			if log := e.git.Log(t, gitRepo, "image-updates-2"); len(log) != 2 || log[1].Subject != "initial commit" {
				t.Errorf("new branch history %v, want one commit on main", subjects(log))
			}
			if log := e.git.Log(t, gitRepo, "image-updates"); len(log) != 4 {
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
		want    map[settings.Forge]string
	}{
		{name: "401", status: http.StatusUnauthorized, want: map[settings.Forge]string{
			settings.ForgeGitHub: `401 Unauthorized: "Bad credentials"`, settings.ForgeGitLab: `401 Unauthorized: "401 Unauthorized"`,
			settings.ForgeGitea: `401 Unauthorized: "Unauthorized"`, settings.ForgeBitbucket: `401 Unauthorized: "Unauthorized"`,
			settings.ForgeBitbucketServer: `401 Unauthorized: "Unauthorized (ServiceException)"`, settings.ForgeAzureDevOps: `401 Unauthorized: "TF400813: Unauthorized`}},
		{name: "403", status: http.StatusForbidden, want: map[settings.Forge]string{
			settings.ForgeGitHub: `403 Forbidden: "Resource not accessible by integration"`, settings.ForgeGitLab: "403 Forbidden",
			settings.ForgeGitea: "403 Forbidden", settings.ForgeBitbucket: "403 Forbidden", settings.ForgeBitbucketServer: "403 Forbidden", settings.ForgeAzureDevOps: "403 Forbidden"}},
		{name: "422", status: http.StatusUnprocessableEntity, want: map[settings.Forge]string{
			settings.ForgeGitHub: `422 Unprocessable Entity: "Validation Failed"`, settings.ForgeGitLab: "422 Unprocessable Entity",
			settings.ForgeGitea: "422 Unprocessable Entity", settings.ForgeBitbucket: "422 Unprocessable Entity", settings.ForgeBitbucketServer: "422 Unprocessable Entity", settings.ForgeAzureDevOps: "422 Unprocessable Entity"}},
		{name: "503", status: http.StatusServiceUnavailable, want: map[settings.Forge]string{
			settings.ForgeGitHub: "503 Service Unavailable", settings.ForgeGitLab: "503 Service Unavailable",
			settings.ForgeGitea: "503 Service Unavailable", settings.ForgeBitbucket: "503 Service Unavailable", settings.ForgeBitbucketServer: "503 Service Unavailable", settings.ForgeAzureDevOps: "503 Service Unavailable"}},
		{name: "host not configured", noHosts: true, want: map[settings.Forge]string{
			settings.ForgeGitHub:          "no github API is configured for host 127.0.0.1 (known hosts: github.com)",
			settings.ForgeGitLab:          "no gitlab API is configured for host 127.0.0.1 (known hosts: gitlab.com)",
			settings.ForgeGitea:           "no gitea API is configured for host 127.0.0.1 (known hosts: codeberg.org, gitea.com)",
			settings.ForgeBitbucket:       "no bitbucket API is configured for host 127.0.0.1 (known hosts: bitbucket.org)",
			settings.ForgeBitbucketServer: "no bitbucket-server API is configured for host 127.0.0.1 (known hosts: none)",
			settings.ForgeAzureDevOps:     "no azure-devops API is configured for host 127.0.0.1 (known hosts: dev.azure.com)"}},
	}
	for _, r := range envs {
		for i, tt := range tests {
			t.Run(string(r.kind)+" "+tt.name, func(t *testing.T) {
				ns := e.argoNamespace(t, fmt.Sprintf("review-errors-%s-%d", r.kind, i), true)
				e.configMap(t, ns, repoaccess.TLSCertsConfigMap, map[string]string{"127.0.0.1": string(ca.PEM)})
				repo := reviewName(r.kind, fmt.Sprintf("review-errors-%s-%d", r.kind, i))
				url := e.repo(t, r.gitPath(repo), nil)
				var opts []Option
				if !tt.noHosts {
					opts = append(opts, WithForgeHosts(r.hosts))
				}
				w := e.writer(t, ns, opts...)
				r.api.FailReviewsWith(tt.status)
				t.Cleanup(func() { r.api.FailReviewsWith(0); r.api.Calls() })
				res := w.write(context.Background(), []update{reviewUpdate("billing", url, "v0.0.2", r.kind)})[0]
				if res.Err == nil || !strings.Contains(res.Err.Error(), tt.want[r.kind]) || !strings.Contains(res.Err.Error(), "Application argocd/billing") || !strings.Contains(res.Err.Error(), string(r.kind)) {
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
