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
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"
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
	kind    settings.Forge
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
		forge.WithInstances(settings.ForgeGitea, gt.URL), forge.WithInstances(settings.ForgeBitbucket, bb.URL),
		forge.WithInstances(settings.ForgeBitbucketServer, bbs.URL), forge.WithInstances(settings.ForgeAzureDevOps, az.URL))
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
			kind: settings.ForgeGitHub, api: gh, hosts: hosts,
			repoURL: "https://x-access-token:secret@127.0.0.1:1/example/deploy.git", project: "example/deploy",
			list: "/api/v3/repos/example/deploy/pulls", one: "/api/v3/repos/example/deploy/pulls/1",
			open: []string{"POST /api/v3/repos/example/deploy/pulls", "POST /api/v3/repos/example/deploy/issues/1/labels"},
		},
		{
			kind: settings.ForgeGitLab, api: gl, hosts: hosts,
			repoURL: "git@127.0.0.1:group/sub/deploy.git", project: "group/sub/deploy",
			list: "/api/v4/projects/group%2Fsub%2Fdeploy/merge_requests", one: "/api/v4/projects/group%2Fsub%2Fdeploy/merge_requests/1",
		},
		{
			kind: settings.ForgeGitea, api: gt, hosts: hosts,
			repoURL: "https://127.0.0.1:1/example/deploy.git", project: "example/deploy",
			list: giteaPulls, one: giteaPulls + "/1",
			open: []string{"GET " + giteaLabels, "POST " + giteaLabels, "POST " + giteaPulls},
		},
		{
			kind: settings.ForgeBitbucket, api: bb, hosts: hosts,
			repoURL: "git@127.0.0.1:example/deploy.git", project: "example/deploy",
			list: "/2.0/repositories/example/deploy/pullrequests", one: "/2.0/repositories/example/deploy/pullrequests/1",
		},
		{
			kind: settings.ForgeBitbucketServer, api: bbs, hosts: hosts,
			repoURL: "https://127.0.0.1:1/bitbucket/scm/PRJ/deploy.git", project: "PRJ/deploy",
			list: bbsPulls, one: bbsPulls + "/1",
			update: []string{"GET " + bbsPulls + "/1", "PUT " + bbsPulls + "/1"},
		},
		{
			kind: settings.ForgeAzureDevOps, api: az, hosts: hosts,
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
			update := map[settings.Forge]string{settings.ForgeGitHub: "PATCH", settings.ForgeGitLab: "PUT", settings.ForgeGitea: "PATCH", settings.ForgeBitbucket: "PUT", settings.ForgeAzureDevOps: "PATCH"}[s.kind]

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
			case s.kind == settings.ForgeBitbucket:
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
		if s.kind == settings.ForgeGitHub || s.kind == settings.ForgeGitLab {
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
		want   map[settings.Forge]string
	}{
		{name: "unknown token", token: "wrong-" + token, want: map[settings.Forge]string{
			settings.ForgeGitHub: `401 Unauthorized: "Bad credentials"`, settings.ForgeGitLab: `401 Unauthorized: "401 Unauthorized"`,
			settings.ForgeGitea: `401 Unauthorized: "user does not exist [uid: 0, name: ]"`, settings.ForgeBitbucket: `401 Unauthorized: "Access token expired or invalid"`,
			settings.ForgeBitbucketServer: `401 Unauthorized: "Authentication failed. Please check your credentials and try again. (IncorrectPasswordAuthenticationException)"`,
			settings.ForgeAzureDevOps:     "401 Unauthorized"}},
		{name: "no token", token: "-", want: map[settings.Forge]string{
			settings.ForgeGitHub: `401 Unauthorized: "Bad credentials"`, settings.ForgeGitLab: `401 Unauthorized: "401 Unauthorized"`,
			settings.ForgeGitea: `401 Unauthorized: "user does not exist [uid: 0, name: ]"`, settings.ForgeBitbucket: `401 Unauthorized: "Access token expired or invalid"`,
			settings.ForgeBitbucketServer: `401 Unauthorized: "Authentication failed`,
			settings.ForgeAzureDevOps:     `203 Non-Authoritative Information: a sign-in page: the token was not accepted`}},
		{name: "forbidden", status: 403, want: map[settings.Forge]string{
			settings.ForgeGitHub: `403 Forbidden: "Resource not accessible by integration"`, settings.ForgeGitLab: `403 Forbidden: "403 Forbidden"`,
			settings.ForgeGitea: `403 Forbidden: "Forbidden"`, settings.ForgeBitbucket: `403 Forbidden: "Forbidden"`,
			settings.ForgeBitbucketServer: `403 Forbidden: "Forbidden (ServiceException)"`,
			settings.ForgeAzureDevOps:     `403 Forbidden: "TF400813: Forbidden (UnauthorizedRequestException)"`}},
		{name: "validation", status: 422, want: map[settings.Forge]string{
			settings.ForgeGitHub: `422 Unprocessable Entity: "Validation Failed"`, settings.ForgeGitLab: "422 Unprocessable Entity",
			settings.ForgeGitea: `422 Unprocessable Entity: "Unprocessable Entity"`, settings.ForgeBitbucket: `422 Unprocessable Entity: "Unprocessable Entity"`,
			settings.ForgeBitbucketServer: `422 Unprocessable Entity: "Unprocessable Entity (ServiceException)"`,
			settings.ForgeAzureDevOps:     `422 Unprocessable Entity: "TF400813: Unprocessable Entity (UnauthorizedRequestException)"`}},
		{name: "server error", status: 502, want: map[settings.Forge]string{
			settings.ForgeGitHub: `502 Bad Gateway: "Bad Gateway"`, settings.ForgeGitLab: "502 Bad Gateway",
			settings.ForgeGitea: `502 Bad Gateway: "Bad Gateway"`, settings.ForgeBitbucket: `502 Bad Gateway: "Bad Gateway"`,
			settings.ForgeBitbucketServer: `502 Bad Gateway: "Bad Gateway (ServiceException)"`,
			settings.ForgeAzureDevOps:     `502 Bad Gateway: "TF400813: Bad Gateway (UnauthorizedRequestException)"`}},
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
var testProject = map[settings.Forge]string{
	settings.ForgeGitHub: "o/r", settings.ForgeGitLab: "g/p", settings.ForgeGitea: "o/r", settings.ForgeBitbucket: "w/r",
	settings.ForgeBitbucketServer: "PRJ/r", settings.ForgeAzureDevOps: "org/project/r",
}

// errorBody is an error answer in each service's shape.
func errorBody(kind settings.Forge, message string) string {
	m, _ := json.Marshal(message)
	switch kind {
	case settings.ForgeBitbucket:
		return `{"type":"error","error":{"message":` + string(m) + `}}`
	case settings.ForgeBitbucketServer:
		return `{"errors":[{"context":null,"message":` + string(m) + `}]}`
	}
	return `{"message":` + string(m) + `}`
}

// What a service answers reaches memory and errors bounded: an answer
// past 4 MiB is not read on, and a message is quoted on one line and cut
// short.
func TestAnswerBounds(t *testing.T) {
	long := strings.Repeat("internal ", 1000)
	for _, kind := range settings.Forges {
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
	for _, kind := range settings.Forges {
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
		forge.WithInstances(settings.ForgeGitea, "https://git.example.com/gitea"),
		forge.WithInstances(settings.ForgeBitbucketServer, "https://bitbucket.example.com/bitbucket/"),
		forge.WithInstances(settings.ForgeAzureDevOps, "https://tfs.example.com/tfs"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		kind    settings.Forge
		url     string
		want    forge.Repository
		wantErr string
	}{
		{kind: settings.ForgeGitHub, url: "https://github.com/example/deploy.git", want: forge.Repository{Kind: settings.ForgeGitHub, API: "https://api.github.com", Project: "example/deploy"}},
		{kind: settings.ForgeGitHub, url: "git@github.com:example/deploy.git", want: forge.Repository{Kind: settings.ForgeGitHub, API: "https://api.github.com", Project: "example/deploy"}},
		{kind: settings.ForgeGitHub, url: "ssh://git@github.example.com:2222/example/deploy", want: forge.Repository{Kind: settings.ForgeGitHub, API: "https://GitHub.Example.com/api/v3", Project: "example/deploy"}},
		{kind: settings.ForgeGitLab, url: "https://user:tok@gitlab.com/a/b/c.git", want: forge.Repository{Kind: settings.ForgeGitLab, API: "https://gitlab.com/api/v4", Project: "a/b/c"}},
		{kind: settings.ForgeGitLab, url: "https://example.org/gitlab/team/app.git", want: forge.Repository{Kind: settings.ForgeGitLab, API: "https://example.org/gitlab/api/v4", Project: "team/app"}},
		{kind: settings.ForgeGitLab, url: "git@example.org:team/app.git", want: forge.Repository{Kind: settings.ForgeGitLab, API: "https://example.org/gitlab/api/v4", Project: "team/app"}},
		{kind: settings.ForgeGitHub, url: "https://gitlab.com/a/b.git", wantErr: "no github API is configured for host gitlab.com (known hosts: github.com, github.example.com)"},
		{kind: settings.ForgeGitLab, url: "https://evil.example/a/b.git", wantErr: "no gitlab API is configured for host evil.example"},
		{kind: settings.ForgeGitHub, url: "https://github.com/a/b/c.git", wantErr: `"a/b/c" on github.com is not <owner>/<repository>`},
		{kind: settings.ForgeGitHub, url: "https://github.com/a/b%3Fstate=closed", wantErr: `"a/b?state=closed" on github.com is not <owner>/<repository>`},
		{kind: settings.ForgeGitHub, url: "https://github.com/a/..", wantErr: `"a/.." on github.com is not <owner>/<repository>`},
		{kind: settings.ForgeGitLab, url: "https://gitlab.com/solo.git", wantErr: "is not <group>/<project>"},
		{kind: settings.ForgeGitHub, url: "https://tok@github.com:bad port/a/b", wantErr: `repository URL "https://xxxxx@github.com:bad port/a/b": `},
		{kind: settings.ForgeGitHub, url: "https://g\u0130thub.com/example/deploy.git", wantErr: `"gİthub.com" holds "İ": only ASCII`},
		{kind: settings.ForgeGitLab, url: "git@\u212Aample.org:team/app.git", wantErr: "only ASCII"},

		{kind: settings.ForgeGitea, url: "https://git.example.com/gitea/team/app.git", want: forge.Repository{Kind: settings.ForgeGitea, API: "https://git.example.com/gitea/api/v1", Project: "team/app"}},
		{kind: settings.ForgeGitea, url: "git@git.example.com:team/app.git", want: forge.Repository{Kind: settings.ForgeGitea, API: "https://git.example.com/gitea/api/v1", Project: "team/app"}},
		{kind: settings.ForgeGitea, url: "https://codeberg.org/forgejo/forgejo.git", want: forge.Repository{Kind: settings.ForgeGitea, API: "https://codeberg.org/api/v1", Project: "forgejo/forgejo"}},
		{kind: settings.ForgeGitea, url: "https://gitea.com/gitea/tea", want: forge.Repository{Kind: settings.ForgeGitea, API: "https://gitea.com/api/v1", Project: "gitea/tea"}},
		{kind: settings.ForgeGitea, url: "https://git.example.com/gitea/a/b/c", wantErr: `"a/b/c" on git.example.com is not <owner>/<repository>`},
		{kind: settings.ForgeGitea, url: "https://github.com/a/b", wantErr: "no gitea API is configured for host github.com (known hosts: codeberg.org, git.example.com, gitea.com)"},

		{kind: settings.ForgeBitbucket, url: "https://user@bitbucket.org/ws/repo.git", want: forge.Repository{Kind: settings.ForgeBitbucket, API: "https://api.bitbucket.org/2.0", Project: "ws/repo"}},
		{kind: settings.ForgeBitbucket, url: "git@bitbucket.org:ws/repo.git", want: forge.Repository{Kind: settings.ForgeBitbucket, API: "https://api.bitbucket.org/2.0", Project: "ws/repo"}},
		{kind: settings.ForgeBitbucket, url: "https://bitbucket.example.com/bitbucket/scm/PRJ/app.git", wantErr: "no bitbucket API is configured for host bitbucket.example.com (known hosts: bitbucket.org)"},

		{kind: settings.ForgeBitbucketServer, url: "https://bitbucket.example.com/bitbucket/scm/PRJ/app.git", want: forge.Repository{Kind: settings.ForgeBitbucketServer, API: "https://bitbucket.example.com/bitbucket/rest/api/1.0", Project: "PRJ/app"}},
		{kind: settings.ForgeBitbucketServer, url: "ssh://git@bitbucket.example.com:7999/PRJ/app.git", want: forge.Repository{Kind: settings.ForgeBitbucketServer, API: "https://bitbucket.example.com/bitbucket/rest/api/1.0", Project: "PRJ/app"}},
		{kind: settings.ForgeBitbucketServer, url: "https://bitbucket.example.com/bitbucket/scm/~jdoe/app.git", want: forge.Repository{Kind: settings.ForgeBitbucketServer, API: "https://bitbucket.example.com/bitbucket/rest/api/1.0", Project: "~jdoe/app"}},
		{kind: settings.ForgeBitbucketServer, url: "https://bitbucket.example.com/bitbucket/projects/PRJ/repos/app", wantErr: "is not [scm/]<project key>/<repository>"},
		{kind: settings.ForgeBitbucketServer, url: "https://bitbucket.org/ws/repo.git", wantErr: "no bitbucket-server API is configured for host bitbucket.org (known hosts: bitbucket.example.com)"},

		{kind: settings.ForgeAzureDevOps, url: "https://dev.azure.com/org/My%20Project/_git/app", want: forge.Repository{Kind: settings.ForgeAzureDevOps, API: "https://dev.azure.com", Project: "org/My Project/app"}},
		{kind: settings.ForgeAzureDevOps, url: "https://org@dev.azure.com/org/proj/_git/app", want: forge.Repository{Kind: settings.ForgeAzureDevOps, API: "https://dev.azure.com", Project: "org/proj/app"}},
		{kind: settings.ForgeAzureDevOps, url: "git@ssh.dev.azure.com:v3/org/My%20Project/app", want: forge.Repository{Kind: settings.ForgeAzureDevOps, API: "https://dev.azure.com", Project: "org/My Project/app"}},
		{kind: settings.ForgeAzureDevOps, url: "https://org.visualstudio.com/proj/_git/app", want: forge.Repository{Kind: settings.ForgeAzureDevOps, API: "https://dev.azure.com", Project: "org/proj/app"}},
		{kind: settings.ForgeAzureDevOps, url: "https://Org.VisualStudio.com/DefaultCollection/proj/_git/app", want: forge.Repository{Kind: settings.ForgeAzureDevOps, API: "https://dev.azure.com", Project: "org/proj/app"}},
		{kind: settings.ForgeAzureDevOps, url: "org@vs-ssh.visualstudio.com:v3/org/proj/app", want: forge.Repository{Kind: settings.ForgeAzureDevOps, API: "https://dev.azure.com", Project: "org/proj/app"}},
		{kind: settings.ForgeAzureDevOps, url: "https://dev.azure.com/org/_git/app", want: forge.Repository{Kind: settings.ForgeAzureDevOps, API: "https://dev.azure.com", Project: "org/app/app"}},
		{kind: settings.ForgeAzureDevOps, url: "https://tfs.example.com/tfs/DefaultCollection/proj/_git/app", want: forge.Repository{Kind: settings.ForgeAzureDevOps, API: "https://tfs.example.com/tfs", Project: "DefaultCollection/proj/app"}},
		{kind: settings.ForgeAzureDevOps, url: "https://dev.azure.com/org/proj/app", wantErr: "is not <organization>/<project>/_git/<repository>"},
		{kind: settings.ForgeAzureDevOps, url: "https://dev.azure.com/org/proj/_git/_full", wantErr: "is not <organization>/<project>/_git/<repository>"},
		{kind: settings.ForgeAzureDevOps, url: "https://a.b.visualstudio.com/proj/_git/app", wantErr: "no azure-devops API is configured for host a.b.visualstudio.com"},
		{kind: settings.ForgeAzureDevOps, url: "https://org.visualstudio.com.example/proj/_git/app", wantErr: "no azure-devops API is configured for host org.visualstudio.com.example"},
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
		got, err := hosts.APIURL(settings.ForgeGitHub, tt.url)
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
	for kind, want := range map[settings.Forge]string{
		settings.ForgeGitea:           `Gitea URL: "http://git.example.com": tokens go only over https (http only to localhost)`,
		settings.ForgeBitbucketServer: `Bitbucket Data Center URL: "http://git.example.com": tokens go only over https (http only to localhost)`,
		settings.ForgeAzureDevOps:     `Azure DevOps Server URL: "http://git.example.com": tokens go only over https (http only to localhost)`,
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
		for _, k := range settings.Forges {
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
	s := svcs[slices.IndexFunc(svcs, func(s service) bool { return s.kind == settings.ForgeBitbucket })]
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
	c, err := forge.Repository{Kind: settings.ForgeBitbucket, API: srv.URL + "/2.0", Project: "w/r"}.Client("token", nil)
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
	s := svcs[slices.IndexFunc(svcs, func(s service) bool { return s.kind == settings.ForgeGitea })]
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
