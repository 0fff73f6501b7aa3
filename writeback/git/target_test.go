package git

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// mustRef parses an image name as the annotations would.
func mustRef(s string) imageref.Reference {
	r, err := imageref.Parse(s)
	if err != nil {
		panic(err)
	}
	return r
}

// Every path an Application names is resolved against the folder it was
// granted: its repository, or the folder its parent deploys.
func TestConfine(t *testing.T) {
	teamB := grant{root: "apps/team-b", what: "apps/team-b, the folder its parent argocd/platform deploys"}
	tests := []struct {
		g             grant
		base, p, want string
		err           string
	}{
		{g: repositoryGrant, base: "main/overlays/production", p: "../../base", want: "main/base"},
		{g: repositoryGrant, base: "main/overlays/production", p: "/main/base", want: "main/base"},
		{g: repositoryGrant, base: "main/overlays/production", p: "//main/base/", want: "main/base"},
		{g: repositoryGrant, base: "main/overlays/production", p: ".", want: "main/overlays/production"},
		{g: repositoryGrant, base: "main/overlays/production", p: "", want: "main/overlays/production"},
		{g: repositoryGrant, base: ".", p: "values.yaml", want: "values.yaml"},
		{g: repositoryGrant, base: ".", p: "./main/overlays/production/", want: "main/overlays/production"},
		{g: repositoryGrant, base: ".", p: "/", want: "."},
		{g: repositoryGrant, base: "main/overlays/production", p: "../../../..", err: `path "../../../.." (from "main/overlays/production") leaves the repository`},
		{g: repositoryGrant, base: "main", p: "/../x", err: "leaves the repository"},
		{g: repositoryGrant, base: ".", p: "../x", err: "leaves the repository"},
		{g: repositoryGrant, base: ".", p: "..", err: "leaves the repository"},

		// What the parent deploys, and nothing beside it.
		{g: teamB, base: "apps/team-b", p: "", want: "apps/team-b"},
		{g: teamB, base: "apps/team-b", p: "web", want: "apps/team-b/web"},
		{g: teamB, base: "apps/team-b", p: "web/../prod/", want: "apps/team-b/prod"},
		{g: teamB, base: "apps/team-b", p: "../team-b/web", want: "apps/team-b/web"},
		{g: teamB, base: "apps/team-b", p: "/apps/team-b/web", want: "apps/team-b/web"},
		{g: teamB, base: "apps/team-b", p: "../team-a", err: `path "../team-a" (from "apps/team-b") leaves apps/team-b, the folder its parent argocd/platform deploys`},
		{g: teamB, base: "apps/team-b", p: "web/../../team-a/web.yaml", err: "leaves apps/team-b"},
		{g: teamB, base: "apps/team-b", p: "..", err: "leaves apps/team-b"},
		{g: teamB, base: "apps/team-b", p: "../team-b-extra", err: "leaves apps/team-b"},
		{g: teamB, base: "apps/team-b", p: "/apps/team-a", err: "leaves apps/team-b"},
		{g: teamB, base: "apps/team-b", p: "/", err: "leaves apps/team-b"},
		{g: teamB, base: "apps/team-b", p: "/etc/passwd", err: "leaves apps/team-b"},
		{g: teamB, base: "apps/team-b", p: "../../../../etc", err: "leaves apps/team-b"},
		// Git decodes no escapes: an encoded separator is part of a name.
		{g: teamB, base: "apps/team-b", p: "%2e%2e/team-a", want: "apps/team-b/%2e%2e/team-a"},
		{g: teamB, base: "apps/team-b", p: "..%2fteam-a", want: "apps/team-b/..%2fteam-a"},
		{g: teamB, base: "apps/team-b", p: "..%2F..%2Fteam-a", want: "apps/team-b/..%2F..%2Fteam-a"},
		// A separator elsewhere, or a control character, is refused.
		{g: teamB, base: "apps/team-b", p: `..\team-a`, err: `path "..\\team-a" holds '\\'`},
		{g: repositoryGrant, base: ".", p: "a\x00/../b", err: "no control characters"},
		{g: repositoryGrant, base: ".", p: "a\n", err: "no control characters"},
	}
	for _, tt := range tests {
		got, err := tt.g.confine(tt.base, tt.p)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %s + %q: got %q, %v; want an error containing %q", tt.g.root, tt.base, tt.p, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %s + %q: got %q, %v; want %q", tt.g.root, tt.base, tt.p, got, err, tt.want)
		}
	}
}

// FuzzConfine checks that a path confine accepts is a clean path from the
// repository root inside the grant, whatever the grant, base and path.
func FuzzConfine(f *testing.F) {
	for _, s := range [][3]string{
		{"apps/team-b", "apps/team-b", "../team-a"},
		{"apps/team-b", "apps/team-b/web", "/apps/team-b/../team-a"},
		{".", "main/overlays", "../../base"},
		{"a", "a", "..%2f..%2fb"},
		{"a/b", "a/b", "./../b/./c//d/"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, root, base, p string) {
		r, err := repositoryGrant.confine(".", root)
		if err != nil {
			return
		}
		g := grant{root: r, what: r}
		if base, err = g.confine(".", base); err != nil {
			return
		}
		got, err := g.confine(base, p)
		if err != nil {
			return
		}
		parts, rootParts := gitwire.SplitPath(got), gitwire.SplitPath(g.root)
		switch {
		case got != path.Clean(got) || path.IsAbs(got):
			t.Fatalf("%q + %q in %q: %q is not a clean relative path", base, p, g.root, got)
		case slices.Contains(parts, ".."):
			t.Fatalf("%q + %q in %q: %q holds ..", base, p, g.root, got)
		case len(parts) < len(rootParts) || !slices.Equal(parts[:len(rootParts)], rootParts):
			t.Fatalf("%q + %q in %q: %q is outside the grant", base, p, g.root, got)
		case strings.ContainsAny(got, "\\\x00"):
			t.Fatalf("%q + %q in %q: %q holds a backslash or NUL", base, p, g.root, got)
		}
	})
}

// memoryTree builds a repoTree from files (content), symlinks (target)
// and submodules, in an in-memory object store.
func memoryTree(t *testing.T, files, symlinks map[string]string, submodules ...string) *repoTree {
	t.Helper()
	s := memory.NewStorage()
	all := map[string][]byte{}
	modes := map[string]filemode.FileMode{}
	for p, c := range files {
		all[p] = []byte(c)
	}
	for p, target := range symlinks {
		all[p], modes[p] = []byte(target), filemode.Symlink
	}
	for _, p := range submodules {
		all[p], modes[p] = nil, filemode.Submodule
	}
	root := commitFiles(t, s, all)
	for p, mode := range modes {
		root = setMode(t, s, root, gitwire.SplitPath(p), mode)
	}
	tree, err := object.GetTree(s, root)
	if err != nil {
		t.Fatal(err)
	}
	return newRepoTree(s, tree)
}

// commitFiles commits files as regular files on an empty first commit in
// s, and returns the tree of the commit.
func commitFiles(tb testing.TB, s *memory.Storage, files map[string][]byte) plumbing.Hash {
	tb.Helper()
	tip := emptyCommit(tb, s)
	clone := &gitwire.Clone{Repo: &gogit.Repository{Storer: s}}
	h, err := clone.Commit(tip, files, "fixture", object.Signature{Name: "fixture", Email: "fixture@example.com", When: testClock}, nil, new([]plumbing.Hash), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if !h.IsZero() {
		tip = h
	}
	commit, err := object.GetCommit(s, tip)
	if err != nil {
		tb.Fatal(err)
	}
	return commit.TreeHash
}

// emptyCommit stores a commit of the empty tree, without parents.
func emptyCommit(tb testing.TB, s *memory.Storage) plumbing.Hash {
	tb.Helper()
	empty, err := gitwire.NewChainTrees(s).Put(nil, plumbing.ZeroHash)
	if err != nil {
		tb.Fatal(err)
	}
	sig := object.Signature{Name: "fixture", Email: "fixture@example.com", When: testClock}
	obj := s.NewEncodedObject()
	if err := (&object.Commit{Author: sig, Committer: sig, Message: "empty", TreeHash: empty}).Encode(obj); err != nil {
		tb.Fatal(err)
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// setMode changes the mode of an existing entry (putTreeFile only writes
// regular files).
func setMode(t *testing.T, s *memory.Storage, tree plumbing.Hash, parts []string, mode filemode.FileMode) plumbing.Hash {
	t.Helper()
	tr, err := object.GetTree(s, tree)
	if err != nil {
		t.Fatal(err)
	}
	entries := append([]object.TreeEntry(nil), tr.Entries...)
	for i := range entries {
		if entries[i].Name != parts[0] {
			continue
		}
		if len(parts) == 1 {
			entries[i].Mode = mode
		} else {
			entries[i].Hash = setMode(t, s, entries[i].Hash, parts[1:], mode)
		}
	}
	obj := s.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRepoTreeStat(t *testing.T) {
	tree := memoryTree(t,
		map[string]string{"a/b/file.yaml": "x: 1\n", "a/c/kustomization.yaml": "{}\n", "a/c/Kustomization": "{}\n"},
		map[string]string{"loop/x": "y", "loop/y": "x", "a/link": "b", "a/file-link": "b/file.yaml", "a/chain": "link",
			"a/up": "../..", "a/abs": "/etc", "a/out": "../x", "a/b/back": "../../a/b", "x/in": "../a/b"},
		"vendor/sub")
	a := grant{root: "a", what: "a, the folder its parent deploys"}
	tests := []struct {
		g              grant
		path, resolved string
		exists, dir    bool
		err            string
	}{
		{path: "a/b/file.yaml", resolved: "a/b/file.yaml", exists: true},
		{path: "a/link/file.yaml", resolved: "a/b/file.yaml", exists: true},
		{path: "a/chain/file.yaml", resolved: "a/b/file.yaml", exists: true},
		{path: "a/file-link", resolved: "a/b/file.yaml", exists: true},
		{path: "a/link", resolved: "a/b", exists: true, dir: true},
		{path: "a/b/missing.yaml", resolved: "a/b/missing.yaml"},
		{path: "", resolved: ".", exists: true, dir: true},
		{path: "loop/x/file", err: "too many levels of symbolic links"},
		{path: "a/b/file.yaml/x", err: "a/b/file.yaml is a file, not a folder"},
		{path: "vendor/sub/values.yaml", err: "vendor/sub is a submodule"},
		{path: "a/up/x", err: "a/up is a symbolic link to ../.., which leaves the repository"},
		{path: "a/abs/passwd", err: "a/abs is a symbolic link to /etc, which leaves the repository"},
		{path: "a/out/f.yaml", resolved: "x/f.yaml"},
		{path: "x/in/file.yaml", resolved: "a/b/file.yaml", exists: true},

		// Inside a folder granted, links are confined to it.
		{g: a, path: "a/link/file.yaml", resolved: "a/b/file.yaml", exists: true},
		{g: a, path: "a/b/back/file.yaml", resolved: "a/b/file.yaml", exists: true},
		{g: a, path: "a/out/f.yaml", err: "a/out is a symbolic link to ../x, which leaves a, the folder its parent deploys"},
		{g: a, path: "a/up/x", err: "a/up is a symbolic link to ../.., which leaves a, the folder"},
		{g: a, path: "a/abs", err: "a/abs is a symbolic link to /etc, which leaves the repository"},
		{g: a, path: "x/in/file.yaml", err: `path "x/in/file.yaml" (from ".") leaves a, the folder`},
	}
	for _, tt := range tests {
		if tt.g == (grant{}) {
			tt.g = repositoryGrant
		}
		f, err := tree.stat(tt.g, tt.path)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: got %+v, %v; want an error containing %q", tt.path, f, err, tt.err)
			}
			if !errors.Is(err, errOutsideGrant) && strings.Contains(tt.err, "leaves") {
				t.Errorf("%s: %v is not errOutsideGrant", tt.path, err)
			}
			continue
		}
		if err != nil || f.path != tt.resolved || f.exists != tt.exists || f.isDir != tt.dir {
			t.Errorf("%s: got %+v, %v", tt.path, f, err)
		}
	}
	if _, err := findKustomization(tree, repositoryGrant, "a/c"); err == nil || !strings.Contains(err.Error(), "more than one kustomization file") {
		t.Errorf("two kustomization files: %v", err)
	}
	if _, err := findKustomization(tree, repositoryGrant, "a/b"); err == nil || !strings.Contains(err.Error(), "no kustomization.yaml, kustomization.yml, Kustomization in a/b") {
		t.Errorf("no kustomization file: %v", err)
	}
	// Files written by earlier Applications are read back.
	tree.changed["a/b/new.yaml"] = []byte("y: 2\n")
	if content, f, err := tree.read(repositoryGrant, "a/link/new.yaml"); err != nil || !f.exists || string(content) != "y: 2\n" {
		t.Errorf("changed file: %q %+v %v", content, f, err)
	}
	// A missing folder is created with the file, as Argo CD Image Updater
	// does.
	edit, err := planTarget(tree, update{Name: "app", SourcePath: "missing/dir", SourceType: application.SourceKustomize, Images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Image: mustRef("a")}, New: imageref.Version{Tag: "1"}}}})
	if err != nil || edit.path != "missing/dir/.argocd-source-app.yaml" || string(edit.content) != "kustomize:\n  images:\n  - a:1\n" {
		t.Errorf("missing source path: %q %q %v", edit.path, edit.content, err)
	}
	_, err = planTarget(tree, update{Name: "app", Target: settings.WriteBackTarget{Kind: "values", Path: "x"}, Images: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Image: mustRef("a")}, New: imageref.Version{Tag: "1"}}}})
	if err == nil || !strings.Contains(err.Error(), `unknown write-back-target "values:x"`) {
		t.Errorf("unknown target: %v", err)
	}
}

func TestSourceOverrideFileName(t *testing.T) {
	tests := []struct {
		u    update
		want string
	}{
		{update{Namespace: "argocd", Name: "main", ControllerNamespace: "argocd"}, ".argocd-source-main.yaml"},
		{update{Namespace: "argocd", Name: "main"}, ".argocd-source-main.yaml"},
		{update{Namespace: "team-a", Name: "main", ControllerNamespace: "argocd"}, ".argocd-source-team-a_main.yaml"},
	}
	for _, tt := range tests {
		if got := sourceOverrideFileName(tt.u); got != tt.want {
			t.Errorf("%+v: got %s, want %s", tt.u, got, tt.want)
		}
	}
}

// The values marked in a plain-manifest source are written in every YAML
// file under it, a file an earlier Application of the batch changed read
// as changed; symbolic links are not followed; the walk is bounded.
func TestPlanMarkers(t *testing.T) {
	web := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("example.com/web")}, New: imageref.Version{Tag: "2.0"}}
	upd := update{Name: "app", SourcePath: "apps", SourceType: application.SourceDirectory, Images: []writeback.ImageUpdate{web}}
	tree := memoryTree(t, map[string]string{
		"apps/deploy.yaml":      "image: example.com/web:1.0 # {\"$imageupdater\": \"web\"}\n",
		"apps/sub/job.yaml":     "image: example.com/web:1.0\n",
		"apps/sub/cron.yml":     "tag: \"1.0\" # {\"$imageupdater\": \"web:tag\"}\n",
		"elsewhere/deploy.yaml": "image: example.com/web:1.0 # {\"$imageupdater\": \"web\"}\n",
		"apps/notes.txt":        "# {\"$imageupdater\": \"web\"}\n",
	}, map[string]string{"apps/link.yaml": "../elsewhere/deploy.yaml"})
	tree.changed["apps/sub/job.yaml"] = []byte("image: example.com/web:1.0 # {\"$imageupdater\": \"web\"}\n")
	edit, err := planTarget(tree, upd)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"apps/deploy.yaml":  "image: example.com/web:2.0 # {\"$imageupdater\": \"web\"}\n",
		"apps/sub/job.yaml": "image: example.com/web:2.0 # {\"$imageupdater\": \"web\"}\n",
		"apps/sub/cron.yml": "tag: \"2.0\" # {\"$imageupdater\": \"web:tag\"}\n",
	}
	got := map[string]string{}
	for p, c := range edit.contents() {
		got[p] = string(c)
	}
	if !maps.Equal(got, want) || len(edit.changed) != 1 {
		t.Errorf("edit %q (changed %d), want %q", got, len(edit.changed), want)
	}

	files := map[string]string{}
	for i := range maxMarkedFiles + 1 {
		files[fmt.Sprintf("many/f%d.yaml", i)] = "x: 1\n"
	}
	upd.SourcePath = "many"
	if _, err := planTarget(memoryTree(t, files, nil), upd); err == nil || !strings.Contains(err.Error(), "more than 2000 YAML files") {
		t.Errorf("too many YAML files: %v", err)
	}
	// A folder of empty folders, written as one tree object.
	st := memory.NewStorage()
	storeTree := func(entries []object.TreeEntry) plumbing.Hash {
		obj := st.NewEncodedObject()
		if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	empty := storeTree(nil)
	var dirs []object.TreeEntry
	for i := range maxMarkedEntries + 1 {
		dirs = append(dirs, object.TreeEntry{Name: fmt.Sprintf("d%05d", i), Mode: filemode.Dir, Hash: empty})
	}
	root, err := object.GetTree(st, storeTree([]object.TreeEntry{{Name: "many", Mode: filemode.Dir, Hash: storeTree(dirs)}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := planTarget(newRepoTree(st, root), upd); err == nil || !strings.Contains(err.Error(), "more than 20000 files and folders") {
		t.Errorf("too many entries: %v", err)
	}
}

// An app-of-apps parent that is a Helm chart: its templates, which are no
// YAML, are passed over by the search for the child's definition, and the
// values its files mark with the child are written; a definition document
// wins in its file; what neither a document nor a marker holds is an error
// that names the marker to add.
func TestPlanDefinitionHelmParent(t *testing.T) {
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("example.com/app")}, New: imageref.Version{Tag: "2.0.0"}}
	guestbook := writeback.ChartUpdate{ChartSpec: settings.ChartSpec{Alias: "guestbook", Chart: "guestbook"}, Old: "1.0.0", New: "1.1.0"}
	parent := &Parent{Namespace: "argocd", Name: "root", Path: "root", DestinationNamespace: "argocd"}
	upd := func(charts []writeback.ChartUpdate, images ...writeback.ImageUpdate) update {
		return update{Namespace: "argocd", Name: "child", SourcePath: "root", SourceIndex: -1, SourceType: application.SourceHelm,
			Target: mustTarget("app-of-apps"), Parent: parent, Charts: charts, Images: images}
	}
	template := "{{- range $name, $app := .Values.apps }}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {{ $name }}\n" +
		"spec:\n  source:\n    chart: {{ $app.chart }}\n    targetRevision: {{ $app.version | quote }}\n{{- end }}\n"
	values := "apps:\n  child: # the guestbook\n    chart: guestbook\n    version: 1.0.0 # {\"$imageupdater\": \"child/guestbook\"}\n" +
		"    image: example.com/app:1.0.0 # {\"$imageupdater\": \"child/app\"}\n"
	definition := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: child\nspec:\n  source:\n    chart: guestbook\n    targetRevision: 1.0.0\n"
	tests := []struct {
		name   string
		files  map[string]string
		upd    update
		want   map[string]string
		images int
		charts []string
		err    string
	}{
		{
			name:  "chart version and image in the values file",
			files: map[string]string{"root/Chart.yaml": "apiVersion: v2\nname: root\nversion: 0.1.0\n", "root/templates/apps.yaml": template + "# child\n", "root/values.yaml": values},
			upd:   upd([]writeback.ChartUpdate{guestbook}, app),
			want: map[string]string{"root/values.yaml": "apps:\n  child: # the guestbook\n    chart: guestbook\n    version: 1.1.0 # {\"$imageupdater\": \"child/guestbook\"}\n" +
				"    image: example.com/app:2.0.0 # {\"$imageupdater\": \"child/app\"}\n"},
			images: 1, charts: []string{"guestbook"},
		},
		{
			name:   "a template that names the child is passed over; the definition beside it is written",
			files:  map[string]string{"root/a-templates/child.yaml": template + "# child\n", "root/child.yaml": definition},
			upd:    upd([]writeback.ChartUpdate{guestbook}),
			want:   map[string]string{"root/child.yaml": strings.Replace(definition, "1.0.0", "1.1.0", 1)},
			charts: []string{"guestbook"},
		},
		{
			name:   "the definition wins in its file",
			files:  map[string]string{"root/child.yaml": strings.Replace(definition, "targetRevision: 1.0.0", "targetRevision: 1.0.0 # {\"$imageupdater\": \"child/guestbook:tag\"}", 1)},
			upd:    upd([]writeback.ChartUpdate{guestbook}),
			want:   map[string]string{"root/child.yaml": strings.Replace(definition, "targetRevision: 1.0.0", "targetRevision: 1.1.0 # {\"$imageupdater\": \"child/guestbook:tag\"}", 1)},
			charts: []string{"guestbook"},
		},
		{
			name:  "already written",
			files: map[string]string{"root/values.yaml": strings.Replace(values, "1.0.0 #", "1.1.0 #", 1)},
			upd:   upd([]writeback.ChartUpdate{guestbook}),
			want:  map[string]string{},
		},
		{
			name:  "an image no file marks",
			files: map[string]string{"root/templates/apps.yaml": template, "root/values.yaml": strings.Replace(values, "child/app", "other/app", 1)},
			upd:   upd([]writeback.ChartUpdate{guestbook}, app),
			err:   `no YAML file under root of its parent argocd/root's repository defines Application argocd/child (kind Application, its name and namespace) or marks its image app: add # {"$imageupdater": "child/<alias>"} after the value`,
		},
		{
			name:  "a chart without an alias",
			files: map[string]string{"root/values.yaml": values},
			upd:   upd([]writeback.ChartUpdate{{ChartSpec: settings.ChartSpec{Chart: "guestbook"}, New: "1.1.0"}}),
			err:   "marks its chart guestbook (which has no alias: give it one in its list, <alias>=guestbook)",
		},
		{
			name:  "a YAML file that does not parse, without a template, still fails",
			files: map[string]string{"root/values.yaml": "child: [\n"},
			upd:   upd([]writeback.ChartUpdate{guestbook}),
			err:   "root/values.yaml: invalid YAML",
		},
		{
			name:  "a chart marked with :tag",
			files: map[string]string{"root/values.yaml": "\nv: 1.0.0 # {\"$imageupdater\": \"argocd/child/guestbook:tag\"}\n"},
			upd:   upd([]writeback.ChartUpdate{guestbook}),
			err:   `root/values.yaml:2: marker "argocd/child/guestbook:tag": guestbook is a chart`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edit, err := planTarget(memoryTree(t, tt.files, nil), tt.upd)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			if len(edit.changed)+len(edit.charts) > 0 {
				for p, c := range edit.contents() {
					got[p] = string(c)
				}
			}
			var charts []string
			for _, c := range edit.charts {
				charts = append(charts, c.Alias)
			}
			if !maps.Equal(got, tt.want) || len(edit.changed) != tt.images || fmt.Sprint(charts) != fmt.Sprint(tt.charts) {
				t.Errorf("edit %q (images %d, charts %v), want %q (%d, %v)", got, len(edit.changed), charts, tt.want, tt.images, tt.charts)
			}
		})
	}
}

// An app-of-apps child writes only under the folder its parent deploys,
// and only into a document proven to be its own: in a platform
// repository of one folder per team, team b's child cannot reach team
// a's definitions, by ".." or "/", or through a link; a definition that
// names no namespace is its own only where its parent creates it in the
// child's namespace.
func TestPlanDefinitionConfined(t *testing.T) {
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("example.com/team-b/web")}, New: imageref.Version{Tag: "2.0.0"}}
	doc := func(name, ns string) string {
		meta := "  name: " + name + "\n"
		if ns != "" {
			meta += "  namespace: " + ns + "\n"
		}
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n" + meta + "spec:\n  source:\n    path: " + name + "\n"
	}
	files := map[string]string{
		// Team a's web, created by team a's parent in team-a.
		"apps/team-a/web.yaml": doc("web", ""),
		"apps/team-b/api.yaml": doc("api", "team-b"),
		"root/web.yaml":        doc("web", ""),
		"root/api.yaml":        doc("api", "argocd"),
	}
	// A link in team b's folder to team a's definition is passed over by
	// the search, as every link is.
	links := map[string]string{"apps/team-b/a-link": "../team-a", "apps/b-link": "team-b", "apps/team-b/web.yaml": "../team-a/web.yaml"}
	teamB := &Parent{Namespace: "argocd", Name: "platform-b", Path: "apps/team-b", DestinationNamespace: "team-b"}
	// root has no destination namespace: where it creates what names
	// none is not known.
	root := &Parent{Namespace: "argocd", Name: "root", Path: "root"}
	upd := func(p *Parent, ns, name, target string) update {
		return update{Namespace: ns, Name: name, SourcePath: p.Path, SourceIndex: -1, SourceType: application.SourceKustomize,
			Target: mustTarget(target), Parent: p, Images: []writeback.ImageUpdate{app}}
	}
	kustomized := func(d string) string {
		return d + "    kustomize:\n      images:\n      - example.com/team-b/web:2.0.0\n"
	}
	tests := []struct {
		name string
		upd  update
		want map[string]string
		err  string
	}{
		{
			name: "team b's child names team a's folder",
			upd:  upd(teamB, "team-b", "web", "app-of-apps:../team-a"),
			err:  `write-back-target "app-of-apps:../team-a": path "../team-a" (from "apps/team-b") leaves apps/team-b, the folder its parent argocd/platform-b deploys`,
		},
		{
			name: "team b's child names team a's folder from the root",
			upd:  upd(teamB, "team-b", "web", "app-of-apps:/apps/team-a"),
			err:  `path "/apps/team-a" (from "apps/team-b") leaves apps/team-b, the folder its parent argocd/platform-b deploys`,
		},
		{
			name: "team b's child names a link to team a's folder",
			upd:  upd(teamB, "team-b", "web", "app-of-apps:a-link"),
			err:  "apps/team-b/a-link is a symbolic link to ../team-a, which leaves apps/team-b, the folder its parent argocd/platform-b deploys",
		},
		{
			name: "team b's child is not defined in what its parent deploys",
			upd:  upd(teamB, "team-b", "web", "app-of-apps"),
			err:  "no YAML file under apps/team-b of its parent argocd/platform-b's repository defines Application team-b/web",
		},
		{
			name: "team b's own child",
			upd:  upd(teamB, "team-b", "api", "app-of-apps"),
			want: map[string]string{"apps/team-b/api.yaml": kustomized(doc("api", "team-b"))},
		},
		{
			name: "a parent whose path is a link deploys the folder linked to",
			upd:  upd(&Parent{Namespace: "argocd", Name: "platform-b", Path: "apps/b-link", DestinationNamespace: "team-b"}, "team-b", "api", "app-of-apps:."),
			want: map[string]string{"apps/team-b/api.yaml": kustomized(doc("api", "team-b"))},
		},
		{
			name: "no namespace, and none the parent creates it in",
			upd:  upd(root, "argocd", "web", "app-of-apps"),
			err:  "the Application web at root/web.yaml:1 names no namespace, and its parent argocd/root has no spec.destination.namespace to create it in, so it is not taken as the definition of argocd/web (write metadata.namespace: argocd in it)",
		},
		{
			name: "its namespace written, where the parent has none",
			upd:  upd(root, "argocd", "api", "app-of-apps"),
			want: map[string]string{"root/api.yaml": kustomized(doc("api", "argocd"))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edit, err := planTarget(memoryTree(t, files, links), tt.upd)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for p, c := range edit.contents() {
				got[p] = string(c)
			}
			if !maps.Equal(got, tt.want) || len(edit.changed) != 1 {
				t.Errorf("edit %q (images %d), want %q", got, len(edit.changed), tt.want)
			}
		})
	}
}
