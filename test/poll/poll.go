// Package poll is the one polling loop of the tests: it asks a condition
// again at a short interval until it holds or a deadline passes, for
// conditions another goroutine or process makes true (an informer's
// cache, a file a watcher reads, a server's state).
package poll

import (
	"testing"
	"time"
)

// interval is how often a condition is asked again.
const interval = 20 * time.Millisecond

// Until polls cond until it holds, failing the test with what (and the
// last detail cond gave) when timeout passes first. cond returns whether
// it holds and, when not, what it saw, for the failure message.
func Until(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if detail == "" {
				t.Fatalf("%s: not within %s", what, timeout)
			}
			t.Fatalf("%s: not within %s (last seen: %s)", what, timeout, detail)
		}
		time.Sleep(interval)
	}
}

// True is Until for a condition with nothing to say when it does not hold.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, timeout, what, func() (bool, string) { return cond(), "" })
}
