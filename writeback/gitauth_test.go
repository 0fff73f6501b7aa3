package writeback

import (
	"context"
	"strings"
	"testing"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

func TestAccess(t *testing.T) {
	r := newCredentialResolver(nil, "argocd", t.TempDir())
	ctx := context.Background()
	basic := gitCredentials{source: "Secret argocd/repo", username: "bot", password: "s3cret"}

	tests := []struct {
		name, url string
		creds     gitCredentials
		wantUser  string
		err       string
	}{
		{name: "https", url: "https://git.example.com/org/repo.git", creds: basic, wantUser: "bot"},
		{name: "token without user", url: "https://git.example.com/org/repo.git", creds: gitCredentials{source: "x", password: "token"}, wantUser: githubTokenUser},
		{name: "plain http to loopback", url: "http://127.0.0.1:8080/repo.git", creds: basic, wantUser: "bot"},
		{name: "plain http to localhost", url: "http://localhost/repo.git", creds: basic, wantUser: "bot"},
		{name: "plain http elsewhere", url: "http://git.example.com/repo.git", creds: basic, err: "refusing to send credentials from Secret argocd/repo over plain http to git.example.com; use https"},
		{name: "anonymous", url: "https://git.example.com/org/repo.git"},
		{name: "github app", url: "https://github.com/org/repo.git", creds: gitCredentials{source: "Secret argocd/app", githubApp: true}, err: "GitHub App credentials"},
		{name: "ssh without a key", url: "git@github.com:org/repo.git", creds: basic, err: "no SSH private key for git@github.com:org/repo.git"},
		{name: "ssh with a bad key", url: "ssh://git@github.com/org/repo.git", creds: gitCredentials{source: "Secret argocd/ssh", sshPrivateKey: "not a key"}, err: "the SSH private key in Secret argocd/ssh cannot be parsed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acc, err := r.access(ctx, tt.url, tt.creds, false)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error containing %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch a := acc.auth.(type) {
			case nil:
				if tt.wantUser != "" {
					t.Errorf("no auth, want user %s", tt.wantUser)
				}
			case *githttp.BasicAuth:
				if a.Username != tt.wantUser {
					t.Errorf("user %q, want %q", a.Username, tt.wantUser)
				}
			default:
				t.Errorf("auth %T", a)
			}
		})
	}
}

func TestAccessSSHUser(t *testing.T) {
	key := string(testSSHKey(t))
	r := newCredentialResolver(nil, "argocd", t.TempDir())
	for url, want := range map[string]string{
		"git@github.com:org/repo.git":                "git",
		"ssh://deploy@git.example.com:2222/repo.git": "deploy",
		"ssh://git.example.com/repo.git":             "git",
	} {
		acc, err := r.access(context.Background(), url, gitCredentials{source: "x", sshPrivateKey: key}, true)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if a, ok := acc.auth.(*gitssh.PublicKeys); !ok || a.User != want {
			t.Errorf("%s: auth %+v, want user %s", url, acc.auth, want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://bot:s3cret@git.example.com/repo.git": "https://bot:xxxxx@git.example.com/repo.git",
		"https://bot@git.example.com/repo.git":        "https://bot@git.example.com/repo.git",
		"git@github.com:org/repo.git":                 "git@github.com:org/repo.git",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}

func TestNormalizeRepoURL(t *testing.T) {
	a, b := normalizeRepoURL("https://GitHub.com/Org/Repo.git"), normalizeRepoURL("https://github.com/org/repo/")
	if a != b {
		t.Errorf("%s != %s", a, b)
	}
}
