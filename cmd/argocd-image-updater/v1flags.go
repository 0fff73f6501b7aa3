package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/image-updater/argocd-image-updater/internal/servertls"
)

// v1Options are the flags that the resource-based updater's (v1.x) install
// passes, so that its Deployment's arguments start this controller: each
// means here what it can, and what cannot mean the same is accepted with
// one warning that says what happens instead. Never an exit for a name the
// v1.x line accepts.
type v1Options struct {
	metricsBindAddress      string
	healthProbeBindAddress  string
	metricsSecure           bool
	leaderElectionNamespace string
	maxConcurrentApps       int
	maxConcurrentReconciles int
	maxConcurrentUpdaters   int
	gitCommitMethod         string
	disableTLS              bool
	// tls are the settings of every HTTPS server: --tlsminversion,
	// --tlsmaxversion, --tlsciphers and --enable-http2.
	tls servertls.Settings
}

// v1Program is the name of the v1.x line's binary in its image, /manager,
// which argocd-operator's Deployment runs.
const v1Program = "manager"

// v1OnlyFlags are the flags only the v1.x line has: one of them on the
// command line means the controller is run as that line runs it (its
// install passes --metrics-bind-address, the community chart both bind
// addresses). Its environment variables do not count: this project's own
// install fills them from ConfigMap keys too. The TLS flags do not count
// either: they set the webhook endpoint's TLS under either line's install.
var v1OnlyFlags = []string{
	"metrics-bind-address", "health-probe-bind-address", "metrics-secure",
	"leader-election-namespace", "max-concurrent-apps", "max-concurrent-reconciles",
	"max-concurrent-updaters", "watch-namespaces", "git-commit-method", "disable-tls",
}

// v1HealthPort is the v1.x line's health probe port, which its install,
// its chart and argocd-operator probe.
const v1HealthPort = 8081

func anyChanged(f *pflag.FlagSet, names []string) bool {
	for _, name := range names {
		if fl := f.Lookup(name); fl != nil && fl.Changed {
			return true
		}
	}
	return false
}

// v1Env maps the v1.x line's environment variables (which its install
// fills from the argocd-image-updater-config ConfigMap) to flags.
var v1Env = envFlags{
	"argocd-namespace":          "ARGOCD_NAMESPACE",
	"watch-namespaces":          "IMAGE_UPDATER_WATCH_NAMESPACES",
	"max-concurrent-apps":       "MAX_CONCURRENT_APPS",
	"max-concurrent-reconciles": "MAX_CONCURRENT_RECONCILES",
	"git-commit-method":         "GIT_COMMIT_METHOD",
	"disable-tls":               "DISABLE_TLS",
	"tlsminversion":             "TLS_MIN_VERSION",
	"tlsmaxversion":             "TLS_MAX_VERSION",
	"tlsciphers":                "TLS_CIPHERS",
}

func (v *v1Options) addFlags(f *pflag.FlagSet) {
	f.StringVar(&v.metricsBindAddress, "metrics-bind-address", "", "the v1.x line's address of the metrics server ([host]:port, 0 disables it): sets --metrics-port")
	f.StringVar(&v.healthProbeBindAddress, "health-probe-bind-address", "", "the v1.x line's address of the health server ([host]:port, 0 disables it): sets --health-port")
	f.BoolVar(&v.metricsSecure, "metrics-secure", false, "serve the metrics over HTTPS (a self-signed certificate) to callers the API server authenticates and authorizes for GET /metrics (needs create on tokenreviews and subjectaccessreviews); on by default with --metrics-bind-address, as in the v1.x line")
	f.BoolVar(&v.tls.HTTP2, "enable-http2", false, "offer HTTP/2 on the HTTPS servers (webhook, secure metrics); they speak HTTP/1.1 only by default")
	f.StringVar(&v.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the Argo CD namespace)")
	f.IntVar(&v.maxConcurrentApps, "max-concurrent-apps", 0, "the v1.x line's name of --max-concurrency")
	f.IntVar(&v.maxConcurrentReconciles, "max-concurrent-reconciles", 0, "accepted from the v1.x line; ImageUpdaters are served by the one update cycle")
	f.IntVar(&v.maxConcurrentUpdaters, "max-concurrent-updaters", 0, "the v1.x webhook command's name of --max-concurrency")
	f.StringVar(&v.gitCommitMethod, "git-commit-method", "git", "how commits are made: git (pushed), or api (through the GitHub API, for repositories with a GitHub App's credentials, which GitHub then signs; others are pushed)")
	f.BoolVar(&v.disableTLS, "disable-tls", false, "the v1.x line's switch of webhook TLS: true serves plain HTTP; false serves TLS (the Secret at /app/config/tls, else self-signed) without --webhook-tls-cert-file; unset: TLS only where that Secret is mounted")
	f.Var(&tlsVersionFlag{v: &v.tls.MinVersion}, "tlsminversion", "lowest TLS version of the HTTPS servers: 1.1, 1.2 or 1.3 (default: 1.3 for the webhook endpoint, 1.2 for the secure metrics)")
	f.Var(&tlsVersionFlag{v: &v.tls.MaxVersion}, "tlsmaxversion", "highest TLS version of the HTTPS servers: 1.1, 1.2 or 1.3 (default 1.3)")
	f.Var(&cipherSuitesFlag{v: &v.tls.CipherSuites}, "tlsciphers", "colon-separated cipher suites of the HTTPS servers below TLS 1.3, by Go's names (TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:...; default: Go's)")
}

// apply turns the v1.x flags given into settings of o, and returns a
// warning for each that cannot mean here what it means there.
func (v *v1Options) apply(o *runOptions, f *pflag.FlagSet) ([]string, error) {
	var warnings []string
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	changed := func(name string) bool { fl := f.Lookup(name); return fl != nil && fl.Changed }

	// The v1.x line's defaults: health probes on 8081, no metrics server
	// (its install asks for one on 8443).
	if o.v1Run {
		if !changed("health-port") {
			o.healthPort = v1HealthPort
		}
		if !changed("metrics-port") {
			o.metricsPort = 0
		}
	}

	for _, b := range []struct {
		flag, portFlag string
		port           *int
	}{
		{"metrics-bind-address", "metrics-port", &o.metricsPort},
		{"health-probe-bind-address", "health-port", &o.healthPort},
	} {
		if !changed(b.flag) {
			continue
		}
		value := f.Lookup(b.flag).Value.String()
		port, host, err := bindPort(value)
		if err != nil {
			return nil, usageErrorf("invalid value %q for --%s: %v", value, b.flag, err)
		}
		if changed(b.portFlag) && *b.port != port {
			return nil, usageErrorf("--%s %q and --%s %d disagree: give only one of them", b.flag, value, b.portFlag, *b.port)
		}
		*b.port = port
		if host != "" && host != o.listenAddress {
			warn("--%s %q: the host is not used; the servers listen on --listen-address (%q)", b.flag, value, o.listenAddress)
		}
	}
	// The v1.x line serves its metrics securely unless told otherwise;
	// v0.18 and this controller's own flags, over plain HTTP.
	o.metricsSecure = v.metricsSecure || !changed("metrics-secure") && changed("metrics-bind-address")
	if changed("max-concurrent-reconciles") {
		warn("--max-concurrent-reconciles %d: ImageUpdaters are not reconciled one by one here; one update cycle serves them all, bounded by --max-concurrency", v.maxConcurrentReconciles)
	}
	for _, alias := range []struct {
		flag  string
		value int
	}{{"max-concurrent-apps", v.maxConcurrentApps}, {"max-concurrent-updaters", v.maxConcurrentUpdaters}} {
		if !changed(alias.flag) {
			continue
		}
		if alias.value < 1 {
			return nil, usageErrorf("invalid value %d for --%s: must be at least 1", alias.value, alias.flag)
		}
		if changed("max-concurrency") && o.maxConcurrency != alias.value {
			return nil, usageErrorf("--%s %d and --max-concurrency %d disagree: give only one of them", alias.flag, alias.value, o.maxConcurrency)
		}
		o.maxConcurrency = alias.value
	}
	switch v.gitCommitMethod {
	case "git", "":
	case "api":
		o.gitAPICommits = true
	default:
		return nil, usageErrorf("invalid value %q for --git-commit-method: want git or api", v.gitCommitMethod)
	}
	switch {
	case !changed("disable-tls"):
	case v.disableTLS && o.webhook.tlsCertFile != "":
		warn("--disable-tls: the webhook endpoint serves TLS with --webhook-tls-cert-file")
	case v.disableTLS:
		o.webhook.v1TLS = v1TLSOff
	default:
		o.webhook.v1TLS = v1TLSOn
	}
	if err := v.tls.CheckVersions(); err != nil {
		return nil, usageErrorf("--tlsminversion and --tlsmaxversion: %v", err)
	}
	if err := v.tls.CheckCipherSuites(); err != nil {
		return nil, usageErrorf("--tlsciphers with --tlsminversion: %v", err)
	}
	if err := v.tls.CheckHTTP2(); err != nil {
		return nil, usageErrorf("--tlsciphers with --enable-http2: %v", err)
	}
	o.serverTLS = v.tls
	o.leaseNamespace = v.leaderElectionNamespace
	return warnings, nil
}

// bindPort reads a controller-runtime bind address: "[host]:port", or "0"
// for off.
func bindPort(addr string) (port int, host string, err error) {
	if addr == "0" {
		return 0, "", nil
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, "", err
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return 0, "", fmt.Errorf("port %q is not a port number", p)
	}
	return port, host, nil
}

// tlsVersionFlag is a TLS version flag: a value servertls.ParseVersion
// does not read is refused as the flag is set, so that the command line
// gets a usage error and an environment variable the warning and default
// of every other flag.
type tlsVersionFlag struct {
	v    *uint16
	text string
}

func (f *tlsVersionFlag) Set(s string) error {
	v, err := servertls.ParseVersion(s)
	if err != nil {
		return err
	}
	*f.v, f.text = v, strings.TrimSpace(s)
	return nil
}

func (f *tlsVersionFlag) String() string { return f.text }
func (f *tlsVersionFlag) Type() string   { return "version" }

// cipherSuitesFlag is a colon-separated list of cipher suites, refused as
// tlsVersionFlag is.
type cipherSuitesFlag struct {
	v    *[]uint16
	text string
}

func (f *cipherSuitesFlag) Set(s string) error {
	ids, err := servertls.ParseCipherSuites(s)
	if err != nil {
		return err
	}
	*f.v, f.text = ids, s
	return nil
}

func (f *cipherSuitesFlag) String() string { return f.text }
func (f *cipherSuitesFlag) Type() string   { return "suites" }
