package gitwire

import (
	"context"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Tags asks the remote for its tags (one round trip, like git ls-remote
// --tags): their names without refs/tags/, sorted. It needs no local
// clone: a Clone with its URL alone lists them.
func (c *Clone) Tags(ctx context.Context, acc Remote) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.networkTimeout())
	defer cancel()
	var tags []string
	err := c.uploadPack(ctx, acc, func(_ transport.UploadPackSession, _ *packp.AdvRefs, refs storer.ReferenceStorer) error {
		iter, err := refs.IterReferences()
		if err != nil {
			return err
		}
		return iter.ForEach(func(r *plumbing.Reference) error {
			if r.Name().IsTag() && r.Type() == plumbing.HashReference {
				tags = append(tags, r.Name().Short())
			}
			return nil
		})
	})
	if err != nil {
		return nil, c.remoteError("list tags of", acc, err)
	}
	sort.Strings(tags)
	return tags, nil
}
