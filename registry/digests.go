package registry

import (
	"crypto/sha256"
	"sync"

	"k8s.io/utils/lru"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// knownReposSize bounds the repositories whose tag digests the client
// remembers.
const knownReposSize = 8192

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
	repos *lru.Cache // repoName → map[string]*repoDigests, by credential identity
}

func newTagKnowledge() *tagKnowledge { return &tagKnowledge{repos: lru.New(knownReposSize)} }

// repoDigests is the digests of one repository's tags learnt since its
// listing had the hash listing.
type repoDigests struct {
	listing [sha256.Size]byte
	mu      sync.Mutex
	digests map[string]string // tag → digest
}

func (r *repoDigests) get(tag string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.digests[tag]
	return d, ok
}

func (r *repoDigests) set(tag, digest string) {
	r.mu.Lock()
	r.digests[tag] = digest
	r.mu.Unlock()
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
	var byIdentity map[string]*repoDigests
	if v, ok := k.repos.Get(repo); ok {
		byIdentity = v.(map[string]*repoDigests)
	} else {
		byIdentity = map[string]*repoDigests{}
		k.repos.Add(repo, byIdentity)
	}
	if r, ok := byIdentity[identity]; ok && r.listing == sum {
		return
	}
	byIdentity[identity] = &repoDigests{listing: sum, digests: map[string]string{}}
}

// of returns what is known of repo as seen with identity, nil before its
// first listing (or after it was forgotten). Digests learnt are set on the
// returned value: if the repository was listed anew in between, they go
// to a value no longer in use.
func (k *tagKnowledge) of(repo, identity string) *repoDigests {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.repos.Get(repo)
	if !ok {
		return nil
	}
	return v.(map[string]*repoDigests)[identity]
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
