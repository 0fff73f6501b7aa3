package git

import (
	"strconv"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

func TestPlanBranches(t *testing.T) {
	images := []writeback.ImageUpdate{
		{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("example.com/app")}, New: imageref.Version{Tag: "1.1"}, Old: imageref.ParseVersion("1.0")},
		{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("example.com/web")}, New: imageref.Version{Tag: "2.1"}, Old: imageref.ParseVersion("2.0")},
	}
	sha := newBranchTemplateData(update{Images: images}).SHA256
	tests := []struct {
		name, branch, revision string
		base, target           string
		err                    string
	}{
		{name: "targetRevision", revision: "release", base: "release", target: "release"},
		{name: "refs/heads prefix", revision: "refs/heads/release", base: "release", target: "release"},
		{name: "HEAD is the default branch", revision: "HEAD", base: "main", target: "main"},
		{name: "empty is the default branch", base: "main", target: "main"},
		{name: "one branch", branch: "deploy", revision: "main", base: "deploy", target: "deploy"},
		{name: "base and target", branch: "main:image-updater", revision: "dev", base: "main", target: "image-updater"},
		{name: "target only", branch: ":image-updater", revision: "dev", base: "dev", target: "image-updater"},
		// .Name is the repository without the registry host, as the old
		// tool rendered it, so existing templates give the same branches.
		{name: "template with names and tags", branch: "main:image-updater-{{range .Images}}{{.Name}}-{{.NewTag}}{{end}}", base: "main",
			target: "image-updater-app-1.1web-2.1"},
		{name: "template with aliases and old tags", branch: "main:upd/{{range $i, $img := .Images}}{{if $i}}-{{end}}{{.Alias}}.{{.OldTag}}{{end}}", base: "main", target: "upd/app.1.0-web.2.0"},
		{name: "template with SHA256", branch: ":image-updater-{{.SHA256}}", base: "main", target: "image-updater-" + sha},
		{name: "long names are cut", branch: "main:" + strings.Repeat("x", 300), base: "main", target: strings.Repeat("x", 255)},
		{name: "bad template", branch: "main:{{.Nope", err: "git-branch template"},
		{name: "unknown field", branch: "main:{{.Nope}}", err: "can't evaluate field Nope"},
		{name: "invalid name", branch: "main:a..b", err: "cannot contain .., // or @{"},
		{name: "colon in rendered name", branch: "main:{{range .Images}}{{.Name}}:{{.NewTag}}{{end}}", err: "cannot contain ':'"},
		{name: "empty rendered name", branch: "main:{{if false}}x{{end}}", err: "empty branch name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planBranches(update{Branch: tt.branch, TargetRevision: tt.revision, Images: images}, "main")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %+v, %v; want an error containing %q", p, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.base != tt.base || p.target != tt.target {
				t.Errorf("got %s:%s, want %s:%s", p.base, p.target, tt.base, tt.target)
			}
		})
	}
	if _, err := planBranches(update{}, ""); err == nil || !strings.Contains(err.Error(), "names no default branch") {
		t.Errorf("no default branch: %v", err)
	}
	if p, err := planBranches(update{Branch: "deploy"}, ""); err != nil || p.target != "deploy" {
		t.Errorf("explicit branch without a default branch: %+v, %v", p, err)
	}
}

// TestBranchTemplateSHA256: .SHA256 is the hex SHA-256 of
// "<name>-<old>-<new>," for each image in order, with names and versions as
// ReportedChange gives them, so an existing git-branch template such as
// "main:image-updater-{{.SHA256}}" keeps naming the same branch. The
// expected values were computed apart from this code, with
//
//	printf '%s' 'app-1.0-1.1,web-2.0-2.1,' | sha256sum
//	printf '%s' 'org/app-v1.2.0-v1.3.0,nginx-stable-sha256:0123...cdef,' | sha256sum
//
// (the digest written out in full).
func TestBranchTemplateSHA256(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name   string
		images []writeback.ImageUpdate
		want   string
	}{
		{
			name: "tags, registry host dropped",
			images: []writeback.ImageUpdate{
				{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("example.com/app")}, Old: imageref.Version{Tag: "1.0"}, New: imageref.Version{Tag: "1.1"}},
				{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("example.com/web")}, Old: imageref.Version{Tag: "2.0"}, New: imageref.Version{Tag: "2.1"}},
			},
			want: "ef33e20ea49e9670b1c2f6862c22e071679ef8430dda9eec2b6086b6c7b0a908",
		},
		{
			name: "semver range and a digest",
			images: []writeback.ImageUpdate{
				{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("quay.io/org/app"), Constraint: "^1"}, Old: imageref.Version{Tag: "v1.2.0"}, New: imageref.Version{Tag: "v1.3.0"}},
				{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("nginx"), Constraint: "stable"}, Old: imageref.Version{Tag: "stable"}, New: imageref.Version{Tag: "stable", Digest: digest}},
			},
			want: "a16741fb18c60911415f47887e270212850852c921b6af442d16d2ef91f50cf1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newBranchTemplateData(update{Images: tt.images}).SHA256; got != tt.want {
				t.Errorf("SHA256 %s, want %s", got, tt.want)
			}
			p, err := planBranches(update{Branch: "main:image-updater-{{.SHA256}}", Images: tt.images}, "main")
			if err != nil || p.target != "image-updater-"+tt.want {
				t.Errorf("branch %q, %v; want image-updater-%s", p.target, err, tt.want)
			}
		})
	}
}

// TestBranchTemplateV1Fields: v1.3.0's .AppName, .AppNamespace and
// .TargetKey. The keys were computed apart from this code, with
//
//	printf '%s' 'https://git.example.com/repo.git|main|apps/web/.argocd-source-web.yaml' | sha256sum | cut -c1-8
//	printf '%s' 'https://git.example.com/repo.git||apps/web/values-prod.yaml' | sha256sum | cut -c1-8
func TestBranchTemplateV1Fields(t *testing.T) {
	images := []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("example.com/app")}, New: imageref.Version{Tag: "1.1"}}}
	base := update{Namespace: "team-a", Name: "web", ControllerNamespace: "team-a", RepoURL: "https://git.example.com/repo.git", SourcePath: "apps/web", Images: images}
	tests := []struct {
		name   string
		branch string
		target settings.WriteBackTarget
		want   string
	}{
		{"names", "main:{{.AppNamespace}}/{{.AppName}}", settings.WriteBackTarget{}, "team-a/web"},
		{"key of the default target", "main:upd-{{.TargetKey}}", settings.WriteBackTarget{}, "upd-19e0ba2d"},
		{"a kustomization is keyed by the default target", "main:upd-{{.TargetKey}}", settings.WriteBackTarget{Kind: settings.TargetKustomization}, "upd-19e0ba2d"},
		{"key of a values file", ":upd-{{.TargetKey}}", settings.WriteBackTarget{Kind: settings.TargetHelmValues, Path: "values-prod.yaml"}, "upd-ccd453a0"},
		{"same file from the root", ":upd-{{.TargetKey}}", settings.WriteBackTarget{Kind: settings.TargetHelmValues, Path: "/apps/web/values-prod.yaml"}, "upd-ccd453a0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := base
			u.Branch, u.Target = tt.branch, tt.target
			p, err := planBranches(u, "main")
			if err != nil || p.target != tt.want {
				t.Errorf("branch %q, %v; want %q", p.target, err, tt.want)
			}
		})
	}
}

func TestCheckBranchName(t *testing.T) {
	const rules = "is refused by git check-ref-format"
	tests := []struct {
		name string
		err  string // "" for a valid name
	}{
		{name: "main"},
		{name: "image-updater/app-1.2.3"},
		{name: "release-1.x"},
		{name: "a_b"},
		{name: "", err: "empty branch name"},
		{name: "HEAD", err: `"HEAD" is not a branch name`},
		{name: "@", err: rules},
		{name: "/a", err: rules},
		{name: "a/", err: rules},
		{name: "a.", err: rules},
		{name: "-a", err: rules},
		{name: "a..b", err: rules},
		{name: "a//b", err: rules},
		{name: "a@{b", err: rules},
		{name: "a b", err: `cannot contain ' '`},
		{name: "a~1", err: `cannot contain '~'`},
		{name: "a^", err: `cannot contain '^'`},
		{name: "a:b", err: `cannot contain ':'`},
		{name: "a?", err: `cannot contain '?'`},
		{name: "a*", err: `cannot contain '*'`},
		{name: "a[b", err: `cannot contain '['`},
		{name: `a\b`, err: `cannot contain '\\'`},
		{name: "a/.b", err: rules},
		{name: "a.lock", err: rules},
		{name: "a/b.lock/c", err: rules},
		{name: "a\tb", err: `cannot contain '\t'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkBranchName(tt.name)
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("%q: %v", tt.name, err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("%q: got %v, want an error containing %q", tt.name, err, tt.err)
			case tt.err != "" && !strings.HasPrefix(tt.err, "empty") && !strings.Contains(err.Error(), strconv.Quote(tt.name)):
				t.Errorf("%q: error %q does not name the branch", tt.name, err)
			}
		})
	}
}
