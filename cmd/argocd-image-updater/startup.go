package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/image-updater/argocd-image-updater/internal/transient"
)

// startupBudget bounds how long the start-up keeps retrying one request
// to the API server that fails transiently; past it the process exits 1
// and the pod restarts, as before the retries. As long as listing the
// Applications may take (appwatch).
const startupBudget = 2 * time.Minute

// startupBackoff is the wait before the first retry; it doubles up to
// startupMaxWait, or follows the server's Retry-After.
const (
	startupBackoff = 200 * time.Millisecond
	startupMaxWait = 10 * time.Second
)

// retryStartup runs call until it succeeds, fails in a way a retry cannot
// mend, or startupBudget is spent. client-go retries only 429 and 5xx
// answers that carry Retry-After, so a plain 500, a reset connection or an
// answer cut short during the start-up would otherwise restart the pod, and
// a few of them in a row put it in CrashLoopBackOff. Each wait is logged
// with what is waited for.
func retryStartup(ctx context.Context, logger *slog.Logger, what string, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, startupBudget)
	defer cancel()
	wait := startupBackoff
	for attempt := 1; ; attempt++ {
		err := call(ctx)
		if err == nil || !transientKubeError(err) {
			return err
		}
		delay := wait
		if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
			delay = time.Duration(s) * time.Second
		}
		delay = min(delay, startupMaxWait)
		logger.Warn("the API server failed a start-up request; retrying", "waitingFor", what, "attempt", attempt, "retryIn", delay, "error", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (still failing after %s of retries)", err, startupBudget)
		case <-t.C:
		}
		wait = min(2*wait, startupMaxWait)
	}
}

// transientKubeError tells whether a request to the API server failed in
// a way that the same request may not fail again: the server overloaded or
// restarting (429, 5xx), the connection dropped or reset, or the answer cut
// short. A refusal (401, 403, 404) and a bad request are not.
func transientKubeError(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == 429 || code >= 500
	}
	return transient.Network(err)
}
