package git

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// DefaultCloneCacheSize bounds the disk space of the clones unless
// WithCloneCacheSize says otherwise.
const DefaultCloneCacheSize int64 = 2 << 30

// Layout of the clone folder: each finished clone is a bare repository in
// a folder named after its URL (cloneDirName), holding lastUseFile. A new
// clone is built in <name>.tmp-<random> and renamed once its first fetch
// has landed, so a folder with a clone's name is never half-written.
const (
	// lastUseFile marks a clone as finished; its modification time is
	// the clone's last use, which orders evictions across restarts.
	lastUseFile = "image-updater-last-use"
	tmpInfix    = ".tmp-"
	// cloneNameLen is the length of cloneDirName's names.
	cloneNameLen = 24
)

// gitClone is a clone of the cache: the repository's gitwire.Clone, in
// its folder.
type gitClone struct {
	*gitwire.Clone
	// name is the clone's folder name in the cache, dir the folder.
	name, dir string
	// building is the temporary folder of a clone whose first fetch has
	// not landed yet; finish moves it to dir.
	building string
}

// tip is gitwire.Clone.Tip, which finishes a new clone once its first
// fetch landed.
func (c *gitClone) tip(ctx context.Context, acc gitauth.Remote, branch string, listed plumbing.Hash) (plumbing.Hash, error) {
	head, err := c.Tip(ctx, acc, branch, listed)
	if errors.Is(err, gitwire.ErrFetchTooLarge) {
		err = fmt.Errorf("%w (--git-clone-max-size)", err)
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := c.finish(); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetch branch %s of %s: %w", branch, repourl.RedactURL(c.URL), err)
	}
	return head, nil
}

// finish moves a new clone, whose first fetch just landed, to its folder.
func (c *gitClone) finish() error {
	if c.building == "" {
		return nil
	}
	if err := os.WriteFile(filepath.Join(c.building, lastUseFile), nil, 0o600); err != nil {
		return fmt.Errorf("finish clone: %w", err)
	}
	if err := os.Rename(c.building, c.dir); err != nil {
		return fmt.Errorf("finish clone: %w", err)
	}
	c.building = ""
	repo, err := gitwire.OpenBare(c.dir)
	if err != nil {
		return fmt.Errorf("open clone %s: %w", c.dir, err)
	}
	c.Repo, c.SpoolDir = repo, c.dir
	return nil
}

// cloneKey identifies a repository's clone: its URL without credentials,
// with the scheme and host in lower case and no trailing slash. Spellings
// of one URL share one clone, and no secret reaches a folder name or the
// clone's configuration on disk.
func cloneKey(raw string) string {
	raw = strings.TrimSpace(raw)
	if repourl.IsSCPLikeURL(raw) {
		rest := raw
		authority := raw
		if slash := strings.Index(raw, "/"); slash >= 0 {
			authority = raw[:slash]
		}
		if at := strings.LastIndex(authority, "@"); at >= 0 {
			rest = raw[at+1:]
		}
		host, path, _ := strings.Cut(rest, ":")
		return strings.ToLower(host) + ":" + strings.TrimRight(path, "/")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return repourl.RedactURL(raw)
	}
	u.User = nil
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	u.Fragment, u.RawFragment = "", ""
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String()
}

// cloneDirName names a clone's folder after a hash of its key, which
// keeps names short, stable across restarts and free of characters from
// the URL.
func cloneDirName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:cloneNameLen/2])
}

func isCloneName(name string) bool {
	if len(name) != cloneNameLen {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil && strings.ToLower(name) == name
}

// cloneCache keeps one clone per repository in one folder, across
// restarts, within a bound on their disk space. Each clone has a lock:
// whoever holds it may open, fetch into, write to or remove the clone.
type cloneCache struct {
	root    string
	maxSize int64 // <= 0: no bound
	// inFlight is what fetches in flight hold on disk beyond the clones'
	// recorded sizes (charge); guarded by mu.
	inFlight int64
	log      *slog.Logger
	// private: root is this writer's own temporary folder, removed by
	// close.
	private bool
	release func() error

	mu     sync.Mutex
	locks  map[string]*sync.Mutex  // by folder name
	clones map[string]*cachedClone // finished clones by folder name
}

type cachedClone struct {
	key     string
	size    int64
	lastUse time.Time
}

// openCloneCache takes the folder dir for this process, removes what
// unfinished or interrupted clones left there, and evicts clones beyond
// maxSize. Without dir, or when another process holds dir, the clones go
// to a new temporary folder that close removes.
func openCloneCache(dir string, maxSize int64, log *slog.Logger) (*cloneCache, error) {
	c := &cloneCache{root: dir, maxSize: maxSize, log: log, locks: map[string]*sync.Mutex{}, clones: map[string]*cachedClone{}}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create clone folder: %w", err)
		}
		if err := checkFolderOwner(dir); err != nil {
			// Another user could have placed objects, hooks or links in a
			// folder it owns or may write: the clones would build on them.
			log.Warn("the clone folder is not this process's own; this one keeps its clones in a temporary folder until it stops", "folder", dir, "reason", err)
			dir = ""
		}
	}
	if dir != "" {
		release, err := lockFolder(dir)
		switch {
		case errors.Is(err, errFolderBusy):
			log.Warn("another process uses the clone folder; this one keeps its clones in a temporary folder until it stops", "folder", dir)
		case err != nil:
			return nil, fmt.Errorf("lock clone folder %s: %w", dir, err)
		default:
			c.release = release
		}
	}
	if c.release == nil {
		tmp, err := os.MkdirTemp("", "argocd-image-updater-git-")
		if err != nil {
			return nil, fmt.Errorf("create clone folder: %w", err)
		}
		c.root, c.private, c.release = tmp, true, func() error { return nil }
	}
	c.sweep()
	c.evict()
	return c, nil
}

// close lets go of the folder, and removes it when it was temporary.
func (c *cloneCache) close() error {
	if c.release == nil {
		return nil
	}
	err := c.release()
	c.release = nil
	if c.private {
		err = errors.Join(err, os.RemoveAll(c.root))
	}
	return err
}

// sweep removes what a process that stopped in the middle of a clone left
// behind, and records the finished clones with their size and last use.
// Entries that are not clones are left alone: the folder may be shared
// with other files.
func (c *cloneCache) sweep() {
	entries, err := os.ReadDir(c.root)
	if err != nil {
		c.log.Warn("cannot read the clone folder", "folder", c.root, "error", err)
		return
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(c.root, name)
		if base, _, ok := strings.Cut(name, tmpInfix); ok && isCloneName(base) {
			c.remove(path, "unfinished clone")
			continue
		}
		if !isCloneName(name) || !e.IsDir() {
			continue
		}
		marker, err := os.Stat(filepath.Join(path, lastUseFile))
		if err != nil {
			c.remove(path, "clone without its completion mark")
			continue
		}
		// A fetch cut short leaves its pack behind under a temporary name.
		if packs, err := filepath.Glob(filepath.Join(path, "objects", "pack", "tmp_*")); err == nil {
			for _, p := range packs {
				c.remove(p, "pack of an interrupted fetch")
			}
		}
		key := ""
		if repo, err := gitwire.OpenBare(path); err == nil {
			if r, err := repo.Remote(gitwire.RemoteName); err == nil && len(r.Config().URLs) == 1 {
				key = r.Config().URLs[0]
			}
		}
		c.clones[name] = &cachedClone{key: key, size: diskUsage(path), lastUse: marker.ModTime()}
	}
}

func (c *cloneCache) remove(path, what string) {
	if err := os.RemoveAll(path); err != nil {
		c.log.Warn("cannot remove "+what, "path", path, "error", err)
		return
	}
	c.log.Info("removed "+what, "path", path)
}

// lock takes the lock of a clone folder and returns its release.
func (c *cloneCache) lock(name string) func() {
	l := c.cloneLock(name)
	l.Lock()
	return l.Unlock
}

func (c *cloneCache) cloneLock(name string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cloneLockLocked(name)
}

// cloneLockLocked is cloneLock for a caller that holds c.mu.
func (c *cloneCache) cloneLockLocked(name string) *sync.Mutex {
	l, ok := c.locks[name]
	if !ok {
		l = &sync.Mutex{}
		c.locks[name] = l
	}
	return l
}

// open opens the clone of a repository, or starts a new one in a
// temporary folder that the first fetch finishes (gitClone.tip). A
// clone that cannot be opened, or that belongs to another URL, is made
// anew. The caller holds the clone's lock, and hands the clone to done
// when it is through with it.
func (c *cloneCache) open(repoURL string) (*gitClone, error) {
	key := cloneKey(repoURL)
	name := cloneDirName(key)
	dir := filepath.Join(c.root, name)
	if _, err := os.Stat(filepath.Join(dir, lastUseFile)); err == nil {
		repo, err := gitwire.OpenBare(dir)
		if err == nil {
			if r, rerr := repo.Remote(gitwire.RemoteName); rerr == nil && slices.Equal(r.Config().URLs, []string{key}) {
				return c.clone(repoURL, repo, name, dir, ""), nil
			}
		}
	}
	c.mu.Lock()
	delete(c.clones, name)
	c.mu.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("remove unusable clone %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(c.root, name+tmpInfix)
	if err != nil {
		return nil, fmt.Errorf("create clone of %s: %w", repourl.RedactURL(repoURL), err)
	}
	repo, err := gitwire.InitBare(tmp)
	if err == nil {
		_, err = repo.CreateRemote(&config.RemoteConfig{Name: gitwire.RemoteName, URLs: []string{key}})
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("create clone of %s in %s: %w", repourl.RedactURL(repoURL), tmp, err)
	}
	return c.clone(repoURL, repo, name, dir, tmp), nil
}

// clone is the clone of repoURL in dir, or in building until its first
// fetch lands: what one fetch may bring, and the fetches in flight
// together, count against the clones' bound.
func (c *cloneCache) clone(repoURL string, repo *gogit.Repository, name, dir, building string) *gitClone {
	spool := dir
	if building != "" {
		spool = building
	}
	return &gitClone{
		Clone: &gitwire.Clone{URL: repoURL, Repo: repo, MaxFetch: c.maxSize, Disk: c, SpoolDir: spool},
		name:  name, dir: dir, building: building,
	}
}

// done records the use of a clone, or removes it if it never got its
// first fetch, then makes room if the clones outgrew their bound. The
// caller still holds the clone's lock, so the clone just used is never
// the one evicted.
func (c *cloneCache) done(clone *gitClone) {
	if clone.building != "" {
		if err := os.RemoveAll(clone.building); err != nil {
			c.log.Warn("cannot remove unfinished clone", "path", clone.building, "error", err)
		}
		return
	}
	now := time.Now()
	if err := os.Chtimes(filepath.Join(clone.dir, lastUseFile), now, now); err != nil {
		c.log.Warn("cannot record the use of a clone", "path", clone.dir, "error", err)
	}
	size := diskUsage(clone.dir)
	c.mu.Lock()
	c.clones[clone.name] = &cachedClone{key: cloneKey(clone.URL), size: size, lastUse: now}
	c.mu.Unlock()
	c.evict()
}

// Charge counts n more bytes that a fetch in flight holds on disk: the
// clones and every fetch in flight share the one bound, maxSize. Idle
// clones are removed to make room; an error when there is none, and then
// nothing is counted.
func (c *cloneCache) Charge(n int64) error {
	if c.maxSize <= 0 {
		return nil
	}
	c.mu.Lock()
	c.inFlight += n
	c.mu.Unlock()
	if c.evict() <= c.maxSize {
		return nil
	}
	c.Uncharge(n)
	return fmt.Errorf("the clones and the fetches in flight would take more than the %s the clones' folder may hold",
		resource.NewQuantity(c.maxSize, resource.BinarySI))
}

// Uncharge gives back what Charge counted.
func (c *cloneCache) Uncharge(n int64) {
	c.mu.Lock()
	c.inFlight -= n
	c.mu.Unlock()
}

// evict removes the least recently used clones not in use until the
// clones and the fetches in flight fit maxSize, or only clones in use are
// left, and returns the space they take then.
func (c *cloneCache) evict() int64 {
	if c.maxSize <= 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	total := c.inFlight
	names := make([]string, 0, len(c.clones))
	for name, cl := range c.clones {
		total += cl.size
		names = append(names, name)
	}
	if total <= c.maxSize {
		return total
	}
	slices.SortFunc(names, func(a, b string) int { return c.clones[a].lastUse.Compare(c.clones[b].lastUse) })
	for _, name := range names {
		if total <= c.maxSize {
			return total
		}
		l := c.cloneLockLocked(name)
		if !l.TryLock() {
			continue
		}
		cl := c.clones[name]
		err := os.RemoveAll(filepath.Join(c.root, name))
		l.Unlock()
		if err != nil {
			c.log.Warn("cannot remove clone to make room", "repository", repourl.RedactURL(cl.key), "error", err)
			continue
		}
		delete(c.clones, name)
		total -= cl.size
		c.log.Info("removed the least recently used clone: the clones outgrew their bound", "repository", repourl.RedactURL(cl.key),
			"size", cl.size, "last_use", cl.lastUse, "bound", c.maxSize)
	}
	c.log.Warn("the clones in use and the fetches in flight outgrow their bound", "size", total, "bound", c.maxSize)
	return total
}

// diskUsage is the disk space the files under dir take.
func diskUsage(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			total += fileDiskSize(info)
		}
		return nil
	})
	return total
}

// errFolderBusy: another process holds the clone folder.
var errFolderBusy = errors.New("clone folder in use by another process")
