package writeback

import (
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/imageref"
)

func TestPlanBranches(t *testing.T) {
	images := []ImageUpdate{
		{ImageSpec: appwatch.ImageSpec{Alias: "app", Image: mustRef("example.com/app")}, New: imageref.Version{Tag: "1.1"}, Old: imageref.ParseVersion("1.0")},
		{ImageSpec: appwatch.ImageSpec{Alias: "web", Image: mustRef("example.com/web")}, New: imageref.Version{Tag: "2.1"}, Old: imageref.ParseVersion("2.0")},
	}
	sha := newBranchTemplateData(images).SHA256
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
		{name: "template with names and tags", branch: "main:image-updater-{{range .Images}}{{.Name}}-{{.NewTag}}{{end}}", base: "main",
			target: "image-updater-example.com/app-1.1example.com/web-2.1"},
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
			p, err := planBranches(GitUpdate{Branch: tt.branch, TargetRevision: tt.revision, Images: images}, "main")
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
	if _, err := planBranches(GitUpdate{}, ""); err == nil || !strings.Contains(err.Error(), "names no default branch") {
		t.Errorf("no default branch: %v", err)
	}
	if p, err := planBranches(GitUpdate{Branch: "deploy"}, ""); err != nil || p.target != "deploy" {
		t.Errorf("explicit branch without a default branch: %+v, %v", p, err)
	}
}

func TestCheckBranchName(t *testing.T) {
	for _, ok := range []string{"main", "image-updater/app-1.2.3", "release-1.x", "a_b"} {
		if err := checkBranchName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "HEAD", "@", "/a", "a/", "a.", "-a", "a..b", "a//b", "a@{b", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[b", `a\b`, "a/.b", "a.lock", "a/b.lock/c", "a\tb"} {
		if err := checkBranchName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
