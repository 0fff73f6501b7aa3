package testenv

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// GitServer serves bare repositories from one folder over HTTP (git
// http-backend behind basic auth) and, once StartSSH is called, over SSH.
type GitServer struct {
	Root string // folder holding <name>.git bare repositories
	// HTTPURL is the base URL; repositories are HTTPURL + "/<name>.git".
	HTTPURL            string
	Username, Password string
	// Fetches and Pushes count git operations over HTTP (one per clone,
	// fetch or push, however many round trips it makes).
	Fetches, Pushes atomic.Int64
	// FetchedBytes counts the bytes the server sent in answer to fetch
	// requests over HTTP (POST git-upload-pack): the negotiation and the
	// pack, not the branch listings.
	FetchedBytes atomic.Int64

	SSH *SSHServer

	mu    sync.Mutex
	extra map[string]string // user → password, besides Username
}

// AcceptCredentials makes the server accept user with password too, in
// place of the password it accepted for that user before: a token that a
// test hands out, then replaces.
func (g *GitServer) AcceptCredentials(user, password string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.extra == nil {
		g.extra = map[string]string{}
	}
	g.extra[user] = password
}

func (g *GitServer) authorized(user, password string) bool {
	if user == g.Username && password == g.Password {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	want, ok := g.extra[user]
	return ok && password == want
}

// SSHServer is an OpenSSH server serving the same repositories.
type SSHServer struct {
	Addr string // 127.0.0.1:<port>
	User string
	// ClientKey is a PEM private key the server accepts.
	ClientKey []byte
	// HostKey is the server's public host key.
	HostKey ssh.PublicKey
}

// StartGitServer serves repositories over HTTP with basic auth.
func StartGitServer(t testing.TB) *GitServer {
	t.Helper()
	backend := gitHTTPBackend(t)
	g := &GitServer{Root: t.TempDir(), Username: "git-user", Password: randomString(t, 16)}
	// Requests in flight, whose git processes may still write into Root
	// after the server closed (a push the client gave up on).
	var inFlight sync.WaitGroup
	var running sync.Map // *http.Request → what it asks, for the report
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Done()
		running.Store(r, r.Method+" "+r.URL.Path)
		defer running.Delete(r)
		user, pass, ok := r.BasicAuth()
		if !ok || !g.authorized(user, pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test git server"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			switch r.URL.Query().Get("service") {
			case "git-upload-pack":
				g.Fetches.Add(1)
			case "git-receive-pack":
				g.Pushes.Add(1)
			}
		}
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			w = countingWriter{w, &g.FetchedBytes}
		}
		h := &cgi.Handler{
			Path: backend,
			Root: "/",
			Env: []string{
				"GIT_PROJECT_ROOT=" + g.Root,
				"GIT_HTTP_EXPORT_ALL=1",
				// http-backend allows pushes only from an authenticated user.
				"REMOTE_USER=" + user,
			},
		}
		h.ServeHTTP(w, r)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		// A git process whose client went away can wait on a pipe that
		// nothing drains any more (http-backend's child keeps the
		// request's stdin open after http-backend is killed), holding
		// its handler: every process of this server is stopped, again
		// while handlers remain, before the repositories' folder is
		// removed.
		waited := make(chan struct{})
		go func() { inFlight.Wait(); close(waited) }()
		deadline := time.After(30 * time.Second)
		for {
			killProcessesWithEnv("GIT_PROJECT_ROOT=" + g.Root)
			select {
			case <-waited:
				return
			case <-time.After(time.Second):
			case <-deadline:
				var reqs []string
				running.Range(func(_, v any) bool { reqs = append(reqs, v.(string)); return true })
				t.Errorf("git server: requests still running 30s after it closed: %s", strings.Join(reqs, ", "))
				return
			}
		}
	})
	g.HTTPURL = "http://" + l.Addr().String()
	return g
}

// killProcessesWithEnv sends SIGKILL to every process of this user whose
// environment holds entry; the processes a CGI handler starts, and
// theirs, inherit it.
func killProcessesWithEnv(entry string) {
	dirs, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == entry {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

// countingWriter adds the bytes of a response body to n.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func gitHTTPBackend(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v (is git installed? run `make testbin`)", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("git http-backend: %v", err)
	}
	return path
}

// HTTPRepoURL is the HTTP clone URL of a repository.
func (g *GitServer) HTTPRepoURL(name string) string { return g.HTTPURL + "/" + name + ".git" }

// SSHRepoURL is the SSH clone URL of a repository (StartSSH first).
func (g *GitServer) SSHRepoURL(name string) string {
	return fmt.Sprintf("ssh://%s@%s%s", g.SSH.User, g.SSH.Addr, filepath.Join(g.Root, name+".git"))
}

// KnownHosts is a known_hosts line for the SSH server, as Argo CD's
// argocd-ssh-known-hosts-cm holds them.
func (s *SSHServer) KnownHosts() string {
	host, port, _ := net.SplitHostPort(s.Addr)
	return fmt.Sprintf("[%s]:%s %s", host, port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey))))
}

// StartSSH starts sshd on a loopback port serving the repositories. It
// accepts only the generated client key, for the user running the tests.
func (g *GitServer) StartSSH(t testing.TB) *SSHServer {
	t.Helper()
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		t.Fatalf("sshd not found (%v): run `make testbin`, which installs openssh-server", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hostPub, hostPEM := newSSHKey(t)
	clientPub, clientPEM := newSSHKey(t)
	writeFile(t, filepath.Join(dir, "host_key"), string(hostPEM))
	writeFile(t, filepath.Join(dir, "authorized_keys"), string(ssh.MarshalAuthorizedKey(clientPub)))
	// sshd wants its privilege separation folder to exist.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("create /run/sshd: %v", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port := FreePort(t)
		config := filepath.Join(dir, "sshd_config")
		writeFile(t, config, fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowUsers %s
LogLevel VERBOSE
`, port, filepath.Join(dir, "host_key"), filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "sshd.pid"), u.Username))
		p := startProcess(t, "sshd", exec.Command(sshd, "-D", "-e", "-f", config))
		addr := loopback(port)
		lastErr = p.waitFor(10*time.Second, func() error {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return err
			}
			return c.Close()
		})
		if lastErr == nil {
			g.SSH = &SSHServer{Addr: addr, User: u.Username, ClientKey: clientPEM, HostKey: hostPub}
			return g.SSH
		}
		p.stop()
	}
	t.Fatalf("start sshd: %v", lastErr)
	return nil
}

func newSSHKey(t testing.TB) (ssh.PublicKey, []byte) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sshPub, pem.EncodeToMemory(block)
}

// CreateRepo creates a bare repository whose branch "main" (also the
// default branch) holds one commit with the files of fixtureDir, or with
// files when fixtureDir is empty.
func (g *GitServer) CreateRepo(t testing.TB, name, fixtureDir string, files map[string]string) {
	t.Helper()
	g.CreateRepoOn(t, name, "main", fixtureDir, files)
}

// CreateRepoOn is CreateRepo with branch as the one and default branch,
// for fixtures that name theirs ("master").
func (g *GitServer) CreateRepoOn(t testing.TB, name, branch, fixtureDir string, files map[string]string) {
	t.Helper()
	work := t.TempDir()
	if fixtureDir != "" {
		copyTree(t, fixtureDir, work)
	}
	for path, content := range files {
		writeFile(t, filepath.Join(work, path), content)
	}
	bare := filepath.Join(g.Root, name+".git")
	runGit(t, "", "init", "--quiet", "--bare", "--initial-branch="+branch, bare)
	runGit(t, work, "init", "--quiet", "--initial-branch="+branch)
	runGit(t, work, "add", "--all")
	runGit(t, work, "commit", "--quiet", "--message", "initial commit")
	runGit(t, work, "push", "--quiet", bare, branch)
}

// CommitFiles commits files to a branch as a person would (a clone, a
// commit, a push), and returns the new commit's hash.
func (g *GitServer) CommitFiles(t testing.TB, repo, branch, message string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	runGit(t, "", "clone", "--quiet", "--branch", branch, filepath.Join(g.Root, repo+".git"), work)
	for path, content := range files {
		writeFile(t, filepath.Join(work, path), content)
	}
	runGit(t, work, "add", "--all")
	runGit(t, work, "commit", "--quiet", "--message", message)
	runGit(t, work, "push", "--quiet", "origin", branch)
	return strings.TrimSpace(runGit(t, work, "rev-parse", "HEAD"))
}

// Tag tags the commit rev (a branch, a tag or a hash) of repo with an
// annotated tag, as a release does.
func (g *GitServer) Tag(t testing.TB, repo, tag, rev string) {
	t.Helper()
	runGit(t, filepath.Join(g.Root, repo+".git"), "tag", "--annotate", "--message", "release "+tag, tag, rev)
}

// Revert reverts a commit on a branch as a person would (git revert in a
// clone, a push), and returns the revert commit's hash.
func (g *GitServer) Revert(t testing.TB, repo, branch, commit string) string {
	t.Helper()
	work := t.TempDir()
	runGit(t, "", "clone", "--quiet", "--branch", branch, filepath.Join(g.Root, repo+".git"), work)
	runGit(t, work, "revert", "--no-edit", commit)
	runGit(t, work, "push", "--quiet", "origin", branch)
	return strings.TrimSpace(runGit(t, work, "rev-parse", "HEAD"))
}

// FastForward moves branch into to the tip of branch from, as merging a
// pull request without a merge commit does.
func (g *GitServer) FastForward(t testing.TB, repo, into, from string) {
	t.Helper()
	bare := filepath.Join(g.Root, repo+".git")
	runGit(t, bare, "merge-base", "--is-ancestor", into, from)
	runGit(t, bare, "update-ref", "refs/heads/"+into, "refs/heads/"+from)
}

// ReadFile returns a file at the tip of a branch.
func (g *GitServer) ReadFile(t testing.TB, repo, branch, path string) string {
	t.Helper()
	return runGit(t, filepath.Join(g.Root, repo+".git"), "show", branch+":"+path)
}

// Commit is one commit as the tests see it.
type Commit struct {
	Hash, Author, Email, Subject, Body string
}

// Log lists the commits of a branch, newest first.
func (g *GitServer) Log(t testing.TB, repo, branch string) []Commit {
	t.Helper()
	const sep, end = "\x1f", "\x1e"
	out := runGit(t, filepath.Join(g.Root, repo+".git"), "log", "--format=%H"+sep+"%an"+sep+"%ae"+sep+"%s"+sep+"%b"+end, branch)
	var commits []Commit
	for _, rec := range strings.Split(out, end) {
		f := strings.Split(strings.TrimLeft(rec, "\n"), sep)
		if len(f) != 5 {
			continue
		}
		commits = append(commits, Commit{Hash: f[0], Author: f[1], Email: f[2], Subject: f[3], Body: strings.TrimSpace(f[4])})
	}
	return commits
}

// ChangedFiles lists the files a commit of a repository changed.
func (g *GitServer) ChangedFiles(t testing.TB, repo, commit string) []string {
	t.Helper()
	return strings.Fields(runGit(t, filepath.Join(g.Root, repo+".git"), "show", "--name-only", "--format=", commit))
}

// Branches lists the branches of a repository.
func (g *GitServer) Branches(t testing.TB, repo string) []string {
	t.Helper()
	out := runGit(t, filepath.Join(g.Root, repo+".git"), "for-each-ref", "--format=%(refname:short)", "refs/heads")
	return strings.Fields(out)
}

// runGit runs git with a fixed identity and no user or system config, so
// the machine's settings cannot change what the tests see.
func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitOutput(dir, []string{
		"GIT_AUTHOR_NAME=fixture", "GIT_AUTHOR_EMAIL=fixture@example.com",
		"GIT_COMMITTER_NAME=fixture", "GIT_COMMITTER_EMAIL=fixture@example.com",
	}, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}
