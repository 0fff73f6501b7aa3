package gitwire

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/memory"
)

// A pack written object by object reads back, through go-git's own
// parser, as the objects it was written from.
func TestWritePack(t *testing.T) {
	from := memory.NewStorage()
	var hashes []plumbing.Hash
	for _, o := range []struct {
		t    plumbing.ObjectType
		data string
	}{
		{plumbing.BlobObject, ""},
		{plumbing.BlobObject, "images:\n- name: app\n  newTag: 1.2.3\n"},
		{plumbing.BlobObject, strings.Repeat("a large file ", 20000)},
		{plumbing.TreeObject, "100644 kustomization.yaml\x00" + strings.Repeat("\x01", 20)},
		{plumbing.CommitObject, "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\nupdate\n"},
	} {
		obj := from.NewEncodedObject()
		obj.SetType(o.t)
		w, _ := obj.Writer()
		io.WriteString(w, o.data)
		w.Close()
		h, err := from.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	var pack bytes.Buffer
	if err := writePack(&pack, from, hashes); err != nil {
		t.Fatal(err)
	}
	to := memory.NewStorage()
	if err := packfile.UpdateObjectStorage(to, &pack); err != nil {
		t.Fatalf("the pack does not read: %v", err)
	}
	for _, h := range hashes {
		want, _ := from.EncodedObject(plumbing.AnyObject, h)
		got, err := to.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			t.Fatalf("object %s missing from the pack: %v", h, err)
		}
		if got.Type() != want.Type() || got.Size() != want.Size() {
			t.Errorf("object %s: %s of %d bytes, want %s of %d", h, got.Type(), got.Size(), want.Type(), want.Size())
		}
	}
	if err := writePack(io.Discard, from, []plumbing.Hash{plumbing.NewHash("0123456789012345678901234567890123456789")}); err == nil {
		t.Error("a missing object packed")
	}
}
