package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// storage writes images and tags straight into the Distribution registry's
// filesystem storage, laid out as the registry itself writes a push:
// pushing 100,000 tags through the HTTP API would take far longer than the
// benchmark. The registry keeps no cache of tags or links, so what is
// written here is served at once.
type storage struct {
	root string // <data dir>/docker/registry/v2
}

func newStorage(dataDir string) *storage {
	return &storage{root: filepath.Join(dataDir, "docker", "registry", "v2")}
}

func hexOf(digest string) string { return strings.TrimPrefix(digest, "sha256:") }

// blob stores content under its digest, once.
func (s *storage) blob(digest string, data []byte) error {
	h := hexOf(digest)
	path := filepath.Join(s.root, "blobs", "sha256", h[:2], h, "data")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	return writeFile(path, data)
}

// link writes a link file, which holds the digest it points to.
func (s *storage) link(digest string, elem ...string) error {
	return writeFile(filepath.Join(append([]string{s.root, "repositories"}, elem...)...), []byte(digest))
}

// image makes an image's blobs and manifest part of a repository.
func (s *storage) image(repoName string, img *image, layer []byte) error {
	layerDigest := sha256Digest(layer)
	return errors.Join(
		s.blob(img.digest, img.manifest),
		s.blob(img.configDigest, img.config),
		s.link(img.configDigest, repoName, "_layers", "sha256", hexOf(img.configDigest), "link"),
		s.link(layerDigest, repoName, "_layers", "sha256", hexOf(layerDigest), "link"),
		s.link(img.digest, repoName, "_manifests", "revisions", "sha256", hexOf(img.digest), "link"),
	)
}

// tag points a tag at a manifest.
func (s *storage) tag(repoName, tag, digest string) error {
	return errors.Join(
		s.link(digest, repoName, "_manifests", "tags", tag, "current", "link"),
		s.link(digest, repoName, "_manifests", "tags", tag, "index", "sha256", hexOf(digest), "link"),
	)
}

// fill writes the repositories' images and the given tags (all of each
// repository's tags when tags is nil), several repositories at once.
func (s *storage) fill(w *workload, repos []*repo, only map[*repo]string) error {
	if err := s.blob(sha256Digest(w.layer), w.layer); err != nil {
		return err
	}
	work := make(chan *repo)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				if err := s.fillRepo(w, r, only); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", r.Name, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, r := range repos {
		work <- r
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

func (s *storage) fillRepo(w *workload, r *repo, only map[*repo]string) error {
	tags := r.Tags
	if only != nil {
		tags = []string{only[r]}
	}
	done := map[string]bool{}
	for _, tag := range tags {
		img := r.tagImage[tag]
		if !done[img.digest] {
			if err := s.image(r.Name, img, w.layer); err != nil {
				return err
			}
			done[img.digest] = true
		}
		if err := s.tag(r.Name, tag, img.digest); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the repositories' files, several at once.
func (s *storage) remove(repos []*repo) {
	work := make(chan *repo)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				_ = os.RemoveAll(filepath.Join(s.root, "repositories", r.Name))
			}
		}()
	}
	for _, r := range repos {
		work <- r
	}
	close(work)
	wg.Wait()
}

// verify asks the registry itself (not the proxy) for the tags of a few
// repositories of each kind and for one image of each, so that a mistake
// in the layout fails here rather than as odd numbers in the report.
func verify(w *workload, host string, auth authn.Authenticator) error {
	seen := map[repoKind]int{}
	var errs []error
	for _, r := range w.repos {
		if seen[r.Kind] >= 2 && !r.Big {
			continue
		}
		seen[r.Kind]++
		repoRef, err := name.NewRepository(host+"/"+r.Name, name.Insecure)
		if err != nil {
			return err
		}
		tags, err := remote.List(repoRef, remote.WithAuth(auth))
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", r.Name, err))
			continue
		}
		want := append([]string(nil), r.Tags...)
		sort.Strings(want)
		sort.Strings(tags)
		if strings.Join(tags, ",") != strings.Join(want, ",") {
			errs = append(errs, fmt.Errorf("%s: the registry lists %d tags, %d were written", r.Name, len(tags), len(want)))
			continue
		}
		last := r.Tags[len(r.Tags)-1]
		img, err := remote.Image(repoRef.Tag(last), remote.WithAuth(auth))
		if err != nil {
			errs = append(errs, fmt.Errorf("get %s:%s: %w", r.Name, last, err))
			continue
		}
		d, err := img.Digest()
		if err != nil || d.String() != r.tagImage[last].digest {
			errs = append(errs, fmt.Errorf("%s:%s has digest %v (%v), want %s", r.Name, last, d, err, r.tagImage[last].digest))
			continue
		}
		if _, err := img.ConfigFile(); err != nil {
			errs = append(errs, fmt.Errorf("config of %s:%s: %w", r.Name, last, err))
		}
	}
	return errors.Join(errs...)
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
