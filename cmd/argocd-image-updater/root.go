package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newRootCommand(lookupEnv func(string) (string, bool)) *cobra.Command {
	root := &cobra.Command{
		Use:   "argocd-image-updater",
		Short: "Keeps the container images of Argo CD Applications up to date",
		// Errors are printed once, by execute, with usage only for bad input.
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{err}
	})
	root.AddCommand(
		newRunCommand(lookupEnv),
		newWebhookCommand(lookupEnv),
		newTestCommand(lookupEnv),
		newTemplateCommand(),
		newVersionCommand(),
	)
	return root
}

// envFlags binds flags to environment variables: an environment variable
// sets the flag unless the flag was given on the command line. A bad value
// in the environment is a usage error that names the variable.
type envFlags map[string]string // flag name -> environment variable

func (e envFlags) apply(flags *pflag.FlagSet, lookupEnv func(string) (string, bool)) error {
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		name, ok := e[f.Name]
		if !ok || f.Changed || err != nil {
			return
		}
		value, set := lookupEnv(name)
		if !set || value == "" {
			return
		}
		// Set through the flag set, so that the flag counts as given, as
		// given on the command line, and a later set of variables for the
		// same flag (the v1.x line's names) does not replace it.
		if setErr := flags.Set(f.Name, value); setErr != nil {
			err = usageErrorf("invalid value %q for environment variable %s (flag --%s): %v", value, name, f.Name, setErr)
		}
	})
	return err
}

// exactlyOneArg is cobra.ExactArgs(1) reporting a usage error.
func exactlyOneArg(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageErrorf("expected exactly one argument (%s), got %d", what, len(args))
		}
		return nil
	}
}

// oneOf validates an enumerated flag value.
func oneOf(flag, value string, allowed ...string) error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return usageErrorf("invalid value %q for --%s: must be one of %s", value, flag, strings.Join(allowed, ", "))
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) != 0 {
		return usageErrorf("unexpected arguments: %s", strings.Join(args, " "))
	}
	return nil
}
