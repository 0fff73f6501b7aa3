package cycle

import (
	"context"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/strategy"
)

func TestOrderedMetadata(t *testing.T) {
	policy, err := strategy.New(strategy.Settings{Strategy: "newest-build", IgnoreTags: []string{"skip-*"}})
	if err != nil {
		t.Fatal(err)
	}
	tags := []string{"build-30", "skip-me", "build-10", "build-20"}
	tests := []struct {
		mode config.TagSortMode
		want string
	}{
		{config.TagSortLatestFirst, "build-30"},
		{config.TagSortLatestLast, "build-20"},
	}
	for _, tt := range tests {
		res, err := policy.Choose(context.Background(), tags, imageref.Version{Tag: "build-10"}, orderedMetadata(tags, tt.mode))
		if err != nil {
			t.Fatal(err)
		}
		if res.Tag != tt.want || !res.Update {
			t.Errorf("%s: chose %+v, want %s", tt.mode, res, tt.want)
		}
	}
}

func TestMetadataMemo(t *testing.T) {
	m := newMetadataMemo()
	calls := 0
	for range 3 {
		info, err := m.get(t.Context(), "k", func(context.Context) (strategy.TagInfo, error) { calls++; return strategy.TagInfo{Tag: "v1"}, nil })
		if err != nil || info.Tag != "v1" {
			t.Fatalf("got %+v, %v", info, err)
		}
	}
	if calls != 1 {
		t.Errorf("fetched %d times, want 1", calls)
	}
}
