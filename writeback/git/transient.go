package git

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/internal/transient"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// Retries of a repository's transient failures within one Write: one 429,
// reset or cut answer would otherwise fail every Application of the batch
// until the next cycle. Up to DefaultTransientRetries tries after the
// first, 0.5 s doubling (or the server's Retry-After), each wait at most
// 10 s.
const (
	DefaultTransientRetries = 3
	transientBackoff        = 500 * time.Millisecond
	transientMaxWait        = 10 * time.Second
)

// WithTransientRetries sets how often a fetch, a listing or a push that
// failed transiently is tried again within one Write; 0 never.
func WithTransientRetries(n int) Option {
	return func(c *writerConfig) { c.transientRetries = max(n, 0) }
}

// withTransientBackoff shortens the waits, for tests.
func withTransientBackoff(d time.Duration) Option {
	return func(c *writerConfig) { c.transientBackoff = d }
}

// transientGitError tells whether a git operation failed in a way the same
// operation may not fail again: the server overloaded (429, 5xx), the
// connection dropped or reset, or the answer cut short. A refusal (401,
// 403, 404), a push the server rejected for its content, a moved branch
// and our own deadline are not.
func transientGitError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, gitwire.ErrBranchMoved) ||
		errors.Is(err, bounded.ErrTooLarge) {
		return false
	}
	if httpErr := gitHTTPError(err); httpErr != nil {
		code := httpErr.Response.StatusCode
		return code == 429 || code >= 500 && code != 501 && code != 505
	}
	return transient.Network(err)
}

// gitHTTPError finds the answer go-git's HTTP transport refused, which it
// wraps in a plumbing.UnexpectedError that errors.As cannot see through.
func gitHTTPError(err error) *githttp.Err {
	var httpErr *githttp.Err
	if errors.As(err, &httpErr) && httpErr.Response != nil {
		return httpErr
	}
	var unexpected *plumbing.UnexpectedError
	if errors.As(err, &unexpected) && errors.As(unexpected.Err, &httpErr) && httpErr.Response != nil {
		return httpErr
	}
	return nil
}

// retryAfter is the wait a server asked for with its answer, if any.
func retryAfter(err error) (time.Duration, bool) {
	httpErr := gitHTTPError(err)
	if httpErr == nil {
		return 0, false
	}
	s, convErr := strconv.Atoi(strings.TrimSpace(httpErr.Response.Header.Get("Retry-After")))
	if convErr != nil || s < 0 {
		return 0, false
	}
	return time.Duration(s) * time.Second, true
}

// transientRetry counts the transient retries of one repository's writes.
type transientRetry struct {
	max   int
	base  time.Duration
	tries int
	log   *slog.Logger
}

// wait tells whether err may be retried and, if so, waits first; false
// when it is not transient, the retries are spent or ctx ended.
func (r *transientRetry) wait(ctx context.Context, what string, err error) bool {
	if r.tries >= r.max || !transientGitError(err) {
		return false
	}
	r.tries++
	delay := min(r.base<<(r.tries-1), transientMaxWait)
	if d, ok := retryAfter(err); ok {
		delay = min(d, transientMaxWait)
	}
	r.log.Info("git server failed transiently; retrying", "operation", what, "attempt", r.tries, "retryIn", delay, "error", err)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// do runs op until it succeeds, fails for good, or the retries are spent.
func (r *transientRetry) do(ctx context.Context, what string, op func() error) error {
	for {
		err := op()
		if err == nil || !r.wait(ctx, what, err) {
			return err
		}
	}
}

// batchError is the error of every Application of a batch that failed
// together (the repository could not be listed, fetched or pushed to):
// the same writeback.BatchError for each, so that a caller can report it
// once.
func batchError(err error, apps int) error {
	if apps < 2 {
		return err
	}
	return &writeback.BatchError{Err: err, Applications: apps}
}
