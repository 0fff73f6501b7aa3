package main

import (
	"fmt"
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
// sets the flag unless the flag was given on the command line. A value the
// flag cannot take is ignored with a warning that names the variable, and
// the flag keeps its default, as both lines of Argo CD Image Updater do: a
// typo in the ConfigMap the install reads them from does not stop the
// controller. A bad value on the command line is a usage error.
type envFlags map[string]string // flag name -> environment variable

func (e envFlags) apply(flags *pflag.FlagSet, lookupEnv func(string) (string, bool)) (warnings []string) {
	flags.VisitAll(func(f *pflag.Flag) {
		name, ok := e[f.Name]
		if !ok || f.Changed {
			return
		}
		value, set := lookupEnv(name)
		if !set || value == "" {
			return
		}
		// Set through the flag set, so that the flag counts as given, as
		// given on the command line, and a later set of variables for the
		// same flag (the v1.x line's names) does not replace it.
		if err := flags.Set(f.Name, value); err != nil {
			// pflag's scalar values are assigned even when they fail to
			// parse (a duration becomes 0); its lists are left as they were.
			if !strings.HasSuffix(f.Value.Type(), "Slice") {
				_ = f.Value.Set(f.DefValue)
			}
			warnings = append(warnings, fmt.Sprintf("invalid value %q for environment variable %s (flag --%s): %v; using the default %q",
				value, name, f.Name, setErrorReason(err), f.DefValue))
		}
	})
	return warnings
}

// setErrorReason is why pflag refused a value, without the value, which
// the warning already quotes.
func setErrorReason(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
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
