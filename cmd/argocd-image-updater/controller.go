package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	imageupdaterv1alpha1 "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/imageupdater"
	"github.com/image-updater/argocd-image-updater/internal/securemetrics"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/registry/credentials/ecr"
	"github.com/image-updater/argocd-image-updater/registry/credentials/gcp"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/writeback/argocd"
	"github.com/image-updater/argocd-image-updater/writeback/git"
	"github.com/image-updater/argocd-image-updater/writeback/gitauth"
)

func runController(ctx context.Context, o *runOptions, logger *slog.Logger, lookupEnv func(string) (string, bool)) error {
	if o.applicationsAPI != "kubernetes" {
		return usageErrorf("--applications-api %s is not supported: this controller reads and writes Applications through the Kubernetes API (applications-api kubernetes)", o.applicationsAPI)
	}
	reg := prometheus.NewRegistry()
	cycleMetrics, registryMetrics, err := registerMetrics(reg)
	if err != nil {
		return err
	}

	restConfig, namespace, err := kubeConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	if o.argocdNamespace != "" {
		namespace = o.argocdNamespace
	}
	restConfig.QPS, restConfig.Burst = o.kubeQPS, o.kubeBurst
	restConfig.UserAgent = "argocd-image-updater/" + version
	restConfig.Wrap(cycleMetrics.WrapKubeTransport)
	clientset, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}

	confWatcher, err := config.Watch(ctx, o.registriesConfPath,
		config.WithErrorHandler(func(err error) {
			logger.Error("registries configuration rejected; the last good one stays in force", "error", err)
		}),
		config.WithReloadHandler(func(*config.Config) {
			logger.Info("registries configuration reloaded", "path", o.registriesConfPath)
		}))
	if err != nil {
		return fmt.Errorf("registries configuration: %w", err)
	}
	resolver := credentials.NewResolver(
		credentials.WithSecretGetter(credentials.NewKubeSecretGetter(clientset)),
		credentials.WithEnv(lookupEnv),
		credentials.WithNative(credentials.KindECR, ecr.NewProvider()),
		credentials.WithNative(credentials.KindGCP, gcp.NewProvider()),
	)
	regClient := registry.NewClient(
		registry.WithConfig(confWatcher.Current),
		registry.WithCredentialResolver(resolver),
		registry.WithMetrics(registryMetrics),
		registry.WithLogger(logger),
		registry.WithUserAgent("argocd-image-updater/"+version),
		registry.WithRequestTimeout(o.requestTimeout),
	)

	watchNamespaces := []string{namespace}
	if len(o.applicationNamespaces) > 0 {
		watchNamespaces = o.applicationNamespaces
	}
	watchOpts := []appwatch.Option{
		appwatch.Namespaces(watchNamespaces...),
		appwatch.MatchNames(o.matchAppNames...),
		appwatch.MatchLabels(o.matchAppLabel),
		appwatch.WithLogger(logger),
	}
	serveImageUpdaters := false
	if o.imageUpdaters {
		if serveImageUpdaters, err = imageUpdatersServed(clientset.Discovery()); err != nil {
			return err
		}
		if !serveImageUpdaters {
			logger.Info("the API server has no ImageUpdater resource (its CRD is not installed): only annotated Applications are managed")
		}
	}
	if serveImageUpdaters {
		watchOpts = append(watchOpts, appwatch.KeepUnannotated())
	}
	watcher, err := appwatch.NewWatcher(dyn, watchOpts...)
	if err != nil {
		return usageErrorf("%v", err)
	}
	var apps cycle.Applications = watcher
	var source *imageupdater.Source
	var statusOpts []cycle.Option
	if serveImageUpdaters {
		source = imageupdater.NewSource(dyn, watcher, imageupdater.Namespaces(watchNamespaces...), imageupdater.WithLogger(logger),
			imageupdater.WithFinalizerRelease(!o.dryRun))
		apps = source
		if !o.dryRun {
			statusOpts = append(statusOpts, cycle.WithObserver(imageupdater.NewStatus(dyn, source, imageupdater.WithStatusLogger(logger))))
		}
	}

	var events *cycle.EventReporter
	if !o.disableKubeEvents {
		delivery := newEventDelivery(clientset)
		// Runs last: the events of the last writes reach the API server
		// before the process exits, within the shutdown grace period.
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownGrace)
			defer cancel()
			delivery.Close(ctx)
		}()
		events = cycle.NewEventReporter(delivery.recorder)
	}

	var ready atomic.Bool
	// SIGTERM (ctx), a failed server or a lost Lease stop the controller:
	// runCtx ends, the cycle stops reading and starts no write, and the
	// writes in flight get the grace period, after which writeCtx ends
	// them.
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	writeCtx, abandonWrites := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-runCtx.Done():
		case <-writeCtx.Done():
			return
		}
		if writeCtx.Err() != nil {
			return // runController returned
		}
		logger.Info("stopping: no new writes; writes in flight may finish", "reason", context.Cause(runCtx), "gracePeriod", o.shutdownGrace)
		grace := time.NewTimer(o.shutdownGrace)
		defer grace.Stop()
		select {
		case <-grace.C:
			logger.Warn("shutdown grace period over; abandoning the writes in flight", "gracePeriod", o.shutdownGrace)
			abandonWrites()
		case <-writeCtx.Done():
		}
	}()
	// Runs before stop(nil), so that the goroutine above sees a return,
	// not a stop.
	defer abandonWrites()

	var lead *leadership
	// A one-off cycle writes without the Lease.
	if o.leaderElection && (o.interval > 0 || o.webhookOnly) {
		leaseNamespace := namespace
		if o.leaseNamespace != "" {
			leaseNamespace = o.leaseNamespace
		}
		if lead, err = newLeadership(clientset, leaseNamespace, logger); err != nil {
			return err
		}
	}
	// Asked before each write (each patch, each push).
	writeGate := func() error {
		if runCtx.Err() != nil {
			return fmt.Errorf("the controller is stopping (%v)", context.Cause(runCtx))
		}
		if lead != nil {
			return lead.check()
		}
		return nil
	}

	gitWriter, err := newGitWriter(o, clientset, dyn, namespace, logger, lookupEnv, git.WithPushGate(writeGate))
	if err != nil {
		return err
	}
	defer gitWriter.Close()
	updater := cycle.New(apps, regClient,
		argocd.NewWriter(dyn, argocd.WithLogger(logger), argocd.WithDryRun(o.dryRun)),
		append(statusOpts,
			cycle.WithGitWriter(gitWriter),
			cycle.WithSignatures(signature.NewVerifier(regClient), credentials.NewKubeSecretGetter(clientset)),
			cycle.WithControllerNamespace(namespace),
			cycle.WithRegistryConfig(confWatcher.Current),
			cycle.WithMaxConcurrency(o.maxConcurrency),
			cycle.WithImageTimeout(o.imageTimeout),
			cycle.WithDryRun(o.dryRun),
			cycle.WithRefreshAfterGit(o.refreshApplications),
			cycle.WithDefaultPlatforms(v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}),
			cycle.WithLogger(logger),
			cycle.WithEvents(events),
			cycle.WithMetrics(cycleMetrics),
			cycle.WithWriteGate(writeGate),
			cycle.WithWriteContext(writeCtx),
		)...,
	)

	// The health and metrics servers answer until the controller returns,
	// through the shutdown's grace period too; the webhook endpoint takes
	// no notification once the controller is stopping.
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	serveErr := make(chan error, 3)
	if o.metricsPort > 0 {
		mux := http.NewServeMux()
		var metrics http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		var tlsConfig *tls.Config
		if o.metricsSecure {
			if tlsConfig, err = securemetrics.SelfSigned(); err != nil {
				return fmt.Errorf("metrics certificate: %w", err)
			}
			metrics = securemetrics.NewGuard(clientset).Wrap(metrics)
		}
		mux.Handle("/metrics", metrics)
		go serve(serveCtx, "metrics", o.listenAddress, o.metricsPort, mux, tlsConfig, logger, serveErr)
	}
	if o.healthPort > 0 {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if updater.Stalled(o.stallTimeout) {
				http.Error(w, fmt.Sprintf("no update cycle finished in the last %s", o.stallTimeout), http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		})
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !ready.Load() {
				http.Error(w, "Applications not listed yet", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		})
		go serve(serveCtx, "health", o.listenAddress, o.healthPort, mux, nil, logger, serveErr)
	}
	dispatcher, err := startWebhook(runCtx, o, updater, reg, logger, serveErr)
	if err != nil {
		return err
	}

	logger.Info("starting", "version", version, "namespace", namespace, "interval", o.interval, "dryRun", o.dryRun,
		"registriesConf", o.registriesConfPath)
	if err := watcher.Start(runCtx); err != nil {
		return err
	}
	if source != nil {
		if err := source.Start(runCtx); err != nil {
			return err
		}
	}
	ready.Store(true)

	if o.interval == 0 && !o.webhookOnly {
		// A cycle that ran is a success whatever it found: problems of
		// single images are in the events, the log and the metrics, and
		// the old tool's scripts and jobs treat a non-zero exit as "could
		// not run".
		updater.RunOnce(runCtx)
		return nil
	}

	// A health or metrics server that cannot serve stops the controller
	// with an error, so that the pod restarts instead of running blind.
	go func() {
		select {
		case err := <-serveErr:
			logger.Error("server failed; stopping", "error", err)
			stop(fmt.Errorf("%w: %w", errServerFailed, err))
		case <-runCtx.Done():
		}
	}()
	work := controllerWork(o, updater, dispatcher)
	if lead != nil {
		if err := lead.run(runCtx, func() { stop(errNotLeader) }, work); err != nil {
			return err
		}
	} else {
		work(runCtx)
	}
	if cause := context.Cause(runCtx); errors.Is(cause, errServerFailed) {
		return cause
	}
	return nil
}

// imageUpdatersServed tells whether the API server serves the ImageUpdater
// resource, whose CRD a cluster may not have: the annotation users'
// installs have no reason to add it.
func imageUpdatersServed(d discovery.DiscoveryInterface) (bool, error) {
	resources, err := d.ServerResourcesForGroupVersion(imageupdaterv1alpha1.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("asking the API server for the ImageUpdater resource: %w", err)
	}
	for _, r := range resources.APIResources {
		if r.Name == imageupdaterv1alpha1.Resource().Resource {
			return true, nil
		}
	}
	return false, nil
}

// errServerFailed stops the controller with an error: see runController.
var errServerFailed = errors.New("server failed")

// registerMetrics registers every metric /metrics serves. The monitoring
// examples are checked against what it registers.
func registerMetrics(reg prometheus.Registerer) (*cycle.Metrics, *registry.Metrics, error) {
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, err
	}
	cycleMetrics, err := cycle.NewMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	registryMetrics, err := registry.NewMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	return cycleMetrics, registryMetrics, nil
}

// newGitWriter builds the git write-back from the git flags. A missing
// commit-message or pull request template file means the default template, as the install
// manifest mounts the file only when the ConfigMap has the key. A signing
// key given by name is read from the keyring in GNUPGHOME, as gpg would.
// AppProjects are read from Argo CD's namespace.
func newGitWriter(o *runOptions, cs kubernetes.Interface, dyn dynamic.Interface, namespace string, logger *slog.Logger, lookupEnv func(string) (string, bool), more ...git.Option) (*git.Writer, error) {
	text, err := os.ReadFile(o.gitCommitMessagePath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("commit message template: %w", err)
	}
	tmpl, err := git.ParseCommitMessageTemplate(string(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.gitCommitMessagePath, err)
	}
	prText, err := os.ReadFile(o.gitPullRequestPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("pull request template: %w", err)
	}
	prTmpl, err := git.ParsePullRequestTemplate(string(prText))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.gitPullRequestPath, err)
	}
	opts := []git.Option{
		git.WithArgoCDNamespace(namespace),
		git.WithPullRequestTemplate(prTmpl),
		git.WithForgeHosts(o.forgeHosts),
		git.WithAuthor(o.gitCommitUser, o.gitCommitEmail),
		git.WithCommitMessageTemplate(tmpl),
		git.WithSignOff(o.gitCommitSignOff),
		git.WithDryRun(o.dryRun),
		git.WithLogger(logger),
		git.WithWorkDir(o.gitCloneDir),
		git.WithCloneCacheSize(o.gitCloneMaxBytes),
	}
	if o.gitCommitSigningKey != "" {
		opts = append(opts, git.WithSigningKey(o.gitCommitSigningKey, o.gitCommitSigningMethod))
	}
	if home, ok := lookupEnv("GNUPGHOME"); ok && home != "" {
		opts = append(opts, git.WithGnuPGHome(home))
	}
	return git.NewWriter(gitauth.NewCachedSecretLister(gitauth.NewKubeSecretLister(cs), 0), gitauth.NewKubeAppProjectGetter(dyn), append(opts, more...)...)
}

// serverLimits bound what one client of the health, metrics and webhook
// servers can hold: an idle keep-alive connection, a slow request, its
// headers, and how many connections are served at once (more wait in the
// kernel's backlog).
type serverLimits struct {
	idle, read  time.Duration
	headerBytes int
	connections int
}

var defaultServerLimits = serverLimits{idle: 90 * time.Second, read: time.Minute, headerBytes: 64 << 10, connections: 256}

func serve(ctx context.Context, name, host string, port int, handler http.Handler, tlsConfig *tls.Config, logger *slog.Logger, errs chan<- error) {
	serveWithin(ctx, defaultServerLimits, name, host, port, handler, tlsConfig, logger, errs)
}

func serveWithin(ctx context.Context, lim serverLimits, name, host string, port int, handler http.Handler, tlsConfig *tls.Config, logger *slog.Logger, errs chan<- error) {
	srv := &http.Server{Handler: handler, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: lim.read, IdleTimeout: lim.idle, MaxHeaderBytes: lim.headerBytes}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		errs <- fmt.Errorf("%s server on port %d: %w", name, port, err)
		return
	}
	l = netutil.LimitListener(l, lim.connections)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("serving", "server", name, "port", port, "tls", tlsConfig != nil)
	if tlsConfig != nil {
		// The certificate comes from TLSConfig.GetCertificate.
		err = srv.ServeTLS(l, "", "")
	} else {
		err = srv.Serve(l)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs <- fmt.Errorf("%s server on port %d: %w", name, port, err)
	}
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
