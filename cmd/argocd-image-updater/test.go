package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/platform"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/registry/credentials/azure"
	"github.com/image-updater/argocd-image-updater/registry/credentials/ecr"
	"github.com/image-updater/argocd-image-updater/registry/credentials/gcp"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/strategy"
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
	verifySignature    string
	pinDigest          string
	minReleaseAge      string
	// defaultRegistriesConf is read when --registries-conf-path is not
	// given and it is a file: the path run and webhook read by default, so
	// that test, run in the controller's container, sees what they see.
	defaultRegistriesConf string
	// registryCAsDir holds CA files named after registry hosts, as for run.
	registryCAsDir string
}

func newTestCommand(lookupEnv func(string) (string, bool)) *cobra.Command {
	return newTestCommandFor(&testOptions{defaultRegistriesConf: defaultRegistriesConfPath, registryCAsDir: defaultRegistryCAsDir}, lookupEnv)
}

// newTestCommandFor fills o from the flags.
func newTestCommandFor(o *testOptions, lookupEnv func(string) (string, bool)) *cobra.Command {
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
	f.StringVar(&o.strategy, "update-strategy", "semver", "update strategy: semver, newest-build, digest, alphabetical or numeric")
	f.StringVar(&o.constraint, "semver-constraint", "", "semver range for semver; the tag to follow for digest")
	f.StringVar(&o.allowTags, "allow-tags", "", "only consider tags matching this: regexp:<expression> or any")
	f.StringSliceVar(&o.ignoreTags, "ignore-tags", nil, "drop tags matching these globs (repeatable, comma-separated)")
	f.StringSliceVar(&o.platforms, "platforms", nil, "platforms to consider: os/arch[/variant] (default: this machine's)")
	f.StringVar(&o.credentials, "credentials", "", "credentials reference: pullsecret:, secret:, env:, ext:, ecr, ecr:<role-arn> or gcp")
	f.StringVar(&o.registriesConfPath, "registries-conf-path", "", "path to a registries configuration file (default: "+o.defaultRegistriesConf+" when that file exists; \"\" for none)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig used to read pull secrets and secrets")
	f.IntVar(&o.rateLimit, "rate-limit", 20, "requests per second to the registry")
	f.StringVar(&o.logLevel, "loglevel", "warn", "log level: trace, debug, info, warn or error")
	f.StringVar(&o.output, "output", "text", "output format: text or json")
	f.StringVar(&o.verifySignature, "verify-signature", "", "only versions with a cosign signature made with this public key: a PEM file, or secret:<namespace>/<name>#<field> (with --kubeconfig)")
	f.StringVar(&o.pinDigest, "pin-digest", "never", "pin the chosen tag by digest: never, if-not-present or always; a digest in IMAGE is the running pin")
	f.StringVar(&o.minReleaseAge, "minimum-release-age", "0", "only versions at least this old (36h, 7d): aged from the registry's push time where its API gives one, else from now, as a first cycle sees them")
	return cmd
}

// testOutput is what `test --output json` prints.
type testOutput struct {
	Image          string `json:"image"`
	Strategy       string `json:"strategy"`
	Constraint     string `json:"constraint,omitempty"`
	Tag            string `json:"tag,omitempty"`
	Digest         string `json:"digest,omitempty"`
	TagsSeen       int    `json:"tagsSeen"`
	TagsConsidered int    `json:"tagsConsidered"`
	Reason         string `json:"reason,omitempty"`
	// Skipped are the new versions passed over for their signatures.
	Skipped []cycle.Skipped `json:"skipped,omitempty"`
	// Waiting is the newer version held back by --minimum-release-age.
	Waiting *testWaiting `json:"waiting,omitempty"`
}

// testWaiting is a version that waits, and until when.
type testWaiting struct {
	Version string    `json:"version"`
	Until   time.Time `json:"until"`
	Reason  string    `json:"reason"`
}

func runTest(cmd *cobra.Command, image string, o *testOptions, lookupEnv func(string) (string, bool)) error {
	// One run is one cycle: an ext: script runs once, as in the controller.
	ctx := credentials.WithCycle(cmd.Context())
	logger, err := newLogger(cmd.ErrOrStderr(), o.logLevel, "text")
	if err != nil {
		return err
	}
	if !cmd.Flags().Changed("registries-conf-path") {
		o.registriesConfPath = o.registriesConfDefault(logger)
	}
	in, err := o.input(image)
	if err != nil {
		return badInput(err)
	}
	client, secrets, err := o.client(in.cfg, lookupEnv, logger)
	if err != nil {
		return badInput(err)
	}
	res, skipped, waiting, err := o.choose(ctx, in, client, secrets)
	if err != nil {
		return badInput(err)
	}
	out := testOutput{
		Image: in.ref.Name(), Strategy: string(in.policy.Name()), Constraint: o.constraint,
		Tag: res.Tag, Digest: res.Digest, TagsSeen: res.Seen, TagsConsidered: res.Considered, Reason: res.Reason,
		Skipped: skipped,
	}
	if waiting != nil {
		out.Waiting = &testWaiting{Version: waiting.Version.String(), Until: waiting.Until.UTC(), Reason: waiting.String()}
	}
	if o.output == "json" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printTestResult(cmd.OutOrStdout(), out)
	}
	if res.Tag == "" {
		return &exitError{code: 1, err: fmt.Errorf("no version of %s qualifies: %s", out.Image, res.Reason)}
	}
	return nil
}

// registriesConfDefault is the registries configuration test reads when
// the flag is not given: the default file when there is one, else none
// (the built-in defaults). A file that is there but does not load is an
// error later, not skipped.
func (o *testOptions) registriesConfDefault(logger *slog.Logger) string {
	if o.defaultRegistriesConf == "" {
		return ""
	}
	if st, err := os.Stat(o.defaultRegistriesConf); err == nil && !st.IsDir() {
		logger.Debug("reading the default registries configuration", "path", o.defaultRegistriesConf)
		return o.defaultRegistriesConf
	}
	logger.Debug("no registries configuration at the default path, using the built-in defaults", "path", o.defaultRegistriesConf)
	return ""
}

// badInput is an error of the command's input: exit code 2.
func badInput(err error) error { return &exitError{code: 2, err: err} }

// testInput is what the test command's arguments and flags ask for.
type testInput struct {
	cfg       *config.Config
	ref       imageref.Reference
	creds     credref.Ref
	platforms []v1.Platform
	policy    *strategy.Policy
	pin       settings.DigestPin
	minAge    time.Duration
}

func (o *testOptions) input(image string) (testInput, error) {
	in := testInput{cfg: &config.Config{}, platforms: []v1.Platform{{OS: runtime.GOOS, Architecture: runtime.GOARCH}}}
	var err error
	if o.registriesConfPath != "" {
		if in.cfg, err = config.Load(o.registriesConfPath); err != nil {
			return in, err
		}
	}
	if in.ref, err = imageref.Parse(image, in.cfg.ReferenceOptions()...); err != nil {
		return in, err
	}
	if o.credentials != "" {
		if in.creds, err = credref.ParseRef(o.credentials); err != nil {
			return in, err
		}
	}
	if len(o.platforms) > 0 {
		if in.platforms, err = platform.Parse(strings.Join(o.platforms, ",")); err != nil {
			return in, err
		}
	}
	if in.pin, err = settings.ParseDigestPin(o.pinDigest); err != nil {
		return in, fmt.Errorf("--pin-digest: %w", err)
	}
	if in.minAge, err = settings.ParseReleaseAge(o.minReleaseAge); err != nil {
		return in, fmt.Errorf("--minimum-release-age: %w", err)
	}
	in.policy, err = strategy.New(strategy.Settings{
		Strategy: o.strategy, Constraint: o.constraint, AllowTags: o.allowTags,
		IgnoreTags: o.ignoreTags, Platforms: in.platforms,
	})
	return in, err
}

// client is the registry client the controller would use with cfg, with
// Secrets read through --kubeconfig when it is given.
func (o *testOptions) client(cfg *config.Config, lookupEnv func(string) (string, bool), logger *slog.Logger) (*registry.Client, credentials.SecretGetter, error) {
	resolverOpts := []credentials.Option{credentials.WithEnv(lookupEnv)}
	var secrets credentials.SecretGetter
	if o.kubeconfig != "" {
		restConfig, _, err := kubeConfig(o.kubeconfig)
		if err != nil {
			return nil, nil, err
		}
		cs, err := kubernetes.NewForConfig(restConfig)
		if err != nil {
			return nil, nil, err
		}
		secrets = credentials.NewKubeSecretGetter(cs)
		resolverOpts = append(resolverOpts, credentials.WithSecretGetter(secrets))
	}
	aws := ecr.NewProvider()
	resolverOpts = append(resolverOpts,
		credentials.WithNative(credref.KindECR, aws),
		credentials.WithNative(credref.KindGCP, gcp.NewProvider()),
		credentials.WithNative(credref.KindAzure, azure.NewProvider()))
	return registry.NewClient(
		registry.WithConfig(func() *config.Config { return cfg }),
		registry.WithCredentialResolver(credentials.NewResolver(resolverOpts...)),
		registry.WithLogger(logger),
		registry.WithDefaultLimit(float64(o.rateLimit)),
		registry.WithHostCAs(o.registryCAsDir),
		registry.WithECRPushTimes(aws.PushTimes),
	), secrets, nil
}

// choose lists the tags and chooses as the cycle does, among signed
// versions only with --verify-signature.
func (o *testOptions) choose(ctx context.Context, in testInput, client *registry.Client, secrets credentials.SecretGetter) (strategy.Result, []cycle.Skipped, *cycle.Waiting, error) {
	tags, err := client.Tags(ctx, in.ref, in.creds)
	if err != nil {
		return strategy.Result{}, nil, nil, err
	}
	meta := cycle.MetadataFunc(client, in.ref, in.creds, in.platforms)
	pin := cycle.Pin{Mode: in.pin}
	if pin.Mode != settings.PinNever {
		follow := cycle.MetadataFunc(client, in.ref, in.creds, in.platforms, registry.FollowTag())
		pin.Digest = func(ctx context.Context, tag string) (string, error) {
			info, err := follow(ctx, tag)
			return info.Digest, err
		}
	}
	choice := cycle.Choice{Pin: pin, Age: testAge(client, in)}
	if o.verifySignature == "" {
		res, waiting, err := cycle.Choose(ctx, in.policy, tags, in.ref.Version(), meta, choice)
		return res, nil, waiting, err
	}
	key, err := loadTestKey(ctx, o.verifySignature, secrets)
	if err != nil {
		return strategy.Result{}, nil, nil, err
	}
	v := signature.NewVerifier(client)
	res, skipped, waiting, err := cycle.ChooseVerified(ctx, in.policy, tags, in.ref.Version(), meta, cycle.SignatureCheck{
		Digest: func(ctx context.Context, tag string) (string, error) {
			info, err := meta(ctx, tag)
			return info.Digest, err
		},
		Verify: func(ctx context.Context, digest string) error { return v.Verify(ctx, in.ref, in.creds, digest, key) },
	}, choice)
	return res, skipped, waiting, err
}

// testAge is --minimum-release-age as a first cycle applies it: every
// version is first seen now, and the registry's push times count where
// its API gives them.
func testAge(client *registry.Client, in testInput) cycle.Age {
	now := time.Now()
	return cycle.Age{
		Min: in.minAge,
		Now: func() time.Time { return now },
		FirstSeen: func(versions []string) map[string]time.Time {
			out := make(map[string]time.Time, len(versions))
			for _, v := range versions {
				out[v] = now
			}
			return out
		},
		Pushed: func(ctx context.Context, tags []string) map[string]time.Time {
			times, _ := client.PushTimes(ctx, in.ref, in.creds, tags)
			return times
		},
	}
}

// loadTestKey reads the public key of --verify-signature: a PEM file, or
// a Secret's field.
func loadTestKey(ctx context.Context, s string, secrets credentials.SecretGetter) (*signature.PublicKey, error) {
	if strings.HasPrefix(s, "secret:") {
		k, err := settings.ParseSignatureKey(s)
		if err != nil {
			return nil, fmt.Errorf("--verify-signature: %w", err)
		}
		if k.Namespace == "" {
			return nil, fmt.Errorf("--verify-signature %s: name the Secret's namespace, secret:<namespace>/<name>#<field>", s)
		}
		if secrets == nil {
			return nil, fmt.Errorf("--verify-signature %s: reading a Secret needs --kubeconfig", s)
		}
		return signature.LoadKey(ctx, secrets, k.Namespace, k.Name, k.Field)
	}
	pemBytes, err := os.ReadFile(s)
	if err != nil {
		return nil, fmt.Errorf("--verify-signature: %w", err)
	}
	k, err := signature.ParsePublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("--verify-signature %s: %w", s, err)
	}
	return k, nil
}

func printTestResult(w io.Writer, out testOutput) {
	fmt.Fprintf(w, "image:       %s\n", out.Image)
	fmt.Fprintf(w, "strategy:    %s\n", out.Strategy)
	if out.Constraint != "" {
		fmt.Fprintf(w, "constraint:  %s\n", out.Constraint)
	}
	fmt.Fprintf(w, "tags:        %d seen, %d considered\n", out.TagsSeen, out.TagsConsidered)
	for _, s := range out.Skipped {
		fmt.Fprintf(w, "skipped:     %s\n", s)
	}
	if out.Waiting != nil {
		fmt.Fprintf(w, "waiting:     %s\n", out.Waiting.Reason)
	}
	if out.Tag == "" {
		fmt.Fprintf(w, "result:      no version qualifies (%s)\n", out.Reason)
		return
	}
	fmt.Fprintf(w, "result:      %s\n", imageref.Version{Tag: out.Tag, Digest: out.Digest})
}
