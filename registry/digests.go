package registry

import (
	"crypto/sha256"
	"sync"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/budget"
)

// knownBytes bounds in bytes what the client remembers of the digests of
// repositories' tags. The repositories are named by tenants and their
// tags by their registries, and newest-build learns a digest for every
// tag, so a count of repositories bounds nothing: 32 MiB is some 200,000
// tags with their digests, far more than a steady cycle asks about.
const knownBytes = 32 << 20

// tagKnowledge is what the client learnt of the digests of repositories'
// tags, kept for the client's life: a steady cycle then sends no manifest
// HEAD for a tag it asked about before. What it knows of a repository, as
// seen with one credential source, holds while the repository's listing
// stays the same: a new listing that differs (a tag pushed or deleted)
// forgets it. A tag pushed again to a new image leaves the listing as it
// was, so callers that follow a tag's moves ask anyway (FollowTag), as does
// every call for a registry whose entry says `mutabletags`; a push
// notification forgets the repository (Client.ForgetTags).
type tagKnowledge struct {
	mu    sync.Mutex
	repos *budget.LRU[string, *repoKnown] // by repoName
}

func newTagKnowledge(limit int64) *tagKnowledge {
	return &tagKnowledge{repos: budget.NewLRU[string, *repoKnown](limit)}
}

// repoKnown is what is known of one repository, by credential identity.
type repoKnown struct {
	byIdentity map[string]*repoDigests
}

// Bytes is the size of an empty repoKnown; what is added later is counted
// as it is added (tagKnowledge.grow).
func (*repoKnown) Bytes() int64 { return budget.MapHeader }

// repoDigests is the digests of one repository's tags learnt since its
// listing had the hash listing.
type repoDigests struct {
	listing [sha256.Size]byte
	mu      sync.Mutex
	digests map[string]string // tag → digest
	// grow counts bytes added to what the client keeps.
	grow func(n int64)
}

// repoDigestsBytes is the size of an empty repoDigests, its entry in
// byIdentity, and its func.
var repoDigestsBytes = sha256.Size + 8 + budget.MapHeader + 16 + budget.MapEntry(budget.StringHeader, 8) + 32

// digestBytes is what a tag's digest learnt adds.
func digestBytes(tag, digest string) int64 {
	return budget.MapEntry(budget.StringHeader, budget.StringHeader) + budget.Data(len(tag)) + budget.Data(len(digest))
}

func (r *repoDigests) get(tag string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.digests[tag]
	return d, ok
}

func (r *repoDigests) set(tag, digest string) {
	r.mu.Lock()
	_, had := r.digests[tag]
	r.digests[tag] = digest
	r.mu.Unlock()
	if !had {
		r.grow(digestBytes(tag, digest))
	}
}

// repoName is the knowledge's key of a repository, whatever the
// credentials: a push notification names only the repository.
func repoName(ref imageref.Reference) string {
	return ref.Registry() + "/" + ref.Repository()
}

// listingHash is the hash of a listing, tags in the registry's order.
func listingHash(tags []string) [sha256.Size]byte {
	h := sha256.New()
	for _, t := range tags {
		h.Write([]byte(t))
		h.Write([]byte{'\n'}) // a tag has no newline
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// listed records a listing of repo as seen with identity: what was known
// stays if the listing is the one it was learnt under, and is forgotten
// otherwise.
func (k *tagKnowledge) listed(repo, identity string, tags []string) {
	sum := listingHash(tags)
	k.mu.Lock()
	defer k.mu.Unlock()
	known, ok := k.repos.Get(repo)
	if !ok {
		known = &repoKnown{byIdentity: map[string]*repoDigests{}}
		if !k.repos.Put(repo, known) {
			return
		}
	}
	if r, ok := known.byIdentity[identity]; ok && r.listing == sum {
		return
	}
	old := known.byIdentity[identity]
	r := &repoDigests{listing: sum, digests: map[string]string{}}
	r.grow = func(n int64) { k.grow(repo, known, identity, r, n) }
	known.byIdentity[identity] = r
	// What the old listing learnt is no longer kept: it goes back.
	n := repoDigestsBytes + budget.Data(len(identity))
	if old != nil {
		old.mu.Lock()
		for t, d := range old.digests {
			n -= digestBytes(t, d)
		}
		old.mu.Unlock()
		n -= repoDigestsBytes + budget.Data(len(identity))
	}
	k.repos.Grow(repo, n)
}

// grow counts n bytes learnt into r, if r is still what is kept of repo
// and identity: a value replaced or dropped since counts for nothing.
func (k *tagKnowledge) grow(repo string, known *repoKnown, identity string, r *repoDigests, n int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cur, ok := k.repos.Get(repo); ok && cur == known && known.byIdentity[identity] == r {
		k.repos.Grow(repo, n)
	}
}

// of returns what is known of repo as seen with identity, nil before its
// first listing (or after it was forgotten). Digests learnt are set on the
// returned value: if the repository was listed anew in between, they go
// to a value no longer in use.
func (k *tagKnowledge) of(repo, identity string) *repoDigests {
	k.mu.Lock()
	defer k.mu.Unlock()
	known, ok := k.repos.Get(repo)
	if !ok {
		return nil
	}
	return known.byIdentity[identity]
}

// forget drops what is known of repo, for every credential source.
func (k *tagKnowledge) forget(repo string) {
	k.mu.Lock()
	k.repos.Remove(repo)
	k.mu.Unlock()
}

// ForgetTags forgets the digests learnt of the tags of ref's repository
// (with any credentials), so that the next calls ask the registry again: a
// push notification says a tag there may have moved.
func (c *Client) ForgetTags(ref imageref.Reference) {
	c.known.forget(repoName(ref))
}
