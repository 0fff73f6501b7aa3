package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// Set by the Makefile through -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

func newVersionCommand() *cobra.Command {
	var short bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if short {
				fmt.Fprintln(cmd.OutOrStdout(), version)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "argocd-image-updater %s\n  commit: %s\n  go:     %s %s/%s\n",
				version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
	cmd.Flags().BoolVar(&short, "short", false, "print only the version")
	return cmd
}
