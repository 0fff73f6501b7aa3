package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/image-updater/argocd-image-updater/settings"
)

func TestExecute(t *testing.T) {
	tmpl := filepath.Join(t.TempDir(), "commit.template")
	if err := os.WriteFile(tmpl, []byte("update {{ .AppName }}"), 0o600); err != nil {
		t.Fatal(err)
	}
	badTmpl := filepath.Join(t.TempDir(), "bad.template")
	if err := os.WriteFile(badTmpl, []byte("{{ .AppName"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "version", args: []string{"version"}, wantStdout: runtime.Version()},
		{name: "version short", args: []string{"version", "--short"}, wantStdout: "dev\n"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 2, wantStderr: `unknown command "frobnicate"`},
		{name: "unknown flag", args: []string{"run", "--no-such-flag"}, wantCode: 2, wantStderr: "unknown flag: --no-such-flag"},
		{name: "bad duration", args: []string{"run", "--interval", "soon"}, wantCode: 2, wantStderr: "Usage:"},
		{name: "bad enum", args: []string{"run", "--logformat", "xml"}, wantCode: 2, wantStderr: `invalid value "xml" for --logformat`},
		{name: "bad concurrency", args: []string{"run", "--max-concurrency", "0"}, wantCode: 2, wantStderr: "--max-concurrency"},
		{name: "no request timeout", args: []string{"run", "--registry-request-timeout", "0s"}, wantCode: 2, wantStderr: "invalid value 0s for --registry-request-timeout: must be positive"},
		{name: "negative application timeout", args: []string{"run", "--application-timeout", "-1s"}, wantCode: 2, wantStderr: "invalid value -1s for --application-timeout: must not be negative"},
		{
			name: "no image timeout", args: []string{"run"}, env: map[string]string{"IMAGE_UPDATER_IMAGE_TIMEOUT": "-1m"},
			wantCode: 2, wantStderr: "invalid value -1m0s for --image-timeout: must be positive",
		},
		{
			// As both upstream lines: the variable is ignored with a warning.
			name: "bad environment", args: []string{"run", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, env: map[string]string{"IMAGE_UPDATER_INTERVAL": "often"},
			wantCode: 1, wantStderr: `for environment variable IMAGE_UPDATER_INTERVAL (flag --interval): invalid duration`,
		},
		{name: "run extra argument", args: []string{"run", "extra"}, wantCode: 2, wantStderr: "unexpected arguments: extra"},
		{name: "test without image", args: []string{"test"}, wantCode: 2, wantStderr: "expected exactly one argument"},
		{name: "test bad output", args: []string{"test", "nginx", "--output", "yaml"}, wantCode: 2, wantStderr: "--output"},
		{name: "template", args: []string{"template", tmpl}, wantStdout: "update example-app\n"},
		{name: "template missing file", args: []string{"template", filepath.Join(t.TempDir(), "none")}, wantCode: 2, wantStderr: "read template"},
		{name: "template syntax error", args: []string{"template", badTmpl}, wantCode: 2, wantStderr: "bad.template: parse commit message template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			lookupEnv := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			code := execute(context.Background(), tt.args, &stdout, &stderr, lookupEnv)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr: %s)", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestRunEnvironment(t *testing.T) {
	env := map[string]string{
		"IMAGE_UPDATER_INTERVAL": "5m",
		"GIT_COMMIT_USER":        "bot",
		"ARGOCD_TOKEN":           "secret-token",
		"GIT_COMMIT_SIGN_OFF":    "true",
	}
	cmd := newRunCommand(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err := cmd.ParseFlags([]string{"--git-commit-user", "flag-wins"}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.PreRunE(cmd, nil); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"interval":            "5m0s",
		"git-commit-user":     "flag-wins",
		"argocd-auth-token":   "secret-token",
		"git-commit-sign-off": "true",
		"git-commit-email":    "noreply@argoproj.io",
	} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
}

func TestOnceDisablesLoopAndHealth(t *testing.T) {
	o := &runOptions{once: true, interval: 2 * 60e9, healthPort: 8080, maxConcurrency: 1, kubeQPS: 1, kubeBurst: 1,
		logLevel: "info", logFormat: "text", applicationsAPI: "kubernetes", gitCommitSigningMethod: "openpgp",
		gitCloneDir: t.TempDir(), gitCloneMaxSize: "2Gi", requestTimeout: time.Minute, imageTimeout: time.Minute}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.interval != 0 || o.healthPort != 0 {
		t.Errorf("interval %s, health port %d; want 0 and 0", o.interval, o.healthPort)
	}
}

// TestOldRunFlags: flags of the old tool's run command that existing
// Deployments still pass.
func TestOldRunFlags(t *testing.T) {
	tests := []struct {
		name           string
		args           []string
		wantNamespaces string // the value of --application-namespaces after validation
		wantErr        string
	}{
		{name: "application-namespace", args: []string{"--application-namespace", "team-a"}, wantNamespaces: "[team-a]"},
		{name: "application-namespace empty", args: []string{"--application-namespace="}, wantNamespaces: "[]"},
		{name: "both, agreeing", args: []string{"--application-namespace", "team-a", "--application-namespaces", "team-a"}, wantNamespaces: "[team-a]"},
		{
			name: "both, disagreeing", args: []string{"--application-namespace", "team-a", "--application-namespaces", "team-b,team-c"},
			wantErr: `--application-namespace "team-a" and --application-namespaces "team-b,team-c" disagree`,
		},
		{name: "watch-namespaces of the resource-based updater", args: []string{"--watch-namespaces", "team-a,team-b"}, wantNamespaces: "[team-a,team-b]"},
		{name: "watch-namespaces all", args: []string{"--watch-namespaces", "*"}, wantNamespaces: "[*]"},
		{
			name: "watch-namespaces disagreeing", args: []string{"--watch-namespaces", "team-a", "--application-namespaces", "team-b"},
			wantErr: `--watch-namespaces "team-a" and --application-namespaces "team-b" disagree`,
		},
		{name: "disable-kubernetes false", args: []string{"--disable-kubernetes=false"}, wantNamespaces: "[]"},
		{name: "disable-kubernetes", args: []string{"--disable-kubernetes"}, wantErr: "--disable-kubernetes is not supported: this controller reads and writes Applications only through the Kubernetes API"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newRunCommand(func(string) (string, bool) { return "", false })
			if !preRun(t, cmd, tt.args, tt.wantErr) {
				return
			}
			if got := cmd.Flags().Lookup("application-namespaces").Value.String(); got != tt.wantNamespaces {
				t.Errorf("--application-namespaces = %s, want %s", got, tt.wantNamespaces)
			}
		})
	}
}

// TestGitCloneFolder: the git write-back keeps its clones in one folder
// named by the flag or its variable, by default under TMPDIR, so that the
// writer of the next start finds them.
func TestGitCloneFolder(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	flagDir, envDir := filepath.Join(t.TempDir(), "flag"), filepath.Join(t.TempDir(), "env")
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		wantDir   string
		wantBytes int64
		wantErr   string
	}{
		{name: "default", wantDir: filepath.Join(tmp, "argocd-image-updater-git"), wantBytes: 2 << 30},
		{name: "flag", args: []string{"--git-clone-dir", flagDir, "--git-clone-max-size", "500Mi"}, wantDir: flagDir, wantBytes: 500 << 20},
		{
			name: "environment", env: map[string]string{"IMAGE_UPDATER_GIT_CLONE_DIR": envDir, "IMAGE_UPDATER_GIT_CLONE_MAX_SIZE": "1G"},
			wantDir: envDir, wantBytes: 1e9,
		},
		{name: "flag wins", args: []string{"--git-clone-dir", flagDir}, env: map[string]string{"IMAGE_UPDATER_GIT_CLONE_DIR": envDir}, wantDir: flagDir, wantBytes: 2 << 30},
		{name: "no bound", args: []string{"--git-clone-max-size", "0"}, wantDir: filepath.Join(tmp, "argocd-image-updater-git")},
		{name: "bad size", args: []string{"--git-clone-max-size", "lots"}, wantErr: `invalid value "lots" for --git-clone-max-size`},
		{name: "negative size", env: map[string]string{"IMAGE_UPDATER_GIT_CLONE_MAX_SIZE": "-1Gi"}, wantErr: "--git-clone-max-size"},
		{name: "empty folder", args: []string{"--git-clone-dir="}, wantErr: "--git-clone-dir must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dirs []string
			// Two starts, one after the other.
			for range 2 {
				opts := &runOptions{}
				cmd := newRunCommandFor(opts, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
				if !preRun(t, cmd, tt.args, tt.wantErr) {
					return
				}
				if opts.gitCloneMaxBytes != tt.wantBytes {
					t.Errorf("bound %d bytes, want %d", opts.gitCloneMaxBytes, tt.wantBytes)
				}
				w, err := newGitWriter(opts, nil, nil, "argocd", slog.New(slog.DiscardHandler), func(string) (string, bool) { return "", false })
				if err != nil {
					t.Fatal(err)
				}
				dirs = append(dirs, w.WorkDir())
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if dirs[0] != tt.wantDir || dirs[1] != tt.wantDir {
				t.Errorf("clone folders %v, want %s both times", dirs, tt.wantDir)
			}
		})
	}
}

// preRun parses args and runs cmd's checks. With wantErr it asserts a
// usage error containing it and reports false: the test case ends there.
func preRun(t *testing.T, cmd *cobra.Command, args []string, wantErr string) bool {
	t.Helper()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("flags refused: %v", err)
	}
	err := cmd.PreRunE(cmd, nil)
	if wantErr != "" {
		var usage *usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want a usage error containing %q", err, wantErr)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func TestPullRequestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		known   map[settings.Forge]string // kind → a repository that must have an API
		unknown map[settings.Forge]string // kind → a repository that must not
		wantErr string
	}{
		{
			name:    "default",
			known:   map[settings.Forge]string{settings.ForgeGitHub: "https://github.com/o/r", settings.ForgeGitLab: "git@gitlab.com:g/p.git"},
			unknown: map[settings.Forge]string{settings.ForgeGitHub: "https://github.example.com/o/r", settings.ForgeGitLab: "https://github.com/o/r"},
		},
		{
			name:  "flags",
			args:  []string{"--github-enterprise-api-url", "https://github.example.com/api/v3", "--gitlab-url", "https://gitlab.example.com"},
			known: map[settings.Forge]string{settings.ForgeGitHub: "https://github.example.com/o/r", settings.ForgeGitLab: "https://gitlab.example.com/g/p"},
		},
		{
			name:    "environment",
			env:     map[string]string{"IMAGE_UPDATER_GITHUB_ENTERPRISE_API_URLS": "https://a.example/api/v3,https://b.example/api/v3", "IMAGE_UPDATER_GITLAB_URLS": "https://c.example"},
			known:   map[settings.Forge]string{settings.ForgeGitHub: "https://b.example/o/r", settings.ForgeGitLab: "https://c.example/g/p"},
			unknown: map[settings.Forge]string{settings.ForgeGitLab: "https://a.example/g/p"},
		},
		{
			name: "other forges' flags",
			args: []string{"--gitea-url", "https://git.example.com", "--bitbucket-server-url", "https://example.com/bitbucket", "--azure-devops-url", "https://tfs.example.com/tfs"},
			known: map[settings.Forge]string{settings.ForgeGitea: "https://git.example.com/o/r", settings.ForgeBitbucketServer: "https://example.com/bitbucket/scm/PRJ/r.git",
				settings.ForgeAzureDevOps: "https://tfs.example.com/tfs/DefaultCollection/p/_git/r"},
			unknown: map[settings.Forge]string{settings.ForgeGitea: "https://example.com/o/r", settings.ForgeBitbucket: "https://example.com/o/r"},
		},
		{
			name: "other forges' environment",
			env: map[string]string{"IMAGE_UPDATER_GITEA_URLS": "https://a.example,https://b.example", "IMAGE_UPDATER_BITBUCKET_SERVER_URLS": "https://c.example",
				"IMAGE_UPDATER_AZURE_DEVOPS_URLS": "https://d.example"},
			known: map[settings.Forge]string{settings.ForgeGitea: "https://b.example/o/r", settings.ForgeBitbucketServer: "ssh://git@c.example:7999/PRJ/r.git",
				settings.ForgeAzureDevOps: "https://d.example/c/p/_git/r", settings.ForgeBitbucket: "git@bitbucket.org:w/r.git"},
		},
		{name: "plain http", args: []string{"--gitlab-url", "http://gitlab.example.com"}, wantErr: "tokens go only over https"},
		{name: "plain http to gitea", args: []string{"--gitea-url", "http://git.example.com"}, wantErr: "Gitea URL: \"http://git.example.com\": tokens go only over https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := &runOptions{}
			cmd := newRunCommandFor(opts, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if !preRun(t, cmd, tt.args, tt.wantErr) {
				return
			}
			for kind, url := range tt.known {
				if _, err := opts.forgeHosts.Lookup(kind, url); err != nil {
					t.Errorf("%s %s: %v", kind, url, err)
				}
			}
			for kind, url := range tt.unknown {
				if _, err := opts.forgeHosts.Lookup(kind, url); err == nil {
					t.Errorf("%s %s has an API", kind, url)
				}
			}
		})
	}

	// A template that does not parse stops the start, naming the file.
	path := filepath.Join(t.TempDir(), "pull-request.template")
	if err := os.WriteFile(path, []byte("{{ .Applications"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := &runOptions{}
	cmd := newRunCommandFor(opts, func(string) (string, bool) { return "", false })
	preRun(t, cmd, []string{"--git-pull-request-template-path", path, "--git-clone-dir", t.TempDir()}, "")
	if _, err := newGitWriter(opts, nil, nil, "argocd", slog.New(slog.DiscardHandler), func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want an error naming %s", err, path)
	}
}
