package strategy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// benchTags builds n tags shaped like a busy repository: mostly versions with
// and without "v", some pre-releases, branch builds and signature tags. They
// come in ascending version order, as many registries list them, or shuffled
// with a fixed seed.
func benchTags(n int, shuffle bool) []string {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	tags := make([]string, 0, n)
	for i := 0; len(tags) < n; i++ {
		major, minor, patch := i/2500, (i/50)%50, i%50
		switch i % 10 {
		case 0:
			tags = append(tags, fmt.Sprintf("v%d.%d.%d", major, minor, patch))
		case 1:
			tags = append(tags, fmt.Sprintf("%d.%d.%d-rc.%d", major, minor, patch, i%7))
		case 2:
			tags = append(tags, fmt.Sprintf("main-%07x", rng.Uint32()&0xfffffff))
		case 3:
			tags = append(tags, fmt.Sprintf("sha256-%064x.sig", i))
		default:
			tags = append(tags, fmt.Sprintf("%d.%d.%d", major, minor, patch))
		}
	}
	if shuffle {
		rng.Shuffle(len(tags), func(i, j int) { tags[i], tags[j] = tags[j], tags[i] })
	}
	return tags
}

func BenchmarkSemVer(b *testing.B) {
	for _, in := range []struct {
		n       int
		order   string
		shuffle bool
	}{{10_000, "shuffled", true}, {100_000, "shuffled", true}, {100_000, "ascending", false}} {
		tags := benchTags(in.n, in.shuffle)
		for _, c := range []struct{ name, constraint string }{
			{"no-constraint", ""},
			{"caret", "^1"},          // most tags above it fail the check
			{"tilde", "~1.26"},       // a narrow range in the middle
			{"matches-none", "~999"}, // every version is checked
		} {
			p := mustNew(b, strategy.Settings{Constraint: c.constraint})
			b.Run(fmt.Sprintf("tags=%d/%s/%s", in.n, in.order, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Choose(context.Background(), tags, imageref.Version{Tag: "1.0.0"}, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkFilters(b *testing.B) {
	tags := benchTags(100_000, true)
	for _, c := range []struct {
		name string
		s    strategy.Settings
	}{
		{"defaults", strategy.Settings{}},
		{"allow-regexp+ignore-globs", strategy.Settings{
			AllowTags:  `regexp:^v?\d+\.\d+\.\d+$`,
			IgnoreTags: []string{"*-rc.*", "main-*", "0.*"},
		}},
	} {
		p := mustNew(b, c.s)
		b.Run(fmt.Sprintf("tags=%d/%s", len(tags), c.name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(p.Candidates(tags)) == 0 {
					b.Fatal("no candidates")
				}
			}
		})
	}
}

func BenchmarkAlphabetical(b *testing.B) {
	tags := benchTags(100_000, true)
	p := mustNew(b, strategy.Settings{Strategy: "alphabetical"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Choose(context.Background(), tags, imageref.Version{}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewestBuild(b *testing.B) {
	tags := benchTags(10_000, true)
	p := mustNew(b, strategy.Settings{Strategy: "newest-build", AllowTags: "regexp:^main-"})
	meta := func(ctx context.Context, tag string) (strategy.TagInfo, error) {
		return strategy.TagInfo{Tag: tag, Created: at(len(tag))}, nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Choose(context.Background(), tags, imageref.Version{}, meta); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGlob weighs the glob fast paths (exact, "prefix*", "*suffix")
// against filepath.Match over the same 10,000 tags; "*-rc*" and "*" take
// filepath.Match either way.
func BenchmarkGlob(b *testing.B) {
	tags := benchTags(10_000, true)
	for _, pattern := range []string{"latest", "v1.*", "main-*", "*.sig", "*-rc*", "*"} {
		compiled, plain, err := strategy.GlobMatchers(pattern)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range []struct {
			name  string
			match func(string) bool
		}{{"compiled", compiled}, {"filepath.Match", plain}} {
			b.Run(fmt.Sprintf("tags=%d/%s/%s", len(tags), pattern, m.name), func(b *testing.B) {
				for b.Loop() {
					n := 0
					for _, tag := range tags {
						if m.match(tag) {
							n++
						}
					}
					if n < 0 {
						b.Fatal("unreachable")
					}
				}
			})
		}
	}
}

// BenchmarkSharedPolicies is the heap the policies of 20,000 images keep
// (kept-B/image) when their settings repeat 20 distinct ones: compiled
// for each image (New), or once per distinct settings (Shared).
func BenchmarkSharedPolicies(b *testing.B) {
	const images, distinct = 20_000, 20
	settings := make([]strategy.Settings, distinct)
	for i := range settings {
		settings[i] = strategy.Settings{
			Strategy:   []string{"semver", "newest-build"}[i%2],
			Constraint: fmt.Sprintf("~1.%d", i),
			AllowTags:  fmt.Sprintf(`regexp:^v?1\.%d\.[0-9]+$`, i),
			IgnoreTags: []string{"*-rc*", "latest"},
		}
	}
	for _, tc := range []struct {
		name    string
		compile func(strategy.Settings) (*strategy.Policy, error)
	}{{"new", strategy.New}, {"shared", strategy.Shared}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var kept []*strategy.Policy
			var perImage float64
			for b.Loop() {
				kept = make([]*strategy.Policy, 0, images)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range images {
					p, err := tc.compile(settings[i%distinct])
					if err != nil {
						b.Fatal(err)
					}
					kept = append(kept, p)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perImage = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / images
			}
			runtime.KeepAlive(kept)
			b.ReportMetric(perImage, "kept-B/image")
		})
	}
}
