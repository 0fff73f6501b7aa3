package testenv

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// AttachBundle pushes bundle as a referrer of digest in repo, as cosign
// writes it (ociremote.WriteAttestationNewBundleFormat): an artifact
// manifest of type sigstore bundle, an empty config, the bundle as its one
// layer, the image as its subject, and the statement's predicate type in
// an annotation. The Distribution registry does not serve the Referrers
// API, so the push keeps the index under the tag schema sha256-<hex>, as
// cosign's does there. It returns the manifest's digest.
func (r *Registry) AttachBundle(t testing.TB, repo string, digest v1.Hash, bundle []byte, predicateType string) v1.Hash {
	t.Helper()
	repoRef, err := name.NewRepository(r.Repo(repo))
	if err != nil {
		t.Fatal(err)
	}
	return AttachBundle(t, repoRef, r.Auth(), digest, bundle, predicateType)
}

// AttachBundle is Registry.AttachBundle for any registry.
func AttachBundle(t testing.TB, repoRef name.Repository, auth authn.Authenticator, digest v1.Hash, bundle []byte, predicateType string) v1.Hash {
	t.Helper()
	subject, err := remote.Head(repoRef.Digest(digest.String()), remote.WithAuth(auth))
	if err != nil {
		t.Fatalf("head %s: %v", digest, err)
	}
	config := static.NewLayer([]byte("{}"), "application/vnd.oci.image.config.v1+json")
	layer := static.NewLayer(bundle, sigstoreBundleMediaType)
	var descs []v1.Descriptor
	for _, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(repoRef, l, remote.WithAuth(auth)); err != nil {
			t.Fatalf("push blob to %s: %v", repoRef, err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		size, err := l.Size()
		if err != nil {
			t.Fatal(err)
		}
		descs = append(descs, v1.Descriptor{Digest: d, Size: size})
	}
	descs[0].MediaType, descs[0].ArtifactType = "application/vnd.oci.empty.v1+json", sigstoreBundleMediaType
	descs[1].MediaType = sigstoreBundleMediaType
	m := struct {
		v1.Manifest
		ArtifactType string `json:"artifactType,omitempty"`
	}{v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        descs[0],
		Layers:        descs[1:],
		Subject:       &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations: map[string]string{
			"org.opencontainers.image.created": time.Now().UTC().Format(time.RFC3339),
			"dev.sigstore.bundle.content":      "dsse-envelope",
			sigstorePredicateAnnotation:        predicateType,
		},
	}, sigstoreBundleMediaType}
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := v1.SHA256(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(repoRef.Digest(d.String()), rawManifest{body: body, mediaType: types.OCIManifestSchema1}, remote.WithAuth(auth)); err != nil {
		t.Fatalf("push bundle manifest to %s: %v", repoRef, err)
	}
	return d
}
