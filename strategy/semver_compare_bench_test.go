package strategy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	"github.com/image-updater/argocd-image-updater/imageref"
)

// The semver strategy parses tags with its own parser (version.go) and checks
// constraints through rangeCheck instead of calling the library per tag. The
// benchmarks below measure that choice against the library doing the same
// job on the same tag lists; docs/benchmarks.md holds the figures.

// compareSizes and compareConstraints span the repositories the controller
// meets: a few hundred tags up to CI repositories that push one per commit.
var (
	compareSizes       = []int{100, 10_000, 100_000}
	compareConstraints = []struct{ name, constraint string }{
		{"none", ""},
		{"tilde", "~1.2"},
		{"caret", "^1"},
		{"range", ">=1.0.0 <2.0.0"},
		{"x-range", "1.x"},
		{"pre-release", ">=1.2.0-0 <1.3.0"},
	}
)

// compareTags builds n distinct tags in byte order, as the distribution
// registry lists them. About 70% are versions: "1.2.3" and "v1.2.3",
// partial "1.2", pre-releases and build metadata. The rest are branch builds,
// commit hashes, pull-request builds, moving tags and cosign signatures. A
// few fixed tags make every constraint match something even in short lists.
func compareTags(n int) []string {
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	hex := func(k int) string {
		const digits = "0123456789abcdef"
		b := make([]byte, k)
		for i := range b {
			b[i] = digits[rng.IntN(16)]
		}
		return string(b)
	}
	seen := make(map[string]bool, n)
	tags := make([]string, 0, n)
	add := func(t string) {
		if len(tags) < n && !seen[t] {
			seen[t] = true
			tags = append(tags, t)
		}
	}
	for _, t := range []string{"latest", "stable", "main", "1.2.0", "v1.2.7", "1.2.8-rc.1", "1.9.0", "v0.9.1"} {
		add(t)
	}
	for len(tags) < n {
		v := fmt.Sprintf("%d.%d.%d", rng.IntN(10), rng.IntN(100), rng.IntN(50))
		switch r := rng.IntN(20); {
		case r < 5:
			add(v)
		case r < 9:
			add("v" + v)
		case r < 11:
			add(fmt.Sprintf("%s-rc.%d", v, rng.IntN(5)+1))
		case r < 12:
			add(fmt.Sprintf("v%s-beta.%d", v, rng.IntN(3)+1))
		case r < 13:
			add(fmt.Sprintf("%s+build.%d", v, rng.IntN(500)))
		case r < 14:
			add(fmt.Sprintf("%d.%d", rng.IntN(10), rng.IntN(100)))
		case r < 16:
			add("main-" + hex(7))
		case r < 17:
			add(hex(40))
		case r < 18:
			add(fmt.Sprintf("pr-%d", rng.IntN(1_000_000)))
		case r < 19:
			add("sha-" + hex(7))
		default:
			add("sha256-" + hex(64) + ".sig")
		}
	}
	slices.Sort(tags)
	return tags
}

// libraryChooser is the semver strategy written directly on the library:
// NewVersion for every tag, the constraint parsed once, Check on each
// version that would beat the best so far, the highest kept. When checkAll
// is set, Check runs on every parsed tag first, as the plainest loop would.
// It applies the same tag filters and the same ranking rules as
// chooseSemver, so only the parsing and checking differ.
func libraryChooser(p *Policy, tags []string, current imageref.Version, checkAll bool) Result {
	st := filterStats{seen: len(tags)}
	c := p.constraint
	var best *semver.Version
	for _, t := range tags {
		if !p.keep(t, &st) {
			continue
		}
		v, err := semver.NewVersion(t)
		switch {
		case err != nil:
		case c == nil && v.Prerelease() != "":
		case c != nil && checkAll && !c.Check(v):
		case best != nil && !libraryHigher(v, best):
		case c != nil && !checkAll && !c.Check(v):
		default:
			best = v
		}
	}
	r := Result{Seen: st.seen, Considered: st.kept}
	if best == nil {
		r.Reason = "no candidates"
		return r
	}
	if cur, err := semver.NewVersion(current.Tag); err == nil && cur.Compare(best) == 0 {
		r.Tag, r.Reason = current.Tag, "already the highest version"
		return r
	}
	r.Tag, r.Update = best.Original(), true
	return r
}

func libraryHigher(a, b *semver.Version) bool {
	if d := a.Compare(b); d != 0 {
		return d > 0
	}
	return a.Original() > b.Original()
}

// compareCurrent is the running tag in the benchmarks: an old release, so
// every choice is an update and neither side stops early.
var compareCurrent = imageref.Version{Tag: "0.1.0"}

// TestLibraryChooserAgrees checks, before the figures mean anything, that
// both implementations pick the same tag on every benchmarked list, and
// again once the winner is also listed in other spellings, so that the
// tie-break between equal versions is compared too.
func TestLibraryChooserAgrees(t *testing.T) {
	for _, n := range compareSizes {
		// The largest lists are checked by the benchmark itself, before
		// it times them: under the race detector they take a minute and
		// go through the same code as the smaller ones.
		if n > 10_000 {
			continue
		}
		agreeOn(t, n, compareTags(n))
	}
}

// agreeOn checks both implementations on a list of n tags for each
// constraint, as it is and respelled.
func agreeOn(t testing.TB, n int, tags []string) {
	t.Helper()
	if len(tags) != n {
		t.Fatalf("compareTags(%d) gave %d tags", n, len(tags))
	}
	for _, c := range compareConstraints {
		p, err := New(Settings{Constraint: c.constraint})
		if err != nil {
			t.Fatal(err)
		}
		ours := agree(t, fmt.Sprintf("tags=%d %s", n, c.name), p, tags)
		if ours.Tag == "" || !ours.Update {
			t.Fatalf("tags=%d %s: no update (%q), the benchmark would measure nothing", n, c.name, ours.Reason)
		}
		plain := strings.TrimPrefix(ours.Tag, "v")
		respelled := append(slices.Clone(tags), plain, "v"+plain, plain+"+zz")
		agree(t, fmt.Sprintf("tags=%d %s respelled", n, c.name), p, respelled)
	}
}

// agree chooses from tags with p and with both library loops, reports any
// difference, and returns our result.
func agree(t testing.TB, name string, p *Policy, tags []string) Result {
	t.Helper()
	ours, err := p.Choose(context.Background(), tags, compareCurrent, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, checkAll := range []bool{false, true} {
		lib := libraryChooser(p, tags, compareCurrent, checkAll)
		if lib.Tag != ours.Tag || lib.Update != ours.Update || lib.Considered != ours.Considered {
			t.Errorf("%s (check all %v): library chose %q (update %v, %d considered), ours %q (update %v, %d considered)",
				name, checkAll, lib.Tag, lib.Update, lib.Considered, ours.Tag, ours.Update, ours.Considered)
		}
	}
	return ours
}

// BenchmarkSemverVsLibrary runs the whole semver choice over each list with
// our parser and with the library. Reproduce with:
//
//	go test -run '^$' -bench SemverVsLibrary -benchmem -count 5 ./strategy/
func BenchmarkSemverVsLibrary(b *testing.B) {
	for _, n := range compareSizes {
		tags := compareTags(n)
		agreeOn(b, n, tags)
		for _, c := range compareConstraints {
			p, err := New(Settings{Constraint: c.constraint})
			if err != nil {
				b.Fatal(err)
			}
			impls := []struct {
				name   string
				choose func() Result
			}{
				{"ours", func() Result {
					r, _ := p.Choose(context.Background(), tags, compareCurrent, nil)
					return r
				}},
				{"masterminds", func() Result { return libraryChooser(p, tags, compareCurrent, false) }},
				{"masterminds-check-all", func() Result { return libraryChooser(p, tags, compareCurrent, true) }},
			}
			for _, impl := range impls {
				b.Run(fmt.Sprintf("tags=%d/%s/%s", n, c.name, impl.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if r := impl.choose(); !r.Update {
							b.Fatal(r.Reason)
						}
					}
				})
			}
		}
	}
}
