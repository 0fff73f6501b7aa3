package gitwire

import (
	"bufio"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/hash"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// writePack writes a pack (version 2) of the objects, each whole, reading
// them one at a time. go-git's packfile.Encoder reads every object of the
// pack before writing the first, so a push of a large batch held all its
// blobs and trees at once (10 MB of a 56 MB heap when 500 Applications of
// one repository changed, in the scale benchmark); our pushes use no
// deltas (the encoder's window was 0), so writing the objects as they are
// read gives the same pack.
func writePack(w io.Writer, objects storer.EncodedObjectStorer, hashes []plumbing.Hash) error {
	sum := hash.New(hash.CryptoType)
	out := bufio.NewWriter(io.MultiWriter(w, sum))
	header := []byte("PACK\x00\x00\x00\x02")
	header = binary.BigEndian.AppendUint32(header, uint32(len(hashes)))
	if _, err := out.Write(header); err != nil {
		return err
	}
	z := zlib.NewWriter(out)
	for _, h := range hashes {
		obj, err := objects.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return fmt.Errorf("read object %s: %w", h, err)
		}
		if _, err := out.Write(entryHeader(obj.Type(), obj.Size())); err != nil {
			return err
		}
		r, err := obj.Reader()
		if err != nil {
			return fmt.Errorf("read object %s: %w", h, err)
		}
		z.Reset(out)
		_, err = io.Copy(z, r)
		r.Close()
		if err == nil {
			err = z.Close()
		}
		if err != nil {
			return fmt.Errorf("pack object %s: %w", h, err)
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	_, err := w.Write(sum.Sum(nil))
	return err
}

// entryHeader is an object's type and size as a pack entry starts: the
// type in bits 4-6 of the first byte, the size in its low 4 bits and then
// 7 bits a byte, each byte but the last with its high bit set.
func entryHeader(t plumbing.ObjectType, size int64) []byte {
	b := byte(t)<<4 | byte(size&0x0f)
	size >>= 4
	var out []byte
	for size != 0 {
		out = append(out, b|0x80)
		b = byte(size & 0x7f)
		size >>= 7
	}
	return append(out, b)
}
