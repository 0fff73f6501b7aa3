package git

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// testAPICommits commits through the stand-in of GitHub's API, which
// commits into the real git server's repositories: one commit per
// repository and branch, whatever the number of Applications, applied
// again on a branch that moved meanwhile, on a new branch created first;
// repositories without a GitHub App's credentials are pushed to.
func (e *gitEnv) testAPICommits(t *testing.T) {
	ca := testenv.NewCA(t, "GitHub Enterprise CA")
	api := testenv.StartGitHubAPI(t, ca, func(token string) { e.git.AcceptCredentials(githubTokenUser, token) })
	api.ServeCommits(e.git)
	hosts, err := forge.NewHosts([]string{api.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := e.argoNamespace(t, "api-commits", false)
	e.configMap(t, ns, repoaccess.TLSCertsConfigMap, map[string]string{"127.0.0.1": string(ca.PEM)})
	e.secret(t, ns, "github-app", argoCDSecretTypeRepoCreds, map[string]string{
		"url": e.git.HTTPURL + "/example/", "githubAppID": api.AppID, "githubAppInstallationID": fmt.Sprint(api.InstallationID),
		"githubAppPrivateKey": string(api.PrivateKey), "githubAppEnterpriseBaseUrl": api.URL,
	})
	w := e.writer(t, ns, WithForgeHosts(hosts), WithAPICommits(true))

	check := func(t *testing.T, repo, branch string, results []writeback.Result, wantCommits int64, since int64, pushes int64) {
		t.Helper()
		if n := api.APICommits() - since; n != wantCommits {
			t.Errorf("%d commits through the API, want %d", n, wantCommits)
		}
		if e.git.Pushes.Load() != pushes {
			t.Errorf("pushed with git: %d pushes", e.git.Pushes.Load()-pushes)
		}
		log := e.git.Log(t, repo, branch)
		for _, r := range results {
			if r.Commit != log[0].Hash || r.Branch != branch {
				t.Errorf("%s: commit %s on %s, want the tip of %s %s (%v)", r.Name, r.Commit, r.Branch, branch, log[0].Hash, subjects(log))
			}
			file := "main/overlays/production/.argocd-source-" + r.Name + ".yaml"
			if got := e.git.ReadFile(t, repo, branch, file); !strings.Contains(got, gitAppImage+":v0.0.2") {
				t.Errorf("%s:\n%s", file, got)
			}
		}
		if log[0].Author != "image-updater[bot]" {
			t.Errorf("tip authored by %s, want GitHub's App bot", log[0].Author)
		}
	}

	t.Run("two Applications, one commit", func(t *testing.T) {
		repo := "example/api-one"
		url := e.repo(t, repo, nil)
		since, pushes := api.APICommits(), e.git.Pushes.Load()
		results := mustWrite(t, w, appUpdate("billing", url), appUpdate("shop", url))
		check(t, repo, "main", results, 1, since, pushes)
		if log := e.git.Log(t, repo, "main"); log[0].Subject != "Update images of 2 Applications" || !strings.Contains(log[0].Body, "billing") || !strings.Contains(log[0].Body, "shop") {
			t.Errorf("message %q %q", log[0].Subject, log[0].Body)
		}
	})

	t.Run("the branch moved: applied again on its new tip", func(t *testing.T) {
		repo := "example/api-moved"
		url := e.repo(t, repo, nil)
		// One writer throughout: the git server takes only the newest
		// installation token, which another writer would replace.
		w.beforePush = func(_, branch string, attempt int) {
			if attempt == 0 {
				e.git.CommitFiles(t, repo, branch, "someone else's change", map[string]string{"README.md": "moved\n"})
			}
		}
		defer func() { w.beforePush = nil }()
		since, pushes := api.APICommits(), e.git.Pushes.Load()
		results := mustWrite(t, w, appUpdate("billing", url))
		check(t, repo, "main", results, 1, since, pushes)
		if log := e.git.Log(t, repo, "main"); !slices.Contains(subjects(log), "someone else's change") {
			t.Errorf("the other change was lost: %v", subjects(log))
		}
	})

	t.Run("a new branch is created first", func(t *testing.T) {
		repo := "example/api-branch"
		url := e.repo(t, repo, nil)
		u := appUpdate("billing", url)
		u.Branch = "main:image-updates"
		since, pushes := api.APICommits(), e.git.Pushes.Load()
		results := mustWrite(t, w, u)
		check(t, repo, "image-updates", results, 1, since, pushes)
		if len(e.git.Log(t, repo, "main")) != 1 {
			t.Error("main moved")
		}
	})

	t.Run("credentials that are not a GitHub App's: pushed with git", func(t *testing.T) {
		ns := e.argoNamespace(t, "api-commits-password", true)
		url := e.repo(t, "example/api-password", nil)
		w := e.writer(t, ns, WithForgeHosts(hosts), WithAPICommits(true))
		since, pushes := api.APICommits(), e.git.Pushes.Load()
		mustWrite(t, w, appUpdate("billing", url))
		if api.APICommits() != since || e.git.Pushes.Load() != pushes+1 {
			t.Errorf("%d API commits, %d pushes; want a push", api.APICommits()-since, e.git.Pushes.Load()-pushes)
		}
	})
	if p := api.Problems(); len(p) > 0 {
		t.Errorf("requests GitHub would refuse: %v", p)
	}
}
