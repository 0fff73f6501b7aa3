package cycle

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// skipGate skips fixed versions per image key and records what it is told.
type skipGate struct {
	skipped  map[string][]imageref.Version
	heldFrom map[string]imageref.Version
	holdAt   map[string]imageref.Version
	mu       sync.Mutex
	written  []writeback.Result
	flushes  int
	// verified are the versions verified, by "<namespace>/<name>/<image>".
	verified map[string]Verified
}

func (g *skipGate) Verified(app *application.Application, image string) (Verified, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.verified[app.Key()+"/"+image]
	return v, ok
}

func (g *skipGate) Skipped(_ context.Context, _ *application.Application, image string, _ imageref.Version) Skips {
	return Skips{Versions: g.skipped[image], HeldFrom: g.heldFrom[image], HoldAt: g.holdAt[image]}
}

func (g *skipGate) Record(*application.Application) func(writeback.Result) (string, string) {
	return nil
}

func (g *skipGate) Flush(context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flushes++
}

func (g *skipGate) Written(_ context.Context, _ *application.Application, res writeback.Result) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.written = append(g.written, res)
}

// digestRegistry answers every tag's metadata with one digest.
type digestRegistry struct{ listingRegistry }

func (*digestRegistry) Metadata(context.Context, imageref.Reference, credref.Ref, []v1.Platform, ...registry.MetadataOption) (registry.ImageMetadata, error) {
	return registry.ImageMetadata{Digest: "sha256:bb"}, nil
}

// argocdRecorder is an argocd writer that keeps each batch, reports every
// change as patched, and counts refreshes.
type argocdRecorder struct {
	batchRecorder
	mu        sync.Mutex
	refreshed []string
}

func (a *argocdRecorder) Write(ctx context.Context, changes []writeback.Change) []writeback.Result {
	res := a.batchRecorder.Write(ctx, changes)
	for i := range res {
		res[i].Commit, res[i].Branch = "", ""
	}
	return res
}

func (a *argocdRecorder) Refresh(_ context.Context, namespace, name string, _ map[string]string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refreshed = append(a.refreshed, namespace+"/"+name)
	return nil
}

// TestHealthGateSkips: a version the health gate skips is not chosen (the
// next best is), a skipped digest is not written, and the gate is told of
// each write.
func TestHealthGateSkips(t *testing.T) {
	const image = "registry.example.com/team/api"
	tests := []struct {
		name       string
		strategy   string
		constraint string
		tags       []string
		skipped    []imageref.Version
		heldFrom   string // the image is held after a rollback from it
		holdAt     string // at this version, which its target is to hold
		current    string // the spec's override, when it differs from what runs (1.0.0)
		want       string // the version written, "" for none
	}{
		{name: "nothing skipped", tags: []string{"1.0.0", "1.1.0", "1.2.0"}, want: "1.2.0"},
		{name: "the newest skipped: the one before", tags: []string{"1.0.0", "1.1.0", "1.2.0"}, skipped: []imageref.Version{{Tag: "1.2.0"}}, want: "1.1.0"},
		{name: "every newer one skipped: no update", tags: []string{"1.0.0", "1.1.0"}, skipped: []imageref.Version{{Tag: "1.1.0"}}},
		{name: "a newer one than the skipped", tags: []string{"1.0.0", "1.1.0", "1.2.0"}, skipped: []imageref.Version{{Tag: "1.1.0"}}, want: "1.2.0"},
		{name: "held: nothing newer than the version rolled back from", tags: []string{"1.0.0", "1.0.5", "1.1.0"}, skipped: []imageref.Version{{Tag: "1.1.0"}}, heldFrom: "1.1.0"},
		{name: "held: a newer version is written", tags: []string{"1.0.0", "1.0.5", "1.1.0", "1.2.0"}, skipped: []imageref.Version{{Tag: "1.1.0"}}, heldFrom: "1.1.0", want: "1.2.0"},
		{name: "held at the version rolled back to: its target is asked to hold it", tags: []string{"0.9.0", "1.0.0", "1.0.5", "1.1.0"}, skipped: []imageref.Version{{Tag: "1.1.0"}}, heldFrom: "1.1.0", holdAt: "0.9.0", want: "0.9.0"},
		{name: "held at a version, with a newer one pushed", tags: []string{"0.9.0", "1.0.0", "1.1.0", "1.2.0"}, skipped: []imageref.Version{{Tag: "1.1.0"}}, heldFrom: "1.1.0", holdAt: "0.9.0", want: "1.2.0"},
		{name: "held: tags that are not semantic versions are left to the strategy", strategy: "alphabetical", tags: []string{"1.0.0", "1.1.0", "nightly"}, skipped: []imageref.Version{{Tag: "1.1.0"}}, heldFrom: "1.1.0", want: "nightly"},
		{name: "the version written is being written back: nothing older is written", tags: []string{"1.0.0", "1.0.5", "1.1.0"}, skipped: []imageref.Version{{Tag: "1.1.0"}}, current: "1.1.0"},
		{name: "the version written is being written back: a newer one is written", tags: []string{"1.0.0", "1.1.0", "1.2.0"}, skipped: []imageref.Version{{Tag: "1.1.0"}}, current: "1.1.0", want: "1.2.0"},
		{name: "another digest of the tag is not skipped", strategy: "alphabetical", tags: []string{"1.0.0", "1.1.0"}, skipped: []imageref.Version{{Tag: "1.1.0", Digest: "sha256:aa"}}, want: "1.1.0"},
		{name: "the digest a followed tag points to", strategy: "digest", constraint: "stable", tags: []string{"stable"}, skipped: []imageref.Version{{Tag: "stable", Digest: "sha256:bb"}}},
		{name: "held at a digest: the digest rolled back from is not written", strategy: "digest", constraint: "stable", tags: []string{"stable"}, skipped: []imageref.Version{{Tag: "stable", Digest: "sha256:bb"}}, heldFrom: "stable@sha256:bb", holdAt: "stable@sha256:00", want: "stable@sha256:00"},
		{name: "another digest of the followed tag", strategy: "digest", constraint: "stable", tags: []string{"stable"}, skipped: []imageref.Version{{Tag: "stable", Digest: "sha256:aa"}}, want: "stable@sha256:bb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann := map[string]string{"write-back-method": "argocd", "image-list": "app=" + image, "app.health-gate": "1m"}
			running := image + ":1.0.0"
			if tt.strategy != "" {
				ann["app.update-strategy"] = tt.strategy
			}
			if tt.constraint != "" {
				ann["image-list"] += ":" + tt.constraint
				running = image + ":" + tt.constraint + "@sha256:00"
			}
			var spec map[string]any
			if tt.current != "" {
				spec = map[string]any{"source": map[string]any{
					"repoURL": "https://git.example.com/deploy.git", "path": "main/overlays/production", "targetRevision": "main",
					"kustomize": map[string]any{"images": []any{image + ":" + tt.current}},
				}}
			}
			obj := appObject("a", ann, spec, running)
			app, err := application.FromUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			gate := &skipGate{skipped: map[string][]imageref.Version{"app": tt.skipped}, heldFrom: map[string]imageref.Version{"app": imageref.ParseVersion(tt.heldFrom)},
				holdAt: map[string]imageref.Version{"app": imageref.ParseVersion(tt.holdAt)}}
			w := &argocdRecorder{}
			u := mustNew(t, fixedApps{app}, &digestRegistry{listingRegistry{tags: tt.tags}}, w, WithHealthGate(gate))
			sum := u.RunOnce(t.Context())
			if sum.Errors != 0 {
				t.Fatalf("summary %+v", sum)
			}
			got := ""
			if len(w.batches) == 1 {
				got = w.batches[0][0].Images[0].New.String()
			}
			if got != tt.want {
				t.Fatalf("wrote %q, want %q", got, tt.want)
			}
			if want := min(1, len(w.batches)); len(gate.written) != want {
				t.Errorf("gate told of %d writes, want %d", len(gate.written), want)
			}
			// What the gate learnt while choosing is saved, written or not.
			if gate.flushes == 0 {
				t.Error("the gate was not flushed at the end of the pass")
			}
		})
	}
}

// TestRevert: a revert writes the version before back by the
// Application's method, only for the Applications named (a git batch
// holds only those), and reports one found in place or superseded
// without writing it; the gate is not told of its own reverts.
func TestRevert(t *testing.T) {
	const image = "registry.example.com/team/api"
	var apps fixedApps
	add := func(name string, ann map[string]string, spec map[string]any, running ...string) {
		ann["image-list"] = "app=" + image
		ann["app.health-gate"] = "1m"
		app, err := application.FromUnstructured(appObject(name, ann, spec, running...))
		if err != nil {
			t.Fatal(err)
		}
		apps = append(apps, app)
	}
	withOverride := func(v string) map[string]any {
		return map[string]any{"source": kustomizeSource(image + ":" + v)}
	}
	add("patched", map[string]string{"write-back-method": "argocd"}, withOverride("1.1.0"), image+":1.1.0")
	add("patched-already", map[string]string{"write-back-method": "argocd"}, withOverride("1.0.0"), image+":1.0.0")
	add("patched-since", map[string]string{"write-back-method": "argocd"}, withOverride("1.2.0"), image+":1.2.0")
	add("git-broken", map[string]string{"write-back-method": "git"}, nil, image+":1.1.0")
	add("git-failed-sync", map[string]string{"write-back-method": "git"}, nil, image+":1.0.0")
	add("git-fine", map[string]string{"write-back-method": "git"}, nil, image+":1.1.0")

	argo, git := &argocdRecorder{}, &batchRecorder{}
	gate := &skipGate{}
	u := mustNew(t, apps, &listingRegistry{}, argo, WithGitWriter(git), WithHealthGate(gate), WithRefreshAfterGit(true))
	from, to := imageref.Version{Tag: "1.1.0"}, imageref.Version{Tag: "1.0.0"}
	var reverts []Revert
	for _, name := range []string{"patched", "patched-already", "patched-since", "git-broken", "git-failed-sync", "gone"} {
		reverts = append(reverts, Revert{Namespace: "argocd", Name: name, Image: "app", From: from, To: to})
	}
	reverts = append(reverts, Revert{Namespace: "argocd", Name: "patched", Image: "web", From: from, To: to})
	got := u.Revert(t.Context(), reverts)
	want := []RevertResult{
		{Done: true, Written: true},
		{Done: true},
		{Superseded: true},
		{Done: true, Written: true, Commit: "0123abcd"},
		{Done: true, Written: true, Commit: "0123abcd"},
		{Superseded: true},
		{Superseded: true},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("results\n %v\nwant\n %v", got, want)
	}
	if len(argo.batches) != 1 || len(argo.batches[0]) != 1 || argo.batches[0][0].App.Name != "patched" || argo.batches[0][0].Images[0].New != to || argo.batches[0][0].Images[0].Old != from {
		t.Errorf("argocd batches %+v", argo.batches)
	}
	var names []string
	for _, b := range git.batches {
		for _, c := range b {
			names = append(names, c.App.Name)
		}
	}
	if len(git.batches) != 1 || !slices.Equal(names, []string{"git-broken", "git-failed-sync"}) {
		t.Errorf("git batches of %v, want one of git-broken and git-failed-sync", names)
	}
	slices.Sort(argo.refreshed)
	if !slices.Equal(argo.refreshed, []string{"argocd/git-broken", "argocd/git-failed-sync"}) {
		t.Errorf("refreshed %v", argo.refreshed)
	}
	if len(gate.written) != 0 {
		t.Errorf("the gate was told of its own reverts: %v", gate.written)
	}
}
