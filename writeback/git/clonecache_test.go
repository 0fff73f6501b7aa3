package git

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

func TestCloneKey(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{name: "same URL", a: "https://git.example.com/org/repo.git", b: "https://git.example.com/org/repo.git", same: true},
		{name: "scheme and host in upper case", a: "HTTPS://Git.Example.com/org/repo.git", b: "https://git.example.com/org/repo.git", same: true},
		{name: "trailing slash", a: "https://git.example.com/org/repo.git/", b: "https://git.example.com/org/repo.git", same: true},
		{name: "token as user name", a: "https://ghp_s3cr3t@git.example.com/org/repo.git", b: "https://git.example.com/org/repo.git", same: true},
		{name: "user and password", a: "https://bot:s3cr3t@git.example.com/org/repo.git", b: "https://git.example.com/org/repo.git", same: true},
		{name: "ssh user", a: "ssh://git@git.example.com/org/repo.git", b: "ssh://git.example.com/org/repo.git", same: true},
		{name: "scp-like with user and host case", a: "git@GitHub.com:org/repo.git", b: "github.com:org/repo.git", same: true},
		{name: "scp-like with password", a: "bot:s3cr3t@github.com:org/repo.git", b: "github.com:org/repo.git", same: true},
		// Servers may tell these apart: they keep clones of their own.
		{name: "path case", a: "https://git.example.com/Org/Repo.git", b: "https://git.example.com/org/repo.git"},
		{name: ".git suffix", a: "https://git.example.com/org/repo", b: "https://git.example.com/org/repo.git"},
		{name: "other repository", a: "https://git.example.com/org/other.git", b: "https://git.example.com/org/repo.git"},
		{name: "other scheme", a: "ssh://git@github.com/org/repo.git", b: "https://github.com/org/repo.git"},
		{name: "other port", a: "https://git.example.com:8443/org/repo.git", b: "https://git.example.com/org/repo.git"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka, kb := cloneKey(tt.a), cloneKey(tt.b)
			for _, k := range []string{ka, kb} {
				if strings.Contains(k, "s3cr3t") {
					t.Errorf("key %q holds the secret", k)
				}
			}
			na, nb := cloneDirName(ka), cloneDirName(kb)
			if (na == nb) != tt.same {
				t.Errorf("%s (%s) and %s (%s): same folder %v, want %v", tt.a, na, tt.b, nb, na == nb, tt.same)
			}
			if !isCloneName(na) {
				t.Errorf("folder name %q is not a clone name", na)
			}
		})
	}
}

// cloneDir is where a writer keeps the clone of url in dir.
func cloneDir(dir, url string) string { return filepath.Join(dir, cloneDirName(cloneKey(url))) }

// testCloneAcrossRestarts: a writer started on the folder of one that
// stopped uses its clone, fetching what changed meanwhile, however the URL
// is spelled, and keeps no credentials on disk.
func (e *gitEnv) testCloneAcrossRestarts(t *testing.T) {
	tests := []struct {
		name string
		// second spells the URL for the second writer.
		second func(url string) string
		// gitSecret: the second writer takes its credentials from the
		// git:secret Secret, as Argo CD's do not match a URL with
		// credentials in it.
		gitSecret bool
	}{
		{name: "same URL", second: func(u string) string { return u }},
		{name: "scheme in upper case", second: func(u string) string { return "HTTP" + strings.TrimPrefix(u, "http") }},
		{
			name: "credentials in the URL",
			second: func(u string) string {
				return strings.Replace(u, "http://", "http://"+e.git.Username+":"+e.git.Password+"@", 1)
			},
			gitSecret: true,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := e.argoNamespace(t, fmt.Sprintf("restart-%d", i), true)
			e.secret(t, ns, "push-creds", "", map[string]string{"username": e.git.Username, "password": e.git.Password})
			url := e.repo(t, ns, nil)
			dir := t.TempDir()

			first := e.writer(t, ns, WithWorkDir(dir))
			before := e.git.FetchedBytes.Load()
			mustWrite(t, first, appUpdate("main", url))
			cloned := e.git.FetchedBytes.Load() - before
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			// Someone else pushes while the updater restarts.
			e.otherWriter(t, ns, "main", "edit by hand", func(dir string) {
				writeTestFile(t, filepath.Join(dir, "README.md"), "hello\n")
			})

			second := e.writer(t, ns, WithWorkDir(dir))
			u := appUpdate("main", tt.second(url))
			u.Images[0].New.Tag = "v0.0.3"
			if tt.gitSecret {
				// The Secret sits beside the Application, in Argo CD's namespace.
				u.Namespace, u.ControllerNamespace = ns, ns
				u.CredentialsSecret = types.NamespacedName{Namespace: ns, Name: "push-creds"}
			}
			before = e.git.FetchedBytes.Load()
			mustWrite(t, second, u)
			fetched := e.git.FetchedBytes.Load() - before
			t.Logf("first writer fetched %d bytes, the one after the restart %d", cloned, fetched)
			if fetched == 0 || fetched*2 > cloned {
				t.Errorf("after the restart %d bytes fetched, the clone took %d: want only the other writer's commit", fetched, cloned)
			}
			if got := e.git.ReadFile(t, ns, "main", "main/overlays/production/.argocd-source-main.yaml"); !strings.Contains(got, gitAppImage+":v0.0.3") {
				t.Errorf("file: %q", got)
			}
			if diff := cmp.Diff([]string{"build: automatic update of main", "edit by hand", "build: automatic update of main", "initial commit"}, subjects(e.git.Log(t, ns, "main"))); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || !entries[0].IsDir() || !isCloneName(entries[0].Name()) {
				t.Errorf("clone folder holds %v, want one clone", entries)
			}
			err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				content, err := os.ReadFile(path)
				if bytes.Contains(content, []byte(e.git.Password)) || strings.Contains(path, e.git.Password) {
					t.Errorf("%s holds the password", path)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// testLeftoverClones: a writer starting on a folder removes what a process
// stopped in the middle of a clone or a fetch left there, and nothing
// else.
func (e *gitEnv) testLeftoverClones(t *testing.T) {
	ns := e.argoNamespace(t, "leftovers", true)
	url := e.repo(t, "leftovers", nil)
	dir := t.TempDir()
	first := e.writer(t, ns, WithWorkDir(dir))
	mustWrite(t, first, appUpdate("main", url))
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	finished := cloneDirName(cloneKey(url))
	other := cloneDirName(cloneKey(e.git.HTTPRepoURL("elsewhere")))
	bare := func(path string) {
		gitCLI(t, "", "init", "--quiet", "--bare", path)
		writeTestFile(t, filepath.Join(path, "objects", "pack", "tmp_pack_0Xq9"), "PACK half")
	}
	file := func(path string) { writeTestFile(t, path, "kept\n") }
	tests := []struct {
		name string
		path string // in the folder
		make func(path string)
		kept bool
	}{
		{name: "clone stopped before its first fetch landed", path: other + ".tmp-1234567", make: bare},
		{name: "clone without its completion mark", path: other, make: bare},
		{name: "pack of a fetch stopped midway", path: filepath.Join(finished, "objects", "pack", "tmp_pack_Zr31"), make: file},
		{name: "finished clone", path: finished, kept: true},
		{name: "file of someone else", path: "notes.txt", make: file, kept: true},
		{name: "folder of someone else", path: "backup.tmp-1", make: func(path string) { file(filepath.Join(path, "a")) }, kept: true},
	}
	for _, tt := range tests {
		if tt.make != nil {
			tt.make(filepath.Join(dir, tt.path))
		}
	}
	second := e.writer(t, ns, WithWorkDir(dir))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := os.Stat(filepath.Join(dir, tt.path))
			if kept := err == nil; kept != tt.kept {
				t.Errorf("%s: kept %v, want %v (%v)", tt.path, kept, tt.kept, err)
			}
		})
	}
	// The finished clone serves as it is: the branch holds its last push.
	u := appUpdate("main", url)
	u.Images[0].New.Tag = "v0.0.3"
	before := e.git.FetchedBytes.Load()
	mustWrite(t, second, u)
	if d := e.git.FetchedBytes.Load() - before; d != 0 {
		t.Errorf("fetched %d bytes, want none", d)
	}
}

// testCloneEviction: when the clones outgrow their bound, the least
// recently used ones go, except those in use.
func (e *gitEnv) testCloneEviction(t *testing.T) {
	tests := []struct {
		name string
		// inUse is the clone another write holds while the third one is
		// written; -1: none.
		inUse int
		// restart: the bound comes with a new writer on the folder, after
		// the clone marked oldest on disk was made older still.
		restart, oldest int
		wantGone        int
	}{
		{name: "least recently used removed", inUse: -1, restart: -1, wantGone: 0},
		{name: "clone in use kept", inUse: 0, restart: -1, wantGone: 1},
		{name: "at start by the last use on disk", inUse: -1, restart: 1, wantGone: 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := e.argoNamespace(t, fmt.Sprintf("evict-%d", i), true)
			var urls []string
			for j := range 3 {
				urls = append(urls, e.repo(t, fmt.Sprintf("%s-%d", ns, j), nil))
			}
			dir := t.TempDir()
			w := e.writer(t, ns, WithWorkDir(dir), WithCloneCacheSize(0))
			mustWrite(t, w, appUpdate("main", urls[0]))
			mustWrite(t, w, appUpdate("main", urls[1]))
			// Room for two clones and a half: a third outgrows it.
			bound := diskUsage(cloneDir(dir, urls[0])) * 5 / 2
			if tt.restart >= 0 {
				mustWrite(t, w, appUpdate("main", urls[2]))
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				old := time.Now().Add(-time.Hour)
				if err := os.Chtimes(filepath.Join(cloneDir(dir, urls[tt.restart]), lastUseFile), old, old); err != nil {
					t.Fatal(err)
				}
				e.writer(t, ns, WithWorkDir(dir), WithCloneCacheSize(bound))
			} else {
				w.cache.maxSize = bound
				if tt.inUse >= 0 {
					release := w.lockRepository(urls[tt.inUse])
					defer release()
				}
				mustWrite(t, w, appUpdate("main", urls[2]))
			}
			for j, url := range urls {
				_, err := os.Stat(cloneDir(dir, url))
				if gone := errors.Is(err, fs.ErrNotExist); gone != (j == tt.wantGone) {
					t.Errorf("clone %d: removed %v, want %v", j, gone, j == tt.wantGone)
				}
			}
		})
	}
}

// addHistory adds n commits to main of a repository, each rewriting one
// of ten files with 2 KB of new text, as a busy repository's history
// grows. The content and dates are fixed, so two repositories made so
// are the same.
func (e *gitEnv) addHistory(t *testing.T, repo string, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var stream bytes.Buffer
	for i := range n {
		msg := fmt.Sprintf("change %d", i)
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter fixture <fixture@example.com> %d +0000\ndata %d\n%s\n", 1700000000+i*60, len(msg), msg)
		if i == 0 {
			stream.WriteString("from refs/heads/main^0\n")
		}
		var content strings.Builder
		for range 32 {
			line := make([]byte, 32)
			for k := range line {
				line[k] = byte(rng.Uint32())
			}
			content.WriteString(hex.EncodeToString(line) + "\n")
		}
		fmt.Fprintf(&stream, "M 100644 inline history/data-%d.txt\ndata %d\n%s\n", i%10, content.Len(), content.String())
	}
	stream.WriteString("done\n")
	cmd := exec.Command("git", "fast-import", "--quiet", "--done")
	cmd.Dir = e.bare(repo)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	cmd.Stdin = &stream
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import: %v: %s", err, out)
	}
}

// cloneObjects counts the commits and all objects in the clones of a
// folder, and tells whether any is shallow.
func cloneObjects(t *testing.T, dir string) (commits, objects int, shallow bool) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		repo, err := gogit.PlainOpen(filepath.Join(dir, entry.Name()))
		if err != nil {
			continue
		}
		iter, err := repo.Storer.IterEncodedObjects(plumbing.AnyObject)
		if err != nil {
			t.Fatal(err)
		}
		err = iter.ForEach(func(o plumbing.EncodedObject) error {
			objects++
			if o.Type() == plumbing.CommitObject {
				commits++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		s, err := repo.Storer.Shallow()
		if err != nil {
			t.Fatal(err)
		}
		shallow = shallow || len(s) > 0
	}
	return commits, objects, shallow
}

// testShallowClones: a clone holds the tips it writes on, not the
// repository's history, over HTTP and SSH, and the server takes pushes
// from it, also after a merge of a branch older than the clone.
func (e *gitEnv) testShallowClones(t *testing.T) {
	tests := []struct {
		name string
		ssh  bool
	}{
		{name: "http"},
		{name: "ssh", ssh: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := e.argoNamespace(t, "shallow-"+tt.name, !tt.ssh)
			repo := ns
			e.git.CreateRepo(t, repo, "testdata/seed003", nil)
			e.addHistory(t, repo, 200)
			url := e.git.HTTPRepoURL(repo)
			if tt.ssh {
				url = e.git.SSHRepoURL(repo)
				e.secret(t, ns, "ssh-repo", argoCDSecretTypeRepository, map[string]string{"url": url, "sshPrivateKey": string(e.sshd.ClientKey)})
				e.configMap(t, ns, argoCDKnownHostsConfigMap, map[string]string{argoCDKnownHostsKey: e.sshd.KnownHosts() + "\n"})
			}
			steps := []struct {
				tag    string
				before func()
				// maxCommits bounds the commits in the clone after the
				// step; 0: no bound.
				maxCommits int
			}{
				{tag: "v0.0.2", maxCommits: 2},
				{tag: "v0.0.3", maxCommits: 3},
				{tag: "v0.0.4", maxCommits: 5, before: func() {
					e.otherWriter(t, repo, "main", "edit by hand", func(dir string) {
						writeTestFile(t, filepath.Join(dir, "README.md"), "hello\n")
					})
				}},
				// The history behind the fork comes along: the server
				// cannot tell it from what the clone lacks.
				{tag: "v0.0.5", before: func() {
					dir := t.TempDir()
					gitCLI(t, "", "clone", "--quiet", e.bare(repo), dir)
					gitCLI(t, dir, "checkout", "--quiet", "-b", "fix", "HEAD~150")
					writeTestFile(t, filepath.Join(dir, "history", "fix.txt"), "fixed\n")
					gitCLI(t, dir, "add", "--all")
					gitCLI(t, dir, "commit", "--quiet", "--message", "fix from an old branch")
					gitCLI(t, dir, "checkout", "--quiet", "main")
					gitCLI(t, dir, "merge", "--quiet", "--no-ff", "--message", "merge the old branch", "fix")
					gitCLI(t, dir, "push", "--quiet", "origin", "main")
				}},
				{tag: "v0.0.6", before: func() {
					e.otherWriter(t, repo, "main", "edit by hand again", func(dir string) {
						writeTestFile(t, filepath.Join(dir, "README.md"), "hello again\n")
					})
				}},
			}
			dir := t.TempDir()
			w := e.writer(t, ns, WithWorkDir(dir))
			for i, step := range steps {
				if step.before != nil {
					step.before()
				}
				u := appUpdate("main", url)
				u.Images[0].New.Tag = step.tag
				before := e.git.FetchedBytes.Load()
				r := mustWrite(t, w, u)[0]
				commits, objects, shallow := cloneObjects(t, dir)
				t.Logf("step %d: %d bytes fetched over HTTP; the clone holds %d commits, %d objects", i, e.git.FetchedBytes.Load()-before, commits, objects)
				if got := e.git.ReadFile(t, repo, "main", "main/overlays/production/.argocd-source-main.yaml"); !strings.Contains(got, gitAppImage+":"+step.tag) {
					t.Errorf("step %d: file %q", i, got)
				}
				if log := e.git.Log(t, repo, "main"); log[0].Hash != r.Commit {
					t.Errorf("step %d: main is at %s, want the pushed %s", i, log[0].Hash, r.Commit)
				}
				gitCLI(t, e.bare(repo), "fsck", "--strict", "--no-progress")
				if !shallow || (step.maxCommits > 0 && commits > step.maxCommits) {
					t.Errorf("step %d: the clone holds %d commits (shallow: %v), want at most %d", i, commits, shallow, step.maxCommits)
				}
			}
		})
	}
}

// testShallowFigures measures what a clone and a later fetch transfer
// from a repository with 200 commits, shallow and with whole histories.
// docs/benchmarks.md quotes the figures.
func (e *gitEnv) testShallowFigures(t *testing.T) {
	type figures struct{ cloneBytes, cloneObjects, cloneDisk, fetchBytes, fetchObjects int64 }
	measured := map[bool]figures{}
	for _, full := range []bool{false, true} {
		ns := e.argoNamespace(t, fmt.Sprintf("shallow-figures-%v", full), true)
		repo := ns
		e.git.CreateRepo(t, repo, "testdata/seed003", nil)
		e.addHistory(t, repo, 200)
		dir := t.TempDir()
		// A dry run fetches and stores nothing else: the clone's objects
		// are those fetched.
		w := e.writer(t, ns, WithWorkDir(dir), WithDryRun(true))
		w.cfg.fullHistory = full
		var f figures
		before := e.git.FetchedBytes.Load()
		mustWrite(t, w, appUpdate("main", e.git.HTTPRepoURL(repo)))
		f.cloneBytes = e.git.FetchedBytes.Load() - before
		_, objects, _ := cloneObjects(t, dir)
		f.cloneObjects = int64(objects)
		f.cloneDisk = diskUsage(dir)
		e.otherWriter(t, repo, "main", "edit by hand", func(dir string) {
			writeTestFile(t, filepath.Join(dir, "history", "data-3.txt"), "replaced\n")
		})
		before = e.git.FetchedBytes.Load()
		mustWrite(t, w, appUpdate("main", e.git.HTTPRepoURL(repo)))
		f.fetchBytes = e.git.FetchedBytes.Load() - before
		_, objects, _ = cloneObjects(t, dir)
		f.fetchObjects = int64(objects) - f.cloneObjects
		measured[full] = f
		t.Logf("full history %v: clone %d bytes, %d objects, %d bytes on disk; next fetch %d bytes, %d objects", full, f.cloneBytes, f.cloneObjects, f.cloneDisk, f.fetchBytes, f.fetchObjects)
	}
	shallow, full := measured[false], measured[true]
	if shallow.cloneBytes*4 > full.cloneBytes || shallow.cloneObjects*4 > full.cloneObjects {
		t.Errorf("shallow clone %+v, full %+v: want a quarter or less", shallow, full)
	}
	if shallow.fetchObjects > full.fetchObjects || shallow.fetchBytes > full.fetchBytes*3/2 {
		t.Errorf("shallow fetch %+v, full %+v: want no more objects", shallow, full)
	}
}

// testFetchBound: a branch whose tip holds a blob larger than the clones'
// bound is refused while it is fetched: the heap does not grow by the
// blob, and no pack of it stays on disk. Within the bound the same
// repository is written.
func (e *gitEnv) testFetchBound(t *testing.T) {
	ns := e.argoNamespace(t, "fetch-bound", true)
	big := make([]byte, 40<<20)
	if _, err := crand.Read(big); err != nil { // random: a pack cannot shrink it
		t.Fatal(err)
	}
	url := e.repo(t, "fetch-bound", map[string]string{"assets/blob.bin": string(big)})
	big = nil
	dir := t.TempDir()
	w := e.writer(t, ns, WithWorkDir(dir), WithCloneCacheSize(32<<20))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := w.write(context.Background(), []update{appUpdate("main", url)})[0]
	runtime.ReadMemStats(&after)
	if r.Err == nil || !errors.Is(r.Err, gitwire.ErrFetchTooLarge) || !strings.Contains(r.Err.Error(), "--git-clone-max-size") {
		t.Fatalf("got %v, want the fetch refused for the clones' bound", r.Err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("the refused fetch allocated %d MiB", grew>>20)
	}
	var left int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			left += fi.Size()
		}
		return nil
	})
	if left > 1<<20 {
		t.Errorf("%d bytes left on disk", left)
	}
	if r := w.write(context.Background(), []update{appUpdate("main", url)})[0]; r.Err == nil {
		t.Error("the second try was not refused")
	}
	// While it runs, a fetch holds its pack twice (the spool, the stored
	// copy): 40 MiB needs 80 of the folder's bound.
	mustWrite(t, e.writer(t, ns, WithWorkDir(t.TempDir()), WithCloneCacheSize(96<<20)), appUpdate("main", url))
}

// TestCloneFolderOwner: a clone folder another user owns or may write is
// not used; the clones go to a private temporary folder instead.
func TestCloneFolderOwner(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		name  string
		setup func(dir string) error
		used  bool
	}{
		{"own, private", func(dir string) error { return os.Chmod(dir, 0o700) }, true},
		{"writable by others", func(dir string) error { return os.Chmod(dir, 0o777) }, false},
		{"another user's", func(dir string) error { return os.Chown(dir, os.Geteuid()+4242, -1) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "clones")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tt.setup(dir); err != nil {
				t.Skipf("cannot set the folder up here: %v", err)
			}
			c, err := openCloneCache(dir, 0, log)
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			if used := c.root == dir && !c.private; used != tt.used {
				t.Errorf("clones in %s (private %v), want the folder used: %v", c.root, c.private, tt.used)
			}
		})
	}
}

// The clones and the fetches in flight share one bound: a fetch's bytes
// are charged as it spools them (twice: the spool and the stored copy),
// idle clones make room, and past the bound the fetch is refused.
func TestCloneFolderOneBound(t *testing.T) {
	c, err := openCloneCache(t.TempDir(), 1000, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if c.Charge(600) != nil {
		t.Fatal("a first fetch within the bound was refused")
	}
	if c.Charge(600) == nil {
		t.Fatal("a second fetch past the bound, with no idle clone to remove, was allowed")
	}
	c.Uncharge(600)
	// An idle clone of 800 bytes is removed to make room.
	idle := filepath.Join(c.root, "idle")
	if err := os.MkdirAll(idle, 0o755); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.clones["idle"] = &cachedClone{key: "https://git.example.com/idle.git", size: 800}
	c.mu.Unlock()
	if c.Charge(600) != nil {
		t.Fatal("a fetch was refused although an idle clone could make room")
	}
	if _, err := os.Stat(idle); !os.IsNotExist(err) {
		t.Errorf("the idle clone is still there: %v", err)
	}
}
