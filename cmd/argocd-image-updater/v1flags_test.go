package main

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/image-updater/argocd-image-updater/internal/servertls"
)

// runsAs checks how the options say the controller runs.
func runsAs(v1 bool, health, metrics int, onChangeOnly bool, interval time.Duration) func(*runOptions) string {
	return func(o *runOptions) string {
		if o.v1Run != v1 || o.healthPort != health || o.metricsPort != metrics || o.onChangeOnly != onChangeOnly || o.interval != interval {
			return fmt.Sprintf("v1Run %t, health %d, metrics %d, onChangeOnly %t, interval %s; want %t, %d, %d, %t, %s",
				o.v1Run, o.healthPort, o.metricsPort, o.onChangeOnly, o.interval, v1, health, metrics, onChangeOnly, interval)
		}
		return ""
	}
}

func ifNot(ok bool, what string) string {
	if ok {
		return ""
	}
	return what
}

// The arguments and variables of the v1.x line's install start this
// controller: each means what it can here, the rest is one warning each,
// and none is a usage error (exit 2).
func TestV1FlagsAndVariables(t *testing.T) {
	tests := []struct {
		name         string
		command      string
		program      string // the name the binary runs under; default argocd-image-updater
		args         []string
		env          map[string]string
		want         func(o *runOptions) string // "" when o is as expected
		wantWarnings []string
		wantErr      string
	}{
		{
			name: "v1.3.0's Deployment arguments",
			args: []string{"--metrics-bind-address=:8443", "--health-probe-bind-address=:8081", "--metrics-secure", "--enable-http2=false",
				"--leader-election-namespace=argocd", "--max-concurrent-apps=7", "--max-concurrent-reconciles=3", "--git-commit-method=git",
				"--disable-tls", "--tlsminversion=1.2", "--tlsmaxversion=1.3", "--tlsciphers=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"},
			want: func(o *runOptions) string {
				if o.metricsPort != 8443 || o.healthPort != 8081 || o.maxConcurrency != 7 || o.leaseNamespace != "argocd" || !o.metricsSecure {
					return "metrics, health, concurrency, lease namespace or secure metrics not taken"
				}
				want := servertls.Settings{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}}
				if !reflect.DeepEqual(o.serverTLS, want) {
					return "TLS settings not taken"
				}
				return ""
			},
			wantWarnings: []string{"--max-concurrent-reconciles 3"},
		},
		{
			name: "a v1.x bind address serves the metrics securely, as there",
			args: []string{"--metrics-bind-address=:8443"},
			want: func(o *runOptions) string {
				if !o.metricsSecure {
					return "metrics not secure"
				}
				return ""
			},
		},
		{
			name: "unless told otherwise",
			args: []string{"--metrics-bind-address=:8080", "--metrics-secure=false"},
			want: func(o *runOptions) string {
				if o.metricsSecure || o.metricsPort != 8080 {
					return "metrics secure, or port not taken"
				}
				return ""
			},
		},
		{
			name: "the old flags keep plain HTTP",
			args: []string{"--metrics-port=9090"},
			want: func(o *runOptions) string {
				if o.metricsSecure {
					return "metrics secure"
				}
				return ""
			},
		},
		{
			name: "bind addresses with a host, and 0 for off",
			args: []string{"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:9440"},
			want: func(o *runOptions) string {
				if o.metricsPort != 0 || o.healthPort != 9440 {
					return "ports not taken"
				}
				return ""
			},
			wantWarnings: []string{`--health-probe-bind-address "127.0.0.1:9440": the host is not used`},
		},
		{
			name: "commits through the API",
			args: []string{"--git-commit-method", "api"},
			want: func(o *runOptions) string {
				if !o.gitAPICommits {
					return "API commits not taken"
				}
				return ""
			},
		},
		{
			name: "v1.x variables",
			env: map[string]string{"ARGOCD_NAMESPACE": "argo", "IMAGE_UPDATER_WATCH_NAMESPACES": "*", "MAX_CONCURRENT_APPS": "4",
				"MAX_CONCURRENT_RECONCILES": "2", "GIT_COMMIT_METHOD": "git", "DISABLE_TLS": "true"},
			want: func(o *runOptions) string {
				if o.argocdNamespace != "argo" || !slices.Equal(o.applicationNamespaces, []string{"*"}) || o.maxConcurrency != 4 {
					return "namespace, watched namespaces or concurrency not taken"
				}
				return ""
			},
			wantWarnings: []string{"--max-concurrent-reconciles 2"},
		},
		{
			name:    "webhook --max-concurrent-updaters",
			command: "webhook",
			args:    []string{"--max-concurrent-updaters", "5"},
			want: func(o *runOptions) string {
				if o.maxConcurrency != 5 {
					return "concurrency not taken"
				}
				return ""
			},
		},
		{
			name: "--disable-tls=false asks for webhook TLS",
			args: []string{"--disable-tls=false"},
			want: func(o *runOptions) string {
				if o.webhook.v1TLS != v1TLSOn {
					return "TLS not asked for"
				}
				return ""
			},
		},
		{
			name: "DISABLE_TLS=true turns it off",
			env:  map[string]string{"DISABLE_TLS": "true"},
			want: func(o *runOptions) string {
				if o.webhook.v1TLS != v1TLSOff {
					return "TLS not turned off"
				}
				return ""
			},
		},
		{
			name: "unset leaves it to the mounted Secret",
			want: func(o *runOptions) string {
				if o.webhook.v1TLS != v1TLSUnset || o.webhook.v1TLSDir != "/app/config/tls" {
					return "TLS choice made without being asked"
				}
				return ""
			},
		},
		{
			name:         "the operator's files win over --disable-tls",
			args:         []string{"--disable-tls", "--webhook-tls-cert-file=/tls/tls.crt", "--webhook-tls-key-file=/tls/tls.key"},
			wantWarnings: []string{"--disable-tls: the webhook endpoint serves TLS with --webhook-tls-cert-file"},
		},
		{name: "disagreeing ports", args: []string{"--metrics-bind-address=:8443", "--metrics-port=9000"}, wantErr: "disagree"},
		{name: "a bad bind address", args: []string{"--health-probe-bind-address=8081"}, wantErr: "invalid value \"8081\" for --health-probe-bind-address"},
		{name: "an unknown commit method", args: []string{"--git-commit-method=svn"}, wantErr: "want git or api"},

		// How the controller is run: as /manager (argocd-operator) or with
		// a v1.x flag, as the v1.x line runs; else as v0.18 does.
		{
			name: "run as /manager: probes on 8081, no metrics server", program: "manager",
			want: runsAs(true, 8081, 0, false, 2*time.Minute),
		},
		{
			name: "run as /manager, interval 0: no periodic cycle, the controller keeps running", program: "manager",
			env:  map[string]string{"IMAGE_UPDATER_INTERVAL": "0"},
			want: runsAs(true, 8081, 0, true, 0),
		},
		{
			name: "run as /manager, --once: one cycle", program: "manager", args: []string{"--once"},
			want: runsAs(true, 0, 0, false, 0),
		},
		{
			name: "a v1.x flag, interval 0: no periodic cycle", args: []string{"--metrics-bind-address=:8443"},
			env:  map[string]string{"IMAGE_UPDATER_INTERVAL": "0"},
			want: runsAs(true, 8081, 8443, true, 0),
		},
		{
			name: "v0.18's interval 0: one cycle", env: map[string]string{"IMAGE_UPDATER_INTERVAL": "0"},
			want: runsAs(false, 8080, 8081, false, 0),
		},
		{
			name: "v1.x variables alone do not change how it runs (this install fills them too)",
			env:  map[string]string{"IMAGE_UPDATER_WATCH_NAMESPACES": "team-a", "ARGOCD_NAMESPACE": "argocd", "MAX_CONCURRENT_APPS": "4"},
			want: runsAs(false, 8080, 8081, false, 2*time.Minute),
		},
		{
			name: "an interval without a unit in the environment: a warning, and the default", program: "manager",
			env:          map[string]string{"IMAGE_UPDATER_INTERVAL": "30"},
			want:         runsAs(true, 8081, 0, false, 2*time.Minute),
			wantWarnings: []string{`invalid value "30" for environment variable IMAGE_UPDATER_INTERVAL (flag --interval): missing unit in duration "30"; using the default "2m0s"`},
		},
		{
			name: "an unreadable number in the environment: a warning, and the default",
			env:  map[string]string{"MAX_CONCURRENT_APPS": "many", "IMAGE_UPDATER_KUBE_API_QPS": "fast"},
			want: func(o *runOptions) string {
				return cmp.Or(ifNot(o.maxConcurrency == 10, "concurrency"), ifNot(o.kubeQPS == 50, "qps"))
			},
			wantWarnings: []string{"MAX_CONCURRENT_APPS", "IMAGE_UPDATER_KUBE_API_QPS"},
		},
		{name: "run as /manager with metrics on the probes' port", program: "manager", args: []string{"--metrics-port=8081"}, wantErr: "both on port 8081"},

		// The TLS settings of the HTTPS servers, from the flags or from
		// the variables v1.3.0's install fills from the ConfigMap keys
		// tls.min-version, tls.max-version and tls.ciphers.
		{
			name: "TLS from the environment",
			env: map[string]string{"TLS_MIN_VERSION": "1.2", "TLS_MAX_VERSION": "TLS1.2",
				"TLS_CIPHERS": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
			want: func(o *runOptions) string {
				want := servertls.Settings{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12,
					CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}
				return ifNot(reflect.DeepEqual(o.serverTLS, want), "TLS settings not taken")
			},
		},
		{
			name: "the TLS flags do not change how it runs",
			args: []string{"--tlsminversion=1.3", "--enable-http2"},
			want: func(o *runOptions) string {
				return cmp.Or(runsAs(false, 8080, 8081, false, 2*time.Minute)(o),
					ifNot(reflect.DeepEqual(o.serverTLS, servertls.Settings{MinVersion: tls.VersionTLS13, HTTP2: true}), "TLS settings not taken"))
			},
		},
		{
			name: "an unreadable TLS variable: a warning, and the default",
			env:  map[string]string{"TLS_MIN_VERSION": "VersionTLS12", "TLS_CIPHERS": "RC4"},
			want: func(o *runOptions) string {
				return ifNot(reflect.DeepEqual(o.serverTLS, servertls.Settings{}), "TLS settings taken")
			},
			wantWarnings: []string{"environment variable TLS_MIN_VERSION (flag --tlsminversion)", "environment variable TLS_CIPHERS (flag --tlsciphers)"},
		},
		{name: "a minimum above the maximum", args: []string{"--tlsminversion=1.3", "--tlsmaxversion=1.2"},
			wantErr: "--tlsminversion and --tlsmaxversion: the minimum TLS version 1.3 is above the maximum 1.2"},
		{name: "HTTP/2 without the suite it needs", args: []string{"--enable-http2", "--tlsciphers=TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"},
			wantErr: "--tlsciphers with --enable-http2: HTTP/2 needs"},
		{name: "a cipher suite the minimum cannot use", env: map[string]string{"TLS_MIN_VERSION": "1.2", "TLS_CIPHERS": "TLS_AES_128_GCM_SHA256"},
			wantErr: "--tlsciphers with --tlsminversion: cipher suite TLS_AES_128_GCM_SHA256 cannot be used with TLS 1.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			o := &runOptions{}
			cmd := newRunCommandFor(o, lookup)
			if tt.command == "webhook" {
				cmd.Use = "webhook"
			}
			root := &cobra.Command{Use: cmp.Or(tt.program, "argocd-image-updater")}
			root.AddCommand(cmd)
			if !preRun(t, cmd, tt.args, tt.wantErr) {
				return
			}
			if tt.want != nil {
				if problem := tt.want(o); problem != "" {
					t.Errorf("%s: %+v", problem, o)
				}
			}
			if len(o.warnings) != len(tt.wantWarnings) {
				t.Errorf("warnings %q, want %d", o.warnings, len(tt.wantWarnings))
			}
			for _, w := range tt.wantWarnings {
				if !slices.ContainsFunc(o.warnings, func(got string) bool { return strings.Contains(got, w) }) {
					t.Errorf("no warning with %q in %q", w, o.warnings)
				}
			}
		})
	}
}

// A TLS value the flag cannot read is a usage error that names the flag.
func TestTLSFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{"--tlsminversion", "1.0"},
		{"--tlsmaxversion", "VersionTLS13"},
		{"--tlsciphers", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"},
		{"--tlsciphers", "TLS_RSA_WITH_RC4_128_SHA"},
	} {
		for _, command := range []string{"run", "webhook"} {
			var stdout, stderr strings.Builder
			code := execute(t.Context(), append([]string{command}, args...), &stdout, &stderr, func(string) (string, bool) { return "", false })
			if code != 2 || !strings.Contains(stderr.String(), args[0]) || !strings.Contains(stderr.String(), "Usage:") {
				t.Errorf("%s %q: exit code %d, stderr %q; want 2 and usage naming the flag", command, args, code, stderr.String())
			}
		}
	}
}
