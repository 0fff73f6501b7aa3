package registry

import (
	"context"
	"net/http"
	"path"
	"strings"
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
// over 4 MiB, an image config over 16 MiB.
var ErrTooLarge = transport.ErrBodyTooLarge

// limitError is a limit the client itself checks, such as a number of
// tags.
type limitError string

func (e limitError) Error() string        { return string(e) }
func (e limitError) Is(target error) bool { return target == ErrTooLarge }

// tagBudgetKey carries the byte budget of one tag listing in the context
// of its page requests.
type tagBudgetKey struct{}

// bodyLimit says how much of an answer to req is read, by the kind of
// request: the registry API's paths end in /tags/list,
// /manifests/<reference> or /blobs/<digest>.
func (c *Client) bodyLimit(req *http.Request) transport.Limit {
	p := req.URL.Path
	if strings.HasSuffix(p, "/tags/list") {
		lim := transport.Limit{What: "tag list", Bytes: c.maxTagBytes}
		if b, ok := req.Context().Value(tagBudgetKey{}).(*transport.Budget); ok {
			lim.Budget = b
		}
		return lim
	}
	switch path.Base(path.Dir(p)) {
	case "manifests":
		return transport.Limit{What: "manifest", Bytes: maxManifestSize}
	case "blobs":
		return transport.Limit{What: "image config", Bytes: maxConfigSize}
	}
	return transport.Limit{Bytes: maxOtherSize}
}

// withTagBudget gives the page requests made with the returned context a
// shared budget of the client's most bytes of a tag list.
func (c *Client) withTagBudget(ctx context.Context) context.Context {
	return context.WithValue(ctx, tagBudgetKey{}, transport.NewBudget(c.maxTagBytes))
}
