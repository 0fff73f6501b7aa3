package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/internal/selfsigned"
	"github.com/image-updater/argocd-image-updater/internal/servertls"
	"github.com/image-updater/argocd-image-updater/webhook"
)

// webhookOptions are the settings of the webhook endpoint, shared by the
// run and webhook commands under the old tool's names.
type webhookOptions struct {
	enable        bool
	port          int
	rateLimit     int
	requireSecret bool
	tlsCertFile   string
	tlsKeyFile    string
	// v1TLS is the v1.x line's --disable-tls, when given; v1TLSDir is where
	// its install mounts the argocd-image-updater-tls Secret.
	v1TLS    v1TLS
	v1TLSDir string
	// The OIDC token of Pub/Sub push subscriptions (artifact-registry).
	pubsubAudience, pubsubAccount, pubsubJWKS string
	// The fields of the generic source's payloads (webhook.GenericMapping).
	genericRepository, genericTag string
	secrets                       map[string]*string // by source
}

// v1TLS is what the v1.x line's --disable-tls (DISABLE_TLS) asked for.
type v1TLS int

const (
	v1TLSUnset v1TLS = iota
	v1TLSOn          // --disable-tls=false
	v1TLSOff         // --disable-tls
)

// defaultV1TLSDir is where the v1.x install mounts the webhook's Secret.
const defaultV1TLSDir = "/app/config/tls"

// webhookSecretFlags name the secret flag of each source.
var webhookSecretFlags = map[string]string{
	webhook.DockerHub:        "docker-webhook-secret",
	webhook.GHCR:             "ghcr-webhook-secret",
	webhook.Quay:             "quay-webhook-secret",
	webhook.Harbor:           "harbor-webhook-secret",
	webhook.Distribution:     "distribution-webhook-secret",
	webhook.ACR:              "acr-webhook-secret",
	webhook.CloudEvents:      "cloudevents-webhook-secret",
	webhook.ArtifactRegistry: "artifact-registry-webhook-secret",
	webhook.AliyunACR:        "aliyun-acr-webhook-secret",
	webhook.Artifactory:      "artifactory-webhook-secret",
	webhook.Nexus:            "nexus-webhook-secret",
	webhook.Generic:          "generic-webhook-secret",
}

// webhookEnv maps the webhook flags to the environment variables of the
// old tool, and to those later Argo CD Image Updater releases added (ACR,
// Aliyun ACR, CloudEvents, Artifact Registry, WEBHOOK_REQUIRE_SECRET).
var webhookEnv = envFlags{
	"enable-webhook":                            "ENABLE_WEBHOOK",
	"webhook-port":                              "WEBHOOK_PORT",
	"webhook-ratelimit-allowed":                 "WEBHOOK_RATELIMIT_ALLOWED",
	"webhook-require-secret":                    "WEBHOOK_REQUIRE_SECRET",
	"docker-webhook-secret":                     "DOCKER_WEBHOOK_SECRET",
	"ghcr-webhook-secret":                       "GHCR_WEBHOOK_SECRET",
	"quay-webhook-secret":                       "QUAY_WEBHOOK_SECRET",
	"harbor-webhook-secret":                     "HARBOR_WEBHOOK_SECRET",
	"distribution-webhook-secret":               "DISTRIBUTION_WEBHOOK_SECRET",
	"acr-webhook-secret":                        "ACR_WEBHOOK_SECRET",
	"cloudevents-webhook-secret":                "CLOUDEVENTS_WEBHOOK_SECRET",
	"artifact-registry-webhook-secret":          "ARTIFACT_REGISTRY_WEBHOOK_SECRET",
	"aliyun-acr-webhook-secret":                 "ALIYUN_ACR_WEBHOOK_SECRET",
	"artifactory-webhook-secret":                "ARTIFACTORY_WEBHOOK_SECRET",
	"nexus-webhook-secret":                      "NEXUS_WEBHOOK_SECRET",
	"generic-webhook-secret":                    "GENERIC_WEBHOOK_SECRET",
	"generic-webhook-repository-field":          "GENERIC_WEBHOOK_REPOSITORY_FIELD",
	"generic-webhook-tag-field":                 "GENERIC_WEBHOOK_TAG_FIELD",
	"webhook-tls-cert-file":                     "WEBHOOK_TLS_CERT_FILE",
	"webhook-tls-key-file":                      "WEBHOOK_TLS_KEY_FILE",
	"artifact-registry-webhook-audience":        "ARTIFACT_REGISTRY_WEBHOOK_AUDIENCE",
	"artifact-registry-webhook-service-account": "ARTIFACT_REGISTRY_WEBHOOK_SERVICE_ACCOUNT",
	"artifact-registry-webhook-jwks-url":        "ARTIFACT_REGISTRY_WEBHOOK_JWKS_URL",
}

func (w *webhookOptions) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&w.enable, "enable-webhook", false, "serve the webhook endpoint: registries' push notifications trigger an immediate check of the repository")
	f.IntVar(&w.port, "webhook-port", 8082, "port of the webhook endpoint (POST /webhook)")
	f.IntVar(&w.rateLimit, "webhook-ratelimit-allowed", 0, "webhook requests accepted per hour from each registry type; 0: no limit")
	f.BoolVar(&w.requireSecret, "webhook-require-secret", true, "refuse webhooks of registry types that have no secret; false accepts them unauthenticated")
	f.StringVar(&w.tlsCertFile, "webhook-tls-cert-file", "", "serve the webhook endpoint over HTTPS with this PEM certificate (chain), read again when it changes; default: the v1.x line's Secret at /app/config/tls when mounted, else plain HTTP")
	f.StringVar(&w.tlsKeyFile, "webhook-tls-key-file", "", "the PEM private key of --webhook-tls-cert-file")
	f.StringVar(&w.pubsubAudience, "artifact-registry-webhook-audience", "", "require the OIDC token of the Pub/Sub push subscription, with this audience (the subscription's, by default its push endpoint URL)")
	f.StringVar(&w.pubsubAccount, "artifact-registry-webhook-service-account", "", "the service account the OIDC token must name (required with --artifact-registry-webhook-audience)")
	f.StringVar(&w.pubsubJWKS, "artifact-registry-webhook-jwks-url", webhook.GoogleJWKS, "where the keys that sign the OIDC tokens are published")
	f.StringVar(&w.genericRepository, "generic-webhook-repository-field", "", "the dot path of the field of generic webhooks' payloads naming the repository pushed, [host/]path[:tag] (\"target.repository\", \"events.0.repo\")")
	f.StringVar(&w.genericTag, "generic-webhook-tag-field", "", "the dot path of the field of generic webhooks' payloads naming the tag pushed")
	w.v1TLSDir = defaultV1TLSDir
	w.secrets = map[string]*string{}
	for _, source := range webhook.Sources() {
		w.secrets[source] = f.String(webhookSecretFlags[source], "", "shared secret of "+source+" webhooks (prefer the environment variable)")
	}
}

func (w *webhookOptions) validate(healthPort, metricsPort int) error {
	if !w.enable {
		return nil
	}
	switch {
	case w.port < 1 || w.port > 65535:
		return usageErrorf("invalid value %d for --webhook-port: must be a port number", w.port)
	case w.port == healthPort:
		return usageErrorf("--webhook-port and --health-port are both %d: give them different ports", w.port)
	case w.port == metricsPort:
		return usageErrorf("--webhook-port and --metrics-port are both %d: give them different ports", w.port)
	case w.rateLimit < 0:
		return usageErrorf("invalid value %d for --webhook-ratelimit-allowed: must not be negative", w.rateLimit)
	case (w.pubsubAccount == "") != (w.pubsubAudience == ""):
		// The audience alone admits anyone: any Google account can obtain
		// a Google-signed token for any audience.
		return usageErrorf("--artifact-registry-webhook-audience and --artifact-registry-webhook-service-account go together: the audience alone admits a token any Google account can obtain")
	case (w.tlsCertFile == "") != (w.tlsKeyFile == ""):
		return usageErrorf("--webhook-tls-cert-file and --webhook-tls-key-file go together: give both or neither")
	case w.genericRepository == "" && (w.genericTag != "" || *w.secrets[webhook.Generic] != ""):
		return usageErrorf("the generic webhook needs --generic-webhook-repository-field: the field of its payloads that names the repository")
	}
	return nil
}

// newWebhookCommand is the old tool's webhook command: the webhook endpoint
// and the checks it triggers, without periodic cycles. It takes the run
// command's flags.
func newWebhookCommand(lookupEnv func(string) (string, bool)) *cobra.Command {
	cmd := newRunCommand(lookupEnv)
	cmd.Use = "webhook"
	cmd.Short = "Serve the webhook endpoint and check the repositories registries notify, without periodic cycles"
	for _, name := range []string{"interval", "once", "enable-webhook", "stall-timeout"} {
		_ = cmd.Flags().MarkHidden(name)
	}
	// Both lines of Argo CD Image Updater serve this command's endpoint on
	// 8080 and no health server; --health-port turns one on.
	for name, value := range map[string]string{"webhook-port": "8080", "health-port": "0"} {
		f := cmd.Flags().Lookup(name)
		_ = f.Value.Set(value)
		f.DefValue = value
	}
	return cmd
}

// validateWebhookOnly checks the webhook command's settings: it always
// serves the endpoint and never runs cycles of its own.
func (o *runOptions) validateWebhookOnly() error {
	if o.once {
		return usageErrorf("--once runs one cycle and exits: use the run command for that")
	}
	o.webhook.enable = true
	return nil
}

// startWebhook serves the webhook endpoint when it is enabled and returns
// the dispatcher that turns notifications into checks; nil when disabled.
// Its metrics are registered only then. Under leader election (lead), a
// replica that does not lead relays what it accepts to the one that does,
// which it finds on the Lease, where it advertises its own address (its
// podIP) while it leads.
func startWebhook(ctx context.Context, o *runOptions, updater *cycle.Updater, reg prometheus.Registerer, logger *slog.Logger, serveErr chan<- error,
	lead *leadership, podIP string) (*webhook.Dispatcher, error) {
	if !o.webhook.enable {
		return nil, nil
	}
	if o.interval == 0 && !o.webhookOnly {
		logger.Warn("--enable-webhook is ignored: the controller runs one cycle and exits")
		return nil, nil
	}
	metrics, err := webhook.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	secrets := map[string]string{}
	for source, s := range o.webhook.secrets {
		secrets[source] = *s
	}
	opts := []webhook.DispatcherOption{webhook.WithDispatcherMetrics(metrics), webhook.WithDispatcherLogger(logger)}
	relayKey := webhook.RelayKey(secrets)
	if lead != nil {
		opts = append(opts, webhook.WithRelay(relayKey, lead.observer.leader))
	}
	dispatcher := webhook.NewDispatcher(checker(updater), opts...)
	oidc := map[string]*webhook.OIDCVerifier{}
	if o.webhook.pubsubAudience != "" {
		v, err := webhook.NewOIDCVerifier(o.webhook.pubsubAudience, o.webhook.pubsubAccount, o.webhook.pubsubJWKS, nil)
		if err != nil {
			return nil, err
		}
		oidc[webhook.ArtifactRegistry] = v
	}
	var generic *webhook.GenericMapping
	if o.webhook.genericRepository != "" {
		generic = &webhook.GenericMapping{Repository: o.webhook.genericRepository, Tag: o.webhook.genericTag}
	}
	handler, err := webhook.NewHandler(dispatcher, webhook.Config{
		Generic:              generic,
		Secrets:              secrets,
		OIDC:                 oidc,
		AllowUnauthenticated: !o.webhook.requireSecret,
		RateLimit:            o.webhook.rateLimit,
	}, webhook.WithMetrics(metrics), webhook.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	if open := handler.Unauthenticated(); len(open) > 0 {
		logger.Warn("webhooks of these registry types are accepted without authentication: anyone who reaches the endpoint can trigger checks",
			"types", strings.Join(open, ","))
	}
	if enabled := handler.Enabled(); len(enabled) == 0 {
		logger.Error("the webhook endpoint accepts no registry type: set a secret (for example --quay-webhook-secret or QUAY_WEBHOOK_SECRET), or --webhook-require-secret=false")
	} else {
		logger.Info("webhook endpoint enabled", "port", o.webhook.port, "path", webhook.Path, "types", strings.Join(enabled, ","),
			"rateLimitPerHour", o.webhook.rateLimit)
	}
	tlsConfig, err := o.webhook.serverTLS(o.serverTLS, logger)
	if err != nil {
		return nil, err
	}
	if lead != nil {
		advertiseRelay(lead, relayKey, relayURL(podIP, o.listenAddress, o.webhook.port, tlsConfig != nil), logger)
		safe.Go(logger, "forwarding push notifications to the leader", func() { dispatcher.Forward(ctx) })
	}
	relay := dispatcher.RelayHandler()
	endpoint := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == webhook.RelayPath {
			relay.ServeHTTP(w, r)
			return
		}
		handler.ServeHTTP(w, r)
	})
	go serve(ctx, "webhook", o.listenAddress, o.webhook.port, endpoint, tlsConfig, logger, serveErr)
	return dispatcher, nil
}

// advertiseRelay puts this replica's address for forwarded notifications
// on the Lease while it leads, and says in the log what a replica that
// does not lead does with notifications.
func advertiseRelay(lead *leadership, key []byte, url string, logger *slog.Logger) {
	switch {
	case key == nil:
		logger.Warn("no webhook secret: a replica that does not hold the leader Lease cannot forward notifications to the one that does, and answers them 503 (the key that signs forwarded notifications is derived from the secrets)")
	case url == "":
		logger.Info("this replica advertises no address for forwarded notifications (POD_IP is not set, or --listen-address is not the Pod's): while it leads, other replicas answer notifications 503")
	default:
		lead.observer.advertise(url)
		logger.Info("while this replica leads, the others forward the notifications they receive to it", "address", url)
	}
}

// serverTLS chooses how the endpoint is served: nil for plain HTTP. The
// operator's --webhook-tls-* files come first. Otherwise the v1.x line's
// answer where its install is found: the argocd-image-updater-tls Secret
// mounted at /app/config/tls is served, and when its files are empty (as
// that install creates it) or --disable-tls=false is given, a self-signed
// certificate, unless --disable-tls. Without either, plain HTTP, as v0.18
// serves it, so that its users' webhook URLs keep working. TLS takes the
// operator's settings, by default TLS 1.3 only, as the v1.x line's
// endpoint does.
func (w *webhookOptions) serverTLS(settings servertls.Settings, logger *slog.Logger) (*tls.Config, error) {
	cfg, err := w.certificateTLS(logger)
	if cfg == nil || err != nil {
		return cfg, err
	}
	if settings.Apply(cfg, webhookTLSDefaults) {
		logger.Warn("--tlsciphers does not apply to the webhook endpoint: it takes TLS 1.3 only, whose cipher suites are not configurable (set --tlsminversion 1.2 for them to apply)")
	}
	return cfg, nil
}

// webhookTLSDefaults are the v1.x line's versions of the endpoint.
var webhookTLSDefaults = servertls.Defaults{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13}

// certificateTLS is serverTLS's choice of certificate.
func (w *webhookOptions) certificateTLS(logger *slog.Logger) (*tls.Config, error) {
	certFile, keyFile := w.tlsCertFile, w.tlsKeyFile
	if certFile == "" {
		if w.v1TLS == v1TLSOff {
			return nil, nil
		}
		certFile, keyFile = filepath.Join(w.v1TLSDir, "tls.crt"), filepath.Join(w.v1TLSDir, "tls.key")
		full, present := fileSizes(certFile, keyFile)
		switch {
		case full:
			logger.Info("the webhook endpoint serves TLS with the mounted certificate", "file", certFile)
		case present || w.v1TLS == v1TLSOn:
			logger.Info("the webhook endpoint serves TLS with a self-signed certificate: fill the argocd-image-updater-tls Secret to serve your own, or set --disable-tls for plain HTTP",
				"file", certFile)
			return selfsigned.Config("argocd-image-updater webhook")
		default:
			return nil, nil
		}
	}
	certs, err := webhook.NewCertFiles(certFile, keyFile, logger)
	if err != nil {
		return nil, err
	}
	return certs.TLSConfig(), nil
}

// fileSizes tells whether both files exist, and whether neither is empty.
func fileSizes(files ...string) (full, present bool) {
	full = true
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			return false, false
		}
		full = full && info.Size() > 0
	}
	return full, true
}

// checker runs the webhook's targeted checks as the update cycle's.
func checker(u *cycle.Updater) webhook.Checker {
	return webhook.CheckerFunc(func(ctx context.Context, repos []imageref.Reference, trigger string) webhook.CheckResult {
		sum := u.CheckRepositories(ctx, repos, trigger)
		return webhook.CheckResult{Updated: sum.Updated > 0, NotRunning: sum.NotRunning, Unlisted: sum.Unlisted}
	})
}
