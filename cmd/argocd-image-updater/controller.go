package main

import (
	"context"
	"errors"
	"log/slog"
)

func runController(_ context.Context, _ *runOptions, _ *slog.Logger) error {
	return errors.New("run: the update loop is not available in this build")
}
