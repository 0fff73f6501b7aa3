package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/internal/memlimit"
	"github.com/image-updater/argocd-image-updater/internal/servertls"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback/git"
)

// Defaults shared with the install manifest.
const (
	defaultRegistriesConfPath = "/app/config/registries.conf"
	defaultCommitMessagePath  = "/app/config/commit.template"
	defaultPullRequestPath    = "/app/config/pull-request.template"
	// defaultRegistryCAsDir is where argocd-operator mounts Argo CD's
	// argocd-tls-certs-cm: a registry host's CAs in a file of its name.
	defaultRegistryCAsDir = "/app/config/tls"
	// defaultShutdownGrace leaves room, within the Deployment's
	// terminationGracePeriodSeconds (60), for releasing the Lease after
	// the writes (at most renewDeadline).
	defaultShutdownGrace = 30 * time.Second
)

// runOptions holds every setting of the run command. It is filled from
// flags and the environment and validated before anything starts.
type runOptions struct {
	interval           time.Duration
	once               bool
	dryRun             bool
	kubeconfig         string
	argocdNamespace    string
	registriesConfPath string
	// sigstoreTrustedRoot is the file keyless signatures are checked
	// against: the operator's choice, never a tenant's.
	sigstoreTrustedRoot string
	// registryCAsDir holds CA files named after registry hosts
	// (registry.WithHostCAs).
	registryCAsDir string
	maxConcurrency int
	// minReleaseAge is the images' default minimum release age, read
	// from --minimum-release-age.
	minReleaseAge     time.Duration
	minReleaseAgeFlag string
	healthPort        int
	stallTimeout      time.Duration
	shutdownGrace     time.Duration
	requestTimeout    time.Duration
	imageTimeout      time.Duration
	// appTimeout bounds all the listings and choices of one Application
	// in a pass (cycle.WithApplicationTimeout); 0: twice imageTimeout.
	appTimeout  time.Duration
	metricsPort int
	// maxAppMetrics bounds the Applications with per-Application series
	// (cycle.MaxApplicationSeries).
	maxAppMetrics int
	// metricsSecure serves the metrics over HTTPS to callers the API
	// server authorizes (the v1.x line's --metrics-secure).
	metricsSecure   bool
	logLevel        string
	logFormat       string
	matchAppNames   []string
	matchAppLabel   string
	applicationsAPI string
	kubeQPS         float32
	kubeBurst       int

	argocdServerAddr string
	argocdAuthToken  string
	argocdInsecure   bool
	argocdPlaintext  bool
	argocdGRPCWeb    bool

	gitCommitUser          string
	gitCommitEmail         string
	gitCommitSigningKey    string
	gitCommitSigningMethod string
	gitCommitSignOff       bool
	gitCommitMessagePath   string
	gitCloneDir            string
	gitCloneMaxSize        string
	// gitCloneMaxBytes is gitCloneMaxSize in bytes, set by validate.
	gitCloneMaxBytes int64

	gitPullRequestPath   string
	githubEnterpriseAPIs []string
	gitlabURLs           []string
	giteaURLs            []string
	bitbucketServerURLs  []string
	azureDevOpsURLs      []string
	// forgeHosts is built from the five above by validate.
	forgeHosts *forge.Hosts
	// gitAPICommits: commits through the GitHub API (--git-commit-method api).
	gitAPICommits bool

	disableKubeEvents   bool
	refreshApplications bool
	notifications       bool
	warmupCache         bool

	leaderElection        bool
	applicationNamespaces []string
	listenAddress         string

	// Flags of the old tool that existing Deployments still pass.
	applicationNamespace string
	// watchNamespaces is the newer line's name of applicationNamespaces.
	watchNamespaces []string
	// imageUpdaters watches ImageUpdater resources when the API server
	// serves them.
	imageUpdaters     bool
	disableKubernetes bool

	webhook webhookOptions
	// serverTLS: the versions, cipher suites and HTTP/2 of every HTTPS
	// server (webhook, secure metrics), from the v1.x line's flags.
	serverTLS servertls.Settings
	// v1 are the v1.x line's flags; warnings what they cannot mean here,
	// logged once at start.
	v1       v1Options
	warnings []string
	// leaseNamespace holds the leader-election Lease; empty: the Argo CD
	// namespace.
	leaseNamespace string
	// webhookOnly: the webhook command, which runs checks on notifications
	// and no periodic cycles.
	webhookOnly bool
	// v1Run: run as the v1.x line runs, because the program is named as
	// that line's binary (/manager, which argocd-operator starts) or a
	// flag only that line has is on the command line. The health server
	// then listens on 8081 and metrics are off unless asked for, and
	// --interval 0 means no periodic cycle rather than one cycle.
	v1Run bool
	// onChangeOnly is the v1.x line's --interval 0: one cycle at the
	// start, then each ImageUpdater when it is created or changed (and
	// the webhook's checks); the controller keeps running.
	onChangeOnly bool
}

// oneCycle: run one cycle and exit (--once, or v0.18's --interval 0).
func (o *runOptions) oneCycle() bool { return o.interval == 0 && !o.webhookOnly && !o.onChangeOnly }

// runEnv maps run flags to the environment variables the install manifest
// fills from the argocd-image-updater-config ConfigMap and Secret.
var runEnv = envFlags{
	"interval":                  "IMAGE_UPDATER_INTERVAL",
	"loglevel":                  "IMAGE_UPDATER_LOGLEVEL",
	"logformat":                 "IMAGE_UPDATER_LOGFORMAT",
	"applications-api":          "APPLICATIONS_API",
	"argocd-server-addr":        "ARGOCD_SERVER",
	"argocd-auth-token":         "ARGOCD_TOKEN",
	"argocd-insecure":           "ARGOCD_INSECURE",
	"argocd-plaintext":          "ARGOCD_PLAINTEXT",
	"argocd-grpc-web":           "ARGOCD_GRPC_WEB",
	"git-commit-user":           "GIT_COMMIT_USER",
	"git-commit-email":          "GIT_COMMIT_EMAIL",
	"git-commit-signing-key":    "GIT_COMMIT_SIGNING_KEY",
	"git-commit-signing-method": "GIT_COMMIT_SIGNING_METHOD",
	"git-commit-sign-off":       "GIT_COMMIT_SIGN_OFF",
	"disable-kube-events":       "IMAGE_UPDATER_KUBE_EVENTS",
	"refresh-applications":      "IMAGE_UPDATER_REFRESH_APPLICATIONS",
	"notifications":             "IMAGE_UPDATER_NOTIFICATIONS",
	"kube-api-qps":              "IMAGE_UPDATER_KUBE_API_QPS",
	"kube-api-burst":            "IMAGE_UPDATER_KUBE_API_BURST",
	"max-concurrency":           "IMAGE_UPDATER_MAX_CONCURRENCY",
	"minimum-release-age":       "IMAGE_UPDATER_MINIMUM_RELEASE_AGE",
	"application-namespaces":    "IMAGE_UPDATER_APPLICATION_NAMESPACES",
	"leader-election":           "IMAGE_UPDATER_LEADER_ELECTION",
	"stall-timeout":             "IMAGE_UPDATER_STALL_TIMEOUT",
	"git-clone-dir":             "IMAGE_UPDATER_GIT_CLONE_DIR",
	"git-clone-max-size":        "IMAGE_UPDATER_GIT_CLONE_MAX_SIZE",
	"github-enterprise-api-url": "IMAGE_UPDATER_GITHUB_ENTERPRISE_API_URLS",
	"gitlab-url":                "IMAGE_UPDATER_GITLAB_URLS",
	"gitea-url":                 "IMAGE_UPDATER_GITEA_URLS",
	"bitbucket-server-url":      "IMAGE_UPDATER_BITBUCKET_SERVER_URLS",
	"azure-devops-url":          "IMAGE_UPDATER_AZURE_DEVOPS_URLS",
	"shutdown-grace-period":     "IMAGE_UPDATER_SHUTDOWN_GRACE_PERIOD",
	"max-application-metrics":   "IMAGE_UPDATER_MAX_APPLICATION_METRICS",
	"registry-request-timeout":  "IMAGE_UPDATER_REGISTRY_REQUEST_TIMEOUT",
	"image-timeout":             "IMAGE_UPDATER_IMAGE_TIMEOUT",
	"application-timeout":       "IMAGE_UPDATER_APPLICATION_TIMEOUT",
	"sigstore-trusted-root":     "IMAGE_UPDATER_SIGSTORE_TRUSTED_ROOT",
	"imageupdaters":             "IMAGE_UPDATER_IMAGEUPDATERS",
}

// defaultGitCloneDir is under TMPDIR, which in the install manifest's pod
// is /tmp, its writable emptyDir volume: the clones outlive restarts of
// the container, not of the pod.
func defaultGitCloneDir() string { return filepath.Join(os.TempDir(), "argocd-image-updater-git") }

func newRunCommand(lookupEnv func(string) (string, bool)) *cobra.Command {
	return newRunCommandFor(&runOptions{}, lookupEnv)
}

// newRunCommandFor fills o from the flags and the environment.
func newRunCommandFor(o *runOptions, lookupEnv func(string) (string, bool)) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "run",
		Short:   "Run the update loop against the Applications of the cluster",
		Args:    noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return o.complete(cmd, lookupEnv) },
		RunE:    func(cmd *cobra.Command, _ []string) error { return o.run(cmd, lookupEnv) },
	}
	f := cmd.Flags()
	o.addCycleFlags(f)
	o.addSelectionFlags(f)
	o.addClusterFlags(f)
	o.addGitFlags(f)
	o.addServerFlags(f)
	o.webhook.addFlags(f)
	o.v1.addFlags(f)
	o.registryCAsDir = defaultRegistryCAsDir
	return cmd
}

// complete settles the options before the controller starts: how it is
// run, then the environment, then the v1.x line's flags, then the checks.
func (o *runOptions) complete(cmd *cobra.Command, lookupEnv func(string) (string, bool)) error {
	o.setMode(cmd)
	o.applyEnv(cmd.Flags(), lookupEnv)
	if err := o.applyV1(cmd.Flags()); err != nil {
		return err
	}
	return o.validate()
}

// setMode tells the command and the line it is run as. Before the
// environment is applied: only the command line tells how the controller
// is run.
func (o *runOptions) setMode(cmd *cobra.Command) {
	o.webhookOnly = cmd.Name() == "webhook"
	o.v1Run = !o.webhookOnly && (cmd.Root().Name() == v1Program || anyChanged(cmd.Flags(), v1OnlyFlags))
}

// applyEnv sets the flags not given from their environment variables,
// keeping the warnings for the logger, which does not exist yet.
func (o *runOptions) applyEnv(f *pflag.FlagSet, lookupEnv func(string) (string, bool)) {
	o.warnings = nil
	for _, env := range []envFlags{runEnv, webhookEnv, v1Env} {
		o.warnings = append(o.warnings, env.apply(f, lookupEnv)...)
	}
}

// applyV1 maps the v1.x line's flags onto the options.
func (o *runOptions) applyV1(f *pflag.FlagSet) error {
	warnings, err := o.v1.apply(o, f)
	if err != nil {
		return err
	}
	o.warnings = append(o.warnings, warnings...)
	return nil
}

// run starts the logger, tells what the options warned of, and runs the
// controller.
func (o *runOptions) run(cmd *cobra.Command, lookupEnv func(string) (string, bool)) error {
	logger, err := newLogger(cmd.ErrOrStderr(), o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	for _, w := range o.warnings {
		logger.Warn(w)
	}
	memlimit.Set(logger, memlimit.FromCgroup)
	return runController(cmd.Context(), o, logger, lookupEnv)
}

// addCycleFlags: when cycles run, what they may write, and how long
// their parts may take.
func (o *runOptions) addCycleFlags(f *pflag.FlagSet) {
	f.DurationVar(&o.interval, "interval", 2*time.Minute, "how often to check for updates (0: one cycle, then exit; run as the v1.x line, no periodic cycle)")
	f.BoolVar(&o.once, "once", false, "run one cycle and exit; same as --interval=0 --health-port=0")
	f.BoolVar(&o.dryRun, "dry-run", false, "compute and log every change, write nothing")
	f.IntVar(&o.maxConcurrency, "max-concurrency", 10, "maximum number of Applications processed at once")
	f.StringVar(&o.minReleaseAgeFlag, "minimum-release-age", "0", "how long the updater must have known a version before it is chosen, for images that set no minimum-release-age: a duration (36h) or days (7d), at most 365d")
	f.StringVar(&o.registriesConfPath, "registries-conf-path", defaultRegistriesConfPath, "path to the registries configuration file")
	f.StringVar(&o.sigstoreTrustedRoot, "sigstore-trusted-root", "", "path to a Sigstore trusted root (trusted_root.json) that keyless signatures are checked against (none: keyless verification is refused)")
	f.DurationVar(&o.stallTimeout, "stall-timeout", 0, "/healthz fails when, while a cycle or check is under way, no image or chart was checked nor anything written for this long, so the pod restarts (default: 5 times --interval, at least 10m)")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace-period", defaultShutdownGrace, "on SIGTERM, how long writes in flight (a patch, a git push) may take to finish before they are abandoned; keep it below the pod's terminationGracePeriodSeconds")
	f.DurationVar(&o.requestTimeout, "registry-request-timeout", registry.DefaultRequestTimeout, "longest time one registry request may take, its answer's body and retries included")
	f.DurationVar(&o.imageTimeout, "image-timeout", cycle.DefaultImageTimeout, "longest time one tag listing, or the choice of one image's new version, may take in a cycle")
	f.DurationVar(&o.appTimeout, "application-timeout", 0, "longest time all the tag listings, chart listings and version choices of one Application may take together in a cycle or check, from its first; past it its images and charts not checked fail with one error, and the other Applications go on (default: 2 times --image-timeout)")
	f.BoolVar(&o.warmupCache, "warmup-cache", true, "accepted for compatibility; the registry cache fills during the first cycle")
}

// addSelectionFlags: which Applications are managed.
func (o *runOptions) addSelectionFlags(f *pflag.FlagSet) {
	f.StringSliceVar(&o.matchAppNames, "match-application-name", nil, "only manage Applications whose name matches this glob (repeatable)")
	f.StringVar(&o.matchAppLabel, "match-application-label", "", "only manage Applications matching this label selector")
	f.StringSliceVar(&o.applicationNamespaces, "application-namespaces", nil, "namespaces whose Applications are managed (default: the Argo CD namespace; * for all)")
	f.StringVar(&o.applicationNamespace, "application-namespace", "", "one namespace whose Applications are managed: the old, single-namespace form of --application-namespaces")
	f.StringSliceVar(&o.watchNamespaces, "watch-namespaces", nil, "the resource-based updater's name of --application-namespaces")
	f.BoolVar(&o.imageUpdaters, "imageupdaters", true, "also serve ImageUpdater resources (argocd-image-updater.argoproj.io/v1alpha1) when the API server has their CRD")
}

// addClusterFlags: how the Kubernetes and Argo CD APIs are reached.
func (o *runOptions) addClusterFlags(f *pflag.FlagSet) {
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig file (default: in-cluster configuration)")
	f.StringVar(&o.argocdNamespace, "argocd-namespace", "", "namespace where Argo CD runs (default: the controller's own namespace)")
	f.StringVar(&o.applicationsAPI, "applications-api", "kubernetes", "API used to read and write Applications: kubernetes or argocd")
	f.Float32Var(&o.kubeQPS, "kube-api-qps", 50, "queries per second allowed to the Kubernetes API")
	f.IntVar(&o.kubeBurst, "kube-api-burst", 100, "burst of queries allowed to the Kubernetes API")
	f.StringVar(&o.argocdServerAddr, "argocd-server-addr", "", "address of the Argo CD API server (applications-api argocd)")
	f.StringVar(&o.argocdAuthToken, "argocd-auth-token", "", "token for the Argo CD API server (prefer the ARGOCD_TOKEN environment variable)")
	f.BoolVar(&o.argocdInsecure, "argocd-insecure", false, "skip TLS verification of the Argo CD API server")
	f.BoolVar(&o.argocdPlaintext, "argocd-plaintext", false, "connect to the Argo CD API server without TLS")
	f.BoolVar(&o.argocdGRPCWeb, "argocd-grpc-web", false, "use gRPC-web to reach the Argo CD API server")
	f.BoolVar(&o.leaderElection, "leader-election", true, "elect one writing replica through a Lease in the Argo CD namespace")
	f.BoolVar(&o.disableKubeEvents, "disable-kube-events", false, "do not create Kubernetes events")
	f.BoolVar(&o.disableKubernetes, "disable-kubernetes", false, "not supported: Applications are read and written through the Kubernetes API only (accepted as false)")
}

// addGitFlags: the git write-back's commits, clones and forges.
func (o *runOptions) addGitFlags(f *pflag.FlagSet) {
	f.StringVar(&o.gitCommitUser, "git-commit-user", "argocd-image-updater", "author name of Git commits")
	f.StringVar(&o.gitCommitEmail, "git-commit-email", "noreply@argoproj.io", "author e-mail of Git commits")
	f.StringVar(&o.gitCommitSigningKey, "git-commit-signing-key", "", "key that signs Git commits: a key file, or for openpgp a key ID in the GnuPG keyring of $GNUPGHOME (none: unsigned)")
	f.StringVar(&o.gitCommitSigningMethod, "git-commit-signing-method", "openpgp", "how Git commits are signed: openpgp or ssh")
	f.BoolVar(&o.gitCommitSignOff, "git-commit-sign-off", false, "add a Signed-off-by trailer to Git commits")
	f.StringVar(&o.gitCommitMessagePath, "git-commit-message-path", defaultCommitMessagePath, "path to the Go template of Git commit messages")
	f.StringVar(&o.gitPullRequestPath, "git-pull-request-template-path", defaultPullRequestPath, "path to the Go template of pull request titles (first line) and descriptions")
	f.StringSliceVar(&o.githubEnterpriseAPIs, "github-enterprise-api-url", nil, "API URL of a GitHub Enterprise Server (https://HOST/api/v3) whose repositories may get pull requests (repeatable; github.com is always known)")
	f.StringSliceVar(&o.gitlabURLs, "gitlab-url", nil, "URL of a GitLab instance (https://HOST) whose repositories may get merge requests (repeatable; gitlab.com is always known)")
	f.StringSliceVar(&o.giteaURLs, "gitea-url", nil, "URL of a Gitea or Forgejo instance (https://HOST) whose repositories may get pull requests (repeatable; gitea.com and codeberg.org are always known)")
	f.StringSliceVar(&o.bitbucketServerURLs, "bitbucket-server-url", nil, "URL of a Bitbucket Data Center instance (https://HOST, with its context path if any) whose repositories may get pull requests (repeatable; bitbucket.org is always known)")
	f.StringSliceVar(&o.azureDevOpsURLs, "azure-devops-url", nil, "URL of an Azure DevOps Server (https://HOST, with its virtual directory if any) whose repositories may get pull requests (repeatable; dev.azure.com and *.visualstudio.com are always known)")
	f.StringVar(&o.gitCloneDir, "git-clone-dir", defaultGitCloneDir(), "folder keeping the clones of the git write-back, across restarts")
	f.StringVar(&o.gitCloneMaxSize, "git-clone-max-size", resource.NewQuantity(git.DefaultCloneCacheSize, resource.BinarySI).String(), "disk space the clones may take before the least recently used are removed (0: no bound)")
	f.BoolVar(&o.notifications, "notifications", false, "keep the last update, failure, revert and wait of each Application in its annotations argocd-image-updater.argoproj.io/last-*, for the triggers of Argo CD Notifications (manifests/notifications/catalog.yaml)")
	f.BoolVar(&o.refreshApplications, "refresh-applications", true, "after a git write-back landed, set argocd.argoproj.io/refresh on each Application it pushed for, so that Argo CD deploys it now rather than at its next poll")
}

// addServerFlags: the health and metrics servers, and the log.
func (o *runOptions) addServerFlags(f *pflag.FlagSet) {
	f.IntVar(&o.healthPort, "health-port", 8080, "port of the health server (/healthz, /readyz); 0 disables it")
	f.IntVar(&o.metricsPort, "metrics-port", 8081, "port of the Prometheus metrics server; 0 disables it")
	f.IntVar(&o.maxAppMetrics, "max-application-metrics", cycle.DefaultMaxApplicationSeries, "Applications with per-Application metric series; the others are counted together per ImageUpdater, under an empty application label (0: every Application)")
	f.StringVar(&o.listenAddress, "listen-address", "", "address the health, metrics and webhook servers listen on (default: all interfaces)")
	f.StringVar(&o.logLevel, "loglevel", "info", "log level: trace, debug, info, warn or error")
	f.StringVar(&o.logFormat, "logformat", "text", "log format: text or json")
}

// minStallTimeout is the shortest default --stall-timeout: a large cycle
// throttled by registries can take minutes without being stuck.
const minStallTimeout = 10 * time.Minute

func (o *runOptions) validate() error {
	if err := oneOf("loglevel", o.logLevel, "trace", "debug", "info", "warn", "error"); err != nil {
		return err
	}
	if o.webhookOnly {
		if err := o.validateWebhookOnly(); err != nil {
			return err
		}
	}
	if err := o.webhook.validate(o.healthPort, o.metricsPort); err != nil {
		return err
	}
	if err := oneOf("logformat", o.logFormat, "text", "json"); err != nil {
		return err
	}
	if err := oneOf("applications-api", o.applicationsAPI, "kubernetes", "argocd"); err != nil {
		return err
	}
	if err := oneOf("git-commit-signing-method", o.gitCommitSigningMethod, "openpgp", "ssh"); err != nil {
		return err
	}
	if d, err := settings.ParseReleaseAge(o.minReleaseAgeFlag); err != nil {
		return usageErrorf("invalid value for --minimum-release-age: %v", err)
	} else {
		o.minReleaseAge = d
	}
	switch {
	case o.interval < 0:
		return usageErrorf("invalid value %s for --interval: must not be negative", o.interval)
	case o.maxConcurrency < 1:
		return usageErrorf("invalid value %d for --max-concurrency: must be at least 1", o.maxConcurrency)
	case o.maxAppMetrics < 0:
		return usageErrorf("invalid value %d for --max-application-metrics: must not be negative", o.maxAppMetrics)
	case o.healthPort < 0 || o.healthPort > 65535:
		return usageErrorf("invalid value %d for --health-port: must be a port number or 0", o.healthPort)
	case o.metricsPort < 0 || o.metricsPort > 65535:
		return usageErrorf("invalid value %d for --metrics-port: must be a port number or 0", o.metricsPort)
	case o.kubeQPS <= 0 || o.kubeBurst < 1:
		return usageErrorf("--kube-api-qps and --kube-api-burst must be positive")
	case o.stallTimeout < 0:
		return usageErrorf("invalid value %s for --stall-timeout: must not be negative", o.stallTimeout)
	case o.shutdownGrace < 0:
		return usageErrorf("invalid value %s for --shutdown-grace-period: must not be negative", o.shutdownGrace)
	case o.requestTimeout <= 0:
		return usageErrorf("invalid value %s for --registry-request-timeout: must be positive", o.requestTimeout)
	case o.imageTimeout <= 0:
		return usageErrorf("invalid value %s for --image-timeout: must be positive", o.imageTimeout)
	case o.appTimeout < 0:
		return usageErrorf("invalid value %s for --application-timeout: must not be negative", o.appTimeout)
	}
	size, err := resource.ParseQuantity(o.gitCloneMaxSize)
	if err != nil || size.Sign() < 0 {
		return usageErrorf("invalid value %q for --git-clone-max-size: want a size such as 2Gi, 500Mi or 0 (no bound)", o.gitCloneMaxSize)
	}
	o.gitCloneMaxBytes = size.Value()
	if o.gitCloneDir == "" {
		return usageErrorf("--git-clone-dir must not be empty")
	}
	if o.forgeHosts, err = forge.NewHosts(o.githubEnterpriseAPIs, o.gitlabURLs,
		forge.WithInstances(settings.ForgeGitea, o.giteaURLs...),
		forge.WithInstances(settings.ForgeBitbucketServer, o.bitbucketServerURLs...),
		forge.WithInstances(settings.ForgeAzureDevOps, o.azureDevOpsURLs...)); err != nil {
		return usageErrorf("--github-enterprise-api-url, --gitlab-url, --gitea-url, --bitbucket-server-url or --azure-devops-url: %v", err)
	}
	if o.stallTimeout == 0 {
		o.stallTimeout = max(5*o.interval, minStallTimeout)
	}
	if o.disableKubernetes {
		// The old tool used it with --applications-api argocd only; without
		// the Kubernetes API this controller has no Applications to read.
		return usageErrorf("--disable-kubernetes is not supported: this controller reads and writes Applications only through the Kubernetes API; remove the flag")
	}
	if ns := o.applicationNamespace; ns != "" {
		switch {
		case len(o.applicationNamespaces) == 0:
			o.applicationNamespaces = []string{ns}
		case len(o.applicationNamespaces) != 1 || o.applicationNamespaces[0] != ns:
			return usageErrorf("--application-namespace %q and --application-namespaces %q disagree: give only --application-namespaces",
				ns, strings.Join(o.applicationNamespaces, ","))
		}
	}
	if len(o.watchNamespaces) > 0 {
		switch {
		case len(o.applicationNamespaces) == 0:
			o.applicationNamespaces = o.watchNamespaces
		case !slices.Equal(o.applicationNamespaces, o.watchNamespaces):
			return usageErrorf("--watch-namespaces %q and --application-namespaces %q disagree: give only one of them",
				strings.Join(o.watchNamespaces, ","), strings.Join(o.applicationNamespaces, ","))
		}
	}
	if o.once {
		o.interval = 0
		o.healthPort = 0
	}
	o.onChangeOnly = o.v1Run && !o.once && o.interval == 0
	if o.healthPort > 0 && o.healthPort == o.metricsPort {
		return usageErrorf("the health and metrics servers are both on port %d: give them different ports (--health-port, --metrics-port or the v1.x line's bind addresses)", o.healthPort)
	}
	return nil
}

// newLogger builds the structured logger every package receives.
func newLogger(w interface{ Write([]byte) (int, error) }, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	switch level {
	case "trace":
		lvl = slog.LevelDebug - 4
	case "debug":
		lvl = slog.LevelDebug
	case "info":
		lvl = slog.LevelInfo
	case "warn":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		return nil, fmt.Errorf("unknown log level %q", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
