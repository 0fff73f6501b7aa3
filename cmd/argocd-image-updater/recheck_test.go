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

// scriptedChecker answers each check with the next summary of its script,
// then with none, and records when each came and what it named.
type scriptedChecker struct {
	script []cycle.Summary
	start  time.Time
	calls  []string
}

func (c *scriptedChecker) CheckImageUpdaters(_ context.Context, names []types.NamespacedName, _ string) cycle.Summary {
	var s cycle.Summary
	if len(c.calls) < len(c.script) {
		s = c.script[len(c.calls)]
	}
	var list []string
	for _, n := range names {
		list = append(list, n.Name)
	}
	slices.Sort(list)
	c.calls = append(c.calls, time.Since(c.start).String()+" "+strings.Join(list, ","))
	return s
}

// TestRecheckImageUpdaters: without cycles, a check that met an error or
// could not write is run again after 5 s, 10 s, 20 s..., with what changed
// meanwhile (which restarts the wait); one that succeeds ends it. With
// cycles, none is repeated.
func TestRecheckImageUpdaters(t *testing.T) {
	a := types.NamespacedName{Namespace: "team", Name: "a"}
	b := types.NamespacedName{Namespace: "team", Name: "b"}
	for _, tc := range []struct {
		name    string
		recheck bool
		want    []string
	}{
		{"no cycles", true, []string{"0s a", "5s a", "12s a,b", "32s a,b", "1m2s b"}},
		{"cycles", false, []string{"0s a", "12s b", "1m2s b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &scriptedChecker{start: time.Now(), script: []cycle.Summary{
					{Errors: 1},     // a fails
					{NotWritten: 1}, // a again, not written
					{Errors: 1},     // a with b, changed meanwhile
					{},              // a once more, done
				}}
				feed := &changeFeed{ch: make(chan struct{})}
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
				if want := tc.want; !slices.Equal(c.calls, want) {
					t.Errorf("checks %q, want %q", c.calls, want)
				}
			})
		})
	}
}
