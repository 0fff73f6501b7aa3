package git

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// maxTargetFileSize bounds the files a write-back reads; manifests and
// values files are far smaller.
const maxTargetFileSize = 8 << 20

// maxSymlinkHops bounds symlink chains, as the kernel's ELOOP does.
const maxSymlinkHops = 40

// repoTree is the repository content one write-back reads: the tree of
// the commit it builds on, plus the files that earlier Applications of the
// same push changed (so two Applications editing one file compose).
type repoTree struct {
	store   storer.EncodedObjectStorer
	root    *object.Tree
	changed map[string][]byte
	trees   *gitwire.TreeCache // the folders read, each decoded once
}

func newRepoTree(store storer.EncodedObjectStorer, root *object.Tree) *repoTree {
	return &repoTree{store: store, root: root, changed: map[string][]byte{}, trees: gitwire.NewTreeCache(store)}
}

// treeFile is what a path names in a repoTree.
type treeFile struct {
	path   string // the path with symlinks resolved
	exists bool
	isDir  bool
	hash   plumbing.Hash
}

// stat resolves a clean, slash-separated path from the repository root,
// which must be inside g, following the symbolic links stored in the
// tree; each link is confined to g, and one to an absolute path refused
// (a checkout would read a file not versioned with the repository).
func (t *repoTree) stat(g grant, p string) (treeFile, error) {
	if _, err := g.confine(".", p); err != nil {
		return treeFile{}, err
	}
	parts := gitwire.SplitPath(p)
	hops := 0
restart:
	tree := t.root
	for i := 0; i < len(parts); i++ {
		here := strings.Join(parts[:i+1], "/")
		last := i == len(parts)-1
		var entry *object.TreeEntry
		if tree != nil {
			entry, _ = tree.FindEntry(parts[i])
		}
		if entry == nil {
			// Perhaps written earlier in this batch, in a new folder too.
			full := strings.Join(parts, "/")
			if _, ok := t.changed[full]; ok {
				return treeFile{path: full, exists: true}, nil
			}
			return treeFile{path: full}, nil
		}
		switch entry.Mode {
		case filemode.Symlink:
			hops++
			if hops > maxSymlinkHops {
				return treeFile{}, fmt.Errorf("%s: too many levels of symbolic links", here)
			}
			target, err := t.readBlob(entry.Hash)
			if err != nil {
				return treeFile{}, fmt.Errorf("%s: read symbolic link: %w", here, err)
			}
			link := string(target)
			if path.IsAbs(link) {
				return treeFile{}, &outsideError{fmt.Sprintf("%s is a symbolic link to %s, which leaves the repository", here, link)}
			}
			resolved, err := g.confine(path.Dir(here), link)
			switch {
			case errors.Is(err, errOutsideGrant):
				return treeFile{}, &outsideError{fmt.Sprintf("%s is a symbolic link to %s, which leaves %s", here, link, g.what)}
			case err != nil:
				return treeFile{}, fmt.Errorf("%s is a symbolic link: %w", here, err)
			}
			parts = append(gitwire.SplitPath(resolved), parts[i+1:]...)
			goto restart
		case filemode.Dir:
			sub, err := t.trees.Get(entry.Hash)
			if err != nil {
				return treeFile{}, fmt.Errorf("%s: read folder: %w", here, err)
			}
			if last {
				return treeFile{path: here, exists: true, isDir: true, hash: entry.Hash}, nil
			}
			tree = sub
		case filemode.Submodule:
			return treeFile{}, fmt.Errorf("%s is a submodule; files in other repositories cannot be written", here)
		default:
			if !last {
				return treeFile{}, fmt.Errorf("%s is a file, not a folder", here)
			}
			return treeFile{path: here, exists: true, hash: entry.Hash}, nil
		}
	}
	return treeFile{path: ".", exists: true, isDir: true}, nil
}

// read returns a file's content (nil when it does not exist).
func (t *repoTree) read(g grant, p string) ([]byte, treeFile, error) {
	f, err := t.stat(g, p)
	if err != nil || !f.exists || f.isDir {
		return nil, f, err
	}
	if content, ok := t.changed[f.path]; ok {
		return content, f, nil
	}
	content, err := t.readBlob(f.hash)
	if err != nil {
		return nil, f, fmt.Errorf("%s: %w", f.path, err)
	}
	return content, f, nil
}

func (t *repoTree) readBlob(h plumbing.Hash) ([]byte, error) {
	blob, err := object.GetBlob(t.store, h)
	if err != nil {
		return nil, err
	}
	if blob.Size > maxTargetFileSize {
		return nil, fmt.Errorf("file is %d bytes, larger than the %d bytes a write-back reads", blob.Size, maxTargetFileSize)
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Bounds of the walk of a plain-manifest source: entries looked at (files
// and folders), YAML files read, and their bytes in all.
const (
	maxMarkedEntries = 20000
	maxMarkedFiles   = 2000
	maxMarkedBytes   = 64 << 20
)

// walkYAML calls f with each YAML file under dir, its sub-folders
// included, within the bounds above; f returns false to stop. Symbolic
// links and submodules are not followed; a file another Application of the
// batch changed is read as changed.
func walkYAML(t *repoTree, g grant, dir string, what string, f func(path string, content []byte) (bool, error)) error {
	return walkFiles(t, g, dir, what, func(p string) bool {
		return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")
	}, f)
}

// walkFiles is walkYAML for the files whose path read says to read.
func walkFiles(t *repoTree, g grant, dir string, what string, read func(path string) bool, f func(path string, content []byte) (bool, error)) error {
	d, err := t.stat(g, dir)
	switch {
	case err != nil:
		return err
	case !d.exists || !d.isDir:
		return fmt.Errorf("folder %s does not exist", d.path)
	}
	entries, files, size := 0, 0, 0
	stop := errors.New("stop")
	var walk func(dir string, hash plumbing.Hash) error
	walk = func(dir string, hash plumbing.Hash) error {
		tree := t.root
		if dir != "." {
			var err error
			if tree, err = t.trees.Get(hash); err != nil {
				return fmt.Errorf("%s: read folder: %w", dir, err)
			}
		}
		for _, e := range tree.Entries {
			if entries++; entries > maxMarkedEntries {
				return fmt.Errorf("%s holds more than %d files and folders, the most looked at for %s", d.path, maxMarkedEntries, what)
			}
			p := path.Join(dir, e.Name)
			switch {
			case e.Mode == filemode.Dir:
				if err := walk(p, e.Hash); err != nil {
					return err
				}
				continue
			case !e.Mode.IsFile() || e.Mode == filemode.Symlink:
				continue
			case !read(p):
				continue
			}
			if files++; files > maxMarkedFiles {
				return fmt.Errorf("%s holds more than %d YAML files, the most read for %s", d.path, maxMarkedFiles, what)
			}
			// The entry names the blob: no walk from the root per file,
			// unless another Application of the batch changed the file.
			content, ok := t.changed[p]
			if !ok {
				var err error
				if content, err = t.readBlob(e.Hash); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
			}
			if size += len(content); size > maxMarkedBytes {
				return fmt.Errorf("the YAML files under %s hold more than %d MiB, the most read for %s", d.path, maxMarkedBytes>>20, what)
			}
			more, err := f(p, content)
			if err != nil {
				return err
			}
			if !more {
				return stop
			}
		}
		return nil
	}
	if err := walk(d.path, d.hash); err != nil && err != stop {
		return err
	}
	return nil
}
