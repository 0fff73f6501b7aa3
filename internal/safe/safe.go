// Package safe contains panics where goroutines start. A panic on input
// from a registry, a repository, a webhook sender or an Application is a
// bug, but it must fail only the work that met the input, never the
// controller: every goroutine that runs such work starts through Call or Go.
package safe

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// PanicError is a panic turned into an error, with the stack where it
// happened.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("internal error: %v", e.Value) }

// Call runs f and returns its panic, if any, as a *PanicError.
func Call(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return f()
}

// Value is Call for a function with a result.
func Value[T any](f func() (T, error)) (v T, err error) {
	err = Call(func() (err error) {
		v, err = f()
		return err
	})
	return v, err
}

// Go runs f on a new goroutine; a panic in it is logged with its stack
// and ends only that goroutine.
func Go(log *slog.Logger, what string, f func()) {
	go func() {
		if err := Call(func() error { f(); return nil }); err != nil {
			Log(log, what, err)
		}
	}()
}

// Log logs err's stack if it holds a panic, with what was being done.
func Log(log *slog.Logger, what string, err error) {
	var p *PanicError
	if log != nil && errors.As(err, &p) {
		log.Error("internal error", "while", what, "panic", p.Value, "stack", string(p.Stack))
	}
}
