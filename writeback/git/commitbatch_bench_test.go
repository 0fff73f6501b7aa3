package git

import (
	"fmt"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// BenchmarkCommitBatch builds the commits of one cycle's batch: n
// Applications, each with its own overlay among n in one repository (the
// bench's git scenario), each getting a new tag.
func BenchmarkCommitBatch(b *testing.B) {
	for _, n := range []int{100, 500} {
		b.Run(fmt.Sprintf("apps=%d", n), func(b *testing.B) {
			clone, tip := overlayRepository(b, n)
			w, err := NewWriter(repoaccess.NewKubeSecretLister(nil), repoaccess.NewKubeAppProjectGetter(nil), WithWorkDir(b.TempDir()), WithClock(func() time.Time { return testClock }))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				apps := make([]*appWrite, n)
				for j := range apps {
					apps[j] = &appWrite{update: update{
						Namespace: "argocd", Name: fmt.Sprintf("app-%04d", j), ControllerNamespace: "argocd",
						RepoURL: "https://git.example.com/deploy.git", TargetRevision: "main",
						SourcePath: fmt.Sprintf("overlays/app-%04d", j), SourceType: application.SourceKustomize,
						Target: settings.WriteBackTarget{Kind: settings.TargetKustomization},
						Images: []writeback.ImageUpdate{{
							ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("registry.example.com/app")},
							New:       imageref.Version{Tag: fmt.Sprintf("1.0.%d", i+1)},
							Old:       imageref.ParseVersion("1.0.0"),
						}},
					}}
				}
				_, pending, _, err := w.commitApplications(clone, tip, apps)
				if err != nil || len(pending) != n {
					b.Fatalf("%d commits, %v", len(pending), err)
				}
			}
		})
	}
}

// overlayRepository is an in-memory repository whose one commit holds n
// overlays/app-NNNN/kustomization.yaml files.
func overlayRepository(b *testing.B, n int) (*gitClone, plumbing.Hash) {
	b.Helper()
	repo, err := gogit.Init(memory.NewStorage(), nil)
	if err != nil {
		b.Fatal(err)
	}
	files := map[string][]byte{}
	for j := range n {
		files[fmt.Sprintf("overlays/app-%04d/kustomization.yaml", j)] = fmt.Appendf(nil,
			"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../base\nimages:\n- name: registry.example.com/app\n  newTag: 1.0.0\n")
	}
	root := emptyCommit(b, repo.Storer.(*memory.Storage))
	sig := object.Signature{Name: "seed", Email: "seed@example.com", When: testClock}
	clone := &gitClone{Clone: &gitwire.Clone{Repo: repo}}
	var created []plumbing.Hash
	tip, err := clone.Commit(root, files, "seed", sig, nil, &created, nil)
	if err != nil {
		b.Fatal(err)
	}
	return clone, tip
}
