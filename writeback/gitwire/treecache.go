package gitwire

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// TreeCache decodes each tree object of a repository once, for a batch of
// commits: without it, every Application of a batch decoded again the
// trees along its path (a folder of 500 overlays is decoded, and its entry
// index built, 500 times), which made a batch's memory grow with the square
// of its size. Trees it stores itself are kept as built, and the tree one
// replaces is dropped (with drop), so that a chain of commits keeps only
// the trees of its latest one.
type TreeCache struct {
	store storer.EncodedObjectStorer
	trees map[plumbing.Hash]*object.Tree
	drop  bool
}

// NewTreeCache keeps every tree read; NewChainTrees keeps only the latest
// version of the trees that a chain of commits rewrites.
func NewTreeCache(s storer.EncodedObjectStorer) *TreeCache {
	return &TreeCache{store: s, trees: map[plumbing.Hash]*object.Tree{}}
}

func NewChainTrees(s storer.EncodedObjectStorer) *TreeCache {
	return &TreeCache{store: s, trees: map[plumbing.Hash]*object.Tree{}, drop: true}
}

// Get returns the decoded tree h. The caller must not change it.
func (c *TreeCache) Get(h plumbing.Hash) (*object.Tree, error) {
	if t, ok := c.trees[h]; ok {
		return t, nil
	}
	t, err := object.GetTree(c.store, h)
	if err != nil {
		return nil, err
	}
	c.trees[h] = t
	return t, nil
}

// Entries returns the entries of tree h for the caller to change: in a
// chain, the tree's own, since the tree is about to be replaced; a copy
// otherwise.
func (c *TreeCache) Entries(h plumbing.Hash) ([]object.TreeEntry, error) {
	t, err := c.Get(h)
	if err != nil {
		return nil, err
	}
	if c.drop {
		delete(c.trees, h)
		return t.Entries, nil
	}
	return append([]object.TreeEntry(nil), t.Entries...), nil
}

// Put stores a tree of entries, sorted, in place of the tree replaced
// (zero for a new folder), and returns its hash.
func (c *TreeCache) Put(entries []object.TreeEntry, replaced plumbing.Hash) (plumbing.Hash, error) {
	// Encoded here rather than by object.Tree.Encode, which formats each
	// entry and checks the order again (allocating for every comparison):
	// the entries are sorted, and a tree of hundreds of them is written in
	// one piece. Git's format: "<octal mode> <name>\x00<20-byte hash>".
	size := 0
	for _, e := range entries {
		if strings.IndexByte(e.Name, 0) >= 0 {
			return plumbing.ZeroHash, fmt.Errorf("malformed file name %q", e.Name)
		}
		size += 8 + len(e.Name) + 1 + len(e.Hash)
	}
	buf := make([]byte, 0, size)
	for _, e := range entries {
		buf = strconv.AppendUint(buf, uint64(e.Mode), 8)
		buf = append(buf, ' ')
		buf = append(buf, e.Name...)
		buf = append(buf, 0)
		buf = append(buf, e.Hash[:]...)
	}
	obj := c.store.NewEncodedObject()
	obj.SetType(plumbing.TreeObject)
	obj.SetSize(int64(len(buf)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(buf); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := c.store.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if c.drop && replaced != h {
		// Another folder with the same content may still hold it: it is
		// then decoded again, which costs time, not correctness.
		delete(c.trees, replaced)
	}
	c.trees[h] = &object.Tree{Entries: entries}
	return h, nil
}
