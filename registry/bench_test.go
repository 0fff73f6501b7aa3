package registry

import (
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// The benchmarks lift the rate limit, which would otherwise be what they
// measure.
const benchLimit = "limit: 1000000"

func BenchmarkTags2500(b *testing.B) {
	reg := testenv.StartRegistry(b, testenv.WithoutAuth())
	pushManyTags(b, reg, "many", 2500)
	c := NewClient(WithConfig(testConfig(b, reg.Host, benchLimit)))
	ref := imageRef(b, reg.Host+"/many")
	if _, err := c.Tags(b.Context(), ref, credref.Ref{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		tags, err := c.Tags(b.Context(), ref, credref.Ref{})
		if err != nil || len(tags) != 2500 {
			b.Fatalf("%d tags, %v", len(tags), err)
		}
	}
}

// One HEAD to learn the digest, then the cache.
func BenchmarkMetadataCacheHit(b *testing.B) {
	reg := testenv.StartRegistry(b, testenv.WithoutAuth())
	reg.PushIndex(b, "multi", "1.0", []v1.Platform{linuxAMD64, linuxARM64})
	c := NewClient(WithConfig(testConfig(b, reg.Host, benchLimit)))
	ref := imageRef(b, reg.Host+"/multi:1.0")
	platforms := []v1.Platform{linuxARM64}
	if _, err := c.Metadata(b.Context(), ref, credref.Ref{}, platforms); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Metadata(b.Context(), ref, credref.Ref{}, platforms); err != nil {
			b.Fatal(err)
		}
	}
}

// A reference with a digest needs no request at all once cached.
func BenchmarkMetadataCacheHitByDigest(b *testing.B) {
	reg := testenv.StartRegistry(b, testenv.WithoutAuth())
	digest := reg.PushIndex(b, "multi", "1.0", []v1.Platform{linuxAMD64, linuxARM64})
	c := NewClient(WithConfig(testConfig(b, reg.Host, benchLimit)))
	ref, err := imageRef(b, reg.Host+"/multi").WithDigest(digest.String())
	if err != nil {
		b.Fatal(err)
	}
	platforms := []v1.Platform{linuxARM64}
	if _, err := c.Metadata(b.Context(), ref, credref.Ref{}, platforms); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Metadata(b.Context(), ref, credref.Ref{}, platforms); err != nil {
			b.Fatal(err)
		}
	}
}
