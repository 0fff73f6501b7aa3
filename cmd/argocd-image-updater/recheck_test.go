package main

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageref"
)

// changeFeed is imageUpdaterChanges fed by the test.
type changeFeed struct {
	mu      sync.Mutex
	ch      chan struct{}
	changed []types.NamespacedName
}

func (f *changeFeed) Changed() <-chan struct{} { return f.ch }

func (f *changeFeed) TakeChanged() []types.NamespacedName {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.changed
	f.changed = nil
	return out
}

func (f *changeFeed) change(n types.NamespacedName) {
	f.mu.Lock()
	f.changed = append(f.changed, n)
	f.mu.Unlock()
	f.ch <- struct{}{}
}

// scriptedChecker answers each check of an ImageUpdater with the next
// summary of its script, then with none, and records when each came and
// what it named; a check of one in hold waits until hold[name] closes.
type scriptedChecker struct {
	mu     sync.Mutex
	script map[string][]cycle.Summary
	hold   map[string]chan struct{}
	start  time.Time
	calls  []string
}

func (c *scriptedChecker) CheckImageUpdaters(_ context.Context, names []types.NamespacedName, _ string) cycle.Summary {
	var list []string
	for _, n := range names {
		list = append(list, n.Name)
	}
	slices.Sort(list)
	key := strings.Join(list, ",")
	c.mu.Lock()
	c.calls = append(c.calls, time.Since(c.start).String()+" "+key)
	var s cycle.Summary
	if script := c.script[key]; len(script) > 0 {
		s, c.script[key] = script[0], script[1:]
	}
	hold := c.hold[key]
	c.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return s
}

func (c *scriptedChecker) called() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// TestRecheckImageUpdaters: without cycles, a check that met an error,
// could not write, or found an image its Application does not run yet is
// run again after 5 s, 10 s, 20 s..., each ImageUpdater
// on its own; one that succeeds ends it. With cycles, none is repeated.
func TestRecheckImageUpdaters(t *testing.T) {
	notYet, err := imageref.Parse("registry.example/team/app")
	if err != nil {
		t.Fatal(err)
	}
	a := types.NamespacedName{Namespace: "team", Name: "a"}
	b := types.NamespacedName{Namespace: "team", Name: "b"}
	for _, tc := range []struct {
		name    string
		recheck bool
		want    []string
	}{
		{"no cycles", true, []string{"0s a", "5s a", "12s b", "15s a", "35s a", "1m2s b"}},
		{"cycles", false, []string{"0s a", "12s b", "1m2s b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &scriptedChecker{start: time.Now(), script: map[string][]cycle.Summary{
					"a": {
						{Errors: 1},     // a fails
						{NotWritten: 1}, // a again, not written
						{NotRunning: []imageref.Reference{notYet}}, // a meets an image not deployed yet
						{}, // a once more, done
					},
				}}
				feed := &changeFeed{ch: make(chan struct{}, 1)}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					checkChangedImageUpdaters(ctx, c, feed, tc.recheck)
				}()
				feed.change(a)
				time.Sleep(12 * time.Second)
				feed.change(b)
				time.Sleep(50 * time.Second)
				feed.change(b)
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				cancel()
				<-done
				if got, want := c.called(), tc.want; !slices.Equal(got, want) {
					t.Errorf("checks %q, want %q", got, want)
				}
			})
		})
	}
}

// Fair share without cycles: the check of an ImageUpdater whose
// registries never answer holds no other ImageUpdater's check; a change
// of the held one while it runs is checked after it.
func TestImageUpdaterCheckHoldsNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hostile := types.NamespacedName{Namespace: "hostile", Name: "hog"}
		team := types.NamespacedName{Namespace: "team", Name: "web"}
		release := make(chan struct{})
		c := &scriptedChecker{start: time.Now(), hold: map[string]chan struct{}{"hog": release}}
		feed := &changeFeed{ch: make(chan struct{}, 1)}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			checkChangedImageUpdaters(ctx, c, feed, true)
		}()
		feed.change(hostile)
		synctest.Wait()
		time.Sleep(time.Second)
		feed.change(team)
		feed.change(hostile)
		synctest.Wait()
		if got, want := c.called(), []string{"0s hog", "1s web"}; !slices.Equal(got, want) {
			t.Errorf("while hog's check is held: checks %q, want %q", got, want)
		}
		time.Sleep(time.Minute)
		close(release)
		synctest.Wait()
		if got, want := c.called(), []string{"0s hog", "1s web", "1m1s hog"}; !slices.Equal(got, want) {
			t.Errorf("after hog's check: checks %q, want %q", got, want)
		}
		cancel()
		<-done
	})
}
