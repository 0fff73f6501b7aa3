package git

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// WithForgeHosts sets which APIs serve the pull requests of which
// repository hosts (default: github.com and gitlab.com only).
func WithForgeHosts(h *forge.Hosts) Option {
	return func(c *writerConfig) { c.forges = h }
}

// WithAPICommits makes commits through the GitHub API (GraphQL
// createCommitOnBranch) instead of pushing them, for repositories whose
// credentials are a GitHub App's and whose host WithForgeHosts knows:
// GitHub then signs them as the App's. One API commit carries the changes
// of every Application of a repository and branch in a cycle; a branch
// that moved meanwhile gets them again on its new tip, as a push does.
// Other repositories are pushed to with git, with a warning.
func WithAPICommits(on bool) Option {
	return func(c *writerConfig) { c.apiCommits = on }
}

// WithPullRequestTemplate sets the template of pull request titles and
// descriptions (default DefaultPullRequestTemplate).
func WithPullRequestTemplate(t *PullRequestTemplate) Option {
	return func(c *writerConfig) { c.pullRequest = t }
}

func (c *writerConfig) pullRequestDefaults() error {
	if c.forges == nil {
		h, err := forge.NewHosts(nil, nil)
		if err != nil {
			return err
		}
		c.forges = h
	}
	if c.pullRequest == nil {
		t, err := ParsePullRequestTemplate("")
		if err != nil {
			return err
		}
		c.pullRequest = t
	}
	return nil
}

// DefaultPullRequestTemplate is the title (its first line) and the
// description (the rest) of pull requests unless configured otherwise.
const DefaultPullRequestTemplate = `build: automatic update of {{ if eq (len .Applications) 1 }}{{ (index .Applications 0).AppName }}{{ else }}{{ len .Applications }} applications{{ end }}

{{ range .Applications -}}
{{ .AppName }}:
{{ range .AppChanges -}}
- updates image {{ .Image }} tag '{{ .OldTag }}' to '{{ .NewTag }}'
{{ end }}
{{ end -}}
`

// PullRequestData is what a pull request template sees: the branches and
// every Application whose changes the branch carries, with its changes as
// a commit message template sees them.
type PullRequestData struct {
	Branch, Base string
	Applications []CommitMessageData
}

// PullRequestTemplate is a parsed pull request template.
type PullRequestTemplate struct {
	tmpl *template.Template
}

// maxTitleLength is GitLab's limit on titles; GitHub's is larger.
const maxTitleLength = 255

// ParsePullRequestTemplate parses a Go text/template whose first line
// renders the title and the rest the description. An empty text means the
// default template.
func ParsePullRequestTemplate(text string) (*PullRequestTemplate, error) {
	if strings.TrimSpace(text) == "" {
		text = DefaultPullRequestTemplate
	}
	t, err := parseLimitedTemplate("pull-request", text)
	if err != nil {
		return nil, fmt.Errorf("parse pull request template: %w", err)
	}
	return &PullRequestTemplate{tmpl: t}, nil
}

// Render returns the title, cut at 255 characters, and the description.
func (t *PullRequestTemplate) Render(data PullRequestData) (title, body string, _ error) {
	out, err := renderLimited(t.tmpl, data)
	if err != nil {
		return "", "", fmt.Errorf("render pull request template: %w", err)
	}
	title, body, _ = strings.Cut(strings.TrimSpace(out), "\n")
	title = strings.TrimSpace(title)
	if title == "" {
		return "", "", errors.New("render pull request template: the title (first line) is empty")
	}
	if utf8.RuneCountInString(title) > maxTitleLength {
		title = string([]rune(title)[:maxTitleLength])
	}
	return title, strings.TrimSpace(body), nil
}

// maxReviewBranches bounds the branches tried past those whose requests
// were closed or merged.
const maxReviewBranches = 100

// writeForReview writes the Applications of one branch group that asked
// for a pull request: it picks the branch (plan.target, or after a closed
// or merged request on it, plan.target-2, -3, ...), pushes there as
// writeBranch does, then opens one request from it into plan.base, or
// brings the open one's title and description up to date. A failure of
// the request fails the Applications it would have listed.
func (w *Writer) writeForReview(ctx context.Context, creds *gitauth.Resolver, clone *gitClone, acc gitauth.Remote, api forge.Committer, remote *gitwire.Branches, plan branchPlan, kind settings.Forge, apps []*appWrite, retry *transientRetry) {
	if plan.target == plan.base {
		failAll(apps, invalidTarget{fmt.Errorf("a %s pull request needs a branch other than its base %s: set git-branch to <base>:<branch>", kind, plan.base)})
		return
	}
	log := w.cfg.log.With("repository", repourl.RedactURL(clone.URL), "base", plan.base)
	if w.cfg.dryRun {
		w.writeBranch(ctx, clone, acc, api, remote, plan, apps, retry)
		log.Info("dry run: not opening a pull request", "service", kind, "branch", plan.target)
		return
	}
	repoURL := apps[0].update.RepoURL
	repo, err := w.cfg.forges.Lookup(kind, repoURL)
	if err != nil {
		failAll(apps, invalidTarget{fmt.Errorf("pull request: %w", err)})
		return
	}
	client, closeClient, err := creds.ForgeClient(ctx, repo, acc)
	if err != nil {
		failAll(apps, fmt.Errorf("pull request: %w", err))
		return
	}
	defer closeClient()
	branch, open, err := reviewBranch(ctx, client, plan, remote)
	if err != nil {
		failAll(apps, fmt.Errorf("%s pull request from %s into %s: %w", kind, plan.target, plan.base, err))
		return
	}
	plan.target = branch
	for _, a := range apps {
		a.result.Branch = branch
	}
	w.writeBranch(ctx, clone, acc, api, remote, plan, apps, retry)

	var listed []*appWrite
	var labels []string
	data := PullRequestData{Branch: branch, Base: plan.base}
	for _, a := range apps {
		if a.result.Err == nil {
			listed = append(listed, a)
			data.Applications = append(data.Applications, commitMessageData(a.update, a.update.Images))
			for _, l := range a.update.PullRequestLabels {
				if !slices.Contains(labels, l) {
					labels = append(labels, l)
				}
			}
		}
	}
	// Nothing to review: every Application failed, or neither this cycle
	// nor an earlier one put anything on the branch.
	if _, pushed := remote.Heads[branch]; len(listed) == 0 || !pushed {
		return
	}
	if err := w.mayPush(); err != nil {
		log.Info("not opening a pull request", "branch", branch, "reason", err)
		return
	}
	title, body, err := w.cfg.pullRequest.Render(data)
	if err != nil {
		failAll(listed, err)
		return
	}
	req, verb, err := ensureReview(ctx, client, branch, plan.base, title, body, labels, open)
	if errors.Is(err, forge.ErrLabels) {
		// The request is open: its labels are the reviewers' to add.
		log.Warn("pull request opened without its labels", "branch", branch, "url", req.URL, "error", err)
		err = nil
	}
	if err != nil {
		failAll(listed, fmt.Errorf("%s pull request from %s into %s: %w", kind, branch, plan.base, err))
		return
	}
	for _, a := range listed {
		a.result.PullRequest = req.URL
	}
	if verb != "" {
		log.Info(verb+" pull request", "branch", branch, "url", req.URL, "applications", len(listed))
	}
}

// reviewBranch picks the branch for the request: the first of target,
// target-2, target-3, ... that has an open request (returned too), or
// that has no closed or merged request while it exists. A branch whose
// request was closed or merged gets no more commits: the commits of a
// closed one were refused, and a new request from a merged one would
// repeat them.
func reviewBranch(ctx context.Context, c forge.Client, plan branchPlan, remote *gitwire.Branches) (string, *forge.Request, error) {
	for n := 1; n <= maxReviewBranches; n++ {
		name := plan.target
		if n > 1 {
			name = fmt.Sprintf("%s-%d", plan.target, n)
			if err := checkBranchName(name); err != nil {
				return "", nil, err
			}
		}
		found, err := c.Find(ctx, name, plan.base)
		if err != nil {
			return "", nil, err
		}
		if open := firstOpen(found); open != nil {
			return name, open, nil
		}
		if _, exists := remote.Heads[name]; !exists || len(found) == 0 {
			return name, nil, nil
		}
	}
	return "", nil, fmt.Errorf("the requests of %s and of %s-2 to %s-%d were all closed or merged and their branches kept: delete some of them", plan.target, plan.target, plan.target, maxReviewBranches)
}

// firstOpen returns the first open request of found, or nil.
func firstOpen(found []forge.Request) *forge.Request {
	for i := range found {
		if found[i].State == forge.StateOpen {
			return &found[i]
		}
	}
	return nil
}

// ensureReview opens the request, with labels, or updates the open one's
// title and description (its labels, as the reviewers left them, are
// kept); it says which it did ("" when the open one was up to date).
func ensureReview(ctx context.Context, c forge.Client, head, base, title, body string, labels []string, open *forge.Request) (forge.Request, string, error) {
	if open == nil {
		req, err := c.Open(ctx, head, base, title, body, labels)
		if !errors.Is(err, forge.ErrAlreadyExists) {
			return req, "opened", err
		}
		// Opened by someone else since the branch was picked.
		found, ferr := c.Find(ctx, head, base)
		if ferr != nil {
			return forge.Request{}, "", ferr
		}
		if open = firstOpen(found); open == nil {
			return forge.Request{}, "", err
		}
	}
	if open.Title == title && strings.TrimSpace(open.Body) == body {
		return *open, "", nil
	}
	req, err := c.Update(ctx, open.Number, title, body)
	return req, "updated", err
}

// SamplePullRequestData is sample data for checking a pull request
// template without a cluster: two Applications, one with the sample
// commit message changes.
func SamplePullRequestData() PullRequestData {
	web := SampleCommitMessageData().AppChanges[1]
	return PullRequestData{
		Branch: "image-updater-2b7c0a1f", Base: "main",
		Applications: []CommitMessageData{SampleCommitMessageData(), {AppName: "web-staging", AppChanges: []ImageChange{web}}},
	}
}
