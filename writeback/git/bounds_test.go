package git

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
)

// openProjects is a cluster without Secrets or ConfigMaps whose every
// AppProject permits every repository.
type openProjects struct{ noObjects }

func (openProjects) AppProject(context.Context, string, string) (*gitauth.AppProject, error) {
	return &gitauth.AppProject{SourceRepos: []string{"*"}}, nil
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
