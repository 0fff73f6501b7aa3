package webhook

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Requests that wait for a place get one in the order they came, as
// places are released, and one that waited placeWait gets none.
func TestPlacesInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newPlaces(2, time.Hour)
		ctx := t.Context()
		first, second := s.take(ctx, nil, placeWait), s.take(ctx, nil, placeWait)
		if first == nil || second == nil {
			t.Fatal("free places not taken")
		}
		got := make(chan string, 3)
		for _, name := range []string{"a", "b", "c"} {
			go func() {
				if p := s.take(ctx, nil, placeWait); p != nil {
					got <- name
					return
				}
				got <- name + " refused"
			}()
			synctest.Wait() // each waits before the next comes
		}
		if held, waiting := s.count(); held != 2 || waiting != 3 {
			t.Fatalf("%d held, %d waiting; want 2 and 3", held, waiting)
		}
		s.release(second)
		if name := <-got; name != "a" {
			t.Errorf("the first place released went to %s, want a", name)
		}
		s.release(first)
		if name := <-got; name != "b" {
			t.Errorf("the second place released went to %s, want b", name)
		}
		if name := <-got; name != "c refused" {
			t.Errorf("after %s: %s, want c refused", placeWait, name)
		}
		if held, waiting := s.count(); held != 2 || waiting != 0 {
			t.Errorf("%d held, %d waiting; want 2 and 0", held, waiting)
		}
	})
}

// A request whose context ends while it waits stops waiting.
func TestPlacesWaitEndsWithRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newPlaces(1, time.Hour)
		s.take(t.Context(), nil, placeWait)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan *place)
		go func() { done <- s.take(ctx, nil, time.Hour) }()
		synctest.Wait()
		cancel()
		if p := <-done; p != nil {
			t.Error("a place for a request that went away")
		}
		if _, waiting := s.count(); waiting != 0 {
			t.Errorf("%d waiting, want 0", waiting)
		}
	})
}
