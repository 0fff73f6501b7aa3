package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// requestLog records the requests a small test server got, with their
// Authorization headers.
type requestLog struct {
	mu    sync.Mutex
	paths []string
	auths []string
}

func (l *requestLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paths = append(l.paths, r.URL.Path)
	l.auths = append(l.auths, r.Header.Get("Authorization"))
}

func (l *requestLog) get() (paths, auths []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.paths...), append([]string(nil), l.auths...)
}

// serve runs h on addr (host:0) until the test ends and returns its
// http:// base URL.
func serve(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// recordingProxy serves target (the git server) on addr, recording every
// request.
func recordingProxy(t *testing.T, addr, target string) (string, *requestLog) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	log := &requestLog{}
	return serve(t, addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		proxy.ServeHTTP(w, r)
	})), log
}

// testRepoCredsBoundaries: a repo-creds Secret whose URL is the
// look-alike server's address cut in the middle of its port sends nothing
// there (gitauth's TestRepoCredsBoundaries checks the matching itself).
func (e *gitEnv) testRepoCredsBoundaries(t *testing.T) {
	// One for the whole address does send them (which shows the server
	// records them).
	tests2 := []struct {
		name     string
		prefix   func(server string) string
		wantAuth bool
	}{
		{name: "prefix ends mid-port", prefix: func(s string) string { return s[:len(s)-1] }},
		{name: "prefix is the whole host and port", prefix: func(s string) string { return s }, wantAuth: true},
	}
	for i, tt := range tests2 {
		t.Run(tt.name, func(t *testing.T) {
			log := &requestLog{}
			server := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				log.add(r)
				w.Header().Set("WWW-Authenticate", `Basic realm="look-alike"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
			}))
			ns := e.argoNamespace(t, []string{"lookalike-mid-port", "lookalike-whole"}[i], false)
			const password = "look-alike-password-0815"
			e.secret(t, ns, "creds", argoCDSecretTypeRepoCreds, map[string]string{"url": tt.prefix(server), "username": "bot", "password": password})
			r := e.writer(t, ns).write(context.Background(), []update{appUpdate("main", server+"/repo.git")})[0]
			if r.Err == nil {
				t.Fatal("the write succeeded")
			}
			paths, auths := log.get()
			if len(paths) == 0 {
				t.Fatalf("no request reached the server: %v", r.Err)
			}
			sent := false
			for _, a := range auths {
				sent = sent || a != ""
			}
			if sent != tt.wantAuth {
				t.Errorf("Authorization headers %q, want some: %v", auths, tt.wantAuth)
			}
			if strings.Contains(r.Err.Error(), password) {
				t.Errorf("the error shows the password: %v", r.Err)
			}
		})
	}
}

// testRedirects: the git server's answer may move a repository on the
// same host, but never send the credentials to another one.
func (e *gitEnv) testRedirects(t *testing.T) {
	ca := testenv.NewCA(t, "redirect CA")
	httpsURL := testenv.StartTLSProxy(t, e.git.HTTPURL, ca.ServerCert(t), nil)
	// Another host: a second loopback address, in front of the real git
	// server, so that a followed redirect would succeed.
	elsewhere, elsewhereLog := recordingProxy(t, "127.0.0.2:0", e.git.HTTPURL)

	tests := []struct {
		name string
		// to is the base URL a request for <ns>-old.git is sent to, as
		// <ns>-new.git, given the redirecting server's own base URL.
		to      func(self string) string
		wantErr string // "": the write lands in the repository "<ns>-new"
	}{
		{name: "to another host", to: func(string) string { return elsewhere }, wantErr: "refusing to follow a redirect from 127.0.0.1"},
		{name: "to another port", to: func(string) string { return e.git.HTTPURL }, wantErr: "refusing to follow a redirect from 127.0.0.1"},
		{name: "to another path on the same host", to: func(self string) string { return self }},
		// Followed, but go-git sends the credentials to no other origin
		// (scheme and port), so a private repository refuses the push.
		{name: "to https on the same host", to: func(string) string { return httpsURL }, wantErr: "authentication required"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := e.argoNamespace(t, []string{"redirect-host", "redirect-port", "redirect-path", "redirect-https"}[i], true)
			e.configMap(t, ns, repoaccess.TLSCertsConfigMap, map[string]string{"127.0.0.1": string(ca.PEM)})
			e.git.CreateRepo(t, ns+"-new", "testdata/seed003", nil)
			target, _ := url.Parse(e.git.HTTPURL)
			proxy := httputil.NewSingleHostReverseProxy(target)
			var self string
			self = serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(r.URL.Path, "-old.git/") {
					http.Redirect(w, r, tt.to(self)+strings.Replace(r.URL.RequestURI(), "-old.git/", "-new.git/", 1), http.StatusMovedPermanently)
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			// The Secret of the namespace covers the git server only; a
			// second one covers the redirecting server.
			e.secret(t, ns, "redirector-creds", argoCDSecretTypeRepoCreds, map[string]string{"url": self, "username": e.git.Username, "password": e.git.Password})
			e.secret(t, ns, "https-creds", argoCDSecretTypeRepoCreds, map[string]string{"url": httpsURL, "username": e.git.Username, "password": e.git.Password})
			before, _ := elsewhereLog.get()

			r := e.writer(t, ns).write(context.Background(), []update{appUpdate("main", self+"/"+ns+"-old.git")})[0]
			if after, auths := elsewhereLog.get(); len(after) != len(before) {
				t.Errorf("the other host got %d requests (Authorization %q)", len(after)-len(before), auths[len(before):])
			}
			log := e.git.Log(t, ns+"-new", "main")
			if tt.wantErr != "" {
				if r.Err == nil || !strings.Contains(r.Err.Error(), tt.wantErr) {
					t.Errorf("got %v, want an error containing %q", r.Err, tt.wantErr)
				}
				if len(log) != 1 {
					t.Errorf("history %v", subjects(log))
				}
				return
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if log[0].Hash != r.Commit {
				t.Errorf("commit %s is not the tip of main (%v)", r.Commit, subjects(log))
			}
		})
	}
}

// testCredentialsInErrors: credentials written into the repository URL
// appear in no error or log line, whatever the server answers.
func (e *gitEnv) testCredentialsInErrors(t *testing.T) {
	const secret = "url-secret-4711"
	tests := []struct {
		name   string
		status int
		user   string // the URL's user info
	}{
		{name: "502 with user and password", status: http.StatusBadGateway, user: "user:" + secret},
		{name: "502 with a token as user", status: http.StatusBadGateway, user: secret},
		{name: "500 with user and password", status: http.StatusInternalServerError, user: "user:" + secret},
		{name: "404 with user and password", status: http.StatusNotFound, user: "user:" + secret},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "bad gateway", tt.status)
			}))
			ns := e.argoNamespace(t, []string{"url-creds-502", "url-creds-502-token", "url-creds-500", "url-creds-404"}[i], false)
			var logs bytes.Buffer
			w := e.writer(t, ns, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
			repoURL := strings.Replace(server, "://", "://"+tt.user+"@", 1) + "/repo.git"
			r := w.write(context.Background(), []update{appUpdate("main", repoURL)})[0]
			if r.Err == nil {
				t.Fatal("the write succeeded")
			}
			if strings.Contains(r.Err.Error(), secret) {
				t.Errorf("the error shows the secret: %v", r.Err)
			}
			if strings.Contains(logs.String(), secret) {
				t.Errorf("the log shows the secret:\n%s", logs.String())
			}
			if !strings.Contains(r.Err.Error(), server[len("http://"):]) || !strings.Contains(r.Err.Error(), "credentials from the repository URL") {
				t.Errorf("the error does not name the server and where the credentials came from: %v", r.Err)
			}
		})
	}
}

// countingSecrets counts the Secrets read by name.
type countingSecrets struct {
	repoaccess.SecretLister
	gets atomic.Int64
}

func (c *countingSecrets) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	c.gets.Add(1)
	return c.SecretLister.Secret(ctx, namespace, name)
}

// testGitSecret: git:secret:<namespace>/<name> names a Secret of the
// Application's own namespace, for the repository it writes to.
func (e *gitEnv) testGitSecret(t *testing.T) {
	ns := e.argoNamespace(t, "creds-git-secret", false)
	url := e.repo(t, "creds-git-secret", nil)
	const team = "team-git-secret"
	e.kube.CreateNamespace(t, team)
	e.kube.CreateNamespace(t, "other-team")
	// Argo CD's read-only credentials would fail to push; the Secret the
	// annotation names is used instead.
	e.secret(t, ns, "read-only", argoCDSecretTypeRepository, map[string]string{"url": url, "username": e.git.Username, "password": "read-only"})
	push := func(extra map[string]string) map[string]string {
		d := map[string]string{"username": e.git.Username, "password": e.git.Password}
		for k, v := range extra {
			d[k] = v
		}
		return d
	}
	e.secret(t, team, "push", "", push(nil))
	e.secret(t, team, "for-this-repo", "", push(map[string]string{"url": strings.TrimSuffix(url, ".git")}))
	e.secret(t, team, "for-the-server", "", push(map[string]string{"url": e.git.HTTPURL}))
	e.secret(t, team, "for-another-repo", "", push(map[string]string{"url": e.git.HTTPRepoURL("creds-git-secret-other")}))
	e.secret(t, team, "for-a-look-alike", "", push(map[string]string{"url": e.git.HTTPURL + "/creds-git"}))
	e.secret(t, "other-team", "push", "", push(nil))
	e.secret(t, testenv.ArgoCDNamespace, "git-secret-push", "", push(nil))

	tests := []struct {
		name      string
		appNS     string
		secret    types.NamespacedName
		wantErr   string
		forbidden bool // repoaccess.ErrNotPermitted, and no Secret read
	}{
		{name: "own namespace", appNS: team, secret: types.NamespacedName{Namespace: team, Name: "push"}},
		{name: "url of the repository", appNS: team, secret: types.NamespacedName{Namespace: team, Name: "for-this-repo"}},
		{name: "url covering the repository", appNS: team, secret: types.NamespacedName{Namespace: team, Name: "for-the-server"}},
		{name: "Argo CD's namespace for its own Applications", appNS: testenv.ArgoCDNamespace, secret: types.NamespacedName{Namespace: testenv.ArgoCDNamespace, Name: "git-secret-push"}},
		{name: "another namespace", appNS: team, secret: types.NamespacedName{Namespace: "other-team", Name: "push"}, forbidden: true,
			wantErr: "git:secret:other-team/push names a Secret in namespace other-team; an Application's annotations may name only Secrets in the Application's own namespace, " + team},
		{name: "Argo CD's namespace for another namespace's Application", appNS: team, secret: types.NamespacedName{Namespace: testenv.ArgoCDNamespace, Name: "git-secret-push"}, forbidden: true,
			wantErr: "may name only Secrets in the Application's own namespace"},
		{name: "url of another repository", appNS: team, secret: types.NamespacedName{Namespace: team, Name: "for-another-repo"},
			wantErr: "credentials Secret " + team + "/for-another-repo is for " + e.git.HTTPRepoURL("creds-git-secret-other") + ", not for " + url},
		{name: "url cut mid-segment", appNS: team, secret: types.NamespacedName{Namespace: team, Name: "for-a-look-alike"},
			wantErr: "credentials Secret " + team + "/for-a-look-alike is for " + e.git.HTTPURL + "/creds-git, not for"},
		{name: "missing", appNS: team, secret: types.NamespacedName{Namespace: team, Name: "missing"}, wantErr: "credentials Secret " + team + "/missing not found"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets := &countingSecrets{SecretLister: repoaccess.NewKubeSecretLister(e.cs)}
			w, err := NewWriter(secrets, repoaccess.NewKubeAppProjectGetter(e.dyn), WithArgoCDNamespace(ns), WithWorkDir(t.TempDir()), WithClock(func() time.Time { return testClock }))
			if err != nil {
				t.Fatal(err)
			}
			u := appUpdate("main", url)
			u.Namespace, u.CredentialsSecret = tt.appNS, tt.secret
			u.Images[0].New.Tag = fmt.Sprintf("v0.0.%d", i+2)
			fetches := e.git.Fetches.Load()
			r := w.write(context.Background(), []update{u})[0]
			if tt.wantErr == "" {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				if log := e.git.Log(t, "creds-git-secret", "main"); log[0].Hash != r.Commit {
					t.Errorf("commit %s is not the tip of main (%v)", r.Commit, subjects(log))
				}
				return
			}
			if r.Err == nil || !strings.Contains(r.Err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", r.Err, tt.wantErr)
			}
			if d := e.git.Fetches.Load() - fetches; d != 0 {
				t.Errorf("%d requests to the git server", d)
			}
			if !errors.Is(r.Err, writeback.ErrInvalidTarget) && tt.secret.Name != "missing" {
				t.Errorf("not an invalid target: %v", r.Err)
			}
			if tt.forbidden {
				if !errors.Is(r.Err, repoaccess.ErrNotPermitted) {
					t.Errorf("not repoaccess.ErrNotPermitted: %v", r.Err)
				}
				if n := secrets.gets.Load(); n != 0 {
					t.Errorf("%d Secrets read", n)
				}
			}
		})
	}
}

// countingProjects counts the AppProjects read.
type countingProjects struct {
	repoaccess.AppProjectGetter
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingProjects) AppProject(ctx context.Context, namespace, name string) (*repoaccess.AppProject, error) {
	c.mu.Lock()
	c.reads[name]++
	c.mu.Unlock()
	return c.AppProjectGetter.AppProject(ctx, namespace, name)
}

// testAppProjects: the repository written to must be one the
// Application's AppProject allows, for an Application its AppProject
// allows. All the Applications go in one Write, as in a cycle, which
// reads each AppProject once.
func (e *gitEnv) testAppProjects(t *testing.T) {
	ns := e.argoNamespace(t, "app-projects", false)
	// The Applications reach the git server through a proxy that tells
	// which repositories were asked for.
	base, requests := recordingProxy(t, "127.0.0.1:0", e.git.HTTPURL)
	e.secret(t, ns, "creds", argoCDSecretTypeRepoCreds, map[string]string{"url": base, "username": e.git.Username, "password": e.git.Password})
	for _, name := range []string{"projects-allowed", "projects-allowed-denied", "projects-other", "projects-elsewhere"} {
		e.git.CreateRepo(t, name, "testdata/seed003", nil)
	}
	repo := func(name string) string { return base + "/" + name + ".git" }
	e.kube.CreateAppProject(t, ns, "restricted", []string{base + "/projects-allowed*", "!" + base + "/projects-allowed-denied.git"}, []string{testenv.ArgoCDNamespace})
	e.kube.CreateAppProject(t, ns, "teams", []string{"*"}, []string{"team-*", "/^ops-[0-9]+$/"})

	tests := []struct {
		name, namespace, project, repo string
		url                            string // instead of repo's URL
		wantErr                        string // "": the write lands
	}{
		{name: "allowed", project: "restricted", repo: "projects-allowed"},
		{name: "another repository", project: "restricted", repo: "projects-other",
			wantErr: "repository " + repo("projects-other") + " is not permitted by AppProject restricted (spec.sourceRepos)"},
		{name: "denied", project: "restricted", repo: "projects-allowed-denied",
			wantErr: "repository " + repo("projects-allowed-denied") + " is not permitted by AppProject restricted"},
		{name: "a path escaping the allowed one", project: "restricted", repo: "projects-allowed/../projects-other",
			wantErr: "has a '.' or '..' path segment"},
		{name: "a file URL", project: "", url: "file://" + e.bare("projects-other"),
			wantErr: "the repository URL file://" + e.bare("projects-other") + " is not an https://, http://, ssh:// or user@host:path URL"},
		{name: "a local path", project: "", url: e.bare("projects-other"), wantErr: "is not an https://, http://, ssh:// or user@host:path URL"},
		{name: "no project means default", project: "", repo: "projects-allowed"},
		{name: "missing project", project: "missing", repo: "projects-allowed", wantErr: "AppProject " + ns + "/missing does not exist"},
		{name: "Argo CD's namespace", namespace: ns, project: "teams", repo: "projects-allowed"},
		{name: "a source namespace glob", namespace: "team-x", project: "teams", repo: "projects-allowed"},
		{name: "a source namespace expression", namespace: "ops-12", project: "teams", repo: "projects-allowed"},
		{name: "not a source namespace", namespace: "ops-x", project: "teams", repo: "projects-elsewhere",
			wantErr: "AppProject teams does not permit Applications in namespace ops-x (spec.sourceNamespaces)"},
		{name: "not a source namespace of the default project", namespace: "ops-12", project: "", repo: "projects-elsewhere",
			wantErr: "AppProject default does not permit Applications in namespace ops-12"},
	}
	var updates []update
	for i, tt := range tests {
		url := tt.url
		if url == "" {
			url = repo(tt.repo)
		}
		u := appUpdate(fmt.Sprintf("app-%d", i), url)
		if tt.namespace != "" {
			u.Namespace = tt.namespace
		}
		u.Project = tt.project
		updates = append(updates, u)
	}
	projects := &countingProjects{AppProjectGetter: repoaccess.NewKubeAppProjectGetter(e.dyn), reads: map[string]int{}}
	w, err := NewWriter(repoaccess.NewKubeSecretLister(e.cs), projects, WithArgoCDNamespace(ns), WithWorkDir(t.TempDir()), WithClock(func() time.Time { return testClock }))
	if err != nil {
		t.Fatal(err)
	}
	results := w.write(context.Background(), updates)
	log := e.git.Log(t, "projects-allowed", "main")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := results[i]
			if tt.wantErr == "" {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				if !slices.ContainsFunc(log, func(c testenv.Commit) bool { return c.Hash == r.Commit }) {
					t.Errorf("commit %s is not on main (%v)", r.Commit, subjects(log))
				}
				return
			}
			if r.Err == nil || !strings.Contains(r.Err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", r.Err, tt.wantErr)
			}
			if !errors.Is(r.Err, repoaccess.ErrNotPermitted) || !errors.Is(r.Err, writeback.ErrInvalidTarget) {
				t.Errorf("not repoaccess.ErrNotPermitted and writeback.ErrInvalidTarget: %v", r.Err)
			}
		})
	}
	if log := e.git.Log(t, "projects-other", "main"); len(log) != 1 {
		t.Errorf("projects-other was written: %v", subjects(log))
	}
	paths, _ := requests.get()
	for _, p := range paths {
		if !strings.HasPrefix(p, "/projects-allowed.git/") {
			t.Errorf("request for %s", p)
		}
	}
	if diff := cmp.Diff(map[string]int{"restricted": 1, "default": 1, "missing": 1, "teams": 1}, projects.reads); diff != "" {
		t.Errorf("AppProject reads (-want +got):\n%s", diff)
	}
}
