package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// ErrNotFound is wrapped by the error of Manifest and Blob when the
// registry has no such manifest, tag or blob.
var ErrNotFound = errors.New("not found in the registry")

// Manifest is a manifest as the registry sent it.
type Manifest struct {
	Digest    string
	MediaType string
	Body      []byte
}

// Manifest reads the manifest that ref's digest, else its tag, names, as
// the registry sends it: for artifacts such as signatures, whose layers are
// not images. It is not cached (a tag moves); its size is bounded like any
// manifest's (4 MiB).
func (c *Client) Manifest(ctx context.Context, ref imageref.Reference, creds credref.Ref) (Manifest, error) {
	const op = "get manifest"
	t, err := c.target(ref, creds)
	if err != nil {
		return Manifest{}, t.wrap(op, err)
	}
	var m Manifest
	err = c.run(ctx, t, func(ctx context.Context, s *session) error {
		var r name.Reference
		switch {
		case ref.Digest() != "":
			r = s.repo.Digest(ref.Digest())
		case ref.Tag() != "":
			r = s.repo.Tag(ref.Tag())
		default:
			return errNoTagOrDigest
		}
		desc, err := s.puller.Get(ctx, r)
		if err != nil {
			return notFound(err)
		}
		m = Manifest{Digest: desc.Digest.String(), MediaType: string(desc.MediaType), Body: desc.Manifest}
		return nil
	})
	if err != nil {
		return Manifest{}, t.wrap(op, err)
	}
	return m, nil
}

// Referrers reads the index of the manifests that name digest, of the
// repository of ref, as their subject (OCI distribution 1.1): from the
// registry's Referrers API, else, from a registry without it, the index
// tagged sha256-<hex> (the referrers tag schema); a registry with neither
// gives an empty index. Its Digest is the SHA-256 of the index as read, so
// that a caller can tell whether it changed. It is not cached; its size is
// bounded like a manifest's (4 MiB).
func (c *Client) Referrers(ctx context.Context, ref imageref.Reference, creds credref.Ref, digest string) (Manifest, error) {
	const op = "get referrers"
	repo := ref.WithoutVersion()
	t, err := c.target(repo, creds)
	if err != nil {
		return Manifest{}, t.wrap(op, err)
	}
	var m Manifest
	err = c.run(ctx, t, func(ctx context.Context, s *session) error {
		// The session's Puller sends through its authenticated transport;
		// go-containerregistry follows the tag schema by itself when the
		// API answers 404 or with something other than an index.
		idx, err := remote.Referrers(s.repo.Digest(digest), remote.Reuse(s.puller), remote.WithContext(ctx))
		if err != nil {
			return err
		}
		body, err := idx.RawManifest()
		if err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		m = Manifest{Digest: d.String(), MediaType: string(types.OCIImageIndex), Body: body}
		return nil
	})
	if err != nil {
		e := t.wrap(op, err).(*Error)
		e.Digest = digest
		return Manifest{}, e
	}
	return m, nil
}

// Blob reads the blob with digest from the repository of ref, at most
// maxBytes of it: a larger blob fails with an error that wraps
// ErrTooLarge, before more than maxBytes+1 bytes are read. What is read is
// checked against the digest. Blobs are not cached.
func (c *Client) Blob(ctx context.Context, ref imageref.Reference, creds credref.Ref, digest string, maxBytes int64) ([]byte, error) {
	const op = "get blob"
	repo := ref.WithoutVersion()
	t, err := c.target(repo, creds)
	if err != nil {
		return nil, t.wrap(op, err)
	}
	var body []byte
	err = c.run(ctx, t, func(ctx context.Context, s *session) error {
		layer, err := s.puller.Layer(ctx, s.repo.Digest(digest))
		if err != nil {
			return notFound(err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			return notFound(err)
		}
		defer rc.Close()
		// Read to the end when within bounds, so that the library's
		// reader checks the digest.
		body, err = bounded.ReadAll(rc, maxBytes, "blob "+digest)
		return err
	})
	if err != nil {
		e := t.wrap(op, err).(*Error)
		e.Digest = digest
		return nil, e
	}
	return body, nil
}

// notFound marks a registry's 404 answer as ErrNotFound, keeping the
// registry's error.
func notFound(err error) error {
	var te *ggcr.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}
