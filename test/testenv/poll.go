package testenv

import (
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/test/poll"
)

// WaitFor polls cond until it holds, failing the test with what (and the
// last detail cond gave) when timeout passes first (see poll.Until).
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	poll.Until(t, timeout, what, cond)
}
