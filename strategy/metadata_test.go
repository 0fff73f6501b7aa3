package strategy_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

var (
	linuxAmd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	linuxArm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
	linuxArmV7 = v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}
)

func TestNewestBuild(t *testing.T) {
	tests := []struct {
		name       string
		settings   strategy.Settings
		tags       []string
		infos      map[string]strategy.TagInfo
		current    imageref.Version
		wantTag    string
		wantDigest string
		wantUpdate bool
		reason     []string
	}{
		{
			name: "most recent wins",
			tags: []string{"a", "b", "c"},
			infos: map[string]strategy.TagInfo{
				"a": {Digest: digestOf('a'), Created: at(1)},
				"b": {Digest: digestOf('b'), Created: at(3)},
				"c": {Digest: digestOf('c'), Created: at(2)},
			},
			current: imageref.Version{Tag: "a"},
			wantTag: "b", wantDigest: digestOf('b'), wantUpdate: true,
		},
		{
			name: "tie goes to the greater tag",
			tags: []string{"main-2", "main-10", "main-1"},
			infos: map[string]strategy.TagInfo{
				"main-1":  {Digest: digestOf('1'), Created: at(5)},
				"main-2":  {Digest: digestOf('2'), Created: at(5)},
				"main-10": {Digest: digestOf('3'), Created: at(5)},
			},
			current: imageref.Version{Tag: "main-1"},
			wantTag: "main-2", wantDigest: digestOf('2'), wantUpdate: true,
		},
		{
			name: "same tag, same digest",
			tags: []string{"a", "b"},
			infos: map[string]strategy.TagInfo{
				"a": {Digest: digestOf('a'), Created: at(1)},
				"b": {Digest: digestOf('b'), Created: at(2)},
			},
			current: imageref.Version{Tag: "b", Digest: digestOf('b')},
			wantTag: "b", wantDigest: digestOf('b'),
			reason: []string{"already the newest build"},
		},
		{
			name:    "same tag, running digest unknown",
			tags:    []string{"b"},
			infos:   map[string]strategy.TagInfo{"b": {Digest: digestOf('b'), Created: at(2)}},
			current: imageref.Version{Tag: "b"},
			wantTag: "b", wantDigest: digestOf('b'),
			reason: []string{"already the newest build"},
		},
		{
			name:    "same tag, new digest",
			tags:    []string{"b"},
			infos:   map[string]strategy.TagInfo{"b": {Digest: digestOf('c'), Created: at(2)}},
			current: imageref.Version{Tag: "b", Digest: digestOf('b')},
			wantTag: "b", wantDigest: digestOf('c'), wantUpdate: true,
		},
		{
			name: "unknown creation time is skipped",
			tags: []string{"old", "mystery"},
			infos: map[string]strategy.TagInfo{
				"old":     {Digest: digestOf('o'), Created: at(-100)},
				"mystery": {Digest: digestOf('m')},
			},
			wantTag: "old", wantDigest: digestOf('o'), wantUpdate: true,
		},
		{
			name:     "wrong platform is skipped",
			settings: strategy.Settings{Platforms: []v1.Platform{linuxArm64}},
			tags:     []string{"amd-only", "multi", "single"},
			infos: map[string]strategy.TagInfo{
				"amd-only": {Digest: digestOf('a'), Created: at(10), Platforms: []v1.Platform{linuxAmd64}},
				"multi":    {Digest: digestOf('m'), Created: at(5), Platforms: []v1.Platform{linuxAmd64, {OS: "linux", Architecture: "arm64", Variant: "v8"}}},
				"single":   {Digest: digestOf('s'), Created: at(1)},
			},
			wantTag: "multi", wantDigest: digestOf('m'), wantUpdate: true,
		},
		{
			// The registry picks such an index child for arm/v7 too: one rule.
			name:     "arm without a variant is arm/v7",
			settings: strategy.Settings{Platforms: []v1.Platform{linuxArmV7}},
			tags:     []string{"v6-only", "arm"},
			infos: map[string]strategy.TagInfo{
				"v6-only": {Digest: digestOf('6'), Created: at(10), Platforms: []v1.Platform{{OS: "linux", Architecture: "arm", Variant: "v6"}}},
				"arm":     {Digest: digestOf('7'), Created: at(5), Platforms: []v1.Platform{{OS: "linux", Architecture: "arm"}}},
			},
			wantTag: "arm", wantDigest: digestOf('7'), wantUpdate: true,
		},
		{
			name:    "nothing qualifies",
			tags:    []string{"x", sigTag},
			infos:   map[string]strategy.TagInfo{"x": {Digest: digestOf('x')}},
			current: imageref.Version{Tag: "x"},
			reason:  []string{"none of the 2 tags", "without a known creation time: 1", "signature/attestation/SBOM: 1"},
		},
		{
			name:     "no platform offered",
			settings: strategy.Settings{Platforms: []v1.Platform{linuxArmV7}},
			tags:     []string{"x"},
			infos:    map[string]strategy.TagInfo{"x": {Created: at(1), Platforms: []v1.Platform{linuxAmd64}}},
			reason:   []string{"not built for linux/arm/v7: 1"},
		},
		{
			name:   "empty",
			reason: []string{"no tags"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.settings
			s.Strategy = "newest-build"
			p := mustNew(t, s)
			reg := &fakeRegistry{infos: tt.infos}
			r, err := p.Choose(context.Background(), tt.tags, tt.current, reg.meta)
			if err != nil {
				t.Fatalf("Choose: %v", err)
			}
			if r.Tag != tt.wantTag || r.Digest != tt.wantDigest || r.Update != tt.wantUpdate {
				t.Errorf("Choose = %+v, want tag %q digest %q update %v", r, tt.wantTag, tt.wantDigest, tt.wantUpdate)
			}
			for _, s := range tt.reason {
				if !strings.Contains(r.Reason, s) {
					t.Errorf("Reason %q does not contain %q", r.Reason, s)
				}
			}
			if !r.Update && r.Reason == "" {
				t.Error("no update without a reason")
			}
		})
	}
}

// Ties must not depend on the order tags are listed in.
func TestNewestBuildTieOrderIndependent(t *testing.T) {
	infos := map[string]strategy.TagInfo{
		"a": {Created: at(1)}, "b": {Created: at(1)}, "c": {Created: at(1)}, "old": {Created: at(0)},
	}
	p := mustNew(t, strategy.Settings{Strategy: "newest-build"})
	for _, perm := range permutations([]string{"a", "b", "c", "old"}) {
		reg := &fakeRegistry{infos: infos}
		r, err := p.Choose(context.Background(), perm, imageref.Version{}, reg.meta)
		if err != nil || r.Tag != "c" {
			t.Errorf("tags %q: got %q, %v; want c", perm, r.Tag, err)
		}
	}
}

func TestNewestBuildMetadataOnlyForCandidates(t *testing.T) {
	p := mustNew(t, strategy.Settings{
		Strategy:   "latest",
		AllowTags:  "regexp:^main-",
		IgnoreTags: []string{"main-broken*"},
	})
	tags := []string{"main-1", "release-1", "main-broken-2", sigTag, "main-3", "main-1", "latest", "main-2"}
	reg := &fakeRegistry{infos: map[string]strategy.TagInfo{
		"main-1": {Created: at(1)}, "main-2": {Created: at(2)}, "main-3": {Created: at(3)},
	}}
	r, err := p.Choose(context.Background(), tags, imageref.Version{Tag: "main-1"}, reg.meta)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tag != "main-3" || !r.Update {
		t.Errorf("Choose = %+v", r)
	}
	if want := []string{"main-1", "main-3", "main-2"}; !reflect.DeepEqual(reg.calls, want) {
		t.Errorf("metadata asked for %q, want %q (once each, filtered tags only)", reg.calls, want)
	}
	if r.Seen != len(tags) || r.Considered != 4 {
		t.Errorf("Seen/Considered = %d/%d, want %d/4", r.Seen, r.Considered, len(tags))
	}
}

func TestNewestBuildFailingMetadata(t *testing.T) {
	boom := errors.New("registry said 500")
	reg := &fakeRegistry{
		infos: map[string]strategy.TagInfo{"a": {Created: at(1)}, "c": {Created: at(3)}},
		fail:  map[string]error{"b": boom},
	}
	p := mustNew(t, strategy.Settings{Strategy: "newest-build"})
	r, err := p.Choose(context.Background(), []string{"a", "b", "c"}, imageref.Version{Tag: "a"}, reg.meta)
	if !errors.Is(err, boom) {
		t.Fatalf("Choose = %+v, %v; want the metadata error", r, err)
	}
	if !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("error %q does not name the tag", err)
	}
	if r.Update || r.Tag != "" {
		t.Errorf("a failed choice returned %+v", r)
	}
}

func TestMetadataNil(t *testing.T) {
	for _, s := range []strategy.Settings{{Strategy: "newest-build"}, {Strategy: "digest", Constraint: "latest"}} {
		p := mustNew(t, s)
		if _, err := p.Choose(context.Background(), []string{"latest"}, imageref.Version{}, nil); !errors.Is(err, strategy.ErrNoMetadataFunc) {
			t.Errorf("%s with nil meta: err = %v", s.Strategy, err)
		}
	}
}

func TestNewestBuildCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := &fakeRegistry{infos: map[string]strategy.TagInfo{"a": {Created: at(1)}, "b": {Created: at(2)}, "c": {Created: at(3)}}}
	reg.after = func(tag string) {
		if tag == "a" {
			cancel()
		}
	}
	p := mustNew(t, strategy.Settings{Strategy: "newest-build"})
	_, err := p.Choose(ctx, []string{"a", "b", "c"}, imageref.Version{}, reg.meta)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if !slices.Equal(reg.calls, []string{"a"}) {
		t.Errorf("metadata asked for %q after cancellation", reg.calls)
	}

	// Already cancelled: no call at all.
	reg.calls = nil
	if _, err := p.Choose(ctx, []string{"a"}, imageref.Version{}, reg.meta); !errors.Is(err, context.Canceled) || len(reg.calls) != 0 {
		t.Errorf("cancelled context: err %v, calls %q", err, reg.calls)
	}

	// A deadline is passed through to meta.
	dctx, dcancel := context.WithTimeout(context.Background(), time.Hour)
	defer dcancel()
	var sawDeadline bool
	meta := func(ctx context.Context, tag string) (strategy.TagInfo, error) {
		_, sawDeadline = ctx.Deadline()
		return strategy.TagInfo{Created: at(1)}, nil
	}
	if _, err := p.Choose(dctx, []string{"a"}, imageref.Version{}, meta); err != nil || !sawDeadline {
		t.Errorf("meta did not get the caller's context (err %v)", err)
	}
}

func TestDigest(t *testing.T) {
	index := strategy.TagInfo{Digest: digestOf('i'), Created: at(1), Platforms: []v1.Platform{linuxAmd64, {OS: "linux", Architecture: "arm64", Variant: "v8"}}}
	single := strategy.TagInfo{Digest: digestOf('s'), Created: at(1)}
	singleArm := strategy.TagInfo{Digest: digestOf('r'), Platforms: []v1.Platform{linuxArmV7}}
	tests := []struct {
		name       string
		follow     string
		platforms  []v1.Platform
		ignore     []string
		allow      string
		tags       []string
		info       strategy.TagInfo
		current    imageref.Version
		wantTag    string
		wantDigest string
		wantUpdate bool
		wantCalls  int
		reason     []string
	}{
		{
			name: "index, new digest", follow: "latest",
			platforms: []v1.Platform{linuxArm64},
			tags:      []string{"1.0", "latest"}, info: index,
			current: imageref.Version{Tag: "latest", Digest: digestOf('o')},
			wantTag: "latest", wantDigest: digestOf('i'), wantUpdate: true, wantCalls: 1,
		},
		{
			name: "index lacks platform", follow: "latest",
			platforms: []v1.Platform{linuxArmV7, {OS: "windows", Architecture: "amd64"}},
			tags:      []string{"latest"}, info: index,
			current:   imageref.Version{Tag: "latest", Digest: digestOf('o')},
			wantCalls: 1,
			reason:    []string{"not built for linux/arm/v7, windows/amd64", "linux/amd64"},
		},
		{
			name: "single manifest of unknown platform", follow: "stable",
			platforms: []v1.Platform{linuxAmd64},
			tags:      []string{"stable"}, info: single,
			wantTag: "stable", wantDigest: digestOf('s'), wantUpdate: true, wantCalls: 1,
		},
		{
			name: "single manifest of another platform", follow: "stable",
			platforms: []v1.Platform{linuxAmd64},
			tags:      []string{"stable"}, info: singleArm,
			wantCalls: 1,
			reason:    []string{"not built for linux/amd64"},
		},
		{
			name: "single manifest, no platform requested", follow: "stable",
			tags: []string{"stable"}, info: singleArm,
			wantTag: "stable", wantDigest: digestOf('r'), wantUpdate: true, wantCalls: 1,
		},
		{
			name: "digest unchanged", follow: "latest",
			tags: []string{"latest", "1.0"}, info: index,
			current: imageref.Version{Tag: "latest", Digest: digestOf('i')},
			wantTag: "latest", wantDigest: digestOf('i'), wantCalls: 1,
			reason: []string{"unchanged"},
		},
		{
			name: "running digest unknown", follow: "latest",
			tags: []string{"latest"}, info: index,
			current: imageref.Version{Tag: "latest"},
			wantTag: "latest", wantDigest: digestOf('i'), wantUpdate: true, wantCalls: 1,
		},
		{
			name: "tag missing", follow: "stable",
			tags:   []string{"latest", "1.0"},
			reason: []string{`"stable"`, "not among the 2 tags"},
		},
		{
			name: "tag ignored", follow: "latest", ignore: []string{"lat*"},
			tags:   []string{"latest"},
			reason: []string{`"latest"`, "ignore-tags"},
		},
		{
			name: "tag not allowed", follow: "latest", allow: "regexp:^v",
			tags:   []string{"latest", "v1"},
			reason: []string{`"latest"`, "allow-tags"},
		},
		{
			name: "empty list", follow: "latest",
			reason: []string{"not among the 0 tags"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, strategy.Settings{
				Strategy: "digest", Constraint: tt.follow, Platforms: tt.platforms,
				IgnoreTags: tt.ignore, AllowTags: tt.allow,
			})
			reg := &fakeRegistry{infos: map[string]strategy.TagInfo{tt.follow: tt.info}}
			r, err := p.Choose(context.Background(), tt.tags, tt.current, reg.meta)
			if err != nil {
				t.Fatalf("Choose: %v", err)
			}
			if r.Tag != tt.wantTag || r.Digest != tt.wantDigest || r.Update != tt.wantUpdate {
				t.Errorf("Choose = %+v, want tag %q digest %q update %v", r, tt.wantTag, tt.wantDigest, tt.wantUpdate)
			}
			if len(reg.calls) != tt.wantCalls {
				t.Errorf("metadata calls %q, want %d", reg.calls, tt.wantCalls)
			}
			for _, s := range tt.reason {
				if !strings.Contains(r.Reason, s) {
					t.Errorf("Reason %q does not contain %q", r.Reason, s)
				}
			}
			if !r.Update && r.Reason == "" {
				t.Error("no update without a reason")
			}
			if r.Update {
				if want := tt.follow + "@" + tt.wantDigest; r.Version().String() != want {
					t.Errorf("Reference() = %q, want %q", r.Version().String(), want)
				}
			}
		})
	}
}

func TestDigestErrors(t *testing.T) {
	p := mustNew(t, strategy.Settings{Strategy: "digest", Constraint: "latest"})
	boom := errors.New("unauthorized")

	reg := &fakeRegistry{fail: map[string]error{"latest": boom}}
	if _, err := p.Choose(context.Background(), []string{"latest"}, imageref.Version{}, reg.meta); !errors.Is(err, boom) || !strings.Contains(err.Error(), `"latest"`) {
		t.Errorf("failing metadata: err = %v", err)
	}

	reg = &fakeRegistry{infos: map[string]strategy.TagInfo{"latest": {Created: at(1)}}}
	if r, err := p.Choose(context.Background(), []string{"latest"}, imageref.Version{}, reg.meta); err == nil {
		t.Errorf("missing digest accepted: %+v", r)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reg = &fakeRegistry{infos: map[string]strategy.TagInfo{"latest": {Digest: digestOf('a')}}}
	if _, err := p.Choose(ctx, []string{"latest"}, imageref.Version{}, reg.meta); !errors.Is(err, context.Canceled) || len(reg.calls) != 0 {
		t.Errorf("cancelled: err %v, calls %q", err, reg.calls)
	}
}

func TestReference(t *testing.T) {
	tests := []struct {
		r    strategy.Result
		want string
	}{
		{strategy.Result{}, ""},
		{strategy.Result{Tag: "1.2.3"}, "1.2.3"},
		{strategy.Result{Tag: "latest", Digest: digestOf('a')}, "latest@" + digestOf('a')},
	}
	for _, tt := range tests {
		if got := tt.r.Version().String(); got != tt.want {
			t.Errorf("%+v.Version().String() = %q, want %q", tt.r, got, tt.want)
		}
	}
}
