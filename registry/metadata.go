package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/url"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/platform"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// createdAnnotation is the OCI annotation (and, by convention, label) for
// the time an image was built.
const createdAnnotation = "org.opencontainers.image.created"

// ErrNoMatchingPlatform is wrapped by Metadata's error when the image has
// no variant for any of the requested platforms. The metadata returned
// with it is still filled in (digest, platforms), so callers can say what
// the image offers.
var ErrNoMatchingPlatform = errors.New("the image is not available for the requested platforms")

var errNoTagOrDigest = errors.New("the reference has neither tag nor digest")

// ImageMetadata describes what a tag or digest points to.
type ImageMetadata struct {
	// Digest is the digest of the manifest the tag points to: the index
	// digest for a multi-platform tag.
	Digest    string
	MediaType string
	// Created is when the image was built: the later of the image config's
	// created time and the org.opencontainers.image.created annotation (of
	// the index or the image manifest) or label, for the first image that
	// matches the requested platforms. The later one is trusted because each
	// source can only err towards the past: reproducible builds pin the
	// config time to the epoch or the last commit, and an annotation or
	// label may be inherited from a base image; neither is ever set to a
	// time after the build. Zero when no source has a time.
	Created time.Time
	// Platforms are those an index offers (attestations left out), or the
	// platform of a single image's config.
	Platforms []v1.Platform
	// Labels are the image config's labels, of the image Created comes
	// from.
	Labels map[string]string
}

func (m ImageMetadata) clone() ImageMetadata {
	m.Platforms = slices.Clone(m.Platforms)
	m.Labels = maps.Clone(m.Labels)
	return m
}

// metaEntry is a cached answer. An image without the requested platform
// is a property of its content, so it is cached too; failed requests are
// not.
type metaEntry struct {
	md      ImageMetadata
	matched bool
}

type metaKey struct {
	host, repo, digest, platforms string
}

func (k metaKey) String() string {
	return k.host + "\x00" + k.repo + "\x00" + k.digest + "\x00" + k.platforms
}

// MetadataOption changes how Metadata learns a tag's digest.
type MetadataOption func(*metadataOptions)

type metadataOptions struct {
	followTag bool
}

// FollowTag makes Metadata ask the registry for the tag's digest even when
// it knows it, for callers that follow where a tag points (the digest
// strategy): a tag pushed again to a new image does not change the
// repository's listing.
func FollowTag() MetadataOption {
	return func(o *metadataOptions) { o.followTag = true }
}

// Metadata returns the metadata of the tag or digest of ref (the digest
// when both are set) for the given platforms, in order of preference; none
// means any. A tag's digest is asked with a HEAD request, unless the
// client learnt it since the repository's listing last changed (see
// tagKnowledge; FollowTag and `mutabletags` always ask); none when ref
// has a digest. The digest's metadata is cached (digests never change);
// otherwise the manifest, for an index the manifest of the first image
// that matches, and that image's config are fetched. Concurrent calls for
// the same digest share those requests.
//
// When the image offers none of the platforms, the error wraps
// ErrNoMatchingPlatform and the metadata is returned as well.
func (c *Client) Metadata(ctx context.Context, ref imageref.Reference, creds credref.Ref, platforms []v1.Platform, opts ...MetadataOption) (ImageMetadata, error) {
	const op = "get metadata"
	t, err := c.target(ref, creds)
	if err != nil {
		return ImageMetadata{}, t.wrap(op, err)
	}
	if ref.Tag() == "" && ref.Digest() == "" {
		return ImageMetadata{}, t.wrap(op, errNoTagOrDigest)
	}
	var o metadataOptions
	for _, opt := range opts {
		opt(&o)
	}
	var known *repoDigests
	if ref.Digest() == "" && !t.mutable {
		known = c.known.of(repoName(t.ref), t.src.identity())
	}
	if known != nil && !o.followTag {
		if d, ok := known.get(ref.Tag()); ok {
			c.metrics.cache(cacheTagDigest, true)
			if ref, err = ref.WithDigest(d); err != nil {
				return ImageMetadata{}, t.wrap(op, err)
			}
		} else {
			c.metrics.cache(cacheTagDigest, false)
		}
	}
	var e metaEntry
	err = c.run(ctx, t, func(ctx context.Context, s *session) error {
		var err error
		e, err = c.metadata(ctx, ref, s, platforms)
		return err
	})
	if err != nil {
		return ImageMetadata{}, t.wrap(op, err)
	}
	if known != nil && ref.Digest() == "" {
		known.set(ref.Tag(), e.md.Digest)
	}
	if !e.matched {
		return e.md, t.wrap(op, fmt.Errorf("%w (wanted %s; it has %s)", ErrNoMatchingPlatform, platform.Join(platforms), platform.Join(e.md.Platforms)))
	}
	return e.md, nil
}

func (c *Client) metadata(ctx context.Context, ref imageref.Reference, s *session, platforms []v1.Platform) (metaEntry, error) {
	digest := ref.Digest()
	var desc *remote.Descriptor // the manifest, when it had to be fetched to learn the digest
	if digest == "" {
		tag := s.repo.Tag(ref.Tag())
		d, err := s.puller.Head(ctx, tag)
		switch {
		case err == nil:
			digest = d.Digest.String()
		case incompleteHead(ctx, err):
			// Some registries leave the digest (or the type or length)
			// out of HEAD answers; GET tells it too, and its manifest is
			// then used below.
			if desc, err = s.puller.Get(ctx, tag); err != nil {
				return metaEntry{}, err
			}
			digest = desc.Digest.String()
		default:
			return metaEntry{}, err
		}
	}

	key := metaKey{host: s.host, repo: s.repo.RepositoryStr(), digest: digest, platforms: platform.Join(platforms)}
	if v, ok := c.meta.Get(key); ok {
		c.metrics.cache(cacheMetadata, true)
		e := v.(metaEntry)
		e.md = e.md.clone()
		return e, nil
	}
	c.metrics.cache(cacheMetadata, false)
	note := func(shared bool) { c.metrics.cache(cacheMetadataInflight, shared) }
	e, err := c.metaCalls.Do(ctx, key.String(), note, func(ctx context.Context) (metaEntry, error) {
		e, err := fetchMetadata(ctx, s, digest, desc, platforms)
		if err == nil {
			c.meta.Add(key, e)
		}
		return e, err
	})
	if err != nil {
		return metaEntry{}, err
	}
	e.md = e.md.clone()
	return e, nil
}

// incompleteHead tells a HEAD answered 200 without the headers
// remote.Head needs (its error is then neither a registry error status
// nor a failed request) from other failures, after which a GET would be
// refused or fail just the same.
func incompleteHead(ctx context.Context, err error) bool {
	var te *ggcr.Error
	var ue *url.Error
	return ctx.Err() == nil && !errors.As(err, &te) && !errors.As(err, &ue)
}

// fetchMetadata reads what the manifest with digest says, fetching it
// unless desc holds it already.
func fetchMetadata(ctx context.Context, s *session, digest string, desc *remote.Descriptor, platforms []v1.Platform) (metaEntry, error) {
	if desc == nil {
		var err error
		if desc, err = s.puller.Get(ctx, s.repo.Digest(digest)); err != nil {
			return metaEntry{}, err
		}
	}
	// The library tells images from indexes by this type, which old
	// registries get wrong.
	mt := manifestType(string(desc.MediaType), desc.Manifest)
	desc.MediaType = mt
	md := ImageMetadata{Digest: digest, MediaType: string(mt)}
	switch mt {
	case types.OCIImageIndex, types.DockerManifestList:
		idx, err := desc.ImageIndex()
		if err != nil {
			return metaEntry{}, err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return metaEntry{}, fmt.Errorf("parsing index %s: %w", digest, err)
		}
		children := imageChildren(im.Manifests)
		for _, d := range children {
			if d.Platform != nil {
				md.Platforms = append(md.Platforms, *d.Platform)
			}
		}
		md.Created = annotationTime(im.Annotations)
		child, ok := pickChild(children, platforms)
		if !ok {
			return metaEntry{md: md, matched: len(platforms) == 0}, nil
		}
		img, err := idx.Image(child.Digest)
		if err != nil {
			return metaEntry{}, err
		}
		info, err := imageDetails(img, child.Digest.String())
		if err != nil {
			return metaEntry{}, err
		}
		md.Created = later(md.Created, info.created)
		md.Labels = info.labels
		return metaEntry{md: md, matched: true}, nil

	case types.OCIManifestSchema1, types.DockerManifestSchema2:
		img, err := desc.Image()
		if err != nil {
			return metaEntry{}, err
		}
		info, err := imageDetails(img, digest)
		if err != nil {
			return metaEntry{}, err
		}
		md.Created, md.Labels = info.created, info.labels
		matched := true
		if info.platform != nil {
			md.Platforms = []v1.Platform{*info.platform}
			matched = platform.Any(platforms, md.Platforms)
		}
		return metaEntry{md: md, matched: matched}, nil
	}
	return metaEntry{}, fmt.Errorf("manifest %s has the unsupported media type %q", digest, mt)
}

type imageInfo struct {
	created  time.Time
	labels   map[string]string
	platform *v1.Platform
}

// imageDetails reads an image's manifest and config. The config is only
// fetched when it is an image config: an artifact's (a Helm chart, a
// signature) has no created time or platform to offer.
func imageDetails(img v1.Image, digest string) (imageInfo, error) {
	m, err := img.Manifest()
	if err != nil {
		return imageInfo{}, fmt.Errorf("parsing manifest %s: %w", digest, err)
	}
	info := imageInfo{created: annotationTime(m.Annotations)}
	switch m.Config.MediaType {
	case types.OCIConfigJSON, types.DockerConfigJSON, "":
	default:
		return info, nil
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return imageInfo{}, fmt.Errorf("reading image config %s: %w", m.Config.Digest, err)
	}
	info.created = later(info.created, cfg.Created.Time, annotationTime(cfg.Config.Labels))
	info.labels = cfg.Config.Labels
	info.platform = cfg.Platform()
	return info, nil
}

// imageChildren keeps the images of an index, without attestations and
// other artifacts that are listed as "unknown/unknown".
func imageChildren(all []v1.Descriptor) []v1.Descriptor {
	out := make([]v1.Descriptor, 0, len(all))
	for _, d := range all {
		if d.MediaType != types.OCIManifestSchema1 && d.MediaType != types.DockerManifestSchema2 {
			continue
		}
		if d.Platform != nil && (d.Platform.OS == "unknown" || d.Platform.Architecture == "unknown") {
			continue
		}
		if d.Annotations["vnd.docker.reference.type"] != "" {
			continue
		}
		out = append(out, d)
	}
	return out
}

// pickChild returns the first image for the first wanted platform that
// has one, so the caller's order is a preference; with no platforms, the
// first image.
func pickChild(children []v1.Descriptor, platforms []v1.Platform) (v1.Descriptor, bool) {
	if len(platforms) == 0 {
		if len(children) == 0 {
			return v1.Descriptor{}, false
		}
		return children[0], true
	}
	for _, want := range platforms {
		for _, d := range children {
			if d.Platform != nil && platform.Matches(want, *d.Platform) {
				return d, true
			}
		}
	}
	return v1.Descriptor{}, false
}

func annotationTime(m map[string]string) time.Time {
	v, ok := m[createdAnnotation]
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
	if err != nil {
		return time.Time{}
	}
	return t
}

func later(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// manifestType is the Content-Type without parameters, else the manifest's
// own mediaType, else a guess from its shape (old registries answer
// application/json).
func manifestType(contentType string, body []byte) types.MediaType {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		switch types.MediaType(mt) {
		case types.OCIImageIndex, types.DockerManifestList, types.OCIManifestSchema1, types.DockerManifestSchema2:
			return types.MediaType(mt)
		}
	}
	var probe struct {
		MediaType types.MediaType `json:"mediaType"`
		Manifests json.RawMessage `json:"manifests"`
		Config    json.RawMessage `json:"config"`
	}
	if json.Unmarshal(body, &probe) != nil {
		return types.MediaType(contentType)
	}
	switch {
	case probe.MediaType != "":
		return probe.MediaType
	case probe.Manifests != nil:
		return types.OCIImageIndex
	case probe.Config != nil:
		return types.OCIManifestSchema1
	}
	return types.MediaType(contentType)
}
