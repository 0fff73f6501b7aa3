package testenv

import (
	"testing"
	"time"
)

// pollInterval is how often WaitFor asks again.
const pollInterval = 20 * time.Millisecond

// WaitFor polls cond until it holds, failing the test with what (and the
// last detail cond gave) when timeout passes first. cond returns whether
// it holds and, when not, what it saw, for the failure message.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last seen: %s)", what, timeout, detail)
		}
		time.Sleep(pollInterval)
	}
}
