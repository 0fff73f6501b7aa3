package git

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// openProjects is a cluster without Secrets or ConfigMaps whose every
// AppProject permits every repository.
type openProjects struct{ noObjects }

func (openProjects) AppProject(context.Context, string, string) (*repoaccess.AppProject, error) {
	return &repoaccess.AppProject{SourceRepos: []string{"*"}}, nil
}

// stallingGit is a git HTTP server that holds every request until the
// client gives up or the test ends, telling arrivals each one that comes.
type stallingGit struct {
	url      string
	arrivals chan string
	mu       sync.Mutex
	inFlight int
	most     int
}

func startStallingGit(t *testing.T) *stallingGit {
	t.Helper()
	s := &stallingGit{arrivals: make(chan string, 64)}
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.inFlight++
		s.most = max(s.most, s.inFlight)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
		}()
		s.arrivals <- r.URL.Path
		select {
		case <-r.Context().Done():
		case <-done:
		}
		http.Error(w, "gone", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // before srv.Close, which waits for the handlers
	s.url = srv.URL
	return s
}

// mostInFlight is the most requests the server held at once.
func (s *stallingGit) mostInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most
}

// boundsUpdate is an Application writing one image to repoURL.
func boundsUpdate(name, repoURL string) update {
	return update{
		Namespace: "argocd", Name: name, ControllerNamespace: "argocd",
		RepoURL: repoURL, TargetRevision: "main",
		SourcePath: "app", SourceType: application.SourceKustomize,
		Target: settings.WriteBackTarget{Kind: settings.TargetKustomization},
		Images: []writeback.ImageUpdate{{
			ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("registry.example.com/app")},
			New:       imageref.Version{Tag: "1.0.1"},
			Old:       imageref.ParseVersion("1.0.0"),
		}},
	}
}

func boundsWriter(t *testing.T, opts ...Option) *Writer {
	t.Helper()
	base := []Option{WithWorkDir(t.TempDir()), WithTransientRetries(0), WithClock(func() time.Time { return testClock })}
	w, err := NewWriter(openProjects{}, openProjects{}, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// A git server that never answers fails the write of its repository once
// the network bound has passed, with an error naming the repository.
func TestNetworkTimeout(t *testing.T) {
	s := startStallingGit(t)
	const bound = 300 * time.Millisecond
	w := boundsWriter(t, WithNetworkTimeout(bound))
	repo := s.url + "/stalled.git"
	// The test's own deadline, far past the bound, ends the write should
	// the bound not hold.
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	start := time.Now()
	res := w.write(ctx, []update{boundsUpdate("web", repo)})
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("the write outlived the test's deadline (%s): the %s bound did not hold", took, bound)
	}
	err := res[0].Err
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "list branches of "+repo) {
		t.Errorf("error %v; want a deadline naming %s", err, repo)
	}
	if took < bound || took > bound+2*time.Second {
		t.Errorf("the write failed after %s, want about %s", took, bound)
	}
}

// At most maxParallelRepositories repositories are written at once: while
// that many are held, no other is reached.
func TestParallelRepositoriesBound(t *testing.T) {
	s := startStallingGit(t)
	w := boundsWriter(t)
	var updates []update
	for i := range 2 * maxParallelRepositories {
		updates = append(updates, boundsUpdate(fmt.Sprintf("app-%d", i), fmt.Sprintf("%s/repo-%d.git", s.url, i)))
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan []writeback.Result, 1)
	go func() { done <- w.write(ctx, updates) }()
	deadline := time.After(4 * time.Second)
	for range maxParallelRepositories {
		select {
		case <-s.arrivals:
		case <-deadline:
			t.Fatalf("fewer than %d repositories reached", maxParallelRepositories)
		}
	}
	// Each held repository keeps its slot: another one arriving in the
	// next moments would be past the bound.
	select {
	case p := <-s.arrivals:
		t.Errorf("%s reached while %d repositories were held", p, maxParallelRepositories)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	for _, r := range <-done {
		if r.Err == nil {
			t.Errorf("%s/%s written while its server held it", r.Namespace, r.Name)
		}
	}
	if most := s.mostInFlight(); most > maxParallelRepositories {
		t.Errorf("%d repositories in flight at once, want at most %d", most, maxParallelRepositories)
	}
}

// A file a write-back reads, and one it commits through the GitHub API,
// is at most maxTargetFileSize.
func TestTargetFileSizeBound(t *testing.T) {
	fits, over := strings.Repeat("#", maxTargetFileSize), strings.Repeat("#", maxTargetFileSize+1)
	tests := []struct {
		name    string
		content string
		read    string // what the read's error says, "" none
		commit  string // what the commit's error says, "" none
	}{
		{"at the bound", fits, "", ""},
		{"past the bound", over, "larger than the 8388608 bytes a write-back reads", "is over 8 MiB, the most a write-back writes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memory.NewStorage()
			empty := emptyCommit(t, s)
			clone := &gitClone{Clone: &gitwire.Clone{Repo: &gogit.Repository{Storer: s}}}
			head, err := clone.Commit(empty, map[string][]byte{"app/values.yaml": []byte(tt.content)}, "fixture", sigOf(), nil, new([]plumbing.Hash), nil)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, err error, want string) {
				t.Helper()
				if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
					t.Errorf("%s: %v; want %q", what, err, want)
				}
			}
			commit, err := clone.Repo.CommitObject(head)
			if err != nil {
				t.Fatal(err)
			}
			root, err := commit.Tree()
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = newRepoTree(s, root).read(repositoryGrant, "app/values.yaml")
			check("read", err, tt.read)
			_, err = clone.changedFiles(empty, head)
			check("files to commit through the API", err, tt.commit)
		})
	}
}

func sigOf() object.Signature {
	return object.Signature{Name: "fixture", Email: "fixture@example.com", When: testClock}
}

// The YAML files under a plain-manifest source are read up to
// maxMarkedBytes in all.
func TestPlanMarkersSizeBound(t *testing.T) {
	web := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("example.com/web")}, New: imageref.Version{Tag: "2.0"}}
	upd := update{Name: "app", SourcePath: "apps", SourceType: application.SourceDirectory, Images: []writeback.ImageUpdate{web}}
	// Files of 7 MiB that name one blob, stored once and read for each.
	const fileSize = 7 << 20
	tests := []struct {
		name  string
		files int
		want  string
	}{
		{"within the bound", maxMarkedBytes / fileSize, ""},
		{"past the bound", maxMarkedBytes/fileSize + 1, "the YAML files under apps hold more than 64 MiB"},
	}
	s := memory.NewStorage()
	store := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		obj := s.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := s.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	blob := func(content string) plumbing.Hash {
		obj := s.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err == nil {
			_, err = w.Write([]byte(content))
		}
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	filler := blob("#" + strings.Repeat("x", fileSize-2) + "\n")
	marked := blob("image: example.com/web:1.0 # {\"$imageupdater\": \"web\"}\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := []object.TreeEntry{{Name: "deploy.yaml", Mode: filemode.Regular, Hash: marked}}
			for i := range tt.files {
				entries = append(entries, object.TreeEntry{Name: fmt.Sprintf("f%02d.yaml", i), Mode: filemode.Regular, Hash: filler})
			}
			root, err := object.GetTree(s, store(&object.Tree{Entries: []object.TreeEntry{{Name: "apps", Mode: filemode.Dir, Hash: store(&object.Tree{Entries: entries})}}}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = planTarget(newRepoTree(s, root), upd)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("%d files of %d MiB: %v; want %q", tt.files, fileSize>>20, err, tt.want)
			}
		})
	}
}

// After maxReviewBranches branches whose requests were closed, and which
// still exist, no further branch is tried.
func TestReviewBranchesBound(t *testing.T) {
	ca := testenv.NewCA(t, "forge CA")
	gh, gl := testenv.StartGitHubAPI(t, ca, nil), testenv.StartGitLabAPI(t, ca)
	hosts, err := forge.NewHosts([]string{gh.URL}, []string{gl.URL})
	if err != nil {
		t.Fatal(err)
	}
	const token = "token-0123456789abcdef"
	for _, tt := range []struct {
		kind settings.Forge
		api  reviewAPI
	}{{settings.ForgeGitHub, gh}, {settings.ForgeGitLab, gl}} {
		t.Run(string(tt.kind), func(t *testing.T) {
			tt.api.AcceptToken(token)
			repo, err := hosts.Lookup(tt.kind, "https://127.0.0.1/example/deploy.git")
			if err != nil {
				t.Fatal(err)
			}
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool()}
			t.Cleanup(tr.CloseIdleConnections)
			c, err := repo.Client(token, tr)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			plan := branchPlan{base: "main", target: "image-updates"}
			remote := &gitwire.Branches{Heads: map[string]plumbing.Hash{"main": plumbing.NewHash("1111111111111111111111111111111111111111")}}
			// closeOne opens a request from the next branch and closes it,
			// its branch kept.
			closeOne := func(n int) {
				name := plan.target
				if n > 1 {
					name = fmt.Sprintf("%s-%d", plan.target, n)
				}
				req, err := c.Open(ctx, name, plan.base, "update", "", nil)
				if err != nil {
					t.Fatal(err)
				}
				tt.api.SetState(repo.Project, req.Number, "closed")
				remote.Heads[name] = plumbing.NewHash("2222222222222222222222222222222222222222")
			}
			for n := 1; n < maxReviewBranches; n++ {
				closeOne(n)
			}
			branch, open, err := reviewBranch(ctx, c, plan, remote)
			if want := fmt.Sprintf("image-updates-%d", maxReviewBranches); err != nil || branch != want || open != nil {
				t.Fatalf("branch %q (open %v), %v; want %s", branch, open, err, want)
			}
			closeOne(maxReviewBranches)
			branch, _, err = reviewBranch(ctx, c, plan, remote)
			if err == nil || !strings.Contains(err.Error(), "image-updates-2 to image-updates-100 were all closed") {
				t.Errorf("branch %q, %v; want an error naming the branches tried", branch, err)
			}
		})
	}
}
