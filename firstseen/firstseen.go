// Package firstseen keeps when the updater first saw each version of the
// repositories whose images have a minimum release age: a time
// no tag's author can backdate, which the image's own "created" is not.
// The times are kept in memory within a byte budget (the repositories
// least recently asked dropped first) and written to a ConfigMap of the
// controller's namespace after each pass, so that a restart does not make
// every version look new, nor old.
package firstseen

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/image-updater/argocd-image-updater/internal/budget"
)

// DefaultLimit bounds the bytes of times kept: the ConfigMap holding them
// must stay below the API server's 1 MiB for an object.
const DefaultLimit = 512 << 10

// Backend is where the times are kept between processes.
type Backend interface {
	// Load reads what Save wrote; nil when nothing was.
	Load(ctx context.Context) ([]byte, error)
	// Save writes what data makes of what is stored now (nil for
	// nothing), so that what another process wrote since is merged in.
	Save(ctx context.Context, data func(stored []byte) ([]byte, error)) error
}

// Store is the first-seen time of each version of the repositories asked.
// It is safe for concurrent use.
type Store struct {
	backend Backend
	now     func() time.Time
	repos   *budget.LRU[string, *repository]

	// mu guards dirty, and the making of a repository's entry.
	mu    sync.Mutex
	dirty bool
}

// repository is the versions of one repository, each with the Unix time
// it was first seen.
type repository struct {
	mu    sync.Mutex
	times map[string]int64
}

// Bytes is what the repository's times take (see budget.MapEntry).
func (r *repository) Bytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int64(budget.MapHeader)
	for v := range r.times {
		n += versionBytes(v)
	}
	return n
}

func versionBytes(v string) int64 {
	return budget.MapEntry(budget.StringHeader, 8) + budget.Data(len(v))
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithLimit sets the bytes of times kept (default DefaultLimit).
func WithLimit(n int64) Option {
	return func(s *Store) { s.repos = budget.NewLRU[string, *repository](n) }
}

// New returns an empty store writing to backend; nil keeps the times in
// memory only.
func New(backend Backend, opts ...Option) *Store {
	s := &Store{backend: backend, now: time.Now, repos: budget.NewLRU[string, *repository](DefaultLimit)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Times gives the first-seen time of each version of repo, seeing those
// never seen before now. What is kept of repo grows by the versions new;
// the other repositories' times make room, least recently asked first.
func (s *Store) Times(repo string, versions []string) map[string]time.Time {
	r := s.repository(repo)
	now := s.now().Unix()
	out := make(map[string]time.Time, len(versions))
	var grown int64
	r.mu.Lock()
	for _, v := range versions {
		t, seen := r.times[v]
		if !seen {
			t = now
			r.times[v] = t
			grown += versionBytes(v)
		}
		out[v] = time.Unix(t, 0)
	}
	r.mu.Unlock()
	if grown > 0 {
		s.repos.Grow(repo, grown)
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
	}
	return out
}

// repository is what is kept of repo, made when nothing is: one for all
// the images of the repository asking at once.
func (s *Store) repository(repo string) *repository {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.repos.Get(repo)
	if !ok {
		r = &repository{times: map[string]int64{}}
		s.repos.Put(repo, r)
	}
	return r
}

// stored is the form the times are written in: repository, version, Unix
// time.
type stored map[string]map[string]int64

// Load reads the times a process saved, keeping those it has already.
// Without them every version of a repository looks new: an error leaves
// the store as it is, and the next Save merges in what is stored.
func (s *Store) Load(ctx context.Context) error {
	if s.backend == nil {
		return nil
	}
	data, err := s.backend.Load(ctx)
	if err != nil || data == nil {
		return err
	}
	var st stored
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("reading the first-seen times: %w", err)
	}
	s.merge(st)
	return nil
}

// merge keeps the earlier time of each version of st and of the store.
func (s *Store) merge(st stored) {
	for repo, times := range st {
		r := s.repository(repo)
		var grown int64
		r.mu.Lock()
		for v, t := range times {
			if have, seen := r.times[v]; !seen || t < have {
				if !seen {
					grown += versionBytes(v)
				}
				r.times[v] = t
			}
		}
		r.mu.Unlock()
		s.repos.Grow(repo, grown)
	}
}

// Save writes the times if versions were seen since the last Save, merged
// with what is stored (the earlier time of each version wins).
func (s *Store) Save(ctx context.Context) error {
	s.mu.Lock()
	dirty := s.dirty
	s.dirty = false
	s.mu.Unlock()
	if !dirty || s.backend == nil {
		return nil
	}
	err := s.backend.Save(ctx, func(old []byte) ([]byte, error) {
		if old != nil {
			var st stored
			if err := json.Unmarshal(old, &st); err == nil {
				s.merge(st)
			}
		}
		st := stored{}
		for repo, r := range s.repos.All() {
			r.mu.Lock()
			st[repo] = maps.Clone(r.times)
			r.mu.Unlock()
		}
		return json.Marshal(st)
	})
	if err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return fmt.Errorf("saving the first-seen times: %w", err)
	}
	return nil
}
