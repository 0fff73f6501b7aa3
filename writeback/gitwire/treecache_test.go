package gitwire

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// The trees the cache writes are those go-git writes, byte for byte.
func TestTreeCachePutMatchesGoGit(t *testing.T) {
	h := func(s string) plumbing.Hash { return plumbing.ComputeHash(plumbing.BlobObject, []byte(s)) }
	for _, tc := range []struct {
		name    string
		entries []object.TreeEntry
	}{
		{"empty", nil},
		{"files and folders", []object.TreeEntry{
			{Name: "README.md", Mode: filemode.Regular, Hash: h("a")},
			{Name: "a.d", Mode: filemode.Regular, Hash: h("b")},
			{Name: "a", Mode: filemode.Dir, Hash: h("c")},
			{Name: "run.sh", Mode: filemode.Executable, Hash: h("d")},
			{Name: "link", Mode: filemode.Symlink, Hash: h("e")},
			{Name: "sub", Mode: filemode.Submodule, Hash: h("f")},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memory.NewStorage()
			entries := append([]object.TreeEntry(nil), tc.entries...)
			sortTreeEntries(entries)
			obj := s.NewEncodedObject()
			if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
				t.Fatal(err)
			}
			got, err := NewChainTrees(s).Put(append([]object.TreeEntry(nil), entries...), plumbing.ZeroHash)
			if err != nil {
				t.Fatal(err)
			}
			if got != obj.Hash() {
				t.Errorf("tree %s, go-git writes %s", got, obj.Hash())
			}
		})
	}
	if _, err := NewChainTrees(memory.NewStorage()).Put([]object.TreeEntry{{Name: "a\x00b", Mode: filemode.Regular}}, plumbing.ZeroHash); err == nil {
		t.Error("a name with a NUL byte was written")
	}
}

func sortTreeEntries(e []object.TreeEntry) {
	for i := 1; i < len(e); i++ {
		for j := i; j > 0 && object.TreeEntrySorter(e).Less(j, j-1); j-- {
			e[j], e[j-1] = e[j-1], e[j]
		}
	}
}
