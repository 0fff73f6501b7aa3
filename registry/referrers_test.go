package registry

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// referrerManifest is an artifact manifest whose subject is subject.
type referrerManifest struct{ body []byte }

func (m referrerManifest) RawManifest() ([]byte, error) { return m.body, nil }
func (m referrerManifest) MediaType() (types.MediaType, error) {
	return types.OCIManifestSchema1, nil
}

// pushReferrer pushes, by digest, an artifact of artifactType in repo
// whose subject is subject, and returns its digest.
func pushReferrer(t *testing.T, host string, auth authn.Authenticator, repo string, subject v1.Hash, artifactType string) v1.Hash {
	t.Helper()
	repoRef, err := name.NewRepository(host+"/"+repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	l := static.NewLayer([]byte("{}"), "application/vnd.oci.empty.v1+json")
	if err := remote.WriteLayer(repoRef, l, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	empty, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Appendf(nil, `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":%q,`+
		`"config":{"mediaType":"application/vnd.oci.empty.v1+json","size":2,"digest":"%s"},`+
		`"layers":[{"mediaType":"application/vnd.oci.empty.v1+json","size":2,"digest":"%s"}],`+
		`"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","size":1,"digest":"%s"}}`,
		artifactType, empty, empty, subject)
	d, _, err := v1.SHA256(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	// Put writes the referrers index under the tag schema itself when the
	// registry does not take the subject.
	if err := remote.Put(repoRef.Digest(d.String()), referrerManifest{body}, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReferrers: the referrers of a digest, from a registry that serves
// the Referrers API (go-containerregistry's), and from the Distribution
// registry, which does not (v3.1): there the pusher keeps the index under
// the tag schema, as cosign does, and the client reads it from there.
func TestReferrers(t *testing.T) {
	distribution := testenv.StartRegistry(t, testenv.WithoutAuth())
	withAPI := httptest.NewServer(ggcrregistry.New(ggcrregistry.WithReferrersSupport(true), ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(withAPI.Close)
	for _, srv := range []struct {
		name, host string
		push       func(t *testing.T, repo string, tags []string) v1.Hash
		auth       authn.Authenticator
		api        bool
	}{
		{name: "Distribution", host: distribution.Host, push: func(t *testing.T, repo string, tags []string) v1.Hash {
			return distribution.PushImage(t, repo, tags)
		}, auth: distribution.Auth()},
		{name: "Referrers API", host: strings.TrimPrefix(withAPI.URL, "http://"), api: true, auth: authn.Anonymous},
	} {
		if srv.push == nil {
			srv.push = func(t *testing.T, repo string, tags []string) v1.Hash {
				img := testenv.NewImage(t)
				for _, tag := range tags {
					ref, err := name.NewTag(srv.host+"/"+repo+":"+tag, name.Insecure)
					if err != nil {
						t.Fatal(err)
					}
					if err := remote.Write(ref, img); err != nil {
						t.Fatal(err)
					}
				}
				d, err := img.Digest()
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
		}
		signed := srv.push(t, "app", []string{"1.0"})
		bare := srv.push(t, "app", []string{"2.0"})
		art := pushReferrer(t, srv.host, srv.auth, "app", signed, "application/vnd.dev.sigstore.bundle.v0.3+json")
		for _, tt := range []struct {
			name   string
			digest v1.Hash
			want   []string // digests of the referrers
		}{
			{name: "one", digest: signed, want: []string{art.String()}},
			{name: "none", digest: bare},
		} {
			t.Run(srv.name+"/"+tt.name, func(t *testing.T) {
				rec := newRecorder()
				c := NewClient(WithConfig(testConfig(t, srv.host)), withBaseTransport(rec))
				m, err := c.Referrers(t.Context(), imageRef(t, srv.host+"/app:1.0"), credref.Ref{}, tt.digest.String())
				if err != nil {
					t.Fatal(err)
				}
				idx, err := v1.ParseIndexManifest(strings.NewReader(string(m.Body)))
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, d := range idx.Manifests {
					got = append(got, d.Digest.String())
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("referrers %v, want %v", got, tt.want)
				}
				if sum, _, _ := v1.SHA256(strings.NewReader(string(m.Body))); m.Digest != sum.String() {
					t.Errorf("digest %s is not that of the index read, %s", m.Digest, sum)
				}
				want := []string{"GET /v2/", "GET /v2/app/referrers/" + tt.digest.String()}
				if !srv.api {
					want = append(want, "GET /v2/app/manifests/sha256-"+tt.digest.Hex)
				}
				if got := rec.requests(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("requests %v, want %v", got, want)
				}
			})
		}
	}
}

// TestReferrersSizeLimit: a referrers index is read within a manifest's
// bound.
func TestReferrersSizeLimit(t *testing.T) {
	b := startBadRegistry(t, func(b *badRegistry, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", string(types.OCIImageIndex))
		b.flood(w, `{"schemaVersion":2,"manifests":[`, `{"digest":"sha256:00"},`, 64<<20)
	})
	c := NewClient(WithConfig(testConfig(t, b.host)))
	_, err := c.Referrers(t.Context(), imageRef(t, b.host+"/app"), credref.Ref{}, "sha256:"+strings.Repeat("a", 64))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "referrers index is larger than 4 MiB") {
		t.Fatalf("want ErrTooLarge for the referrers index, got %v", err)
	}
	// What the kernel's buffers took besides.
	if got := b.served.Load(); got > 16<<20 {
		t.Errorf("the client took %d bytes", got)
	}
}
