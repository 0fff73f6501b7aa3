package git

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// TestUpdateOfRevision: a git-repository that names another source of a
// multi-source Application commits to that source's revision, as Argo CD
// Image Updater does, not to the written source's (a chart version).
func TestUpdateOfRevision(t *testing.T) {
	chart := application.Source{Index: 0, RepoURL: "https://charts.example.com", Chart: "web", TargetRevision: "18.2.3", Type: application.SourceHelm}
	values := application.Source{Index: 1, RepoURL: "https://git.example.com/team/values.git", TargetRevision: "main", Ref: "values"}
	tests := []struct {
		name     string
		sources  []application.Source
		repo     string
		revision string
	}{
		{"the values source", []application.Source{chart, values}, "https://git.example.com/team/values.git", "main"},
		{"spelt otherwise", []application.Source{chart, values}, "https://Git.example.com/team/values/", "main"},
		{"no such source: the written one's", []application.Source{chart, values}, "https://git.example.com/other.git", "18.2.3"},
		{"no git-repository", []application.Source{chart, values}, "", "18.2.3"},
		{"one source", []application.Source{{Index: -1, RepoURL: "https://git.example.com/team/values.git", TargetRevision: "release", Type: application.SourceKustomize}}, "https://git.example.com/team/values.git", "release"},
	}
	w := &Writer{cfg: writerConfig{argoCDNamespace: "argocd"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &application.Application{Namespace: "argocd", Name: "web", Sources: tt.sources}
			app.Settings.WriteBack = settings.WriteBack{Method: settings.WriteBackGit, GitRepository: tt.repo}
			u, err := w.updateOf(t.Context(), writeback.Change{App: app, Source: tt.sources[0]}, nil)
			if err != nil || u.TargetRevision != tt.revision {
				t.Errorf("revision %q, %v; want %q", u.TargetRevision, err, tt.revision)
			}
		})
	}
}

// TestUpdateOf: what a Change of an Application becomes for the git
// method; an Application without any repository is refused by name.
func TestUpdateOf(t *testing.T) {
	src := application.Source{Index: -1, RepoURL: "https://git.example.com/deploy.git", Path: "apps/web", TargetRevision: "main", Type: application.SourceKustomize}
	app := &application.Application{Namespace: "team-a", Name: "web", Project: "team", Sources: []application.Source{src}}
	app.Settings.WriteBack = settings.WriteBack{Method: settings.WriteBackGit, GitBranch: "main:image-updates",
		GitSecret: types.NamespacedName{Name: "creds"}, Target: settings.WriteBackTarget{Kind: settings.TargetKustomization, Path: "."}}
	w := &Writer{cfg: writerConfig{argoCDNamespace: "argocd"}}
	got, err := w.updateOf(t.Context(), writeback.Change{App: app, Source: src}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := update{Namespace: "team-a", Name: "web", ControllerNamespace: "argocd", RepoURL: src.RepoURL, TargetRevision: "main",
		Branch: "main:image-updates", SourcePath: "apps/web", SourceType: application.SourceKustomize,
		Target: app.Settings.WriteBack.Target, CredentialsSecret: types.NamespacedName{Namespace: "team-a", Name: "creds"}, Project: "team", SourceIndex: -1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}

	// app-of-apps: the parent's repository, revision, path and project.
	parent := Parent{Namespace: "argocd", Name: "root", Project: "platform", RepoURL: "https://git.example.com/platform.git", TargetRevision: "prod", Path: "apps", DestinationNamespace: "argocd"}
	app.Settings.WriteBack.Target = settings.WriteBackTarget{Kind: settings.TargetAppOfApps}
	app.Settings.WriteBack.GitSecret = types.NamespacedName{}
	if _, err := w.updateOf(t.Context(), writeback.Change{App: app, Source: src}, nil); err == nil || !strings.Contains(err.Error(), "write-back-target app-of-apps is not available") {
		t.Errorf("without parents: %v", err)
	}
	w.cfg.parents = parentsFunc(func(_ context.Context, ns, name string) (Parent, error) {
		if ns != "team-a" || name != "web" {
			return Parent{}, fmt.Errorf("asked for %s/%s", ns, name)
		}
		return parent, nil
	})
	got, err = w.updateOf(t.Context(), writeback.Change{App: app, Source: src}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want = update{Namespace: "team-a", Name: "web", ControllerNamespace: "argocd", RepoURL: parent.RepoURL, TargetRevision: "prod",
		Branch: "main:image-updates", SourcePath: "apps", SourceType: application.SourceKustomize,
		Target: app.Settings.WriteBack.Target, Project: "platform", SourceIndex: -1, Parent: &parent}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("app-of-apps update (-want +got):\n%s", diff)
	}
	app.Settings.WriteBack.GitSecret = types.NamespacedName{Name: "creds"}
	if _, err := w.updateOf(t.Context(), writeback.Change{App: app, Source: src}, nil); err == nil || !strings.Contains(err.Error(), "takes no git:secret") {
		t.Errorf("with a git:secret: %v", err)
	}

	bare := &application.Application{Namespace: "team-a", Name: "bare"}
	bare.Settings.WriteBack.Method = settings.WriteBackGit
	res := w.Write(t.Context(), []writeback.Change{{App: bare, Source: application.Source{Index: -1}}})
	if len(res) != 1 || res[0].Name != "bare" || res[0].Err == nil || res[0].Err.Error() != "git write-back: the Application has no source repository and no git-repository annotation" {
		t.Errorf("results %+v", res)
	}
}

type parentsFunc func(ctx context.Context, namespace, name string) (Parent, error)

func (f parentsFunc) Parent(ctx context.Context, namespace, name string) (Parent, error) {
	return f(ctx, namespace, name)
}
