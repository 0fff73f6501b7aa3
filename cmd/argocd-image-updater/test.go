package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// testOptions holds the settings of the test command: the same per-image
// settings the annotations carry, given as flags.
type testOptions struct {
	strategy           string
	constraint         string
	allowTags          string
	ignoreTags         []string
	platforms          []string
	credentials        string
	registriesConfPath string
	kubeconfig         string
	rateLimit          int
	logLevel           string
	output             string
}

func newTestCommand(lookupEnv func(string) (string, bool)) *cobra.Command {
	o := &testOptions{}
	cmd := &cobra.Command{
		Use:   "test IMAGE",
		Short: "Ask the registry which version of IMAGE would be chosen",
		Long: "Ask the registry for the tags of IMAGE and print the version the update strategy chooses.\n" +
			"Exit code 0: a version was chosen; 1: no version qualifies; 2: bad input or an unreachable registry.",
		Args: exactlyOneArg("image"),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneOf("loglevel", o.logLevel, "trace", "debug", "info", "warn", "error"); err != nil {
				return err
			}
			if err := oneOf("output", o.output, "text", "json"); err != nil {
				return err
			}
			if o.rateLimit < 0 {
				return usageErrorf("invalid value %d for --rate-limit: must not be negative", o.rateLimit)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTest(cmd, args[0], o, lookupEnv)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.strategy, "update-strategy", "semver", "update strategy: semver, newest-build, digest or alphabetical")
	f.StringVar(&o.constraint, "semver-constraint", "", "semver range for semver; the tag to follow for digest")
	f.StringVar(&o.allowTags, "allow-tags", "", "only consider tags matching this: regexp:<expression> or any")
	f.StringSliceVar(&o.ignoreTags, "ignore-tags", nil, "drop tags matching these globs (repeatable, comma-separated)")
	f.StringSliceVar(&o.platforms, "platforms", nil, "platforms to consider: os/arch[/variant] (default: this machine's)")
	f.StringVar(&o.credentials, "credentials", "", "credentials reference: pullsecret:, secret:, env:, ext:, ecr, ecr:<role-arn> or gcp")
	f.StringVar(&o.registriesConfPath, "registries-conf-path", "", "path to a registries configuration file")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig used to read pull secrets and secrets")
	f.IntVar(&o.rateLimit, "rate-limit", 20, "requests per second to the registry")
	f.StringVar(&o.logLevel, "loglevel", "warn", "log level: trace, debug, info, warn or error")
	f.StringVar(&o.output, "output", "text", "output format: text or json")
	return cmd
}

func runTest(_ *cobra.Command, _ string, _ *testOptions, _ func(string) (string, bool)) error {
	return &exitError{code: 2, err: errors.New("test: registry access is not available in this build")}
}
