package registry

import (
	"context"
	"fmt"
	"slices"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// tagsPageSize is the n of a tag-list request: the most ECR accepts, and a
// size every registry we know pages at or honours.
const tagsPageSize = 1000

// Tags lists every tag of the repository of ref (its tag or digest are
// ignored), following the registry's pages to the end. creds is the
// image's own credential reference; the zero value means the registry's
// (see Client).
//
// Concurrent calls for the same repository with the same credential
// reference share one listing; calls with different references never do.
// Results are not kept beyond that: each call after the shared one
// finished lists again; the listing's hash is kept, and tells Metadata
// whether the digests it learnt of the repository's tags still hold. The
// returned slice is the caller's own.
func (c *Client) Tags(ctx context.Context, ref imageref.Reference, creds credref.Ref) ([]string, error) {
	t, err := c.target(ref.WithoutVersion(), creds)
	if err != nil {
		return nil, t.wrap("list tags", err)
	}
	note := func(shared bool) { c.metrics.cache(cacheTagsInflight, shared) }
	tags, err := c.tagCalls.Do(ctx, t.key(), note, func(ctx context.Context) ([]string, error) {
		var tags []string
		err := c.run(ctx, t, func(ctx context.Context, s *session) error {
			var err error
			tags, err = c.listTags(ctx, s)
			return err
		})
		if err == nil {
			c.known.listed(repoName(t.ref), t.src.identity(), tags)
		}
		return tags, err
	})
	if err != nil {
		return nil, t.wrap("list tags", err)
	}
	return slices.Clone(tags), nil
}

// listTags reads the repository's tag list page by page, with
// go-containerregistry's Lister, within the client's limits: the pages
// share one byte budget and one count of tags, which the transport's body
// limit checks as the pages stream in, before the library decodes them;
// pages are counted here. The library refuses a next-page link to another
// host or scheme.
func (c *Client) listTags(ctx context.Context, s *session) ([]string, error) {
	ctx = c.withTagListing(ctx)
	lister, err := s.puller.Lister(ctx, s.repo)
	if err != nil {
		return nil, err
	}
	all := []string{}
	seen := make(map[string]bool)
	for pages := 1; lister.HasNext(); pages++ {
		page, err := lister.Next(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Tags...)
		switch {
		case len(all) > c.maxTags:
			return nil, tooManyTags(int64(c.maxTags))
		case page.Next == "":
		case pages >= c.maxTagPages:
			return nil, limitError(fmt.Sprintf("the tag list has more than %d pages, the most the client reads", c.maxTagPages))
		case seen[page.Next]:
			return nil, fmt.Errorf("the tag list does not end: page %d links back to an earlier page", pages)
		default:
			seen[page.Next] = true
		}
	}
	return all, nil
}
