package cycle

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/appwatch"
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

// Liveness: Stalled turns true when Run has not finished a cycle for
// longer than allowed, and never while Run is not running.
func TestStalled(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	block := make(chan struct{})
	apps := &blockingApps{block: block, entered: make(chan struct{})}
	u := New(apps, nil, nil, withClock(clock))
	if u.Stalled(time.Minute) {
		t.Fatal("stalled before Run")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { u.Run(ctx, time.Minute); close(done) }()
	<-apps.entered // the first cycle is under way and held
	advance(30 * time.Second)
	if u.Stalled(time.Minute) {
		t.Error("stalled within the limit")
	}
	advance(time.Minute)
	if !u.Stalled(time.Minute) {
		t.Error("not stalled after the limit")
	}
	close(block) // the cycle finishes
	waitUntil(t, func() bool { return !u.Stalled(time.Minute) })
	cancel()
	<-done
	advance(time.Hour)
	if u.Stalled(time.Minute) {
		t.Error("stalled after Run returned")
	}
}

// blockingApps holds the cycle that lists it until block is closed, and
// closes entered when the first cycle asks.
type blockingApps struct {
	block   chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (b *blockingApps) Applications(...imageref.Option) []*appwatch.Application {
	b.once.Do(func() { close(b.entered) })
	<-b.block
	return nil
}
