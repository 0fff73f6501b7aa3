package cycle

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/firstseen"
	"github.com/image-updater/argocd-image-updater/imageref"
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
			res, waiting, err := Choose(t.Context(), policy, tags, tt.current, meta, Choice{Age: age})
			if err != nil {
				t.Fatal(err)
			}
			j := &job{policy: policy}
			if got := j.newVersion(res); got != tt.want || res.Update != tt.wantUpdate {
				t.Errorf("version %s update=%v, want %s update=%v (%s)", got, res.Update, tt.want, tt.wantUpdate, res.Reason)
			}
			switch {
			case tt.wantWaiting == "" && waiting != nil:
				t.Errorf("waiting %+v, want none", waiting)
			case tt.wantWaiting != "" && (waiting == nil || waiting.Version.String() != tt.wantWaiting):
				t.Errorf("waiting %+v, want %s", waiting, tt.wantWaiting)
			case waiting != nil:
				if want := start.Add(-time.Hour).Add(7 * 24 * time.Hour); tt.wantWaiting != "1.3.0" && !strings.HasPrefix(tt.wantWaiting, "stable") && !waiting.Until.Equal(want) {
					t.Errorf("waiting until %v, want %v", waiting.Until, want)
				}
				if !tt.wantUpdate && !strings.Contains(res.Reason, "waits for its minimum release age (168h0m0s) until ") {
					t.Errorf("reason %q does not tell of the wait", res.Reason)
				}
			}
		})
	}
}
