package cycle

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/firstseen"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/strategy"
)

func TestChooseAged(t *testing.T) {
	digest := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		strategy    string
		old, young  []string // versions first seen 8 days and 1 hour ago
		current     imageref.Version
		digestNow   string // where the digest strategy's tag points
		want        imageref.Version
		wantUpdate  bool
		wantWaiting string // the version waiting, "" for none
		// pushed are the registry's push times; with them, wantUntil is
		// when the wait ends and wantAsked the tags asked.
		pushed    map[string]time.Time
		wantUntil time.Time
		wantAsked []string
	}{
		{name: "the newest is young: nothing taken", old: []string{"1.0.0"}, young: []string{"1.1.0"}, current: imageref.Version{Tag: "1.0.0"},
			want: imageref.Version{Tag: "1.0.0"}, wantWaiting: "1.1.0"},
		{name: "the newest old enough is taken meanwhile", old: []string{"1.0.0", "1.1.0"}, young: []string{"1.2.0"}, current: imageref.Version{Tag: "1.0.0"},
			want: imageref.Version{Tag: "1.1.0"}, wantUpdate: true, wantWaiting: "1.2.0"},
		{name: "old enough: taken", old: []string{"1.0.0", "1.2.0"}, current: imageref.Version{Tag: "1.0.0"},
			want: imageref.Version{Tag: "1.2.0"}, wantUpdate: true},
		{name: "never seen before counts as new", old: []string{"1.0.0"}, current: imageref.Version{Tag: "1.0.0"},
			young: nil, want: imageref.Version{Tag: "1.0.0"}, wantWaiting: "1.3.0"},
		{name: "the running version is never held back", young: []string{"1.0.0"}, current: imageref.Version{Tag: "1.0.0"},
			want: imageref.Version{Tag: "1.0.0"}},
		{name: "digest: a new digest of the tag waits", strategy: "digest", old: []string{"stable@" + digest("a")}, current: imageref.Version{Tag: "stable", Digest: digest("a")},
			digestNow: digest("b"), want: imageref.Version{Tag: "stable", Digest: digest("a")}, wantWaiting: "stable@" + digest("b")},
		{name: "digest: an old enough digest is taken", strategy: "digest", old: []string{"stable@" + digest("b")}, current: imageref.Version{Tag: "stable", Digest: digest("a")},
			digestNow: digest("b"), want: imageref.Version{Tag: "stable", Digest: digest("b")}, wantUpdate: true},
		{name: "pushed long ago, first seen now: taken", old: []string{"1.0.0"}, young: []string{"1.1.0", "1.2.0"}, current: imageref.Version{Tag: "1.0.0"},
			pushed: map[string]time.Time{"1.1.0": start.Add(-10 * 24 * time.Hour), "1.2.0": start.Add(-9 * 24 * time.Hour)},
			want:   imageref.Version{Tag: "1.2.0"}, wantUpdate: true, wantAsked: []string{"1.1.0", "1.2.0"}},
		{name: "pushed recently: waits from the push, the older push taken", old: []string{"1.0.0"}, young: []string{"1.1.0", "1.2.0"}, current: imageref.Version{Tag: "1.0.0"},
			pushed: map[string]time.Time{"1.1.0": start.Add(-10 * 24 * time.Hour), "1.2.0": start.Add(-2 * time.Hour)},
			want:   imageref.Version{Tag: "1.1.0"}, wantUpdate: true, wantWaiting: "1.2.0", wantUntil: start.Add(-2 * time.Hour).Add(7 * 24 * time.Hour), wantAsked: []string{"1.1.0", "1.2.0"}},
		{name: "no push time: the first sighting", old: []string{"1.0.0"}, young: []string{"1.1.0"}, current: imageref.Version{Tag: "1.0.0"},
			pushed: map[string]time.Time{}, want: imageref.Version{Tag: "1.0.0"}, wantWaiting: "1.1.0", wantAsked: []string{"1.1.0"}},
		{name: "old enough by sight: the registry not asked", old: []string{"1.0.0", "1.2.0"}, current: imageref.Version{Tag: "1.0.0"},
			pushed: map[string]time.Time{}, want: imageref.Version{Tag: "1.2.0"}, wantUpdate: true},
		{name: "digest: the tag pushed long ago", strategy: "digest", old: []string{"stable@" + digest("a")}, current: imageref.Version{Tag: "stable", Digest: digest("a")},
			digestNow: digest("b"), pushed: map[string]time.Time{"stable": start.Add(-8 * 24 * time.Hour)},
			want: imageref.Version{Tag: "stable", Digest: digest("b")}, wantUpdate: true, wantAsked: []string{"stable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := start
			store := firstseen.New(nil, firstseen.WithClock(func() time.Time { return now }))
			now = start.Add(-8 * 24 * time.Hour)
			store.Times("repo", tt.old)
			now = start.Add(-time.Hour)
			store.Times("repo", tt.young)
			now = start
			s := strategy.Settings{Strategy: tt.strategy}
			tags := append(append([]string{}, tt.old...), tt.young...)
			if tt.name == "never seen before counts as new" {
				tags = append(tags, "1.3.0")
			}
			if tt.strategy == "digest" {
				s.Constraint, tags = "stable", []string{"stable"}
			}
			policy, err := strategy.New(s)
			if err != nil {
				t.Fatal(err)
			}
			meta := func(_ context.Context, tag string) (strategy.TagInfo, error) {
				return strategy.TagInfo{Tag: tag, Digest: tt.digestNow}, nil
			}
			age := Age{Min: 7 * 24 * time.Hour, Now: func() time.Time { return now }, FirstSeen: func(v []string) map[string]time.Time { return store.Times("repo", v) }}
			var asked []string
			if tt.pushed != nil {
				age.Pushed = func(_ context.Context, tags []string) map[string]time.Time {
					asked = append(asked, tags...)
					out := map[string]time.Time{}
					for _, t := range tags {
						if at, ok := tt.pushed[t]; ok {
							out[t] = at
						}
					}
					return out
				}
			}
			res, waiting, err := Choose(t.Context(), policy, tags, tt.current, meta, Choice{Age: age})
			if err != nil {
				t.Fatal(err)
			}
			j := &job{policy: policy, spec: &settings.ImageSpec{}}
			if got := j.newVersion(res); got != tt.want || res.Update != tt.wantUpdate {
				t.Errorf("version %s update=%v, want %s update=%v (%s)", got, res.Update, tt.want, tt.wantUpdate, res.Reason)
			}
			switch {
			case tt.wantWaiting == "" && waiting != nil:
				t.Errorf("waiting %+v, want none", waiting)
			case tt.wantWaiting != "" && (waiting == nil || waiting.Version.String() != tt.wantWaiting):
				t.Errorf("waiting %+v, want %s", waiting, tt.wantWaiting)
			case waiting != nil && !tt.wantUntil.IsZero():
				if !waiting.Until.Equal(tt.wantUntil) {
					t.Errorf("waiting until %v, want %v", waiting.Until, tt.wantUntil)
				}
			case waiting != nil:
				if want := start.Add(-time.Hour).Add(7 * 24 * time.Hour); tt.wantWaiting != "1.3.0" && !strings.HasPrefix(tt.wantWaiting, "stable") && !waiting.Until.Equal(want) {
					t.Errorf("waiting until %v, want %v", waiting.Until, want)
				}
				if !tt.wantUpdate && !strings.Contains(res.Reason, "waits for its minimum release age (168h0m0s) until ") {
					t.Errorf("reason %q does not tell of the wait", res.Reason)
				}
			}
			if !slices.Equal(asked, tt.wantAsked) {
				t.Errorf("push times asked of %q, want %q", asked, tt.wantAsked)
			}
		})
	}
}
