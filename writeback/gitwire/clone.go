// Package gitwire is git on the wire and in the object store, for the git
// write-back: a bare local clone of one repository (Clone) that lists a
// remote's branches, fetches a branch tip into a bounded pack, commits
// files on top of it without a checkout, and pushes just the objects it
// made, through upload-pack and receive-pack sessions that the caller
// opens (gitauth.Remote).
package gitwire

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
)

// RemoteName is the remote a clone fetches from: its remote-tracking
// branches are what it has.
const RemoteName = "origin"

// DefaultNetworkTimeout bounds one list, fetch or push unless the clone's
// NetworkTimeout says otherwise, so that a server that stops answering
// cannot stall the update cycle.
const DefaultNetworkTimeout = 5 * time.Minute

// Remote opens sessions with a repository's server, with the client,
// credentials and bounds on its answers that gitauth gives it.
type Remote interface {
	UploadPack(ctx context.Context, repoURL string) (transport.UploadPackSession, *packp.AdvRefs, error)
	ReceivePack(ctx context.Context, repoURL string) (transport.ReceivePackSession, *packp.AdvRefs, error)
	// Describe says where the credentials came from, never what they are.
	Describe() string
}

// Signer signs a commit (gitsign's OpenPGP and SSH signers).
type Signer interface {
	Sign(message io.Reader) ([]byte, error)
}

// Budget is disk space that fetches in flight share with what is already
// stored (the clones' folder): Charge counts n more bytes, or refuses them
// and counts nothing; Uncharge gives them back.
type Budget interface {
	Charge(n int64) error
	Uncharge(n int64)
}

// Clone is the local clone of one repository, kept between cycles so
// that a cycle only fetches what changed. It is bare: write-backs read
// and write git objects directly and never check files out, so the cost
// of a cycle does not grow with the size of the repository's tree, and no
// half-written working tree can survive a crash. It is shallow where the
// server allows: its history starts at the first tip it fetched.
type Clone struct {
	// URL is the repository's, as its sessions open it.
	URL  string
	Repo *gogit.Repository
	// FullHistory fetches whole histories instead of branch tips.
	FullHistory bool
	// MaxFetch bounds what one fetch may bring, packed and unpacked;
	// <= 0: no bound.
	MaxFetch int64
	// Disk is the bound that every fetch in flight shares, counted while
	// a fetch bounded by MaxFetch spools its pack; nil: none.
	Disk Budget
	// SpoolDir is where a bounded fetch spools its pack ("": the
	// system's temporary folder).
	SpoolDir string
	// NetworkTimeout bounds one list, fetch or push, the server's answer
	// included; <= 0: DefaultNetworkTimeout.
	NetworkTimeout time.Duration
	// maxObject bounds one object of a fetch; <= 0: maxFetchedObject.
	// Tests lower it.
	maxObject int64
	// charged is what this clone's fetch in flight counts against Disk.
	charged int64
}

func (c *Clone) networkTimeout() time.Duration {
	if c.NetworkTimeout > 0 {
		return c.NetworkTimeout
	}
	return DefaultNetworkTimeout
}

// Branches is what the remote advertises: its branches and the one HEAD
// names (its default branch).
type Branches struct {
	Heads   map[string]plumbing.Hash
	Default string
}

// List asks the remote for its branches (one round trip, like git
// ls-remote).
func (c *Clone) List(ctx context.Context, acc Remote) (Branches, error) {
	ctx, cancel := context.WithTimeout(ctx, c.networkTimeout())
	defer cancel()
	var rb Branches
	err := c.uploadPack(ctx, acc, func(_ transport.UploadPackSession, _ *packp.AdvRefs, refs storer.ReferenceStorer) error {
		rb = Branches{Heads: map[string]plumbing.Hash{}}
		iter, err := refs.IterReferences()
		if err != nil {
			return err
		}
		return iter.ForEach(func(r *plumbing.Reference) error {
			switch {
			case r.Name() == plumbing.HEAD && r.Type() == plumbing.SymbolicReference && r.Target().IsBranch():
				rb.Default = r.Target().Short()
			case r.Name().IsBranch() && r.Type() == plumbing.HashReference:
				rb.Heads[r.Name().Short()] = r.Hash()
			}
			return nil
		})
	})
	if err != nil {
		return Branches{}, c.remoteError("list branches of", acc, err)
	}
	return rb, nil
}

// uploadPack opens a fetch session and hands the advertised references to
// use. Sessions are opened through acc rather than go-git's Remote so
// that they use acc's client, with its TLS settings, and the bounds on
// what the server answers.
func (c *Clone) uploadPack(ctx context.Context, acc Remote, use func(transport.UploadPackSession, *packp.AdvRefs, storer.ReferenceStorer) error) (err error) {
	sess, adv, err := acc.UploadPack(ctx, c.URL)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	refs, err := adv.AllReferences()
	if err != nil {
		return err
	}
	return use(sess, adv, refs)
}

// Tip makes sure the clone holds a branch's commit, fetching the branch
// when it does not, and returns the commit: the listed one, or a newer
// one when the branch moved since it was listed.
func (c *Clone) Tip(ctx context.Context, acc Remote, branch string, listed plumbing.Hash) (plumbing.Hash, error) {
	if _, err := object.GetCommit(c.Repo.Storer, listed); err == nil {
		return listed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.networkTimeout())
	defer cancel()
	var head plumbing.Hash
	err := c.uploadPack(ctx, acc, func(sess transport.UploadPackSession, adv *packp.AdvRefs, refs storer.ReferenceStorer) error {
		ref, err := refs.Reference(plumbing.NewBranchReferenceName(branch))
		if err != nil {
			return fmt.Errorf("no branch %s: %w", branch, err)
		}
		head = ref.Hash()
		if _, err := object.GetCommit(c.Repo.Storer, head); err == nil {
			return nil
		}
		return c.fetchPack(ctx, sess, adv, head)
	})
	if err != nil {
		return plumbing.ZeroHash, c.remoteError("fetch branch "+branch+" of", acc, err)
	}
	tracking := plumbing.NewHashReference(plumbing.NewRemoteReferenceName(RemoteName, branch), head)
	if err := c.Repo.Storer.SetReference(tracking); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetch branch %s of %s: %w", branch, repourl.RedactURL(c.URL), err)
	}
	return head, nil
}

// fetchPack asks for the objects of want that the clone lacks and stores
// them. The branches the clone tracks are what it has; the server leaves
// out every object reachable from them, down to the clone's shallow
// commits, which are sent along so that the server does not count history
// the clone never fetched.
//
// A clone's first fetch, with nothing to build on, asks for want alone
// (depth 1) unless FullHistory is set: editing a file needs the tip's
// tree, a commit names its parent by hash, and a push sends only the new
// objects. Later fetches ask for everything since the tracked tips, not
// for depth 1 again: the server cannot leave out the files a shallow
// commit shares with the clone's tips, and would send the whole tree each
// time.
func (c *Clone) fetchPack(ctx context.Context, sess transport.UploadPackSession, adv *packp.AdvRefs, want plumbing.Hash) (err error) {
	req := packp.NewUploadPackRequestFromCapabilities(adv.Capabilities)
	if adv.Capabilities.Supports(capability.NoProgress) {
		if err := req.Capabilities.Set(capability.NoProgress); err != nil {
			return err
		}
	}
	req.Wants = []plumbing.Hash{want}
	tips, err := c.trackedTips()
	if err != nil {
		return err
	}
	shallow, err := c.Repo.Storer.Shallow()
	if err != nil {
		return err
	}
	switch {
	case adv.Capabilities.Supports(capability.Shallow):
		if err := req.Capabilities.Set(capability.Shallow); err != nil {
			return err
		}
		req.Shallows = shallow
		req.Haves = tips
		if len(tips) == 0 && !c.FullHistory {
			req.Depth = packp.DepthCommits(1)
		}
	case len(shallow) == 0:
		req.Haves = tips
	default:
		// A shallow clone whose server cannot be told where its history
		// stops claims nothing, and gets the whole history of want.
	}
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := resp.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var pack io.Reader = resp
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		pack = sideband.NewDemuxer(sideband.Sideband64k, resp)
	case req.Capabilities.Supports(capability.Sideband):
		pack = sideband.NewDemuxer(sideband.Sideband, resp)
	}
	if c.MaxFetch > 0 {
		// What the fetch holds on disk counts against the shared bound
		// until the caller records the clone's size after it.
		defer func() {
			if c.Disk != nil {
				c.Disk.Uncharge(c.charged)
			}
			c.charged = 0
		}()
		spooled, err := c.boundedPack(pack)
		if err != nil {
			return err
		}
		defer func() { _ = spooled.Close(); _ = os.Remove(spooled.Name()) }()
		pack = spooled
	}
	if err := packfile.UpdateObjectStorage(c.Repo.Storer, pack); err != nil {
		return err
	}
	if req.Depth.IsZero() {
		return nil
	}
	// The commits whose parents the server left out are recorded before
	// anything tracks them, so that every later fetch declares them.
	shallow = slices.Concat(shallow, resp.Shallows)
	shallow = slices.DeleteFunc(shallow, func(h plumbing.Hash) bool { return slices.Contains(resp.Unshallows, h) })
	slices.SortFunc(shallow, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	return c.Repo.Storer.SetShallow(slices.Compact(shallow))
}

// chargedWriter spools a fetched pack, counting each byte twice against
// the shared bound: the spooled pack, and the copy the store will make of
// it before the spool is removed.
type chargedWriter struct {
	w       io.Writer
	disk    Budget
	charged *int64
}

func (w *chargedWriter) Write(p []byte) (int, error) {
	if w.disk != nil {
		if err := w.disk.Charge(2 * int64(len(p))); err != nil {
			return 0, fmt.Errorf("%w: %w", ErrFetchTooLarge, err)
		}
		*w.charged += 2 * int64(len(p))
	}
	return w.w.Write(p)
}

// maxFetchedObject bounds one object of a fetch, whatever the clones'
// bound: go-git holds an object whole while it stores it.
const maxFetchedObject = 256 << 20

// headWriter keeps the first max bytes written to it.
type headWriter struct {
	buf []byte
	max int
}

func (w *headWriter) Write(p []byte) (int, error) {
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// ErrFetchTooLarge is wrapped by the error of a fetch refused by the
// clone's bounds (MaxFetch, Disk).
var ErrFetchTooLarge = errors.New("the fetch is larger than the clones may be")

// boundedPack spools a fetched pack to a file, refusing it as soon as it
// outgrows MaxFetch, then reads its object headers and refuses it when
// its objects, unpacked, would: go-git holds an object whole while it
// stores it, so a large blob anywhere in the branch would otherwise cost
// its size in memory and on disk before the clone's size is ever checked.
// A delta counts the size of the object it makes, as its header says.
// The file is left at its start.
func (c *Clone) boundedPack(pack io.Reader) (_ *os.File, err error) {
	f, err := os.CreateTemp(c.SpoolDir, "fetch-*.pack")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	n, err := io.Copy(&chargedWriter{w: f, disk: c.Disk, charged: &c.charged}, io.LimitReader(pack, c.MaxFetch+1))
	if err != nil {
		return nil, err
	}
	if n > c.MaxFetch {
		return nil, fmt.Errorf("%w: over %d bytes packed", ErrFetchTooLarge, c.MaxFetch)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	sc := packfile.NewScanner(f)
	_, count, err := sc.Header()
	if err != nil {
		return nil, err
	}
	maxObject := min(c.MaxFetch, maxFetchedObject)
	if c.maxObject > 0 {
		maxObject = min(c.MaxFetch, c.maxObject)
	}
	var total int64
	for range count {
		h, err := sc.NextObjectHeader()
		if err != nil {
			return nil, err
		}
		size := h.Length
		if h.Type == plumbing.OFSDeltaObject || h.Type == plumbing.REFDeltaObject {
			// What a delta makes is the second size at its start; the
			// rest of it is read past, not kept.
			start := &headWriter{max: 2 * binary.MaxVarintLen64}
			if _, _, err := sc.NextObject(start); err != nil {
				return nil, err
			}
			if size, err = deltaTargetSize(start.buf); err != nil {
				return nil, err
			}
		}
		if size > maxObject {
			return nil, fmt.Errorf("%w: an object of %d bytes, more than the %d one fetch may hold", ErrFetchTooLarge, size, maxObject)
		}
		if total += size; total > c.MaxFetch {
			return nil, fmt.Errorf("%w: its objects take over %d bytes unpacked", ErrFetchTooLarge, c.MaxFetch)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return f, nil
}

// deltaTargetSize reads the size of the object a git delta makes: the
// second of the two variable-length sizes that start it.
func deltaTargetSize(d []byte) (int64, error) {
	var sizes [2]int64
	for i := range sizes {
		var shift uint
		for {
			if len(d) == 0 || shift > 56 {
				return 0, errors.New("malformed delta in the fetched pack")
			}
			b := d[0]
			d = d[1:]
			sizes[i] |= int64(b&0x7f) << shift
			shift += 7
			if b&0x80 == 0 {
				break
			}
		}
	}
	return sizes[1], nil
}

// trackedTips are the commits the clone's remote-tracking branches hold:
// what the clone has, with everything they reach down to its shallow
// commits.
func (c *Clone) trackedTips() ([]plumbing.Hash, error) {
	refs, err := c.Repo.Storer.IterReferences()
	if err != nil {
		return nil, err
	}
	var tips []plumbing.Hash
	err = refs.ForEach(func(r *plumbing.Reference) error {
		if r.Type() != plumbing.HashReference || !r.Name().IsRemote() {
			return nil
		}
		if _, err := object.GetCommit(c.Repo.Storer, r.Hash()); err == nil && !slices.Contains(tips, r.Hash()) {
			tips = append(tips, r.Hash())
		}
		return nil
	})
	return tips, err
}

// ErrBranchMoved is wrapped by a push error when the branch no longer
// held the commit the push built on: someone else pushed first.
var ErrBranchMoved = errors.New("the branch moved since it was read")

// Push sends head to a branch without force, with the objects this clone
// created for the commits since expected (the branch's tip they build on,
// zero for a new branch). Sending just those objects keeps a push as cheap
// in a large repository as in a small one; go-git's own push would first
// walk the whole history behind every remote branch. When the branch no
// longer holds expected, nothing is sent and the error wraps
// ErrBranchMoved. The server applies the update only if the branch still
// holds expected when it gets there, so a race in between fails too.
func (c *Clone) Push(ctx context.Context, acc Remote, head plumbing.Hash, objects []plumbing.Hash, branch string, expected plumbing.Hash) (err error) {
	ctx, cancel := context.WithTimeout(ctx, c.networkTimeout())
	defer cancel()
	fail := func(err error) error { return c.remoteError("push branch "+branch+" to", acc, err) }
	sess, adv, err := acc.ReceivePack(ctx, c.URL)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil && err == nil {
			err = fail(cerr)
		}
	}()
	refs, err := adv.AllReferences()
	if err != nil {
		return fail(err)
	}
	dst := plumbing.NewBranchReferenceName(branch)
	var current plumbing.Hash
	if ref, err := refs.Reference(dst); err == nil {
		current = ref.Hash()
	}
	if current != expected {
		return fail(fmt.Errorf("%w: it is at %s, the changes were made on %s", ErrBranchMoved, shortHash(current), shortHash(expected)))
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(adv.Capabilities)
	req.Commands = []*packp.Command{{Name: dst, Old: expected, New: head}}
	// The pack streams to the session as it is written; closing the
	// reader when the session is done ends a writer it did not drain.
	pack, packWriter := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		err := safe.Call(func() error { return writePack(packWriter, c.Repo.Storer, objects) })
		packWriter.CloseWithError(err)
		packed <- err
	}()
	req.Packfile = pack
	report, err := sess.ReceivePack(ctx, req)
	pack.Close()
	if packErr := <-packed; packErr != nil && !errors.Is(packErr, io.ErrClosedPipe) {
		return fmt.Errorf("pack the commits for %s: %w", branch, packErr)
	}
	if err != nil {
		return fail(err)
	}
	if report != nil {
		if err := report.Error(); err != nil {
			return fail(err)
		}
	}
	tracking := plumbing.NewHashReference(plumbing.NewRemoteReferenceName(RemoteName, branch), head)
	if err := c.Repo.Storer.SetReference(tracking); err != nil {
		return fmt.Errorf("record pushed branch %s: %w", branch, err)
	}
	return nil
}

func shortHash(h plumbing.Hash) string {
	if h.IsZero() {
		return "nothing (no such branch)"
	}
	return h.String()[:12]
}

// remoteError names the operation, the repository and where credentials
// came from (never the credentials themselves).
func (c *Clone) remoteError(op string, acc Remote, err error) error {
	hint := ""
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		hint = " (check the username and password or token)"
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		hint = " (the repository has no commits yet)"
	case errors.As(err, new(x509.UnknownAuthorityError)):
		hint = " (add the server's certificate, or its CA, to Argo CD's " + repoaccess.TLSCertsConfigMap + " under the server's host name)"
	}
	return fmt.Errorf("%s %s (%s): %w%s", op, repourl.RedactURL(c.URL), acc.Describe(), err, hint)
}

// Commit stores a commit of parent's tree with files (by slash-separated
// path from the root) replaced, adding the objects it stores to created.
// It returns the zero hash when the files already hold that content.
//
// trees holds the trees decoded for earlier commits of the same chain
// (NewChainTrees); nil means none.
func (c *Clone) Commit(parent plumbing.Hash, files map[string][]byte, msg string, sig object.Signature, signer Signer, created *[]plumbing.Hash, trees *TreeCache) (plumbing.Hash, error) {
	s := c.Repo.Storer
	if trees == nil {
		trees = NewChainTrees(s)
	}
	pc, err := object.GetCommit(s, parent)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", parent, err)
	}
	tree := pc.TreeHash
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		blob, err := storeBlob(s, files[p])
		if err != nil {
			return plumbing.ZeroHash, err
		}
		*created = append(*created, blob)
		if tree, err = putTreeFile(trees, tree, SplitPath(p), blob, created); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%s: %w", p, err)
		}
	}
	if tree == pc.TreeHash {
		return plumbing.ZeroHash, nil
	}
	commit := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: tree, ParentHashes: []plumbing.Hash{parent}}
	if signer != nil {
		unsigned := &plumbing.MemoryObject{}
		if err := commit.EncodeWithoutSignature(unsigned); err != nil {
			return plumbing.ZeroHash, err
		}
		r, err := unsigned.Reader()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		signature, err := signer.Sign(r)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		commit.PGPSignature = string(signature)
	}
	obj := s.NewEncodedObject()
	if err := commit.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	*created = append(*created, h)
	return h, nil
}

func storeBlob(s storer.EncodedObjectStorer, content []byte) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(content)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(content); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

// putTreeFile returns the hash of a tree with the file at parts set to
// blob, storing the trees along the path and adding them to created. An
// executable file stays executable; a new file is a regular one.
func putTreeFile(trees *TreeCache, tree plumbing.Hash, parts []string, blob plumbing.Hash, created *[]plumbing.Hash) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !tree.IsZero() {
		var err error
		if entries, err = trees.Entries(tree); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	idx := slices.IndexFunc(entries, func(e object.TreeEntry) bool { return e.Name == parts[0] })
	entry := object.TreeEntry{Name: parts[0]}
	if len(parts) == 1 {
		entry.Mode, entry.Hash = filemode.Regular, blob
		if idx >= 0 {
			switch m := entries[idx].Mode; m {
			case filemode.Executable, filemode.Deprecated:
				entry.Mode = m
			case filemode.Regular:
			default:
				return plumbing.ZeroHash, fmt.Errorf("%s is not a regular file", parts[0])
			}
		}
	} else {
		sub := plumbing.ZeroHash
		if idx >= 0 {
			if entries[idx].Mode != filemode.Dir {
				return plumbing.ZeroHash, fmt.Errorf("%s is not a folder", parts[0])
			}
			sub = entries[idx].Hash
		}
		h, err := putTreeFile(trees, sub, parts[1:], blob, created)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entry.Mode, entry.Hash = filemode.Dir, h
	}
	if idx >= 0 {
		// Same name, and a folder stays a folder: the order holds.
		entries[idx] = entry
	} else {
		entries = append(entries, entry)
		sort.Sort(object.TreeEntrySorter(entries))
	}
	h, err := trees.Put(entries, tree)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	*created = append(*created, h)
	return h, nil
}

// SplitPath splits a clean, slash-separated path from the repository root
// into its elements; the root itself ("" or ".") has none.
func SplitPath(p string) []string {
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// objectCacheSize bounds the decoded objects an open clone keeps, delta
// bases included. go-git's default, 96 MiB, held about 10 MiB of objects
// read once each in a write of 500 overlays (the decoded trees have their
// own cache, TreeCache); recent delta bases are what the cache is for.
const objectCacheSize = 4 * cache.MiByte

// OpenBare opens the bare repository in dir with a bounded object cache.
func OpenBare(dir string) (*gogit.Repository, error) {
	return gogit.Open(bareStorage(dir), nil)
}

// InitBare creates a bare repository in dir, like OpenBare.
func InitBare(dir string) (*gogit.Repository, error) {
	return gogit.Init(bareStorage(dir), nil)
}

func bareStorage(dir string) *filesystem.Storage {
	return filesystem.NewStorage(osfs.New(dir, osfs.WithBoundOS()), cache.NewObjectLRU(objectCacheSize))
}
