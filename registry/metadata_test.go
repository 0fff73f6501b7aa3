package registry

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

var (
	linuxAMD64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	linuxARM64 = v1.Platform{OS: "linux", Architecture: "arm64"}
	linuxARMv7 = v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}
)

func platformStrings(ps []v1.Platform) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func TestMetadataSingleImage(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithoutAuth())
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	labels := map[string]string{"org.opencontainers.image.source": "https://example.com/app"}
	digest := reg.PushImage(t, "app", []string{"1.0"}, testenv.Created(created), testenv.Labels(labels), testenv.OnPlatform(linuxARM64))
	c := NewClient(WithConfig(testConfig(t, reg.Host)))
	ref := imageRef(t, reg.Host+"/app:1.0")

	md, err := c.Metadata(t.Context(), ref, credref.Ref{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if md.Digest != digest.String() {
		t.Errorf("digest %s, want %s", md.Digest, digest)
	}
	if md.MediaType != string(types.DockerManifestSchema2) {
		t.Errorf("media type %s", md.MediaType)
	}
	if !md.Created.Equal(created) {
		t.Errorf("created %s, want %s", md.Created, created)
	}
	if got := platformStrings(md.Platforms); !slices.Equal(got, []string{"linux/arm64"}) {
		t.Errorf("platforms %v", got)
	}
	if md.Labels["org.opencontainers.image.source"] != "https://example.com/app" {
		t.Errorf("labels %v", md.Labels)
	}

	// arm64 without a variant is arm64/v8.
	if _, err := c.Metadata(t.Context(), ref, credref.Ref{}, []v1.Platform{{OS: "linux", Architecture: "arm64", Variant: "v8"}}); err != nil {
		t.Errorf("linux/arm64/v8: %v", err)
	}
	md, err = c.Metadata(t.Context(), ref, credref.Ref{}, []v1.Platform{linuxAMD64})
	if !errors.Is(err, ErrNoMatchingPlatform) {
		t.Fatalf("an arm64 image asked for amd64: want ErrNoMatchingPlatform, got %v", err)
	}
	if md.Digest != digest.String() || !strings.Contains(err.Error(), "linux/arm64") || !strings.Contains(err.Error(), "1.0") {
		t.Errorf("the metadata and the error should say what the image offers: %+v, %v", md, err)
	}

	// By digest: no HEAD needed.
	byDigest, err := ref.WithDigest(digest.String())
	if err != nil {
		t.Fatal(err)
	}
	if md, err := c.Metadata(t.Context(), byDigest, credref.Ref{}, nil); err != nil || !md.Created.Equal(created) {
		t.Errorf("by digest: %+v, %v", md, err)
	}

	_, err = c.Metadata(t.Context(), imageRef(t, reg.Host+"/app:missing"), credref.Ref{}, nil)
	var e *Error
	if !errors.As(err, &e) || e.StatusCode() != http.StatusNotFound || e.Tag != "missing" || !strings.Contains(err.Error(), "app:missing") {
		t.Errorf("unknown tag: want a 404 naming the tag, got %v", err)
	}
	if _, err := c.Metadata(t.Context(), imageRef(t, reg.Host+"/app"), credref.Ref{}, nil); !errors.Is(err, errNoTagOrDigest) {
		t.Errorf("no tag: %v", err)
	}
}

func TestMetadataIndex(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithoutAuth())
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	indexDigest := reg.PushIndex(t, "multi", "2.0", []v1.Platform{linuxAMD64, linuxARM64, linuxARMv7}, testenv.Created(created))
	children := childDigests(t, reg, "multi:2.0")

	rec := newRecorder()
	m := newTestMetrics(t)
	c := NewClient(WithConfig(testConfig(t, reg.Host)), withBaseTransport(rec), WithMetrics(m))
	ref := imageRef(t, reg.Host+"/multi:2.0")

	md, err := c.Metadata(t.Context(), ref, credref.Ref{}, []v1.Platform{linuxARM64})
	if err != nil {
		t.Fatal(err)
	}
	if md.Digest != indexDigest.String() || md.MediaType != string(types.OCIImageIndex) {
		t.Errorf("digest %s (%s), want the index %s", md.Digest, md.MediaType, indexDigest)
	}
	if got := platformStrings(md.Platforms); !slices.Equal(got, []string{"linux/amd64", "linux/arm64", "linux/arm/v7"}) {
		t.Errorf("platforms %v", got)
	}
	if !md.Created.Equal(created) {
		t.Errorf("created %s, want %s", md.Created, created)
	}
	// Only the index and the arm64 image's manifest, and its config.
	if rec.count(http.MethodGet, "/manifests/"+children["linux/arm64"]) != 1 ||
		rec.count(http.MethodGet, "/manifests/"+children["linux/amd64"]) != 0 ||
		rec.count(http.MethodGet, "/manifests/"+children["linux/arm/v7"]) != 0 ||
		rec.count(http.MethodGet, "/manifests/"+indexDigest.String()) != 1 ||
		rec.count(http.MethodGet, "/blobs/") != 1 {
		t.Errorf("requests beyond what arm64 needs (index %s, images %v):\n%s", indexDigest, children, strings.Join(rec.requests(), "\n"))
	}

	// Second call: one HEAD, the rest from the cache.
	rec.reset()
	again, err := c.Metadata(t.Context(), ref, credref.Ref{}, []v1.Platform{linuxARM64})
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.requests(); !slices.Equal(got, []string{"HEAD /v2/multi/manifests/2.0"}) {
		t.Errorf("a cached digest should cost one HEAD, got %v", got)
	}
	if testutil.ToFloat64(m.cacheHits.WithLabelValues(cacheMetadata)) != 1 {
		t.Error("the metadata cache hit was not counted")
	}
	again.Platforms[0].OS = "changed by the caller"
	again.Labels = nil
	if third, _ := c.Metadata(t.Context(), ref, credref.Ref{}, []v1.Platform{linuxARM64}); third.Platforms[0].OS != "linux" {
		t.Error("callers share the cached metadata's slices")
	}

	// Preference order: the first wanted platform the index has wins.
	rec.reset()
	if _, err := c.Metadata(t.Context(), ref, credref.Ref{}, []v1.Platform{{OS: "linux", Architecture: "s390x"}, linuxARMv7, linuxAMD64}); err != nil {
		t.Fatal(err)
	}
	if rec.count(http.MethodGet, "/manifests/"+children["linux/arm/v7"]) != 1 || rec.count(http.MethodGet, "/manifests/"+children["linux/amd64"]) != 0 {
		t.Errorf("want the arm/v7 image:\n%s", strings.Join(rec.requests(), "\n"))
	}

	md, err = c.Metadata(t.Context(), ref, credref.Ref{}, []v1.Platform{{OS: "windows", Architecture: "amd64"}})
	if !errors.Is(err, ErrNoMatchingPlatform) || len(md.Platforms) != 3 || md.Digest != indexDigest.String() {
		t.Errorf("windows: %+v, %v", md, err)
	}
}

// childDigests maps the platforms of an index in the registry to the
// digests of their images.
func childDigests(t *testing.T, reg *testenv.Registry, repoTag string) map[string]string {
	t.Helper()
	tag, err := name.NewTag(reg.Repo(repoTag), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag, remote.WithAuth(reg.Auth()))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range im.Manifests {
		out[d.Platform.String()] = d.Digest.String()
	}
	return out
}

// pushAnnotated pushes an OCI image whose config says configTime and whose
// manifest carries the created annotation annotationTime.
func pushAnnotated(t *testing.T, reg *testenv.Registry, repoTag string, configTime, annotationTime time.Time) {
	t.Helper()
	img := testenv.NewImage(t, testenv.Created(configTime))
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img = mutate.Annotations(img, map[string]string{createdAnnotation: annotationTime.Format(time.RFC3339)}).(v1.Image)
	tag, err := name.NewTag(reg.Repo(repoTag), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithAuth(reg.Auth())); err != nil {
		t.Fatal(err)
	}
}

func TestMetadataCreatedAnnotation(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithoutAuth())
	epoch := time.Unix(0, 0).UTC()
	built := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	// A reproducible build: the config says 1970, the annotation the truth.
	pushAnnotated(t, reg, "app:reproducible", epoch, built)
	// An annotation inherited from a base image is older than the build.
	pushAnnotated(t, reg, "app:inherited", built, built.Add(-30*24*time.Hour))

	c := NewClient(WithConfig(testConfig(t, reg.Host)))
	for tag, want := range map[string]time.Time{"reproducible": built, "inherited": built} {
		md, err := c.Metadata(t.Context(), imageRef(t, reg.Host+"/app:"+tag), credref.Ref{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !md.Created.Equal(want) {
			t.Errorf("%s: created %s, want %s", tag, md.Created, want)
		}
		if md.MediaType != string(types.OCIManifestSchema1) {
			t.Errorf("%s: media type %s", tag, md.MediaType)
		}
	}
}

func TestMetadataConcurrentFetchShared(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithoutAuth())
	digest := reg.PushImage(t, "app", []string{"1.0"})
	rec := newRecorder()
	release := make(chan struct{})
	rec.setHold(func(r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/") {
			<-release
		}
	})
	m := newTestMetrics(t)
	c := NewClient(WithConfig(testConfig(t, reg.Host)), withBaseTransport(rec), WithMetrics(m))
	ref := imageRef(t, reg.Host+"/app:1.0")

	const callers = 10
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			md, err := c.Metadata(t.Context(), ref, credref.Ref{}, nil)
			if err == nil && md.Digest != digest.String() {
				err = errors.New("wrong digest " + md.Digest)
			}
			errs <- err
		}()
	}
	poll.True(t, 10*time.Second, "every caller but the first to join the metadata request in flight", func() bool {
		return testutil.ToFloat64(m.cacheHits.WithLabelValues(cacheMetadataInflight)) == callers-1
	})
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := rec.count(http.MethodGet, "/manifests/"+digest.String()); n != 1 {
		t.Errorf("%d manifest GETs for one digest, want 1", n)
	}
}

// Some registries leave headers out of HEAD answers: the digest is then
// learnt from a GET by tag, whose manifest serves for the metadata too.
func TestMetadataHeadWithoutHeaders(t *testing.T) {
	reg := testenv.StartRegistry(t, testenv.WithoutAuth())
	created := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	digest := reg.PushImage(t, "app", []string{"1.0"}, testenv.Created(created))
	for _, header := range []string{"Docker-Content-Digest", "Content-Type"} {
		t.Run("without "+header, func(t *testing.T) {
			target, err := url.Parse("http://" + reg.Host)
			if err != nil {
				t.Fatal(err)
			}
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.ModifyResponse = func(resp *http.Response) error {
				if resp.Request.Method == http.MethodHead {
					resp.Header.Del(header)
				}
				return nil
			}
			srv := httptest.NewServer(proxy)
			t.Cleanup(srv.Close)
			host := strings.TrimPrefix(srv.URL, "http://")
			rec := newRecorder()
			c := NewClient(WithConfig(testConfig(t, host)), withBaseTransport(rec))

			md, err := c.Metadata(t.Context(), imageRef(t, host+"/app:1.0"), credref.Ref{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if md.Digest != digest.String() || !md.Created.Equal(created) {
				t.Errorf("metadata %+v, want digest %s created %s", md, digest, created)
			}
			want := []string{"GET /v2/", "HEAD /v2/app/manifests/1.0", "GET /v2/app/manifests/1.0", "GET /v2/app/blobs/"}
			got := rec.requests()
			if len(got) != len(want) {
				t.Fatalf("requests %v, want %v", got, want)
			}
			for i := range want {
				if !strings.HasPrefix(got[i], want[i]) {
					t.Errorf("requests %v, want %v", got, want)
					break
				}
			}
		})
	}
}
