// Command argocd-image-updater keeps the container images of Argo CD
// Applications up to date.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := executeAs(ctx, filepath.Base(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

// execute runs the command line and returns the process exit code: 0 on
// success, 2 for bad input (unknown flag, bad value, wrong arguments), and
// the code carried by an exitError otherwise (1 by default).
func execute(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	return executeAs(ctx, "argocd-image-updater", args, stdout, stderr, lookupEnv)
}

// executeAs is execute for a program run under the name program: as
// "manager", the name of the v1.x line's binary, run means what it means
// there (see runOptions.v1Run).
func executeAs(ctx context.Context, program string, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	root := newRootCommand(lookupEnv)
	root.Use = program
	return executeRoot(ctx, root, args, stdout, stderr)
}

// executeRoot runs root with args and returns the exit code (see execute).
func executeRoot(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "Error: %v\n", err)
	var usage *usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(stderr, "\n%s", cmd.UsageString())
		return 2
	}
	var exit *exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	return 1
}

// usageError marks bad input on the command line or in the environment.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// exitError carries a specific exit code, for commands whose outcome is
// read by scripts (the test command exits 1 when no version qualifies).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
