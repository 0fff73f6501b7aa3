package forge_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/internal/testenv"
)

// standIn is one service's stand-in as these tests drive it.
type standIn interface {
	Reviews(repo string) []testenv.Review
	SetState(repo string, number int, state string)
	Merge(repo string, number int) error
	Calls() []string
	FailReviewsWith(status int)
	ReviewProblems() []string
	AcceptToken(token string)
	SetPageSize(n int)
}

type service struct {
	kind    forge.Kind
	api     standIn
	hosts   *forge.Hosts
	repoURL string
	project string
	// calls are the paths of the repository's requests and of request 1.
	list, one string
	// open is the calls that open request 1 with labels, when they are
	// more than a POST to list.
	open []string
	// update is the calls of an update, when they are more than one.
	update []string
}

func services(t *testing.T) (*testenv.CA, []service) {
	ca := testenv.NewCA(t, "forge CA")
	gh := testenv.StartGitHubAPI(t, ca, nil)
	gl := testenv.StartGitLabAPI(t, ca)
	gt := testenv.StartGiteaAPI(t, ca)
	bb := testenv.StartBitbucketAPI(t, ca)
	bbs := testenv.StartBitbucketServerAPI(t, ca)
	az := testenv.StartAzureDevOpsAPI(t, ca)
	hosts, err := forge.NewHosts([]string{gh.URL}, []string{gl.URL},
		forge.WithInstances(forge.Gitea, gt.URL), forge.WithInstances(forge.Bitbucket, bb.URL),
		forge.WithInstances(forge.BitbucketServer, bbs.URL), forge.WithInstances(forge.AzureDevOps, az.URL))
	if err != nil {
		t.Fatal(err)
	}
	// One of the two labels exists already; the other is created.
	gt.CreateLabel("example/deploy", "automated")
	const (
		giteaPulls  = "/api/v1/repos/example/deploy/pulls"
		giteaLabels = "/api/v1/repos/example/deploy/labels"
		bbsPulls    = "/bitbucket/rest/api/1.0/projects/PRJ/repos/deploy/pull-requests"
	)
	return ca, []service{
		{
			kind: forge.GitHub, api: gh, hosts: hosts,
			repoURL: "https://x-access-token:secret@127.0.0.1:1/example/deploy.git", project: "example/deploy",
			list: "/api/v3/repos/example/deploy/pulls", one: "/api/v3/repos/example/deploy/pulls/1",
			open: []string{"POST /api/v3/repos/example/deploy/pulls", "POST /api/v3/repos/example/deploy/issues/1/labels"},
		},
		{
			kind: forge.GitLab, api: gl, hosts: hosts,
			repoURL: "git@127.0.0.1:group/sub/deploy.git", project: "group/sub/deploy",
			list: "/api/v4/projects/group%2Fsub%2Fdeploy/merge_requests", one: "/api/v4/projects/group%2Fsub%2Fdeploy/merge_requests/1",
		},
		{
			kind: forge.Gitea, api: gt, hosts: hosts,
			repoURL: "https://127.0.0.1:1/example/deploy.git", project: "example/deploy",
			list: giteaPulls, one: giteaPulls + "/1",
			open: []string{"GET " + giteaLabels, "POST " + giteaLabels, "POST " + giteaPulls},
		},
		{
			kind: forge.Bitbucket, api: bb, hosts: hosts,
			repoURL: "git@127.0.0.1:example/deploy.git", project: "example/deploy",
			list: "/2.0/repositories/example/deploy/pullrequests", one: "/2.0/repositories/example/deploy/pullrequests/1",
		},
		{
			kind: forge.BitbucketServer, api: bbs, hosts: hosts,
			repoURL: "https://127.0.0.1:1/bitbucket/scm/PRJ/deploy.git", project: "PRJ/deploy",
			list: bbsPulls, one: bbsPulls + "/1",
			update: []string{"GET " + bbsPulls + "/1", "PUT " + bbsPulls + "/1"},
		},
		{
			kind: forge.AzureDevOps, api: az, hosts: hosts,
			repoURL: "https://127.0.0.1:1/org/My%20Project/_git/deploy", project: "org/My Project/deploy",
			list: "/org/My%20Project/_apis/git/repositories/deploy/pullrequests", one: "/org/My%20Project/_apis/git/repositories/deploy/pullrequests/1",
		},
	}
}

func client(t *testing.T, ca *testenv.CA, s service, token string, opts ...forge.ClientOption) forge.Client {
	t.Helper()
	repo, err := s.hosts.Lookup(s.kind, s.repoURL)
	if err != nil {
		t.Fatal(err)
	}
	if repo.Project != s.project {
		t.Fatalf("project %q, want %q", repo.Project, s.project)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool()}
	c, err := repo.Client(token, tr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stripAuth sends requests without their Authorization header.
type stripAuth struct{ next http.RoundTripper }

func (s stripAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del("Authorization")
	r.Header.Del("PRIVATE-TOKEN")
	return s.next.RoundTrip(r)
}

func TestRequests(t *testing.T) {
	ca, svcs := services(t)
	ctx := context.Background()
	for _, s := range svcs {
		t.Run(string(s.kind), func(t *testing.T) {
			const token = "glpat-or-ghp-0123456789abcdef"
			s.api.AcceptToken(token)
			c := client(t, ca, s, token)
			update := map[forge.Kind]string{forge.GitHub: "PATCH", forge.GitLab: "PUT", forge.Gitea: "PATCH", forge.Bitbucket: "PUT", forge.AzureDevOps: "PATCH"}[s.kind]

			// Nothing yet; open one.
			if found, err := c.Find(ctx, "image-updates", "main"); err != nil || len(found) != 0 {
				t.Fatalf("Find: %v %v", found, err)
			}
			opened, err := c.Open(ctx, "image-updates", "main", "build: update", "- app: 1 to 2", []string{"image-update", "automated"})
			wantLabels := []string{"image-update", "automated"}
			if !s.kind.Labels() {
				// The request is opened, without labels.
				if !errors.Is(err, forge.ErrLabels) {
					t.Errorf("Open with labels: %v, want ErrLabels", err)
				}
				err, wantLabels = nil, nil
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.api.Reviews(s.project)[0].Labels; !slices.Equal(got, wantLabels) {
				t.Errorf("labels %q, want %q", got, wantLabels)
			}
			if opened.Number != 1 || opened.State != forge.StateOpen || opened.URL == "" || opened.Body != "- app: 1 to 2" {
				t.Errorf("opened %+v", opened)
			}
			// A second one for the same branch is refused, or (Bitbucket
			// Cloud) the open one is answered.
			again, err := c.Open(ctx, "image-updates", "main", "again", "", nil)
			switch {
			case s.kind == forge.Bitbucket:
				if err != nil || again.Number != 1 || len(s.api.Reviews(s.project)) != 1 {
					t.Errorf("second Open: %+v %v, want request 1", again, err)
				}
			case !errors.Is(err, forge.ErrAlreadyExists):
				t.Errorf("second Open: %v, want ErrAlreadyExists", err)
			}
			updated, err := c.Update(ctx, 1, "build: update 2", "- app: 1 to 3")
			if err != nil || updated.Title != "build: update 2" || updated.Body != "- app: 1 to 3" || updated.Number != 1 {
				t.Errorf("Update: %+v %v", updated, err)
			}
			if got := s.api.Reviews(s.project)[0].Labels; len(got) != len(wantLabels) {
				t.Errorf("labels after the update %q, want them kept", got)
			}
			// Closed and merged ones are told apart; newest first.
			s.api.SetState(s.project, 1, "closed")
			if _, err := c.Open(ctx, "image-updates", "main", "build: update 3", "", nil); err != nil {
				t.Fatal(err)
			}
			if err := s.api.Merge(s.project, 2); err != nil {
				t.Fatal(err)
			}
			found, err := c.Find(ctx, "image-updates", "main")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range found {
				got = append(got, r.Title+" "+string(r.State))
			}
			if diff := cmp.Diff([]string{"build: update 3 merged", "build: update 2 closed"}, got); diff != "" {
				t.Errorf("Find (-want +got):\n%s", diff)
			}
			if found, _ := c.Find(ctx, "image-updates", "release"); len(found) != 0 {
				t.Errorf("Find into another base: %v", found)
			}
			want := []string{"GET " + s.list}
			if s.open != nil {
				want = append(want, s.open...)
			} else {
				want = append(want, "POST "+s.list)
			}
			want = append(want, "POST "+s.list)
			if s.update != nil {
				want = append(want, s.update...)
			} else {
				want = append(want, update+" "+s.one)
			}
			want = append(want, "POST "+s.list, "GET "+s.list, "GET "+s.list)
			if diff := cmp.Diff(want, s.api.Calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if p := s.api.ReviewProblems(); len(p) > 0 {
				t.Errorf("the service would refuse: %v", p)
			}
		})
	}
}

// The requests of a branch are found among many, over several pages, and
// an open one comes with its whole description.
func TestFindPages(t *testing.T) {
	ca, svcs := services(t)
	ctx := context.Background()
	long := strings.Repeat("- app: 1 to 2\n", 60)
	for _, s := range svcs {
		if s.kind == forge.GitHub || s.kind == forge.GitLab {
			// One page of 100 is read: the API filters by branch.
			continue
		}
		t.Run(string(s.kind), func(t *testing.T) {
			const token = "page-token"
			s.api.AcceptToken(token)
			s.api.SetPageSize(2)
			t.Cleanup(func() { s.api.SetPageSize(0) })
			c := client(t, ca, s, token)
			for i := range 7 {
				head := fmt.Sprintf("other-%d", i)
				if i == 1 || i == 5 {
					head = "image-updates"
				}
				if _, err := c.Open(ctx, head, "main", "request "+strconv.Itoa(i+1), long, nil); err != nil {
					t.Fatal(err)
				}
				if i == 1 {
					s.api.SetState(s.project, 2, "closed")
				}
			}
			found, err := c.Find(ctx, "image-updates", "main")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range found {
				got = append(got, fmt.Sprintf("%d %s", r.Number, r.State))
			}
			if diff := cmp.Diff([]string{"6 open", "2 closed"}, got); diff != "" {
				t.Errorf("Find (-want +got):\n%s", diff)
			}
			if len(found) > 0 && found[0].Body != strings.TrimSpace(long) && found[0].Body != long {
				t.Errorf("the open request's description is cut: %d of %d characters", len(found[0].Body), len(long))
			}
			if p := s.api.ReviewProblems(); len(p) > 0 {
				t.Errorf("the service would refuse: %v", p)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	ca, svcs := services(t)
	const token = "s3cr3t-token-value"
	tests := []struct {
		name   string
		token  string // "" : the accepted one
		status int
		want   map[forge.Kind]string
	}{
		{name: "unknown token", token: "wrong-" + token, want: map[forge.Kind]string{
			forge.GitHub: `401 Unauthorized: "Bad credentials"`, forge.GitLab: `401 Unauthorized: "401 Unauthorized"`,
			forge.Gitea: `401 Unauthorized: "user does not exist [uid: 0, name: ]"`, forge.Bitbucket: `401 Unauthorized: "Access token expired or invalid"`,
			forge.BitbucketServer: `401 Unauthorized: "Authentication failed. Please check your credentials and try again. (IncorrectPasswordAuthenticationException)"`,
			forge.AzureDevOps:     "401 Unauthorized"}},
		{name: "no token", token: "-", want: map[forge.Kind]string{
			forge.GitHub: `401 Unauthorized: "Bad credentials"`, forge.GitLab: `401 Unauthorized: "401 Unauthorized"`,
			forge.Gitea: `401 Unauthorized: "user does not exist [uid: 0, name: ]"`, forge.Bitbucket: `401 Unauthorized: "Access token expired or invalid"`,
			forge.BitbucketServer: `401 Unauthorized: "Authentication failed`,
			forge.AzureDevOps:     `203 Non-Authoritative Information: a sign-in page: the token was not accepted`}},
		{name: "forbidden", status: 403, want: map[forge.Kind]string{
			forge.GitHub: `403 Forbidden: "Resource not accessible by integration"`, forge.GitLab: `403 Forbidden: "403 Forbidden"`,
			forge.Gitea: `403 Forbidden: "Forbidden"`, forge.Bitbucket: `403 Forbidden: "Forbidden"`,
			forge.BitbucketServer: `403 Forbidden: "Forbidden (ServiceException)"`,
			forge.AzureDevOps:     `403 Forbidden: "TF400813: Forbidden (UnauthorizedRequestException)"`}},
		{name: "validation", status: 422, want: map[forge.Kind]string{
			forge.GitHub: `422 Unprocessable Entity: "Validation Failed"`, forge.GitLab: "422 Unprocessable Entity",
			forge.Gitea: `422 Unprocessable Entity: "Unprocessable Entity"`, forge.Bitbucket: `422 Unprocessable Entity: "Unprocessable Entity"`,
			forge.BitbucketServer: `422 Unprocessable Entity: "Unprocessable Entity (ServiceException)"`,
			forge.AzureDevOps:     `422 Unprocessable Entity: "TF400813: Unprocessable Entity (UnauthorizedRequestException)"`}},
		{name: "server error", status: 502, want: map[forge.Kind]string{
			forge.GitHub: `502 Bad Gateway: "Bad Gateway"`, forge.GitLab: "502 Bad Gateway",
			forge.Gitea: `502 Bad Gateway: "Bad Gateway"`, forge.Bitbucket: `502 Bad Gateway: "Bad Gateway"`,
			forge.BitbucketServer: `502 Bad Gateway: "Bad Gateway (ServiceException)"`,
			forge.AzureDevOps:     `502 Bad Gateway: "TF400813: Bad Gateway (UnauthorizedRequestException)"`}},
	}
	for _, s := range svcs {
		s.api.AcceptToken(token)
		for _, tt := range tests {
			t.Run(string(s.kind)+" "+tt.name, func(t *testing.T) {
				tok := tt.token
				if tok == "" {
					tok = token
				}
				s.api.FailReviewsWith(tt.status)
				t.Cleanup(func() { s.api.FailReviewsWith(0) })
				c := client(t, ca, s, tok)
				if tok == "-" {
					// The request goes without credentials, as behind a
					// proxy that drops them.
					repo, _ := s.hosts.Lookup(s.kind, s.repoURL)
					tr := http.DefaultTransport.(*http.Transport).Clone()
					tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool()}
					c, _ = repo.Client(tok, stripAuth{tr})
				}
				_, err := c.Open(context.Background(), "b", "main", "t", "", nil)
				if err == nil || !strings.Contains(err.Error(), tt.want[s.kind]) || !strings.Contains(err.Error(), "POST https://127.0.0.1") {
					t.Errorf("got %v, want an error with %q", err, tt.want[s.kind])
				}
				var fe *forge.Error
				if !errors.As(err, &fe) || fe.Service != s.kind {
					t.Errorf("%v is not a *forge.Error of %s", err, s.kind)
				}
				if err != nil && strings.Contains(err.Error(), token) {
					t.Errorf("the error shows the token: %v", err)
				}
			})
		}
	}
}

// testProject is a repository's path on each service, for clients made
// without Hosts.
var testProject = map[forge.Kind]string{
	forge.GitHub: "o/r", forge.GitLab: "g/p", forge.Gitea: "o/r", forge.Bitbucket: "w/r",
	forge.BitbucketServer: "PRJ/r", forge.AzureDevOps: "org/project/r",
}

// errorBody is an error answer in each service's shape.
func errorBody(kind forge.Kind, message string) string {
	m, _ := json.Marshal(message)
	switch kind {
	case forge.Bitbucket:
		return `{"type":"error","error":{"message":` + string(m) + `}}`
	case forge.BitbucketServer:
		return `{"errors":[{"context":null,"message":` + string(m) + `}]}`
	}
	return `{"message":` + string(m) + `}`
}

// What a service answers reaches memory and errors bounded: an answer
// past 4 MiB is not read on, and a message is quoted on one line and cut
// short.
func TestAnswerBounds(t *testing.T) {
	long := strings.Repeat("internal ", 1000)
	for _, kind := range forge.Kinds {
		for _, tt := range []struct {
			name    string
			status  int
			answer  string
			want    string
			notWant string
		}{
			{"an answer past 4 MiB", http.StatusOK, `{"values":[` + strings.Repeat(`{"number":1},`, 400_000) + `{}]}`, "the " + string(kind) + " API answer is larger than 4 MiB, the most the client reads", ""},
			{"a long message on several lines", http.StatusForbidden, errorBody(kind, "denied\n"+long), `403 Forbidden: "denied internal internal`, strings.Repeat("internal ", 40)},
		} {
			t.Run(string(kind)+"/"+tt.name, func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tt.status)
					_, _ = io.WriteString(w, tt.answer)
				}))
				defer srv.Close()
				c, err := forge.Repository{Kind: kind, API: srv.URL, Project: testProject[kind]}.Client("token", nil)
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.Find(t.Context(), "head", "main")
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, want an error containing %q", err, tt.want)
				}
				if strings.Contains(err.Error(), "\n") || tt.notWant != "" && strings.Contains(err.Error(), tt.notWant) {
					t.Errorf("the error quotes too much of the answer: %.200s...", err)
				}
			})
		}
	}
}

// A service that stalls, before its answer or halfway through it, fails
// the call at the call's deadline, before the caller's.
func TestCallTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	for _, kind := range forge.Kinds {
		for _, tt := range []struct {
			name string
			part string // sent before the stall; "" sends no answer
		}{
			{name: "no answer"},
			{name: "stops halfway", part: `[{"number":1,`},
		} {
			t.Run(string(kind)+"/"+tt.name, func(t *testing.T) {
				gone := make(chan struct{})
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if tt.part != "" {
						w.Header().Set("Content-Type", "application/json")
						_, _ = io.WriteString(w, tt.part)
						w.(http.Flusher).Flush()
					}
					select {
					case <-r.Context().Done():
					case <-gone:
					}
				}))
				t.Cleanup(srv.Close)
				t.Cleanup(func() { close(gone) }) // before srv.Close, which waits for the handler
				c, err := forge.Repository{Kind: kind, API: srv.URL, Project: testProject[kind]}.Client("token", nil, forge.WithCallTimeout(timeout))
				if err != nil {
					t.Fatal(err)
				}
				// The caller would wait far longer.
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				start := time.Now()
				_, err = c.Find(ctx, "head", "main")
				took := time.Since(start)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("got %v, want a deadline exceeded", err)
				}
				if took < timeout || took > timeout+time.Second {
					t.Errorf("the call took %s, want about %s", took, timeout)
				}
			})
		}
	}
}

func TestHostsLookup(t *testing.T) {
	hosts, err := forge.NewHosts([]string{"https://GitHub.Example.com/api/v3/"}, []string{"https://example.org/gitlab"},
		forge.WithInstances(forge.Gitea, "https://git.example.com/gitea"),
		forge.WithInstances(forge.BitbucketServer, "https://bitbucket.example.com/bitbucket/"),
		forge.WithInstances(forge.AzureDevOps, "https://tfs.example.com/tfs"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		kind    forge.Kind
		url     string
		want    forge.Repository
		wantErr string
	}{
		{kind: forge.GitHub, url: "https://github.com/example/deploy.git", want: forge.Repository{Kind: forge.GitHub, API: "https://api.github.com", Project: "example/deploy"}},
		{kind: forge.GitHub, url: "git@github.com:example/deploy.git", want: forge.Repository{Kind: forge.GitHub, API: "https://api.github.com", Project: "example/deploy"}},
		{kind: forge.GitHub, url: "ssh://git@github.example.com:2222/example/deploy", want: forge.Repository{Kind: forge.GitHub, API: "https://GitHub.Example.com/api/v3", Project: "example/deploy"}},
		{kind: forge.GitLab, url: "https://user:tok@gitlab.com/a/b/c.git", want: forge.Repository{Kind: forge.GitLab, API: "https://gitlab.com/api/v4", Project: "a/b/c"}},
		{kind: forge.GitLab, url: "https://example.org/gitlab/team/app.git", want: forge.Repository{Kind: forge.GitLab, API: "https://example.org/gitlab/api/v4", Project: "team/app"}},
		{kind: forge.GitLab, url: "git@example.org:team/app.git", want: forge.Repository{Kind: forge.GitLab, API: "https://example.org/gitlab/api/v4", Project: "team/app"}},
		{kind: forge.GitHub, url: "https://gitlab.com/a/b.git", wantErr: "no github API is configured for host gitlab.com (known hosts: github.com, github.example.com)"},
		{kind: forge.GitLab, url: "https://evil.example/a/b.git", wantErr: "no gitlab API is configured for host evil.example"},
		{kind: forge.GitHub, url: "https://github.com/a/b/c.git", wantErr: `"a/b/c" on github.com is not <owner>/<repository>`},
		{kind: forge.GitHub, url: "https://github.com/a/b%3Fstate=closed", wantErr: `"a/b?state=closed" on github.com is not <owner>/<repository>`},
		{kind: forge.GitHub, url: "https://github.com/a/..", wantErr: `"a/.." on github.com is not <owner>/<repository>`},
		{kind: forge.GitLab, url: "https://gitlab.com/solo.git", wantErr: "is not <group>/<project>"},
		{kind: forge.GitHub, url: "https://tok@github.com:bad port/a/b", wantErr: `"https://xxxxx@github.com:bad port/a/b" cannot be parsed`},

		{kind: forge.Gitea, url: "https://git.example.com/gitea/team/app.git", want: forge.Repository{Kind: forge.Gitea, API: "https://git.example.com/gitea/api/v1", Project: "team/app"}},
		{kind: forge.Gitea, url: "git@git.example.com:team/app.git", want: forge.Repository{Kind: forge.Gitea, API: "https://git.example.com/gitea/api/v1", Project: "team/app"}},
		{kind: forge.Gitea, url: "https://codeberg.org/forgejo/forgejo.git", want: forge.Repository{Kind: forge.Gitea, API: "https://codeberg.org/api/v1", Project: "forgejo/forgejo"}},
		{kind: forge.Gitea, url: "https://gitea.com/gitea/tea", want: forge.Repository{Kind: forge.Gitea, API: "https://gitea.com/api/v1", Project: "gitea/tea"}},
		{kind: forge.Gitea, url: "https://git.example.com/gitea/a/b/c", wantErr: `"a/b/c" on git.example.com is not <owner>/<repository>`},
		{kind: forge.Gitea, url: "https://github.com/a/b", wantErr: "no gitea API is configured for host github.com (known hosts: codeberg.org, git.example.com, gitea.com)"},

		{kind: forge.Bitbucket, url: "https://user@bitbucket.org/ws/repo.git", want: forge.Repository{Kind: forge.Bitbucket, API: "https://api.bitbucket.org/2.0", Project: "ws/repo"}},
		{kind: forge.Bitbucket, url: "git@bitbucket.org:ws/repo.git", want: forge.Repository{Kind: forge.Bitbucket, API: "https://api.bitbucket.org/2.0", Project: "ws/repo"}},
		{kind: forge.Bitbucket, url: "https://bitbucket.example.com/bitbucket/scm/PRJ/app.git", wantErr: "no bitbucket API is configured for host bitbucket.example.com (known hosts: bitbucket.org)"},

		{kind: forge.BitbucketServer, url: "https://bitbucket.example.com/bitbucket/scm/PRJ/app.git", want: forge.Repository{Kind: forge.BitbucketServer, API: "https://bitbucket.example.com/bitbucket/rest/api/1.0", Project: "PRJ/app"}},
		{kind: forge.BitbucketServer, url: "ssh://git@bitbucket.example.com:7999/PRJ/app.git", want: forge.Repository{Kind: forge.BitbucketServer, API: "https://bitbucket.example.com/bitbucket/rest/api/1.0", Project: "PRJ/app"}},
		{kind: forge.BitbucketServer, url: "https://bitbucket.example.com/bitbucket/scm/~jdoe/app.git", want: forge.Repository{Kind: forge.BitbucketServer, API: "https://bitbucket.example.com/bitbucket/rest/api/1.0", Project: "~jdoe/app"}},
		{kind: forge.BitbucketServer, url: "https://bitbucket.example.com/bitbucket/projects/PRJ/repos/app", wantErr: "is not [scm/]<project key>/<repository>"},
		{kind: forge.BitbucketServer, url: "https://bitbucket.org/ws/repo.git", wantErr: "no bitbucket-server API is configured for host bitbucket.org (known hosts: bitbucket.example.com)"},

		{kind: forge.AzureDevOps, url: "https://dev.azure.com/org/My%20Project/_git/app", want: forge.Repository{Kind: forge.AzureDevOps, API: "https://dev.azure.com", Project: "org/My Project/app"}},
		{kind: forge.AzureDevOps, url: "https://org@dev.azure.com/org/proj/_git/app", want: forge.Repository{Kind: forge.AzureDevOps, API: "https://dev.azure.com", Project: "org/proj/app"}},
		{kind: forge.AzureDevOps, url: "git@ssh.dev.azure.com:v3/org/My%20Project/app", want: forge.Repository{Kind: forge.AzureDevOps, API: "https://dev.azure.com", Project: "org/My Project/app"}},
		{kind: forge.AzureDevOps, url: "https://org.visualstudio.com/proj/_git/app", want: forge.Repository{Kind: forge.AzureDevOps, API: "https://dev.azure.com", Project: "org/proj/app"}},
		{kind: forge.AzureDevOps, url: "https://Org.VisualStudio.com/DefaultCollection/proj/_git/app", want: forge.Repository{Kind: forge.AzureDevOps, API: "https://dev.azure.com", Project: "org/proj/app"}},
		{kind: forge.AzureDevOps, url: "org@vs-ssh.visualstudio.com:v3/org/proj/app", want: forge.Repository{Kind: forge.AzureDevOps, API: "https://dev.azure.com", Project: "org/proj/app"}},
		{kind: forge.AzureDevOps, url: "https://dev.azure.com/org/_git/app", want: forge.Repository{Kind: forge.AzureDevOps, API: "https://dev.azure.com", Project: "org/app/app"}},
		{kind: forge.AzureDevOps, url: "https://tfs.example.com/tfs/DefaultCollection/proj/_git/app", want: forge.Repository{Kind: forge.AzureDevOps, API: "https://tfs.example.com/tfs", Project: "DefaultCollection/proj/app"}},
		{kind: forge.AzureDevOps, url: "https://dev.azure.com/org/proj/app", wantErr: "is not <organization>/<project>/_git/<repository>"},
		{kind: forge.AzureDevOps, url: "https://dev.azure.com/org/proj/_git/_full", wantErr: "is not <organization>/<project>/_git/<repository>"},
		{kind: forge.AzureDevOps, url: "https://a.b.visualstudio.com/proj/_git/app", wantErr: "no azure-devops API is configured for host a.b.visualstudio.com"},
		{kind: forge.AzureDevOps, url: "https://org.visualstudio.com.example/proj/_git/app", wantErr: "no azure-devops API is configured for host org.visualstudio.com.example"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := hosts.Lookup(tt.kind, tt.url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A base URL from credentials (a GitHub App's githubAppEnterpriseBaseUrl)
// must be one of the APIs the operator allows.
func TestHostsAPIURL(t *testing.T) {
	hosts, err := forge.NewHosts([]string{"https://GitHub.Example.com/api/v3/", "http://127.0.0.1:8080/api/v3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		url  string
		want string // the API's URL; "" when refused
	}{
		{"https://api.github.com", "https://api.github.com"},
		{"https://API.GITHUB.COM/", "https://api.github.com"},
		{"https://api.github.com:443", "https://api.github.com"},
		{"https://github.example.com/api/v3", "https://GitHub.Example.com/api/v3"},
		{" https://github.example.com/api/v3/ ", "https://GitHub.Example.com/api/v3"},
		{"http://127.0.0.1:8080/api/v3", "http://127.0.0.1:8080/api/v3"},
		{"https://evil.example.com/api/v3", ""},
		{"https://github.example.com/api/v4", ""},
		{"https://github.example.com", ""},
		{"https://github.example.com:8443/api/v3", ""},
		{"http://github.example.com/api/v3", ""},
		{"https://user:pw@github.example.com/api/v3", ""},
		{"https://github.example.com/api/v3?x=1", ""},
		{"http://127.0.0.1:8081/api/v3", ""},
		{"http://localhost:8080/api/v3", ""},
		{"https://gitlab.com/api/v4", ""},
		{"::", ""},
	} {
		got, err := hosts.APIURL(forge.GitHub, tt.url)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%q: allowed as %s", tt.url, got)
		case tt.want == "" && !strings.Contains(err.Error(), "not a github API the controller may use (http://127.0.0.1:8080/api/v3, https://GitHub.Example.com/api/v3, https://api.github.com)"):
			t.Errorf("%q: %v", tt.url, err)
		case tt.want != "" && (err != nil || got.String() != tt.want):
			t.Errorf("%q: got %v, %v; want %s", tt.url, got, err, tt.want)
		}
	}
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]forge.Kind{
		"github": forge.GitHub, "gitlab": forge.GitLab, "gitea": forge.Gitea, "forgejo": forge.Gitea,
		"bitbucket": forge.Bitbucket, "bitbucket-server": forge.BitbucketServer,
		"bitbucket-datacenter": forge.BitbucketServer, "bitbucket-data-center": forge.BitbucketServer,
		"azure-devops": forge.AzureDevOps,
	} {
		if got, err := forge.ParseKind(in); err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, want)
		}
	}
	const wantErr = `unknown pull request service "GitHub": use one of github, gitlab, gitea, bitbucket, bitbucket-server, azure-devops, forgejo, bitbucket-datacenter`
	if _, err := forge.ParseKind("GitHub"); err == nil || err.Error() != wantErr {
		t.Errorf("got %v, want %s", err, wantErr)
	}
}

func TestNewHostsRefuses(t *testing.T) {
	for _, tt := range []struct{ github, gitlab, want string }{
		{github: "http://github.example.com/api/v3", want: "tokens go only over https"},
		{gitlab: "https://user:pw@gitlab.example.com", want: "is not a URL"},
		{gitlab: "ftp://gitlab.example.com", want: "is not an http(s) URL"},
		{github: "github.example.com", want: "is not a URL"},
	} {
		var gh, gl []string
		if tt.github != "" {
			gh = []string{tt.github}
		}
		if tt.gitlab != "" {
			gl = []string{tt.gitlab}
		}
		if _, err := forge.NewHosts(gh, gl); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s%s: got %v, want %q", tt.github, tt.gitlab, err, tt.want)
		}
	}
	for kind, want := range map[forge.Kind]string{
		forge.Gitea:           `Gitea URL: "http://git.example.com": tokens go only over https (http only to localhost)`,
		forge.BitbucketServer: `Bitbucket Data Center URL: "http://git.example.com": tokens go only over https (http only to localhost)`,
		forge.AzureDevOps:     `Azure DevOps Server URL: "http://git.example.com": tokens go only over https (http only to localhost)`,
	} {
		if _, err := forge.NewHosts(nil, nil, forge.WithInstances(kind, "http://git.example.com")); err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", kind, err, want)
		}
	}
}

func FuzzLookup(f *testing.F) {
	hosts, err := forge.NewHosts(nil, []string{"https://example.org/gitlab"})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"https://github.com/a/b.git", "git@gitlab.com:a/b", "ssh://u:p@x:1/a", "https://example.org/gitlab/x/y", "@:", "://@",
		"https://o.visualstudio.com/DefaultCollection/p/_git/r", "git@ssh.dev.azure.com:v3/o/p%20q/r", "https://bitbucket.org/w/r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, k := range forge.Kinds {
			r, err := hosts.Lookup(k, raw)
			if err != nil {
				continue
			}
			if r.Project == "" || strings.HasPrefix(r.Project, "/") || strings.HasSuffix(r.Project, ".git") {
				t.Errorf("%q: project %q", raw, r.Project)
			}
		}
	})
}

// Bitbucket Cloud takes a user's app password (or API token) with the
// user's name as basic authentication, and an access token as a bearer
// token; the user name of the credentials tells which.
func TestBitbucketAuth(t *testing.T) {
	ca, svcs := services(t)
	s := svcs[slices.IndexFunc(svcs, func(s service) bool { return s.kind == forge.Bitbucket })]
	bb := s.api.(*testenv.BitbucketAPI)
	bb.AcceptAppPassword("jdoe", "app-password")
	s.api.AcceptToken("access-token")
	for _, tt := range []struct {
		user, token string
		ok          bool
	}{
		{user: "jdoe", token: "app-password", ok: true},
		{user: "", token: "access-token", ok: true},
		{user: "x-token-auth", token: "access-token", ok: true},
		{user: "x-access-token", token: "access-token", ok: true},
		{user: "jdoe", token: "access-token"},
		{user: "x-token-auth", token: "app-password"},
	} {
		_, err := client(t, ca, s, tt.token, forge.WithUsername(tt.user)).Find(t.Context(), "b", "main")
		if tt.ok != (err == nil) {
			t.Errorf("user %q, token %q: %v", tt.user, tt.token, err)
		}
	}
}

// A next page the answer names off the API is not asked for: the token
// goes to the operator's API alone.
func TestNextPageOffAPI(t *testing.T) {
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"values":[],"next":"https://evil.example/2.0/repositories/w/r/pullrequests?page=2"}`)
	}))
	defer srv.Close()
	c, err := forge.Repository{Kind: forge.Bitbucket, API: srv.URL + "/2.0", Project: "w/r"}.Client("token", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Find(t.Context(), "head", "main")
	if err == nil || !strings.Contains(err.Error(), `the bitbucket API named a next page off the API: "https://evil.example/2.0/`) || calls != 1 {
		t.Errorf("got %v after %d calls, want a refusal after one", err, calls)
	}
}

// Gitea takes labels by ID: when they cannot be looked up or created,
// the request is opened without them.
func TestGiteaLabelsRefused(t *testing.T) {
	ca, svcs := services(t)
	s := svcs[slices.IndexFunc(svcs, func(s service) bool { return s.kind == forge.Gitea })]
	gt := s.api.(*testenv.GiteaAPI)
	gt.AcceptToken("gitea-pat-0123")
	gt.FailLabelsWith(http.StatusForbidden)
	req, err := client(t, ca, s, "gitea-pat-0123").Open(t.Context(), "image-updates", "main", "t", "b", []string{"image-update"})
	if !errors.Is(err, forge.ErrLabels) || !strings.Contains(err.Error(), `403 Forbidden: "token does not have at least one of required scope(s): [write:issue]"`) || req.Number != 1 {
		t.Errorf("got %+v, %v; want request 1 and ErrLabels", req, err)
	}
	if got := gt.Reviews(s.project); len(got) != 1 || len(got[0].Labels) != 0 {
		t.Errorf("requests %+v, want one without labels", got)
	}
}
