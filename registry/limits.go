package registry

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/image-updater/argocd-image-updater/registry/transport"
)

// Limits on what the client reads from a registry. A registry is
// untrusted input: nothing it sends, or fails to send, may hold the
// controller for ever or exhaust its memory.
const (
	// DefaultRequestTimeout bounds each HTTP request, from sending it to
	// the end of its response body, retries included; WithRequestTimeout
	// changes it.
	DefaultRequestTimeout = 60 * time.Second

	// defaultMaxTags is the most tags a repository's listing may have, over
	// all its pages.
	defaultMaxTags = 100_000
	// defaultMaxTagListBytes is the most bytes a repository's listing may
	// take, over all its pages: about 330 bytes a tag at defaultMaxTags, where
	// a tag has at most 128 characters.
	defaultMaxTagListBytes = 32 << 20
	// defaultMaxTagPages stops a listing whose pages never end even
	// though each is small.
	defaultMaxTagPages = 10_000

	// maxManifestSize bounds a manifest or index: the OCI distribution
	// spec lets registries refuse larger ones.
	maxManifestSize = 4 << 20
	// maxConfigSize bounds an image config, which is far smaller in
	// practice.
	maxConfigSize = 16 << 20
	// maxOtherSize bounds any other answer, such as the API version check
	// (go-containerregistry bounds token and error answers itself).
	maxOtherSize = 1 << 20
)

// ErrTooLarge is wrapped by the error of an answer larger than the client
// reads: a tag list over its limits of tags, bytes or pages, a manifest
// or referrers index over 4 MiB, an image config over 16 MiB.
var ErrTooLarge = transport.ErrBodyTooLarge

// limitError is a limit the client itself checks, such as a number of
// tags.
type limitError string

func (e limitError) Error() string        { return string(e) }
func (e limitError) Is(target error) bool { return target == ErrTooLarge }

// tagListingKey carries the tagListing of one listing in the context of
// its page requests.
type tagListingKey struct{}

// tagListing is what the page requests of one listing share: the byte
// budget, and the count of tags read so far. go-containerregistry decodes
// a whole page before the client can count its tags, and the bytes alone
// do not bound them: 32 MiB of one-character tags decode to eight million
// strings, some 400 MiB. So each page is followed as it streams in, just
// far enough to count the strings of its "tags" array (tagScanner), and
// stopped past the limit.
type tagListing struct {
	budget  *transport.Budget
	maxTags int64
	tags    atomic.Int64
}

// tagScanner follows one tag-list page, a JSON object, byte by byte: it
// tracks strings (with their escapes) and nesting, remembers the member
// whose value comes next, and counts the strings directly inside the
// array of the top-level "tags" member. Anything else in the page, such
// as the per-digest data some registries add, is passed over.
type tagScanner struct {
	l                 *tagListing
	depth             int
	inString, escaped bool
	str               []byte // the string being read at depth 1, its first bytes
	last, member      string // the last string at depth 1; the member being read
	inTags            bool
}

func (sc *tagScanner) scan(chunk []byte) error {
	for _, c := range chunk {
		if sc.inString {
			switch {
			case sc.escaped:
				sc.escaped = false
			case c == '\\':
				sc.escaped = true
			case c == '"':
				sc.inString = false
				if sc.depth == 1 {
					sc.last = string(sc.str)
				}
			case sc.depth == 1 && len(sc.str) < len("tags")+1:
				sc.str = append(sc.str, c)
			}
			continue
		}
		switch c {
		case '"':
			sc.inString, sc.str = true, sc.str[:0]
			if sc.inTags && sc.depth == 2 && sc.l.tags.Add(1) > sc.l.maxTags {
				return tooManyTags(sc.l.maxTags)
			}
		case ':':
			if sc.depth == 1 {
				sc.member = sc.last
			}
		case '{', '[':
			sc.depth++
			if c == '[' && sc.depth == 2 && sc.member == "tags" {
				sc.inTags = true
			}
		case '}', ']':
			if sc.depth == 2 {
				sc.inTags = false
			}
			sc.depth--
		}
	}
	return nil
}

func tooManyTags(n int64) error {
	return limitError(fmt.Sprintf("the repository has more than %d tags, the most the client reads", n))
}

// bodyLimit says how much of an answer to req is read, by the kind of
// request: the registry API's paths end in /tags/list,
// /manifests/<reference> or /blobs/<digest>.
func (c *Client) bodyLimit(req *http.Request) transport.Limit {
	p := req.URL.Path
	if strings.HasSuffix(p, "/tags/list") {
		lim := transport.Limit{What: "tag list", Bytes: c.maxTagBytes}
		if l, ok := req.Context().Value(tagListingKey{}).(*tagListing); ok {
			lim.Budget, lim.Scan = l.budget, (&tagScanner{l: l}).scan
		}
		return lim
	}
	switch path.Base(path.Dir(p)) {
	case "manifests":
		return transport.Limit{What: "manifest", Bytes: maxManifestSize}
	case "referrers":
		// An index of descriptors, as a manifest list is.
		return transport.Limit{What: "referrers index", Bytes: maxManifestSize}
	case "blobs":
		return transport.Limit{What: "image config", Bytes: maxConfigSize}
	}
	return transport.Limit{Bytes: maxOtherSize}
}

// withTagListing gives the page requests made with the returned context
// one listing's limits.
func (c *Client) withTagListing(ctx context.Context) context.Context {
	return context.WithValue(ctx, tagListingKey{}, &tagListing{
		budget:  transport.NewBudget(c.maxTagBytes),
		maxTags: int64(c.maxTags),
	})
}
