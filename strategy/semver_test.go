package strategy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

func TestSemVer(t *testing.T) {
	tests := []struct {
		name       string
		constraint string
		allow      string
		ignore     []string
		tags       []string
		current    string
		wantTag    string // "" when nothing qualifies
		wantUpdate bool
		reason     []string // substrings of Reason when no update
	}{
		{
			name:    "highest release",
			tags:    []string{"1.0.0", "1.10.0", "1.9.3", "1.2.0"},
			current: "1.0.0", wantTag: "1.10.0", wantUpdate: true,
		},
		{
			name:    "mixed v prefixes",
			tags:    []string{"v1.0.0", "1.1.0", "v1.3.0", "1.2.9"},
			current: "v1.0.0", wantTag: "v1.3.0", wantUpdate: true,
		},
		{
			name:       "tilde",
			constraint: "~1.26",
			tags:       []string{"1.25.4", "1.26.0", "1.26.3", "1.27.0", "2.0.0"},
			current:    "1.26.0", wantTag: "1.26.3", wantUpdate: true,
		},
		{
			name:       "caret",
			constraint: "^2",
			tags:       []string{"1.9.0", "2.0.0", "2.7.1", "3.0.0", "v2.8.0-rc.1"},
			current:    "2.0.0", wantTag: "2.7.1", wantUpdate: true,
		},
		{
			name:       "range",
			constraint: ">=1.2 <2",
			tags:       []string{"1.1.0", "1.2.0", "1.99.0", "2.0.0"},
			wantTag:    "1.99.0", wantUpdate: true,
		},
		{
			name:       "x range with partial tags",
			constraint: "1.x",
			tags:       []string{"1", "1.4", "2", "0.9"},
			current:    "1", wantTag: "1.4", wantUpdate: true,
		},
		{
			name:    "non-semver tags ignored",
			tags:    []string{"latest", "main", "1.2.3", "stable", "1.2.4-alpine", "20240101-abc", "v", "1.2.3.4"},
			current: "1.2.3", wantTag: "1.2.3",
			reason: []string{"already the highest"},
		},
		{
			name:    "numeric-looking date tags are versions",
			tags:    []string{"20240101", "20231231", "latest"},
			current: "20231231", wantTag: "20240101", wantUpdate: true,
		},
		{
			name:    "no constraint skips pre-releases",
			tags:    []string{"1.0.0", "1.1.0-rc.1", "2.0.0-alpha", "1.0.1-alpine"},
			current: "", wantTag: "1.0.0", wantUpdate: true,
		},
		{
			name:       "constraint without pre-release skips pre-releases",
			constraint: ">=1.0",
			tags:       []string{"1.0.0", "1.1.0-rc.1", "2.0.0-alpha"},
			current:    "1.0.0", wantTag: "1.0.0",
			reason: []string{"already the highest"},
		},
		{
			name:       "constraint with pre-release admits pre-releases",
			constraint: ">=1.0.0-0",
			tags:       []string{"1.0.0", "1.1.0-rc.1", "1.1.0-rc.2", "1.1.0-beta.10"},
			current:    "1.0.0", wantTag: "1.1.0-rc.2", wantUpdate: true,
		},
		{
			name:       "release beats its pre-releases",
			constraint: ">=1.0.0-0",
			tags:       []string{"1.1.0-rc.2", "1.1.0", "1.1.0-rc.10"},
			wantTag:    "1.1.0", wantUpdate: true,
		},
		{
			name:       "numeric pre-release identifiers compare as numbers",
			constraint: ">=1.0.0-0",
			tags:       []string{"1.0.0-rc.9", "1.0.0-rc.10", "1.0.0-rc.2"},
			wantTag:    "1.0.0-rc.10", wantUpdate: true,
		},
		{
			// '+' is outside the OCI tag grammar: no registry can hold
			// such a tag, so one in a listing is never a candidate.
			name:    "build metadata is not a tag",
			tags:    []string{"1.2.3+build.1", "1.2.3+build.2", "1.2.2", "1.2.4+zzz"},
			wantTag: "1.2.2", wantUpdate: true,
		},
		{
			name:    "tags outside the grammar are never candidates",
			tags:    []string{"1.0.0", "9.9.9\nmalicious", "9.9.9/x", ".9.9.9", "-9.9.9", strings.Repeat("9", 129)},
			wantTag: "1.0.0", wantUpdate: true,
		},
		{
			name:    "current spelled differently is kept",
			tags:    []string{"1.2", "1.2.0", "v1.2.0", "1.1.9"},
			current: "v1.2", wantTag: "v1.2",
			reason: []string{"same version", `"v1.2.0"`},
		},
		{
			name:    "current not in list but same version",
			tags:    []string{"1.2.0", "1.1.0"},
			current: "v1.2.0", wantTag: "v1.2.0",
		},
		{
			name:    "duplicates",
			tags:    []string{"1.1.0", "1.2.0", "1.2.0", "1.1.0", "1.2.0"},
			current: "1.1.0", wantTag: "1.2.0", wantUpdate: true,
		},
		{
			name:       "current above constraint moves inside it",
			constraint: "~1.2",
			tags:       []string{"1.2.0", "1.2.5", "1.3.0"},
			current:    "1.3.0", wantTag: "1.2.5", wantUpdate: true,
		},
		{
			name:    "current tag is not semver",
			tags:    []string{"1.0.0", "latest"},
			current: "latest", wantTag: "1.0.0", wantUpdate: true,
		},
		{
			name:    "signature tags excluded",
			tags:    []string{"1.0.0", sigTag, attTag, sbomTag},
			current: "0.9.0", wantTag: "1.0.0", wantUpdate: true,
		},
		{
			name:    "allow-tags narrows",
			allow:   `regexp:^v\d+\.\d+\.\d+$`,
			tags:    []string{"v1.0.0", "v1.1.0", "1.5.0", "v2.0.0-rc.1"},
			current: "v1.0.0", wantTag: "v1.1.0", wantUpdate: true,
		},
		{
			name:    "ignore-tags drops",
			ignore:  []string{"2.*", "*.9"},
			tags:    []string{"1.8.0", "1.9.9", "2.0.0"},
			current: "1.8.0", wantTag: "1.8.0",
			reason: []string{"already the highest"},
		},
		{
			name:   "empty list",
			tags:   nil,
			reason: []string{"no tags"},
		},
		{
			name:    "nothing semver",
			tags:    []string{"latest", "main", sigTag},
			current: "1.0.0",
			reason:  []string{"none of the 3 tags", "not a semantic version: 2", "signature/attestation/SBOM: 1"},
		},
		{
			name:   "only pre-releases without constraint",
			tags:   []string{"1.0.0-rc.1", "2.0.0-beta"},
			reason: []string{"none of the 2 tags", "pre-release, skipped without a constraint: 2"},
		},
		{
			name:       "nothing inside constraint",
			constraint: "~3.0",
			tags:       []string{"1.0.0", "2.0.0", "latest"},
			current:    "2.0.0",
			reason:     []string{"none of the 3 tags", `outside constraint "~3.0": 2`, "not a semantic version: 1"},
		},
		{
			name:   "everything filtered",
			allow:  "regexp:^release-",
			ignore: []string{"release-*"},
			tags:   []string{"release-1", "1.0.0", "release-2"},
			reason: []string{"none of the 3 tags", "not matching allow-tags: 1", "matching ignore-tags: 2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, strategy.Settings{Constraint: tt.constraint, AllowTags: tt.allow, IgnoreTags: tt.ignore})
			r, err := p.Choose(context.Background(), tt.tags, imageref.Version{Tag: tt.current}, nil)
			if err != nil {
				t.Fatalf("Choose: %v", err)
			}
			if r.Tag != tt.wantTag || r.Update != tt.wantUpdate {
				t.Errorf("Choose = {Tag: %q, Update: %v, Reason: %q}, want {Tag: %q, Update: %v}", r.Tag, r.Update, r.Reason, tt.wantTag, tt.wantUpdate)
			}
			if r.Update && r.Reason != "" {
				t.Errorf("Reason %q set on an update", r.Reason)
			}
			if !r.Update && r.Reason == "" {
				t.Error("no update without a reason")
			}
			for _, s := range tt.reason {
				if !strings.Contains(r.Reason, s) {
					t.Errorf("Reason %q does not contain %q", r.Reason, s)
				}
			}
			if r.Seen != len(tt.tags) {
				t.Errorf("Seen = %d, want %d", r.Seen, len(tt.tags))
			}
			if r.Digest != "" || r.Version().String() != r.Tag {
				t.Errorf("semver result has digest %q / reference %q", r.Digest, r.Version().String())
			}
		})
	}
}

// Equal versions written differently must resolve the same way whatever the
// order the registry lists them in, with or without a constraint.
func TestSemVerOrderIndependence(t *testing.T) {
	sets := []struct {
		constraint string
		tags       []string
		want       string
	}{
		{"", []string{"1.2", "1.2.0", "v1.2.0", "1.1.0"}, "v1.2.0"},
		{"~1.2", []string{"1.2", "1.2.0", "v1.2.0", "v1.2", "1.3.0"}, "v1.2.0"},
		{"", []string{"1.2.3_b", "1.2.3_a", "1.2.3", "v1.2.3"}, "v1.2.3"},
		{">=1.0.0-0", []string{"1.0.0-rc.1", "v1.0.0-rc.1", "1.0.0-rc.1_x", "0.9.0"}, "v1.0.0-rc.1"},
	}
	for _, set := range sets {
		p := mustNew(t, strategy.Settings{Constraint: set.constraint})
		for _, perm := range permutations(set.tags) {
			r, err := p.Choose(context.Background(), perm, imageref.Version{Tag: "0.0.1"}, nil)
			if err != nil || r.Tag != set.want || !r.Update {
				t.Errorf("constraint %q, tags %q: got %q (update %v, err %v), want %q", set.constraint, perm, r.Tag, r.Update, err, set.want)
			}
		}
	}
}

// Choosing again with the chosen tag as current must be a no-op, whatever the
// order: the choice never flaps between cycles.
func TestSemVerStable(t *testing.T) {
	tags := []string{"1.2", "v1.2.0", "1.2.0", "1.2.0+meta", "1.0.0"}
	p := mustNew(t, strategy.Settings{})
	for _, perm := range permutations(tags) {
		first, _ := p.Choose(context.Background(), perm, imageref.Version{Tag: "1.0.0"}, nil)
		second, _ := p.Choose(context.Background(), perm, imageref.Version{Tag: first.Tag}, nil)
		if second.Update {
			t.Fatalf("tags %q: chose %q, then wanted to move to %q", perm, first.Tag, second.Tag)
		}
	}
}

func TestAlphabetical(t *testing.T) {
	tests := []struct {
		name       string
		tags       []string
		ignore     []string
		current    string
		want       string
		wantUpdate bool
	}{
		{"byte order", []string{"b", "a", "c-1", "C-2"}, nil, "a", "c-1", true},
		{"dates", []string{"2024-01-02", "2024-01-10", "2023-12-31"}, nil, "2024-01-02", "2024-01-10", true},
		{"already last", []string{"a", "b"}, nil, "b", "b", false},
		{"signatures excluded", []string{"a", sigTag}, nil, "", "a", true},
		{"ignored", []string{"a", "zzz"}, []string{"z*"}, "a", "a", false},
		{"empty", nil, nil, "a", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, strategy.Settings{Strategy: "alphabetical", IgnoreTags: tt.ignore})
			r, err := p.Choose(context.Background(), tt.tags, imageref.Version{Tag: tt.current}, nil)
			if err != nil || r.Tag != tt.want || r.Update != tt.wantUpdate {
				t.Errorf("Choose = %+v, %v; want tag %q update %v", r, err, tt.want, tt.wantUpdate)
			}
			if !r.Update && r.Reason == "" {
				t.Error("no update without a reason")
			}
		})
	}
}

func TestPaused(t *testing.T) {
	for _, s := range []string{"semver", "newest-build", "alphabetical", "digest"} {
		reg := &fakeRegistry{}
		constraint := ""
		if s == "digest" {
			constraint = "latest"
		}
		p := mustNew(t, strategy.Settings{Strategy: s, Constraint: constraint, IgnoreTags: []string{"*"}})
		r, err := p.Choose(context.Background(), []string{"1.0.0", "latest"}, imageref.Version{Tag: "0.1.0"}, reg.meta)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if r.Update || r.Tag != "" || !strings.Contains(r.Reason, "paused") || r.Seen != 2 {
			t.Errorf("%s: paused image gave %+v", s, r)
		}
		if len(reg.calls) != 0 {
			t.Errorf("%s: paused image asked for metadata of %q", s, reg.calls)
		}
		if !p.Paused() {
			t.Errorf("%s: Paused() = false", s)
		}
	}
}

func TestZeroPolicy(t *testing.T) {
	var p strategy.Policy
	if _, err := p.Choose(context.Background(), []string{"1.0.0"}, imageref.Version{}, nil); err == nil {
		t.Error("a Policy not made by New must not choose")
	}
}
