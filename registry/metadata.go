package registry

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/platform"
	"github.com/image-updater/argocd-image-updater/registry/credentials"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Limits on what is read from a registry: the OCI distribution spec lets
// registries refuse manifests over 4 MiB, and image configs are far
// smaller than the cap here.
const (
	maxManifestSize = 4 << 20
	maxConfigSize   = 16 << 20
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

// acceptedManifests are the manifest types we can read: OCI and Docker
// v2, single images and indexes.
var acceptedManifests = strings.Join([]string{
	string(types.OCIImageIndex),
	string(types.DockerManifestList),
	string(types.OCIManifestSchema1),
	string(types.DockerManifestSchema2),
}, ",")

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

// Metadata returns the metadata of the tag or digest of ref (the digest
// when both are set) for the given platforms, in order of preference; none
// means any. Only one HEAD request is made when the digest's metadata is
// cached (digests never change), none when ref has a digest. Otherwise the
// manifest, for an index the manifest of the first image that matches, and
// that image's config are fetched. Concurrent calls for the same digest
// share those requests.
//
// When the image offers none of the platforms, the error wraps
// ErrNoMatchingPlatform and the metadata is returned as well.
func (c *Client) Metadata(ctx context.Context, ref imageref.Reference, creds credentials.Ref, platforms []v1.Platform) (ImageMetadata, error) {
	const op = "get metadata"
	t, err := c.target(ref, creds)
	if err != nil {
		return ImageMetadata{}, t.wrap(op, err)
	}
	if ref.Tag() == "" && ref.Digest() == "" {
		return ImageMetadata{}, t.wrap(op, errNoTagOrDigest)
	}
	var e metaEntry
	err = c.run(ctx, t, func(ctx context.Context, s *session) error {
		var err error
		e, err = c.metadata(ctx, t.ref, s, platforms)
		return err
	})
	if err != nil {
		return ImageMetadata{}, t.wrap(op, err)
	}
	if !e.matched {
		return e.md, t.wrap(op, fmt.Errorf("%w (wanted %s; it has %s)", ErrNoMatchingPlatform, platform.Join(platforms), platform.Join(e.md.Platforms)))
	}
	return e.md, nil
}

func (c *Client) metadata(ctx context.Context, ref imageref.Reference, s *session, platforms []v1.Platform) (metaEntry, error) {
	digest := ref.Digest()
	var manifest []byte
	var mediaType string
	if digest == "" {
		d, err := headManifest(ctx, s, ref.Tag())
		switch {
		case errors.Is(err, errNoDigestHeader):
			// Some registries leave the digest out of HEAD answers; GET
			// tells it too, and its manifest is then used below.
			manifest, mediaType, digest, err = getManifest(ctx, s, ref.Tag(), "")
			if err != nil {
				return metaEntry{}, err
			}
		case err != nil:
			return metaEntry{}, err
		default:
			digest = d
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
		e, err := fetchMetadata(ctx, s, digest, manifest, mediaType, platforms)
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

// fetchMetadata reads what the manifest with digest says, fetching it
// unless it is given.
func fetchMetadata(ctx context.Context, s *session, digest string, manifest []byte, mediaType string, platforms []v1.Platform) (metaEntry, error) {
	if manifest == nil {
		var err error
		if manifest, mediaType, _, err = getManifest(ctx, s, digest, digest); err != nil {
			return metaEntry{}, err
		}
	}
	mt := manifestType(mediaType, manifest)
	md := ImageMetadata{Digest: digest, MediaType: string(mt)}
	switch mt {
	case types.OCIImageIndex, types.DockerManifestList:
		idx, err := v1.ParseIndexManifest(bytes.NewReader(manifest))
		if err != nil {
			return metaEntry{}, fmt.Errorf("parsing index %s: %w", digest, err)
		}
		children := imageChildren(idx.Manifests)
		for _, d := range children {
			if d.Platform != nil {
				md.Platforms = append(md.Platforms, *d.Platform)
			}
		}
		md.Created = annotationTime(idx.Annotations)
		child, ok := pickChild(children, platforms)
		if !ok {
			return metaEntry{md: md, matched: len(platforms) == 0}, nil
		}
		body, childType, _, err := getManifest(ctx, s, child.Digest.String(), child.Digest.String())
		if err != nil {
			return metaEntry{}, err
		}
		img, err := imageDetails(ctx, s, child.Digest.String(), body, manifestType(childType, body))
		if err != nil {
			return metaEntry{}, err
		}
		md.Created = later(md.Created, img.created)
		md.Labels = img.labels
		return metaEntry{md: md, matched: true}, nil

	case types.OCIManifestSchema1, types.DockerManifestSchema2:
		img, err := imageDetails(ctx, s, digest, manifest, mt)
		if err != nil {
			return metaEntry{}, err
		}
		md.Created, md.Labels = img.created, img.labels
		matched := true
		if img.platform != nil {
			md.Platforms = []v1.Platform{*img.platform}
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

// imageDetails reads an image manifest and its config. The config is only
// fetched when it is an image config: an artifact's (a Helm chart, a
// signature) has no created time or platform to offer.
func imageDetails(ctx context.Context, s *session, digest string, manifest []byte, mt types.MediaType) (imageInfo, error) {
	if mt != types.OCIManifestSchema1 && mt != types.DockerManifestSchema2 {
		return imageInfo{}, fmt.Errorf("manifest %s has the unsupported media type %q", digest, mt)
	}
	m, err := v1.ParseManifest(bytes.NewReader(manifest))
	if err != nil {
		return imageInfo{}, fmt.Errorf("parsing manifest %s: %w", digest, err)
	}
	info := imageInfo{created: annotationTime(m.Annotations)}
	switch m.Config.MediaType {
	case types.OCIConfigJSON, types.DockerConfigJSON, "":
	default:
		return info, nil
	}
	raw, err := getBlob(ctx, s, m.Config)
	if err != nil {
		return imageInfo{}, err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return imageInfo{}, fmt.Errorf("parsing image config %s: %w", m.Config.Digest, err)
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

var errNoDigestHeader = errors.New("the registry sent no Docker-Content-Digest")

func headManifest(ctx context.Context, s *session, tag string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, s.base+"/v2/"+s.repo.RepositoryStr()+"/manifests/"+tag, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", acceptedManifests)
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if err := ggcr.CheckError(resp, http.StatusOK); err != nil {
		return "", err
	}
	h, err := v1.NewHash(resp.Header.Get("Docker-Content-Digest"))
	if err != nil {
		return "", errNoDigestHeader
	}
	return h.String(), nil
}

// getManifest fetches a manifest by tag or digest. With want set, the
// content must hash to it.
func getManifest(ctx context.Context, s *session, identifier, want string) (body []byte, mediaType, digest string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v2/"+s.repo.RepositoryStr()+"/manifests/"+identifier, nil)
	if err != nil {
		return nil, "", "", err
	}
	req.Header.Set("Accept", acceptedManifests)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, "", "", err
	}
	defer resp.Body.Close()
	if err := ggcr.CheckError(resp, http.StatusOK); err != nil {
		return nil, "", "", err
	}
	body, err = readLimited(resp.Body, maxManifestSize)
	if err != nil {
		return nil, "", "", fmt.Errorf("reading manifest %s: %w", identifier, err)
	}
	algo := "sha256"
	if want != "" {
		h, err := v1.NewHash(want)
		if err != nil {
			return nil, "", "", err
		}
		algo = h.Algorithm
	}
	digest, err = hashOf(algo, body)
	if err != nil {
		return nil, "", "", err
	}
	if want != "" && digest != want {
		return nil, "", "", fmt.Errorf("manifest %s: the registry sent content with digest %s", want, digest)
	}
	return body, resp.Header.Get("Content-Type"), digest, nil
}

func getBlob(ctx context.Context, s *session, d v1.Descriptor) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v2/"+s.repo.RepositoryStr()+"/blobs/"+d.Digest.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := ggcr.CheckError(resp, http.StatusOK); err != nil {
		return nil, err
	}
	limit := int64(maxConfigSize)
	if d.Size > 0 {
		limit = min(limit, d.Size)
	}
	body, err := readLimited(resp.Body, limit)
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", d.Digest, err)
	}
	got, err := hashOf(d.Digest.Algorithm, body)
	if err != nil {
		return nil, err
	}
	if got != d.Digest.String() {
		return nil, fmt.Errorf("blob %s: the registry sent content with digest %s", d.Digest, got)
	}
	return body, nil
}

func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

func hashOf(algo string, b []byte) (string, error) {
	h, err := v1.Hasher(algo)
	if err != nil {
		return "", err
	}
	h.Write(b)
	return algo + ":" + hex.EncodeToString(h.Sum(nil)), nil
}
