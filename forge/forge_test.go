package forge_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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
	Calls() []string
	FailReviewsWith(status int)
	ReviewProblems() []string
	AcceptToken(token string)
}

type service struct {
	kind    forge.Kind
	api     standIn
	hosts   *forge.Hosts
	repoURL string
	project string
	// calls are the paths of the repository's requests and of request 1;
	// labels is the call that labels request 1, when it takes one.
	list, one, labels string
}

func services(t *testing.T) (*testenv.CA, []service) {
	ca := testenv.NewCA(t, "forge CA")
	gh := testenv.StartGitHubAPI(t, ca, nil)
	gl := testenv.StartGitLabAPI(t, ca)
	hosts, err := forge.NewHosts([]string{gh.URL}, []string{gl.URL})
	if err != nil {
		t.Fatal(err)
	}
	return ca, []service{
		{
			kind: forge.GitHub, api: gh, hosts: hosts,
			repoURL: "https://x-access-token:secret@127.0.0.1:1/example/deploy.git", project: "example/deploy",
			list: "/api/v3/repos/example/deploy/pulls", one: "/api/v3/repos/example/deploy/pulls/1",
			labels: "POST /api/v3/repos/example/deploy/issues/1/labels",
		},
		{
			kind: forge.GitLab, api: gl, hosts: hosts,
			repoURL: "git@127.0.0.1:group/sub/deploy.git", project: "group/sub/deploy",
			list: "/api/v4/projects/group%2Fsub%2Fdeploy/merge_requests", one: "/api/v4/projects/group%2Fsub%2Fdeploy/merge_requests/1",
		},
	}
}

func client(t *testing.T, ca *testenv.CA, s service, token string) forge.Client {
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
	c, err := repo.Client(token, tr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRequests(t *testing.T) {
	ca, svcs := services(t)
	ctx := context.Background()
	for _, s := range svcs {
		t.Run(string(s.kind), func(t *testing.T) {
			const token = "glpat-or-ghp-0123456789abcdef"
			s.api.AcceptToken(token)
			c := client(t, ca, s, token)
			method := map[forge.Kind]string{forge.GitHub: "PATCH", forge.GitLab: "PUT"}[s.kind]

			// Nothing yet; open one.
			if found, err := c.Find(ctx, "image-updates", "main"); err != nil || len(found) != 0 {
				t.Fatalf("Find: %v %v", found, err)
			}
			opened, err := c.Open(ctx, "image-updates", "main", "build: update", "- app: 1 to 2", []string{"image-update", "automated"})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.api.Reviews(s.project)[0].Labels; !slices.Equal(got, []string{"image-update", "automated"}) {
				t.Errorf("labels %q", got)
			}
			if opened.Number != 1 || opened.State != forge.StateOpen || opened.URL == "" || opened.Body != "- app: 1 to 2" {
				t.Errorf("opened %+v", opened)
			}
			// A second one for the same branch is refused.
			if _, err := c.Open(ctx, "image-updates", "main", "again", "", nil); !errors.Is(err, forge.ErrAlreadyExists) {
				t.Errorf("second Open: %v, want ErrAlreadyExists", err)
			}
			updated, err := c.Update(ctx, 1, "build: update 2", "- app: 1 to 3")
			if err != nil || updated.Title != "build: update 2" || updated.Body != "- app: 1 to 3" {
				t.Errorf("Update: %+v %v", updated, err)
			}
			if got := s.api.Reviews(s.project)[0].Labels; len(got) != 2 {
				t.Errorf("labels after the update %q, want them kept", got)
			}
			// Closed and merged ones are told apart; newest first.
			s.api.SetState(s.project, 1, "closed")
			if _, err := c.Open(ctx, "image-updates", "main", "build: update 3", "", nil); err != nil {
				t.Fatal(err)
			}
			s.api.SetState(s.project, 2, "merged")
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
			want := []string{"GET " + s.list, "POST " + s.list}
			if s.labels != "" {
				want = append(want, s.labels)
			}
			want = append(want, "POST "+s.list, method+" "+s.one, "POST "+s.list, "GET "+s.list, "GET "+s.list)
			if diff := cmp.Diff(want, s.api.Calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
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
			forge.GitHub: `401 Unauthorized: "Bad credentials"`, forge.GitLab: `401 Unauthorized: "401 Unauthorized"`}},
		{name: "forbidden", status: 403, want: map[forge.Kind]string{
			forge.GitHub: `403 Forbidden: "Resource not accessible by integration"`, forge.GitLab: `403 Forbidden: "403 Forbidden"`}},
		{name: "validation", status: 422, want: map[forge.Kind]string{
			forge.GitHub: `422 Unprocessable Entity: "Validation Failed"`, forge.GitLab: "422 Unprocessable Entity"}},
		{name: "server error", status: 502, want: map[forge.Kind]string{
			forge.GitHub: `502 Bad Gateway: "Bad Gateway"`, forge.GitLab: "502 Bad Gateway"}},
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

// What a service answers reaches memory and errors bounded: an answer
// past 4 MiB is not read on, and a message is quoted on one line and cut
// short.
func TestAnswerBounds(t *testing.T) {
	long := strings.Repeat("internal ", 1000)
	for _, tt := range []struct {
		name    string
		status  int
		answer  string
		want    string
		notWant string
	}{
		{"an answer past 4 MiB", http.StatusOK, `[` + strings.Repeat(`{"number":1},`, 400_000) + `{}]`, "the github API answer is larger than 4 MiB, the most the client reads", ""},
		{"a long message on several lines", http.StatusForbidden, `{"message":"denied\n` + long + `"}`, `403 Forbidden: "denied internal internal`, strings.Repeat("internal ", 40)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.answer)
			}))
			defer srv.Close()
			c, err := forge.Repository{Kind: forge.GitHub, API: srv.URL, Project: "o/r"}.Client("token", nil)
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

// A service that stalls, before its answer or halfway through it, fails
// the call at the call's deadline, before the caller's.
func TestCallTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	for _, kind := range []forge.Kind{forge.GitHub, forge.GitLab} {
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
				c, err := forge.Repository{Kind: kind, API: srv.URL, Project: "o/r"}.Client("token", nil, forge.WithCallTimeout(timeout))
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
	hosts, err := forge.NewHosts([]string{"https://GitHub.Example.com/api/v3/"}, []string{"https://example.org/gitlab"})
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
}

func FuzzLookup(f *testing.F) {
	hosts, err := forge.NewHosts(nil, []string{"https://example.org/gitlab"})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"https://github.com/a/b.git", "git@gitlab.com:a/b", "ssh://u:p@x:1/a", "https://example.org/gitlab/x/y", "@:", "://@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, k := range []forge.Kind{forge.GitHub, forge.GitLab} {
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
