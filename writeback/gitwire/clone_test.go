package gitwire

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
)

// noObjects is a cluster without Secrets, ConfigMaps or AppProjects.
type noObjects struct{}

func (noObjects) RepositorySecrets(context.Context, string) ([]corev1.Secret, error) {
	return nil, nil
}

func (noObjects) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func (noObjects) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
}

func (noObjects) AppProject(_ context.Context, _, name string) (*repoaccess.AppProject, error) {
	return nil, apierrors.NewNotFound(repoaccess.AppProjectsResource().GroupResource(), name)
}

// server is a repository on the real git http-backend, and how to reach it.
type server struct {
	git *testenv.GitServer
	url string
	acc Remote
}

func startServer(t *testing.T, files map[string]string) *server {
	t.Helper()
	g := testenv.StartGitServer(t)
	g.CreateRepo(t, "deploy", "", files)
	url := strings.Replace(g.HTTPRepoURL("deploy"), "://", "://"+g.Username+":"+g.Password+"@", 1)
	acc, err := gitauth.NewResolver(noObjects{}, "argocd", t.TempDir(), nil).Access(t.Context(), url, repoaccess.Credentials{}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { acc.Close() })
	return &server{git: g, url: url, acc: acc}
}

func newClone(t *testing.T, url string) *Clone {
	t.Helper()
	repo, err := InitBare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &Clone{URL: url, Repo: repo, SpoolDir: t.TempDir()}
}

var sig = object.Signature{Name: "argocd-image-updater", Email: "noreply@argoproj.io", When: time.Unix(1700000000, 0)}

// A clone lists, fetches the branch tip alone, commits without a checkout
// and pushes only what it made, against git http-backend; a push built on
// a tip the branch no longer has is refused with ErrBranchMoved.
func TestCloneListFetchCommitPush(t *testing.T) {
	const file = "apps/web/kustomization.yaml"
	s := startServer(t, map[string]string{file: "images: []\n", "README.md": "deploy\n"})
	s.git.CommitFiles(t, "deploy", "main", "second commit", map[string]string{"README.md": "deploy, again\n"})
	c := newClone(t, s.url)
	ctx := t.Context()

	branches, err := c.List(ctx, s.acc)
	if err != nil {
		t.Fatal(err)
	}
	listed := branches.Heads["main"]
	if listed.IsZero() || branches.Default != "main" {
		t.Fatalf("branches %+v, want main as the default", branches)
	}
	tip, err := c.Tip(ctx, s.acc, "main", listed)
	if err != nil || tip != listed {
		t.Fatalf("tip %s, %v; want %s", tip, err, listed)
	}
	if shallow, err := c.Repo.Storer.Shallow(); err != nil || len(shallow) != 1 || shallow[0] != tip {
		t.Errorf("shallow commits %v, %v; want the tip alone (its history was not fetched)", shallow, err)
	}
	fetches := s.git.Fetches.Load()
	if again, err := c.Tip(ctx, s.acc, "main", listed); err != nil || again != tip || s.git.Fetches.Load() != fetches {
		t.Errorf("a tip the clone holds was fetched again (%s, %v)", again, err)
	}

	var created []plumbing.Hash
	head, err := c.Commit(tip, map[string][]byte{file: []byte("images: [web:2]\n")}, "update web", sig, nil, &created, nil)
	if err != nil || head.IsZero() {
		t.Fatalf("commit %s, %v", head, err)
	}
	if same, err := c.Commit(head, map[string][]byte{file: []byte("images: [web:2]\n")}, "again", sig, nil, &created, nil); err != nil || !same.IsZero() {
		t.Errorf("a commit of the same content: %s, %v; want none", same, err)
	}
	if err := c.Push(ctx, s.acc, head, created, "main", tip); err != nil {
		t.Fatal(err)
	}
	if got := s.git.ReadFile(t, "deploy", "main", file); got != "images: [web:2]\n" {
		t.Errorf("pushed file %q", got)
	}
	if log := s.git.Log(t, "deploy", "main"); len(log) != 3 || log[0].Hash != head.String() || log[0].Subject != "update web" {
		t.Errorf("log %+v, want the pushed commit on the two before it", log)
	}

	// A new branch from the pushed commit.
	created = nil
	review, err := c.Commit(head, map[string][]byte{file: []byte("images: [web:3]\n")}, "update web again", sig, nil, &created, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Push(ctx, s.acc, review, created, "image-updates", plumbing.ZeroHash); err != nil {
		t.Fatal(err)
	}
	if got := s.git.ReadFile(t, "deploy", "image-updates", file); got != "images: [web:3]\n" {
		t.Errorf("file on the new branch %q", got)
	}

	// Someone else pushes first: nothing is sent.
	s.git.CommitFiles(t, "deploy", "main", "by hand", map[string]string{"README.md": "by hand\n"})
	err = c.Push(ctx, s.acc, review, created, "main", head)
	if !errors.Is(err, ErrBranchMoved) || !strings.Contains(err.Error(), "push branch main to ") || strings.Contains(err.Error(), s.git.Password) {
		t.Errorf("push on a moved branch: %v; want ErrBranchMoved naming the repository without its password", err)
	}
	if log := s.git.Log(t, "deploy", "main"); log[0].Subject != "by hand" {
		t.Errorf("main is at %q", log[0].Subject)
	}
}

// budget is a Budget of a fixed size, recording what is counted.
type budget struct {
	mu          sync.Mutex
	left, inUse int64
}

func (b *budget) Charge(n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.left {
		return errors.New("no room left")
	}
	b.left -= n
	b.inUse += n
	return nil
}

func (b *budget) Uncharge(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left += n
	b.inUse -= n
}

// A fetch beyond the clone's bounds is refused before its objects are
// stored, and what it counted against the shared bound is given back.
func TestCloneFetchBounds(t *testing.T) {
	// Four files of 256 KiB, which compress well.
	files := map[string]string{"values.yaml": "tag: 1\n"}
	for _, name := range []string{"a", "b", "c", "d"} {
		files[name+".bin"] = strings.Repeat(name+"123456789abcdef", 16<<10)
	}
	s := startServer(t, files)
	tests := []struct {
		name     string
		maxFetch int64
		// maxObject stands for maxFetchedObject, 256 MiB, lowered
		// below MaxFetch (0: not lowered).
		maxObject int64
		disk      *budget
		want      string
	}{
		{"within the bounds", 4 << 20, 0, &budget{left: 16 << 20}, ""},
		{"packed larger than MaxFetch", 512, 0, nil, "over 512 bytes packed"},
		{"an object larger than MaxFetch", 200 << 10, 0, nil, "an object of 262144 bytes"},
		{"an object larger than one object may be", 4 << 20, 200 << 10, nil, "an object of 262144 bytes, more than the 204800 one fetch may hold"},
		{"unpacked larger than MaxFetch", 600 << 10, 0, nil, "its objects take over"},
		{"no room in the shared bound", 4 << 20, 0, &budget{left: 1 << 10}, "no room left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClone(t, s.url)
			c.MaxFetch = tt.maxFetch
			c.maxObject = tt.maxObject
			if tt.disk != nil {
				c.Disk = tt.disk
			}
			branches, err := c.List(t.Context(), s.acc)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Tip(t.Context(), s.acc, "main", branches.Heads["main"])
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if !errors.Is(err, ErrFetchTooLarge) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("fetch: %v; want ErrFetchTooLarge with %q", err, tt.want)
			}
			if tt.disk != nil && tt.disk.inUse != 0 {
				t.Errorf("%d bytes still counted against the shared bound after the fetch", tt.disk.inUse)
			}
			if _, cerr := object.GetCommit(c.Repo.Storer, branches.Heads["main"]); (cerr == nil) != (tt.want == "") {
				t.Errorf("commit stored: %v, want %v", cerr == nil, tt.want == "")
			}
		})
	}
}
