package settings

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
)

func TestParseGitTagList(t *testing.T) {
	tests := []struct {
		name         string
		annotations  map[string]string
		want         []string // "<key> <repository> <constraint> <policy>"
		wantProblems []string // substrings, in order
	}{
		{
			name:        "URLs with and without constraints, aliases",
			annotations: ann("git-tag-list", "config=https://git.example.com/org/config.git:^1.4, git@github.com:org/base.git, ssh://git@git.example.com:2222/org/x.git:~2"),
			want: []string{
				`config https://git.example.com/org/config.git ^1.4 semver constraint="^1.4"`,
				"git@github.com:org/base.git git@github.com:org/base.git  semver",
				`ssh://git@git.example.com:2222/org/x.git ssh://git@git.example.com:2222/org/x.git ~2 semver constraint="~2"`,
			},
		},
		{
			name:        "a port is no constraint",
			annotations: ann("git-tag-list", "https://git.example.com:8443/org/config"),
			want:        []string{"https://git.example.com:8443/org/config https://git.example.com:8443/org/config  semver"},
		},
		{
			name: "its own keys, and no chart- defaults",
			annotations: ann("git-tag-list", "config=https://git.example.com/org/config.git", "config.allow-tags", "regexp:^v1\\.",
				"chart-update-strategy", "alphabetical"),
			want: []string{`config https://git.example.com/org/config.git  semver allow-tags="regexp:^v1\\."`},
		},
		{
			name:        "with images and charts",
			annotations: ann("image-list", "web=nginx", "chart-list", "db=postgresql", "git-tag-list", "config=https://git.example.com/org/config.git"),
			want:        []string{"db postgresql  semver", "config https://git.example.com/org/config.git  semver"},
		},
		{
			name:         "an alias names one image, chart or git source",
			annotations:  ann("chart-list", "config=podinfo", "git-tag-list", "config=https://git.example.com/org/config.git"),
			want:         []string{"config podinfo  semver"},
			wantProblems: []string{`alias "config" is used twice`},
		},
		{
			name:         "a strategy that reads image metadata",
			annotations:  ann("git-tag-list", "config=https://git.example.com/org/config.git", "config.update-strategy", "digest"),
			wantProblems: []string{"(git source config): a git source is updated by semver, alphabetical or numeric"},
		},
		{
			name:         "a bad constraint is named at git-tag-list",
			annotations:  ann("git-tag-list", "https://git.example.com/org/config.git:^^1"),
			wantProblems: []string{"annotation argocd-image-updater.argoproj.io/git-tag-list (git source https://git.example.com/org/config.git): invalid constraint"},
		},
		{
			name:         "not a URL",
			annotations:  ann("git-tag-list", "config, https://git.example.com/org/a b.git"),
			wantProblems: []string{`"config" is not a repository URL`, "is not a repository URL"},
		},
		{
			name:         "listed twice",
			annotations:  ann("git-tag-list", "a=https://git.example.com/org/config.git,b=https://git.example.com/org/config.git"),
			want:         []string{"a https://git.example.com/org/config.git  semver"},
			wantProblems: []string{"repository https://git.example.com/org/config.git is listed twice"},
		},
		{
			name:         "empty",
			annotations:  ann("git-tag-list", ","),
			wantProblems: []string{"git-tag-list: is empty"},
		},
		{
			name:         "too many",
			annotations:  ann("git-tag-list", strings.Repeat("https://git.example.com/a.git,", MaxGitTagSources+1)),
			wantProblems: []string{"21 repositories, more than the 20"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !Managed(tt.annotations) {
				t.Fatal("an Application with git-tag-list is not managed")
			}
			s := ParseAnnotations(tt.annotations)
			var got []string
			for _, c := range s.Charts {
				got = append(got, strings.TrimSpace(c.Key()+" "+c.Chart+" "+c.Constraint+" "+c.Policy.String()))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("entries\n got %q\nwant %q", got, tt.want)
			}
			var problems []string
			for _, p := range s.Problems {
				problems = append(problems, p.Error())
			}
			if len(problems) != len(tt.wantProblems) {
				t.Fatalf("problems %q, want %q", problems, tt.wantProblems)
			}
			for i, w := range tt.wantProblems {
				if !strings.Contains(problems[i], w) {
					t.Errorf("problem %d: %q does not contain %q", i, problems[i], w)
				}
			}
		})
	}
}

func FuzzParseGitTag(f *testing.F) {
	f.Add("https://git.example.com/org/config.git:^1.4")
	f.Add("git@github.com:org/base.git")
	f.Add("ssh://git@h:22/x:~2:3")
	f.Add(":/:")
	f.Fuzz(func(t *testing.T, entry string) {
		c, err := ParseGitTag(entry)
		if err != nil {
			return
		}
		if !c.GitTag || c.Chart == "" || strings.Contains(c.Constraint, "/") || !strings.Contains(c.Chart, "/") {
			t.Fatalf("%q read as %+v", entry, c)
		}
		if len(c.Chart) > maxRepositoryURL {
			t.Fatalf("a repository of %d bytes", len(c.Chart))
		}
	})
}

func TestImageUpdaterGitTags(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name         string
		ref          api.ApplicationRef
		want         []string // "<key> <repository> <policy>"
		wantProblems []string
	}{
		{
			name: "repositories with their own settings; the images' do not apply",
			ref: api.ApplicationRef{
				CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: str("regexp:^x")},
				Charts:               []api.ChartConfig{{Alias: "db", ChartName: "postgresql"}},
				GitTags: []api.GitTagConfig{
					{Alias: "config", RepoURL: "https://git.example.com/org/config.git", Constraint: "^1.4", IgnoreTags: []string{"v1.4.0"}},
					{Alias: "base", RepoURL: "git@github.com:org/base.git", AllowTags: str("regexp:^v")},
				},
			},
			want: []string{"db postgresql semver", `config https://git.example.com/org/config.git semver constraint="^1.4" ignore-tags="v1.4.0"`,
				`base git@github.com:org/base.git semver allow-tags="regexp:^v"`},
		},
		{
			name: "bad values are named at their field",
			ref: api.ApplicationRef{
				Images: []api.ImageConfig{{Alias: "web", ImageName: "nginx"}},
				GitTags: []api.GitTagConfig{
					{Alias: "web", RepoURL: "https://git.example.com/org/web.git"},
					{Alias: "a", RepoURL: "config"},
					{Alias: "b", RepoURL: "https://git.example.com/org/b.git", Constraint: "^^1"},
					{Alias: "c", RepoURL: "https://git.example.com/org/c.git", UpdateStrategy: str("newest-build")},
					{Alias: "d", RepoURL: "https://git.example.com/org/d.git"},
				},
			},
			want: []string{"d https://git.example.com/org/d.git semver"},
			wantProblems: []string{
				`ImageUpdater ns/iu spec.applicationRefs[0].gitTags[0].repoURL (git source web): alias "web" is used twice`,
				`ImageUpdater ns/iu spec.applicationRefs[0].gitTags[1].repoURL (git source a): "config" is not a repository URL`,
				"ImageUpdater ns/iu spec.applicationRefs[0].gitTags[2].constraint (git source b): invalid constraint",
				"ImageUpdater ns/iu spec.applicationRefs[0].gitTags[3].updateStrategy (git source c): a git source is updated by semver, alphabetical or numeric",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.ref.NamePattern = "*"
			iu := &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"}, Spec: api.ImageUpdaterSpec{ApplicationRefs: []api.ApplicationRef{tt.ref}}}
			s := ParseImageUpdater(iu, 0)
			var got []string
			for _, c := range s.Charts {
				got = append(got, c.Key()+" "+c.Chart+" "+c.Policy.String())
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("entries\n got %q\nwant %q", got, tt.want)
			}
			var problems []string
			for _, p := range s.Problems {
				problems = append(problems, p.Error())
			}
			if len(problems) != len(tt.wantProblems) {
				t.Fatalf("problems %q, want %q", problems, tt.wantProblems)
			}
			for i, w := range tt.wantProblems {
				if !strings.Contains(problems[i], w) {
					t.Errorf("problem %d: %q does not contain %q", i, problems[i], w)
				}
			}
		})
	}
}
