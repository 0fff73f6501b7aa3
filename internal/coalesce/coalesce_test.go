package coalesce

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/image-updater/argocd-image-updater/internal/safe"
)

func TestDoShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group[int]
		var runs, joins atomic.Int32
		release := make(chan struct{})
		fn := func(context.Context) (int, error) {
			runs.Add(1)
			<-release
			return 42, nil
		}
		done := make(chan struct{}, 10)
		for range 10 {
			go func() {
				v, err := g.Do(t.Context(), "k", func(shared bool) {
					if shared {
						joins.Add(1)
					}
				}, fn)
				if err != nil || v != 42 {
					t.Errorf("Do = %d, %v", v, err)
				}
				done <- struct{}{}
			}()
		}
		synctest.Wait() // every caller is waiting for the one call
		close(release)
		for range 10 {
			<-done
		}
		if runs.Load() != 1 || joins.Load() != 9 {
			t.Errorf("%d runs and %d joins, want 1 and 9", runs.Load(), joins.Load())
		}
		// A finished call is not joined.
		if v, _ := g.Do(t.Context(), "k", nil, func(context.Context) (int, error) { return 1, nil }); v != 1 {
			t.Error("a finished call was joined")
		}
	})
}

// One caller's cancellation must not fail the others; a call nobody waits
// for is cancelled, unless the group is detached.
func TestDoCancellation(t *testing.T) {
	for _, detached := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			g := Group[int]{Detached: detached}
			release := make(chan struct{})
			var callCtx context.Context
			fn := func(ctx context.Context) (int, error) {
				callCtx = ctx
				select {
				case <-release:
					return 7, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			first, cancelFirst := context.WithCancel(t.Context())
			errFirst := make(chan error, 1)
			go func() { _, err := g.Do(first, "k", nil, fn); errFirst <- err }()
			synctest.Wait()
			second, cancelSecond := context.WithCancel(t.Context())
			errSecond := make(chan error, 1)
			go func() { _, err := g.Do(second, "k", nil, fn); errSecond <- err }()
			synctest.Wait()

			cancelFirst()
			if err := <-errFirst; !errors.Is(err, context.Canceled) {
				t.Fatalf("first caller: %v", err)
			}
			if callCtx.Err() != nil {
				t.Fatal("the call was cancelled while a caller still waited")
			}
			cancelSecond()
			<-errSecond
			synctest.Wait()
			if got := callCtx.Err() != nil; got == detached {
				t.Fatalf("detached %v: call cancelled %v once nobody waited", detached, got)
			}
			// A detached call is still there to join.
			third := make(chan int, 1)
			go func() {
				v, _ := g.Do(t.Context(), "k", nil, func(context.Context) (int, error) { return -1, nil })
				third <- v
			}()
			synctest.Wait()
			close(release)
			want := -1
			if detached {
				want = 7
			}
			if v := <-third; v != want {
				t.Errorf("detached %v: third caller got %d, want %d", detached, v, want)
			}
		})
	}
}

func TestForget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group[int]
		release := make(chan struct{})
		go func() {
			_, _ = g.Do(t.Context(), "k", nil, func(context.Context) (int, error) { <-release; return 1, nil })
		}()
		synctest.Wait()
		g.Forget("k")
		v, err := g.Do(t.Context(), "k", nil, func(context.Context) (int, error) { return 2, nil })
		if v != 2 || err != nil {
			t.Errorf("after Forget: %d %v", v, err)
		}
		close(release)
	})
}

// A panic in the shared call fails every caller waiting for it, and the
// process goes on: no caller's recover would see that goroutine.
func TestDoPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group[int]
		release := make(chan struct{})
		errs := make(chan error, 3)
		for range 3 {
			go func() {
				_, err := g.Do(t.Context(), "k", nil, func(context.Context) (int, error) {
					<-release
					panic("bad input")
				})
				errs <- err
			}()
		}
		synctest.Wait()
		close(release)
		for range 3 {
			var p *safe.PanicError
			if err := <-errs; !errors.As(err, &p) || p.Value != "bad input" {
				t.Errorf("Do = %v, want the panic as an error", err)
			}
		}
		// The key is free again.
		if v, err := g.Do(t.Context(), "k", nil, func(context.Context) (int, error) { return 7, nil }); v != 7 || err != nil {
			t.Errorf("after a panic Do = %d, %v", v, err)
		}
	})
}
