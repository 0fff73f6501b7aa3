package testenv

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// githubCommits stands in for GitHub's commits through its API: the
// GraphQL mutation createCommitOnBranch (POST /api/graphql) and POST
// /repos/{owner}/{repo}/git/refs, on the bare repositories of a
// GitServer (GitHub's <owner>/<repo> is <owner>/<repo>.git there). The
// branch moves only if it still points where the mutation expects, as
// GitHub's expectedHeadOid guarantees.
type githubCommits struct {
	git *GitServer
	// Commits counts the commits made through the API.
	Commits atomic.Int64
}

// ServeCommits makes the stand-in commit into git's repositories through
// its API.
func (g *GitHubAPI) ServeCommits(git *GitServer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.commits.git = git
}

// APICommits is how many commits were made through the API.
func (g *GitHubAPI) APICommits() int64 { return g.commits.Commits.Load() }

// tokenOf checks the token of a call as GitHub does for REST and GraphQL
// calls alike; it answers the call when the token is refused.
func (g *GitHubAPI) tokenOf(w http.ResponseWriter, r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		token, _ = strings.CutPrefix(auth, "token ")
	}
	if !g.s.accepted(token) {
		githubError(w, http.StatusUnauthorized, "Bad credentials")
		return false
	}
	return true
}

// serveRefs answers POST /api/v3/repos/{owner}/{repo}/git/refs.
func (g *GitHubAPI) serveRefs(w http.ResponseWriter, r *http.Request, repo string) {
	s := g.s
	s.record(r)
	if r.Method != http.MethodPost {
		s.problem(r, "want POST")
		githubError(w, http.StatusNotFound, "Not Found")
		return
	}
	if !g.tokenOf(w, r) {
		return
	}
	var in struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || !strings.HasPrefix(in.Ref, "refs/") || len(in.SHA) != 40 {
		s.problem(r, fmt.Sprintf("ref %q, sha %q: want refs/heads/<branch> and a 40-digit sha", in.Ref, in.SHA))
		githubError(w, http.StatusUnprocessableEntity, "Invalid request.")
		return
	}
	dir, err := g.repoDir(repo)
	if err != nil {
		githubError(w, http.StatusNotFound, "Not Found")
		return
	}
	// update-ref with an empty old value creates the ref only if absent.
	if _, err := gitIn(dir, nil, nil, "update-ref", in.Ref, in.SHA, ""); err != nil {
		githubError(w, http.StatusUnprocessableEntity, "Reference already exists")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"ref": in.Ref, "object": map[string]string{"type": "commit", "sha": in.SHA}})
}

// serveGraphQL answers POST /api/graphql with the createCommitOnBranch
// mutation, and GraphQL's errors for anything else.
func (g *GitHubAPI) serveGraphQL(w http.ResponseWriter, r *http.Request) {
	s := g.s
	s.record(r)
	if !g.tokenOf(w, r) {
		return
	}
	var in struct {
		Query     string `json:"query"`
		Variables struct {
			Input struct {
				Branch struct {
					RepositoryNameWithOwner string `json:"repositoryNameWithOwner"`
					BranchName              string `json:"branchName"`
				} `json:"branch"`
				ExpectedHeadOid string `json:"expectedHeadOid"`
				Message         struct {
					Headline string `json:"headline"`
					Body     string `json:"body"`
				} `json:"message"`
				FileChanges struct {
					Additions []struct {
						Path     string `json:"path"`
						Contents string `json:"contents"`
					} `json:"additions"`
				} `json:"fileChanges"`
			} `json:"input"`
		} `json:"variables"`
	}
	answerErr := func(typ, message string) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": nil, "errors": []map[string]any{{"type": typ, "path": []string{"createCommitOnBranch"}, "message": message}}})
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&in); err != nil {
		s.problem(r, "body: "+err.Error())
		githubError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	input := in.Variables.Input
	switch {
	case !strings.Contains(in.Query, "createCommitOnBranch(input: $input)"):
		s.problem(r, "not the createCommitOnBranch mutation: "+in.Query)
		answerErr("INVALID", "unknown query")
		return
	case input.Message.Headline == "":
		s.problem(r, "empty headline")
		answerErr("INVALID", "Argument 'headline' on InputObject 'CommitMessage' is required")
		return
	case len(input.ExpectedHeadOid) != 40:
		s.problem(r, "expectedHeadOid "+input.ExpectedHeadOid)
		answerErr("INVALID", "expectedHeadOid is not a GitObjectID")
		return
	}
	files := map[string][]byte{}
	for _, a := range input.FileChanges.Additions {
		content, err := base64.StdEncoding.DecodeString(a.Contents)
		if err != nil || a.Path == "" || strings.HasPrefix(a.Path, "/") {
			s.problem(r, fmt.Sprintf("addition %q: contents not base64 or bad path", a.Path))
			answerErr("INVALID", "invalid file change")
			return
		}
		files[a.Path] = content
	}
	repo, branch := input.Branch.RepositoryNameWithOwner, input.Branch.BranchName
	dir, err := g.repoDir(repo)
	if err != nil {
		answerErr("NOT_FOUND", fmt.Sprintf("Could not resolve to a Repository with the name '%s'.", repo))
		return
	}
	oid, stale, err := commitFiles(dir, branch, input.ExpectedHeadOid, input.Message.Headline, input.Message.Body, files)
	switch {
	case stale:
		answerErr("STALE_DATA", fmt.Sprintf("Expected branch to point to %q but it did not. Pull and try again.", input.ExpectedHeadOid))
		return
	case err != nil:
		answerErr("UNPROCESSABLE", err.Error())
		return
	}
	g.commits.Commits.Add(1)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"createCommitOnBranch": map[string]any{"commit": map[string]string{"oid": oid}}}})
}

func (g *GitHubAPI) repoDir(repo string) (string, error) {
	g.mu.Lock()
	git := g.commits.git
	g.mu.Unlock()
	if git == nil || strings.Contains(repo, "..") || strings.Count(repo, "/") != 1 {
		return "", fmt.Errorf("no repository %s", repo)
	}
	dir := filepath.Join(git.Root, repo+".git")
	if _, err := os.Stat(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// commitFiles makes a commit of files on top of expected in the bare
// repository dir and moves branch to it if branch is still at expected
// (stale otherwise), as GitHub's servers do: signed by GitHub, authored by
// the App's bot.
func commitFiles(dir, branch, expected, headline, body string, files map[string][]byte) (oid string, stale bool, _ error) {
	index, err := os.CreateTemp("", "github-index-*")
	if err != nil {
		return "", false, err
	}
	index.Close()
	defer os.Remove(index.Name())
	env := []string{"GIT_INDEX_FILE=" + index.Name()}
	if _, err := gitIn(dir, env, nil, "read-tree", expected); err != nil {
		return "", true, nil
	}
	for p, content := range files {
		blob, err := gitIn(dir, nil, content, "hash-object", "-w", "--stdin")
		if err != nil {
			return "", false, err
		}
		if _, err := gitIn(dir, env, nil, "update-index", "--add", "--cacheinfo", "100644,"+blob+","+p); err != nil {
			return "", false, err
		}
	}
	tree, err := gitIn(dir, env, nil, "write-tree")
	if err != nil {
		return "", false, err
	}
	message := headline
	if body != "" {
		message += "\n\n" + body
	}
	bot := []string{"GIT_AUTHOR_NAME=image-updater[bot]", "GIT_AUTHOR_EMAIL=bot@users.noreply.github.com",
		"GIT_COMMITTER_NAME=GitHub", "GIT_COMMITTER_EMAIL=noreply@github.com"}
	commit, err := gitIn(dir, bot, []byte(message), "commit-tree", tree, "-p", expected)
	if err != nil {
		return "", false, err
	}
	if _, err := gitIn(dir, nil, nil, "update-ref", "refs/heads/"+branch, commit, expected); err != nil {
		return "", true, nil
	}
	return commit, false, nil
}

// gitIn is gitOutput trimmed, for git's plumbing commands.
func gitIn(dir string, env []string, stdin []byte, args ...string) (string, error) {
	out, err := gitOutput(dir, env, stdin, args...)
	return strings.TrimSpace(out), err
}

// gitOutput runs git in dir with no user or system configuration, env
// added and stdin, so the machine's settings cannot change what the tests
// see.
func gitOutput(dir string, env []string, stdin []byte, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}, env...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
