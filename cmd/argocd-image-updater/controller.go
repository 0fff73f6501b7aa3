package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/chartrepo"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/firstseen"
	"github.com/image-updater/argocd-image-updater/healthgate"
	"github.com/image-updater/argocd-image-updater/imageupdater"
	"github.com/image-updater/argocd-image-updater/internal/securemetrics"
	"github.com/image-updater/argocd-image-updater/internal/selfsigned"
	"github.com/image-updater/argocd-image-updater/internal/servertls"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/registry/credentials/azure"
	"github.com/image-updater/argocd-image-updater/registry/credentials/ecr"
	"github.com/image-updater/argocd-image-updater/registry/credentials/gcp"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/webhook"
	"github.com/image-updater/argocd-image-updater/writeback/argocd"
	"github.com/image-updater/argocd-image-updater/writeback/git"
)

// controller is the running controller's parts, made by the steps of
// runController in order; each step uses what the ones before it made.
type controller struct {
	o         *runOptions
	logger    *slog.Logger
	lookupEnv func(string) (string, bool)
	// closers run when runController returns, the last added first.
	closers []func()

	reg             *prometheus.Registry
	cycleMetrics    *cycle.Metrics
	registryMetrics *registry.Metrics
	gateMetrics     *healthgate.Metrics

	namespace string // Argo CD's
	clientset kubernetes.Interface
	// eventClient sends the events, with a rate limit of its own: a burst
	// of events after a large cycle waits behind neither the writes nor
	// the Lease's renewals.
	eventClient kubernetes.Interface
	dyn         dynamic.Interface

	conf      *config.Watcher
	regClient *registry.Client

	watcher  *appwatch.Watcher
	source   *imageupdater.Source // nil without ImageUpdaters
	apps     cycle.Applications
	status   []cycle.Option
	events   *cycle.EventReporter
	recorder record.EventRecorder // nil without events

	// runCtx ends on SIGTERM, a failed server or a lost Lease (stop);
	// writeCtx ends the grace period after that (abandonWrites).
	runCtx        context.Context
	stop          context.CancelCauseFunc
	writeCtx      context.Context
	abandonWrites context.CancelFunc

	lead      *leadership // nil without leader election
	firstSeen *firstseen.Store
	updater   *cycle.Updater
	gate      *healthgate.Gate // nil in a dry run

	ready      atomic.Bool
	serveErr   chan error // a server that failed
	dispatcher *webhook.Dispatcher
}

// runController starts the controller and runs it until ctx ends, or the
// one cycle of --once is over.
func runController(ctx context.Context, o *runOptions, logger *slog.Logger, lookupEnv func(string) (string, bool)) error {
	if o.applicationsAPI != "kubernetes" {
		return usageErrorf("--applications-api %s is not supported: this controller reads and writes Applications through the Kubernetes API (applications-api kubernetes)", o.applicationsAPI)
	}
	c := &controller{o: o, logger: logger, lookupEnv: lookupEnv}
	defer c.close()
	for _, step := range []func(context.Context) error{
		c.startMetrics,
		c.connectKubernetes,
		c.startRegistryClient,
		c.watchApplications,
		c.recordEvents,
		c.handleShutdown,
		c.electLeader,
		c.loadFirstSeen,
		c.buildUpdateCycle,
		c.startServers,
		c.startWatches,
	} {
		if err := step(ctx); err != nil {
			if ctx.Err() != nil {
				// Stopped while starting (SIGTERM before the first
				// cycle): a requested stop, not a failure to start.
				logger.Info("stopped while starting", "reason", context.Cause(ctx), "error", err)
				return nil
			}
			return err
		}
	}
	return c.run()
}

// deferred adds f to what runs when runController returns.
func (c *controller) deferred(f func()) { c.closers = append(c.closers, f) }

func (c *controller) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
}

func (c *controller) startMetrics(context.Context) (err error) {
	c.reg = prometheus.NewRegistry()
	c.cycleMetrics, c.registryMetrics, c.gateMetrics, err = registerMetrics(c.reg, cycle.MaxApplicationSeries(c.o.maxAppMetrics))
	return err
}

func (c *controller) connectKubernetes(context.Context) error {
	restConfig, namespace, err := kubeConfig(c.o.kubeconfig)
	if err != nil {
		return err
	}
	c.namespace = cmp.Or(c.o.argocdNamespace, namespace)
	restConfig.QPS, restConfig.Burst = c.o.kubeQPS, c.o.kubeBurst
	restConfig.UserAgent = "argocd-image-updater/" + version
	restConfig.Wrap(c.cycleMetrics.WrapKubeTransport)
	if c.clientset, err = kubernetes.NewForConfig(restConfig); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if c.dyn, err = dynamic.NewForConfig(restConfig); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if c.eventClient, err = kubernetes.NewForConfig(restConfig); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	return nil
}

func (c *controller) startRegistryClient(ctx context.Context) (err error) {
	c.conf, err = config.Watch(ctx, c.o.registriesConfPath,
		config.WithErrorHandler(func(err error) {
			c.logger.Error("registries configuration rejected; the last good one stays in force", "error", err)
		}),
		config.WithReloadHandler(func(*config.Config) {
			c.logger.Info("registries configuration reloaded", "path", c.o.registriesConfPath)
		}))
	if err != nil {
		return fmt.Errorf("registries configuration: %w", err)
	}
	aws := ecr.NewProvider()
	resolver := credentials.NewResolver(
		credentials.WithSecretGetter(credentials.NewKubeSecretGetter(c.clientset)),
		credentials.WithEnv(c.lookupEnv),
		credentials.WithNative(credref.KindECR, aws),
		credentials.WithNative(credref.KindGCP, gcp.NewProvider()),
		credentials.WithNative(credref.KindAzure, azure.NewProvider()),
	)
	c.regClient = registry.NewClient(
		registry.WithConfig(c.conf.Current),
		registry.WithCredentialResolver(resolver),
		registry.WithMetrics(c.registryMetrics),
		registry.WithLogger(c.logger),
		registry.WithUserAgent("argocd-image-updater/"+version),
		registry.WithRequestTimeout(c.o.requestTimeout),
		registry.WithHostCAs(c.o.registryCAsDir),
		registry.WithECRPushTimes(aws.PushTimes),
	)
	return nil
}

// watchApplications makes the Application watcher and, where the API
// server serves the resource, the ImageUpdater source over it.
func (c *controller) watchApplications(ctx context.Context) error {
	namespaces := []string{c.namespace}
	if len(c.o.applicationNamespaces) > 0 {
		namespaces = c.o.applicationNamespaces
	}
	opts := []appwatch.Option{
		appwatch.Namespaces(namespaces...),
		appwatch.MatchNames(c.o.matchAppNames...),
		appwatch.MatchLabels(c.o.matchAppLabel),
		appwatch.WithLogger(c.logger),
	}
	serveImageUpdaters := false
	if c.o.imageUpdaters {
		var err error
		err = retryStartup(ctx, c.logger, "whether the API server serves ImageUpdaters", func(context.Context) (err error) {
			serveImageUpdaters, err = imageUpdatersServed(c.clientset.Discovery())
			return err
		})
		if err != nil {
			return err
		}
		if !serveImageUpdaters {
			c.logger.Info("the API server has no ImageUpdater resource (its CRD is not installed): only annotated Applications are managed")
		}
	}
	if serveImageUpdaters {
		opts = append(opts, appwatch.KeepUnannotated())
	}
	watcher, err := appwatch.NewWatcher(c.dyn, opts...)
	if err != nil {
		return usageErrorf("%v", err)
	}
	c.watcher, c.apps = watcher, watcher
	if serveImageUpdaters {
		c.source = imageupdater.NewSource(c.dyn, watcher, imageupdater.Namespaces(namespaces...), imageupdater.WithLogger(c.logger),
			imageupdater.WithFinalizerRelease(!c.o.dryRun))
		c.apps = c.source
		if !c.o.dryRun {
			c.status = append(c.status, cycle.WithObserver(imageupdater.NewStatus(c.dyn, c.source, imageupdater.WithStatusLogger(c.logger))))
		}
	}
	return nil
}

func (c *controller) recordEvents(ctx context.Context) error {
	if c.o.disableKubeEvents {
		return nil
	}
	delivery := newEventDelivery(c.eventClient)
	// Runs last: the events of the last writes reach the API server
	// before the process exits, within the shutdown grace period.
	c.deferred(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.shutdownGrace)
		defer cancel()
		delivery.Close(ctx)
	})
	c.events = cycle.NewEventReporter(delivery.recorder)
	c.recorder = delivery.recorder
	return nil
}

// handleShutdown: SIGTERM (ctx), a failed server or a lost Lease stop the
// controller: runCtx ends, the cycle stops reading and starts no write,
// and the writes in flight get the grace period, after which writeCtx
// ends them.
func (c *controller) handleShutdown(ctx context.Context) error {
	c.runCtx, c.stop = context.WithCancelCause(ctx)
	c.deferred(func() { c.stop(nil) })
	c.writeCtx, c.abandonWrites = context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-c.runCtx.Done():
		case <-c.writeCtx.Done():
			return
		}
		if c.writeCtx.Err() != nil {
			return // runController returned
		}
		c.logger.Info("stopping: no new writes; writes in flight may finish", "reason", context.Cause(c.runCtx), "gracePeriod", c.o.shutdownGrace)
		grace := time.NewTimer(c.o.shutdownGrace)
		defer grace.Stop()
		select {
		case <-grace.C:
			c.logger.Warn("shutdown grace period over; abandoning the writes in flight", "gracePeriod", c.o.shutdownGrace)
			c.abandonWrites()
		case <-c.writeCtx.Done():
		}
	}()
	// Runs before stop(nil), so that the goroutine above sees a return,
	// not a stop.
	c.deferred(c.abandonWrites)
	return nil
}

// electLeader prepares the Lease; a one-off cycle writes without it.
func (c *controller) electLeader(context.Context) (err error) {
	if !c.o.leaderElection || c.o.oneCycle() {
		return nil
	}
	c.lead, err = newLeadership(c.clientset, cmp.Or(c.o.leaseNamespace, c.namespace), c.logger)
	return err
}

// writeGate is asked before each write (each patch, each push).
func (c *controller) writeGate() error {
	if c.runCtx.Err() != nil {
		return fmt.Errorf("the controller is stopping (%v)", context.Cause(c.runCtx))
	}
	return c.leading()
}

// leading is asked before each save of the health gate's own state. The
// record of a write already made is part of that write: it is saved while
// the controller stops, as long as this replica holds the Lease (released
// only once the writes in flight are done), so that the next leader
// follows the version written.
func (c *controller) leading() error {
	if c.lead != nil {
		return c.lead.check()
	}
	return nil
}

// firstSeenLoadTimeout bounds the start-up's read of the first-seen times.
const firstSeenLoadTimeout = 20 * time.Second

// loadFirstSeen reads when versions were first seen, for minimum release
// ages, from the ConfigMap the cycles save them to (none in a dry run).
// Without it every version looks new: the controller starts anyway, and
// the first save merges in what is stored.
func (c *controller) loadFirstSeen(ctx context.Context) error {
	var backend firstseen.Backend
	if !c.o.dryRun {
		backend = firstseen.ConfigMap{ConfigMaps: c.clientset.CoreV1().ConfigMaps(c.namespace), Name: firstseen.DefaultConfigMap}
	}
	c.firstSeen = firstseen.New(backend)
	// Bounded: the times only hold back versions, and the controller
	// must not wait on them to take its Lease.
	lctx, cancel := context.WithTimeout(ctx, firstSeenLoadTimeout)
	defer cancel()
	if err := c.firstSeen.Load(lctx); err != nil {
		c.logger.Warn("the first-seen times of versions could not be read; versions look new until they are", "configMap", firstseen.DefaultConfigMap, "error", err)
	}
	return nil
}

func (c *controller) buildUpdateCycle(context.Context) error {
	gitWriter, err := newGitWriter(c.o, c.clientset, c.dyn, c.namespace, c.logger, c.lookupEnv, git.WithPushGate(c.writeGate))
	if err != nil {
		return err
	}
	c.deferred(func() { _ = gitWriter.Close() })
	root, err := loadTrustedRoot(c.o.sigstoreTrustedRoot)
	if err != nil {
		return err
	}
	appWriter := argocd.NewWriter(c.dyn, argocd.WithLogger(c.logger), argocd.WithDryRun(c.o.dryRun),
		argocd.WithMaxConcurrency(c.o.maxConcurrency), argocd.WithWriteGate(c.writeGate))
	var notices cycle.Notices
	if c.o.notifications {
		notices = appWriter
	}
	c.updater, err = cycle.New(c.apps, c.regClient, appWriter,
		append(append(c.status, c.healthGateOptions()...),
			cycle.WithGitWriter(gitWriter),
			cycle.WithGitTags(gitWriter),
			cycle.WithChartRepositories(chartrepo.NewClient(repoaccess.NewCachedSecretLister(repoaccess.NewKubeSecretLister(c.clientset), 0),
				repoaccess.NewKubeAppProjectGetter(c.dyn), c.namespace)),
			cycle.WithSignatures(signature.NewVerifier(c.regClient), credentials.NewKubeSecretGetter(c.clientset), root),
			cycle.WithControllerNamespace(c.namespace),
			cycle.WithRegistryConfig(c.conf.Current),
			cycle.WithMaxConcurrency(c.o.maxConcurrency),
			cycle.WithMinReleaseAge(c.o.minReleaseAge),
			cycle.WithFirstSeen(c.firstSeen),
			cycle.WithSyncWindows(projectSyncWindows{dyn: c.dyn, namespace: c.namespace}),
			cycle.WithImageTimeout(c.o.imageTimeout),
			cycle.WithApplicationTimeout(c.o.appTimeout),
			cycle.WithDryRun(c.o.dryRun),
			cycle.WithRefreshAfterGit(c.o.refreshApplications),
			cycle.WithNotices(notices),
			cycle.WithDefaultPlatforms(v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}),
			cycle.WithLogger(c.logger),
			cycle.WithEvents(c.events),
			cycle.WithMetrics(c.cycleMetrics),
			cycle.WithWriteGate(c.writeGate),
			cycle.WithWriteContext(c.writeCtx),
		)...,
	)
	return err
}

// startServers: the health and metrics servers answer until the
// controller returns, through the shutdown's grace period too; the
// webhook endpoint takes no notification once the controller is stopping.
func (c *controller) startServers(ctx context.Context) (err error) {
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	c.deferred(stopServing)
	c.serveErr = make(chan error, 3)
	if c.o.metricsPort > 0 {
		mux := http.NewServeMux()
		var metrics http.Handler = promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{})
		var tlsConfig *tls.Config
		if c.o.metricsSecure {
			if tlsConfig, err = selfsigned.Config("argocd-image-updater metrics"); err != nil {
				return fmt.Errorf("metrics certificate: %w", err)
			}
			// Go's versions by default (TLS 1.2 and 1.3), as the v1.x
			// line's metrics server.
			if c.o.serverTLS.Apply(tlsConfig, servertls.Defaults{}) {
				c.logger.Warn("--tlsciphers does not apply to the metrics server: it takes TLS 1.3 only, whose cipher suites are not configurable")
			}
			metrics = securemetrics.NewGuard(c.clientset).Wrap(metrics)
		}
		mux.Handle("/metrics", metrics)
		go serve(serveCtx, "metrics", c.o.listenAddress, c.o.metricsPort, mux, tlsConfig, c.logger, c.serveErr)
	}
	if c.o.healthPort > 0 {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if c.updater.Stalled(c.o.stallTimeout) {
				http.Error(w, fmt.Sprintf("no image or chart checked nor anything written in the last %s while a cycle or check was under way", c.o.stallTimeout), http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		})
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !c.ready.Load() {
				http.Error(w, "Applications not listed yet", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		})
		go serve(serveCtx, "health", c.o.listenAddress, c.o.healthPort, mux, nil, c.logger, c.serveErr)
	}
	podIP, _ := c.lookupEnv("POD_IP")
	c.dispatcher, err = startWebhook(c.runCtx, c.o, c.updater, c.reg, c.logger, c.serveErr, c.lead, podIP)
	return err
}

// startWatches lists the Applications (and ImageUpdaters) and waits for
// the lists before anything is checked; then the controller is ready.
func (c *controller) startWatches(context.Context) error {
	interval := c.o.interval.String()
	if c.o.onChangeOnly {
		interval = "none (ImageUpdaters are checked when created or changed)"
	}
	c.logger.Info("starting", "version", version, "namespace", c.namespace, "interval", interval, "dryRun", c.o.dryRun,
		"registriesConf", c.o.registriesConfPath, "health", c.o.healthPort, "metrics", c.o.metricsPort)
	if err := c.watcher.Start(c.runCtx); err != nil {
		return err
	}
	if c.source != nil {
		if err := c.source.Start(c.runCtx); err != nil {
			return err
		}
	}
	c.ready.Store(true)
	return nil
}

// run runs the one cycle of --once, or the cycles (and webhook checks)
// until the controller stops, under the Lease when there is one.
func (c *controller) run() error {
	if c.o.oneCycle() {
		// A cycle that ran is a success whatever it found: problems of
		// single images are in the events, the log and the metrics, and
		// the old tool's scripts and jobs treat a non-zero exit as "could
		// not run".
		c.resumeHealthGate(c.runCtx)
		c.updater.RunOnce(c.runCtx)
		return nil
	}
	// A health or metrics server that cannot serve stops the controller
	// with an error, so that the pod restarts instead of running blind.
	go func() {
		select {
		case err := <-c.serveErr:
			c.logger.Error("server failed; stopping", "error", err)
			c.stop(fmt.Errorf("%w: %w", errServerFailed, err))
		case <-c.runCtx.Done():
		}
	}()
	var changes imageUpdaterChanges
	if c.source != nil {
		changes = c.source
	}
	work := c.withHealthGate(controllerWork(c.o, c.updater, c.dispatcher, changes))
	if c.lead != nil {
		if err := c.lead.run(c.runCtx, func() { c.stop(errNotLeader) }, work); err != nil {
			return err
		}
	} else {
		work(c.runCtx)
	}
	if cause := context.Cause(c.runCtx); errors.Is(cause, errServerFailed) {
		return cause
	}
	return nil
}

// registerMetrics registers every metric /metrics serves. The monitoring
// examples are checked against what it registers.
func registerMetrics(reg prometheus.Registerer, opts ...cycle.MetricsOption) (*cycle.Metrics, *registry.Metrics, *healthgate.Metrics, error) {
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, nil, err
	}
	cycleMetrics, err := cycle.NewMetrics(reg, opts...)
	if err != nil {
		return nil, nil, nil, err
	}
	registryMetrics, err := registry.NewMetrics(reg)
	if err != nil {
		return nil, nil, nil, err
	}
	gateMetrics, err := healthgate.NewMetrics(reg)
	if err != nil {
		return nil, nil, nil, err
	}
	return cycleMetrics, registryMetrics, gateMetrics, nil
}

// kubeConfig loads the client configuration (a kubeconfig file, else the
// in-cluster configuration) and the namespace the controller runs in.
func kubeConfig(path string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes configuration: %w", err)
	}
	// In a pod this is the ServiceAccount's namespace; with a kubeconfig,
	// its context's.
	ns, _, err := loader.Namespace()
	if err != nil || ns == "" {
		ns = "argocd"
	}
	return cfg, ns, nil
}

// loadTrustedRoot reads the Sigstore trusted root named by
// --sigstore-trusted-root; none when path is "".
func loadTrustedRoot(path string) (*signature.TrustedRoot, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path) // the operator's file
	if err != nil {
		return nil, fmt.Errorf("--sigstore-trusted-root: %w", err)
	}
	root, err := signature.ParseTrustedRoot(data)
	if err != nil {
		return nil, fmt.Errorf("--sigstore-trusted-root %s: %w", path, err)
	}
	return root, nil
}
