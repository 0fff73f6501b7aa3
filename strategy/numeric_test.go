package strategy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// TestVersionGroup covers the numeric strategy and the (?P<version>…)
// group of allow-tags, which every ordering strategy sorts by.
func TestVersionGroup(t *testing.T) {
	tests := []struct {
		name       string
		strategy   string
		constraint string
		allow      string
		tags       []string
		current    string
		wantTag    string
		wantUpdate bool
		reason     []string
	}{
		{
			name: "build numbers by value, not by name", strategy: "numeric",
			tags:    []string{"225", "26", "224", "latest", "9"},
			current: "225", wantTag: "225",
			reason: []string{"already the highest number"},
		},
		{
			name: "the next build", strategy: "numerical",
			tags:    []string{"225", "26", "226", "9"},
			current: "225", wantTag: "226", wantUpdate: true,
		},
		{
			name: "numbers longer than 64 bits", strategy: "numeric",
			tags:    []string{"99999999999999999999", "100000000000000000000", "1"},
			current: "1", wantTag: "100000000000000000000", wantUpdate: true,
		},
		{
			name: "leading zeros are the same number, the running tag kept", strategy: "numeric",
			tags:    []string{"0042", "42", "41"},
			current: "042", wantTag: "042",
			reason: []string{"already the highest number"},
		},
		{
			name: "build numbers in a group", strategy: "numeric",
			allow:   `regexp:^build-(?P<version>\d+)$`,
			tags:    []string{"build-9", "build-1234", "build-999", "build-x", "1235"},
			current: "build-9", wantTag: "build-1234", wantUpdate: true,
		},
		{
			name: "timestamps after a commit", strategy: "numeric",
			allow:   `regexp:^main-[0-9a-f]{7}-(?P<version>[0-9]{10,})$`,
			tags:    []string{"main-abc1234-1700000000", "main-fff0000-1690000000", "main-0000000-1710000000", "dev-abc1234-1800000000"},
			current: "main-abc1234-1700000000", wantTag: "main-0000000-1710000000", wantUpdate: true,
		},
		{
			name: "an optional group that took no part", strategy: "numeric",
			allow:  `regexp:^build(-(?P<version>\d+))?$`,
			tags:   []string{"build"},
			reason: []string{"without a match of the group version of allow-tags: 1"},
		},
		{
			name: "no numbers", strategy: "numeric",
			tags:   []string{"latest", "v1", "1.2"},
			reason: []string{"not a number: 3"},
		},
		{
			name: "semver of a group", strategy: "semver", constraint: "^5",
			allow:   `regexp:^version-(?P<version>\d+\.\d+\.\d+)$`,
			tags:    []string{"version-5.6.16", "version-5.10.0", "version-6.0.0", "5.99.0"},
			current: "version-5.6.16", wantTag: "version-5.10.0", wantUpdate: true,
		},
		{
			name: "semver of a group, a fourth part cut off", strategy: "semver",
			allow:   `regexp:^(?P<version>\d+\.\d+\.\d+)\.\d+-.*$`,
			tags:    []string{"1.25.7.5604-980a13e02", "1.25.10.1-aaaa", "1.3.0"},
			current: "1.25.7.5604-980a13e02", wantTag: "1.25.10.1-aaaa", wantUpdate: true,
		},
		{
			name: "groups of other names order whole tags, as before", strategy: "semver",
			allow:   `regexp:^v?(1|2)\.\d+$`,
			tags:    []string{"1.3", "2.1", "2.10", "3.0"},
			current: "1.3", wantTag: "2.10", wantUpdate: true,
		},
		{
			name: "alphabetical of a group", strategy: "alphabetical",
			allow:   `regexp:^[a-z]+-(?P<version>\d{4}-\d{2}-\d{2})$`,
			tags:    []string{"zeta-2024-01-02", "alpha-2024-03-01", "beta-2023-12-31"},
			current: "zeta-2024-01-02", wantTag: "alpha-2024-03-01", wantUpdate: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := strategy.New(strategy.Settings{Strategy: tt.strategy, Constraint: tt.constraint, AllowTags: tt.allow})
			if err != nil {
				t.Fatal(err)
			}
			for _, tags := range permutations(tt.tags) {
				r, err := p.Choose(context.Background(), tags, imageref.Version{Tag: tt.current}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if r.Tag != tt.wantTag || r.Update != tt.wantUpdate {
					t.Fatalf("tags %v: got %q update=%v (%s), want %q update=%v", tags, r.Tag, r.Update, r.Reason, tt.wantTag, tt.wantUpdate)
				}
				for _, want := range tt.reason {
					if !strings.Contains(r.Reason, want) {
						t.Fatalf("reason %q lacks %q", r.Reason, want)
					}
				}
			}
		})
	}
}

// FuzzNumeric checks the numeric order against its definition: the
// winner is a candidate, and no candidate is a greater number.
func FuzzNumeric(f *testing.F) {
	for _, s := range []string{"1,2,3", "0042,42,41", "99999999999999999999,100000000000000000000", "a,1,b", ",,0"} {
		f.Add(s)
	}
	p, err := strategy.New(strategy.Settings{Strategy: "numeric"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, list string) {
		tags := strings.Split(list, ",")
		r, err := p.Choose(context.Background(), tags, imageref.Version{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Tag == "" {
			for _, tag := range p.Candidates(tags) {
				if strings.Trim(tag, "0123456789") == "" {
					t.Fatalf("no choice among %q, but %q is a number (%s)", tags, tag, r.Reason)
				}
			}
			return
		}
		win := strings.TrimLeft(r.Tag, "0")
		for _, tag := range p.Candidates(tags) {
			if strings.Trim(tag, "0123456789") != "" {
				continue
			}
			n := strings.TrimLeft(tag, "0")
			if len(n) > len(win) || len(n) == len(win) && n > win {
				t.Fatalf("chose %q among %q, but %q is greater", r.Tag, tags, tag)
			}
		}
	})
}
