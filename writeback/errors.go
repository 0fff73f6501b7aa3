package writeback

import "errors"

// ErrInvalidTarget is wrapped by errors of what an Application asks to
// write: a branch name or template, a file path, or a file that cannot be
// edited (missing, invalid YAML, outside the repository). Trying again
// does not help until the Application or the repository changes.
var ErrInvalidTarget = errors.New("invalid write-back target")

// ErrWriteNotStarted is wrapped by the error of a write that was not
// started because the controller is stopping or no longer leads. Nothing
// was written; a later cycle, or the replica that leads now, writes it.
var ErrWriteNotStarted = errors.New("write not started")

// BatchError is the error of a write that failed for several Applications
// at once (a repository that could not be listed, fetched or pushed to):
// each of their Results wraps the same BatchError, so that callers report
// it once.
type BatchError struct {
	Err error
	// Applications is how many Applications it failed.
	Applications int
}

func (e *BatchError) Error() string { return e.Err.Error() }
func (e *BatchError) Unwrap() error { return e.Err }
