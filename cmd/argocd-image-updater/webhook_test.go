package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/internal/servertls"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// The old tool's webhook flags and environment variables keep their
// meaning, on the run command and on the webhook command.
func TestWebhookFlags(t *testing.T) {
	tests := []struct {
		name    string
		command string
		args    []string
		env     map[string]string
		want    map[string]string // flag -> value after the environment is applied
		wantErr string
	}{
		{
			name: "defaults", command: "run",
			want: map[string]string{"enable-webhook": "false", "webhook-port": "8082", "webhook-ratelimit-allowed": "0", "webhook-require-secret": "true"},
		},
		{
			name: "environment", command: "run",
			env: map[string]string{
				"ENABLE_WEBHOOK": "true", "WEBHOOK_PORT": "9000", "WEBHOOK_RATELIMIT_ALLOWED": "120",
				"DOCKER_WEBHOOK_SECRET": "d", "GHCR_WEBHOOK_SECRET": "g", "QUAY_WEBHOOK_SECRET": "q",
				"HARBOR_WEBHOOK_SECRET": "h", "DISTRIBUTION_WEBHOOK_SECRET": "r", "WEBHOOK_REQUIRE_SECRET": "false",
				"ACR_WEBHOOK_SECRET": "a", "CLOUDEVENTS_WEBHOOK_SECRET": "c",
				"ARTIFACT_REGISTRY_WEBHOOK_SECRET": "g", "ALIYUN_ACR_WEBHOOK_SECRET": "y",
				"ARTIFACTORY_WEBHOOK_SECRET": "j", "NEXUS_WEBHOOK_SECRET": "n", "GENERIC_WEBHOOK_SECRET": "x",
				"GENERIC_WEBHOOK_REPOSITORY_FIELD": "target.repository", "GENERIC_WEBHOOK_TAG_FIELD": "target.tag",
			},
			want: map[string]string{
				"enable-webhook": "true", "webhook-port": "9000", "webhook-ratelimit-allowed": "120",
				"docker-webhook-secret": "d", "ghcr-webhook-secret": "g", "quay-webhook-secret": "q",
				"harbor-webhook-secret": "h", "distribution-webhook-secret": "r", "webhook-require-secret": "false",
				"acr-webhook-secret": "a", "cloudevents-webhook-secret": "c",
				"artifact-registry-webhook-secret": "g", "aliyun-acr-webhook-secret": "y",
				"artifactory-webhook-secret": "j", "nexus-webhook-secret": "n", "generic-webhook-secret": "x",
				"generic-webhook-repository-field": "target.repository", "generic-webhook-tag-field": "target.tag",
			},
		},
		{
			name: "flags win over the environment", command: "run",
			args: []string{"--enable-webhook", "--webhook-port", "9100", "--quay-webhook-secret", "from-flag"},
			env:  map[string]string{"WEBHOOK_PORT": "9000", "QUAY_WEBHOOK_SECRET": "from-env", "HARBOR_WEBHOOK_SECRET": "h"},
			want: map[string]string{"enable-webhook": "true", "webhook-port": "9100", "quay-webhook-secret": "from-flag", "harbor-webhook-secret": "h"},
		},
		{
			name: "webhook command", command: "webhook",
			args: []string{"--webhook-port", "9200", "--docker-webhook-secret", "d", "--webhook-ratelimit-allowed", "10"},
			want: map[string]string{"webhook-port": "9200", "docker-webhook-secret": "d", "webhook-ratelimit-allowed": "10"},
		},
		{
			name: "webhook command takes the run flags", command: "webhook",
			args: []string{"--argocd-namespace", "argocd", "--registries-conf-path", "/tmp/r.conf", "--max-concurrency", "3"},
			env:  map[string]string{"HARBOR_WEBHOOK_SECRET": "h"},
			want: map[string]string{"max-concurrency": "3", "harbor-webhook-secret": "h"},
		},
		{name: "webhook command refuses --once", command: "webhook", args: []string{"--once"}, wantErr: "--once runs one cycle and exits"},
		// As both lines of Argo CD Image Updater: 8080, no health server.
		{name: "webhook command defaults", command: "webhook", env: map[string]string{"HARBOR_WEBHOOK_SECRET": "h"},
			want: map[string]string{"webhook-port": "8080", "health-port": "0", "metrics-port": "8081"}},
		{name: "webhook command's port from the environment", command: "webhook", env: map[string]string{"WEBHOOK_PORT": "9300", "HARBOR_WEBHOOK_SECRET": "h"},
			want: map[string]string{"webhook-port": "9300"}},
		{name: "the health server on the webhook port", command: "webhook", args: []string{"--health-port", "8080"}, wantErr: "--webhook-port and --health-port are both 8080"},
		{name: "the metrics server on the webhook port", command: "run", args: []string{"--enable-webhook", "--webhook-port", "8081"}, wantErr: "--webhook-port and --metrics-port are both 8081"},
		{name: "bad port", command: "run", args: []string{"--enable-webhook", "--webhook-port", "0"}, wantErr: "--webhook-port"},
		{name: "bad port, webhook command", command: "webhook", args: []string{"--webhook-port", "70000"}, wantErr: "--webhook-port"},
		{name: "port unchecked while disabled", command: "run", args: []string{"--webhook-port", "0"}, want: map[string]string{"webhook-port": "0"}},
		{name: "negative rate limit", command: "run", env: map[string]string{"ENABLE_WEBHOOK": "1", "WEBHOOK_RATELIMIT_ALLOWED": "-5"}, wantErr: "--webhook-ratelimit-allowed"},
		{
			name: "TLS files from the environment", command: "webhook",
			env:  map[string]string{"WEBHOOK_TLS_CERT_FILE": "/tls/tls.crt", "WEBHOOK_TLS_KEY_FILE": "/tls/tls.key"},
			want: map[string]string{"webhook-tls-cert-file": "/tls/tls.crt", "webhook-tls-key-file": "/tls/tls.key"},
		},
		{
			name: "Pub/Sub OIDC from the environment", command: "webhook",
			env: map[string]string{"ARTIFACT_REGISTRY_WEBHOOK_AUDIENCE": "https://u.example.com/webhook", "ARTIFACT_REGISTRY_WEBHOOK_SERVICE_ACCOUNT": "push@p.iam.gserviceaccount.com"},
			want: map[string]string{"artifact-registry-webhook-audience": "https://u.example.com/webhook",
				"artifact-registry-webhook-service-account": "push@p.iam.gserviceaccount.com", "artifact-registry-webhook-jwks-url": "https://www.googleapis.com/oauth2/v3/certs"},
		},
		{name: "service account without audience", command: "webhook", args: []string{"--artifact-registry-webhook-service-account", "a@b"}, wantErr: "go together"},
		{name: "audience without service account", command: "webhook", args: []string{"--artifact-registry-webhook-audience", "https://u.example.com/webhook"}, wantErr: "the audience alone admits a token any Google account can obtain"},
		{name: "a generic secret without its repository field", command: "webhook", env: map[string]string{"GENERIC_WEBHOOK_SECRET": "x"}, wantErr: "needs --generic-webhook-repository-field"},
		{name: "TLS certificate without key", command: "webhook", args: []string{"--webhook-tls-cert-file", "/tls/tls.crt"}, wantErr: "give both or neither"},
		{name: "TLS key without certificate", command: "run", args: []string{"--enable-webhook", "--webhook-tls-key-file", "/tls/tls.key"}, wantErr: "give both or neither"},
		{name: "bad environment value: the default", command: "run", env: map[string]string{"WEBHOOK_PORT": "eighty"}, want: map[string]string{"webhook-port": "8082"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookupEnv := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			cmd := newRunCommand(lookupEnv)
			if tt.command == "webhook" {
				cmd = newWebhookCommand(lookupEnv)
			}
			if !preRun(t, cmd, tt.args, tt.wantErr) {
				return
			}
			for flag, want := range tt.want {
				if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q", flag, got, want)
				}
			}
		})
	}
}

func TestWebhookCommandHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := execute(context.Background(), []string{"webhook", "--help"}, &stdout, &stderr, func(string) (string, bool) { return "", false }); code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	for _, want := range []string{"--webhook-port", "--docker-webhook-secret", "--ghcr-webhook-secret", "--quay-webhook-secret",
		"--harbor-webhook-secret", "--distribution-webhook-secret", "--acr-webhook-secret", "--cloudevents-webhook-secret",
		"--artifact-registry-webhook-secret", "--aliyun-acr-webhook-secret", "--artifactory-webhook-secret", "--nexus-webhook-secret",
		"--generic-webhook-secret", "--generic-webhook-repository-field", "--generic-webhook-tag-field", "--webhook-ratelimit-allowed", "--webhook-require-secret", "--registries-conf-path"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("webhook --help lacks %s", want)
		}
	}
	if strings.Contains(stdout.String(), "--interval") {
		t.Error("webhook --help offers --interval, which it does not use")
	}
}

// tagListCounter counts the tag listings of each repository on the way to
// the registry.
type tagListCounter struct {
	host   string
	mu     sync.Mutex
	counts map[string]int
}

func startTagListCounter(t *testing.T, registryHost string) *tagListCounter {
	t.Helper()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: registryHost})
	c := &tagListCounter{counts: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if repo, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v2/"), "/tags/list"); ok {
			c.mu.Lock()
			c.counts[repo]++
			c.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.host = strings.TrimPrefix(srv.URL, "http://")
	return c
}

func (c *tagListCounter) count(repo string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[repo]
}

func loopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// End to end: the Distribution registry notifies the controller of a push
// and the Application that runs the image is updated at once, though the
// interval is an hour; the other Application's repository is not listed
// again. Both commands that serve the endpoint, under leader election.
func TestWebhookEndToEnd(t *testing.T) {
	t.Parallel()
	k := testenv.StartKube(t)
	installRBAC(t, k)
	kubeconfig := testenv.WriteKubeconfig(t, k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater"), testenv.ArgoCDNamespace)
	dyn := dynamic.NewForConfigOrDie(k.Config)
	cs := kubernetes.NewForConfigOrDie(k.Config)
	const secret = "distribution-notification-secret"

	tests := []struct {
		command string
		args    []string
	}{
		{command: "run", args: []string{"--enable-webhook", "--interval", "1h"}},
		{command: "webhook"},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			webhookPort, metricsPort := loopbackPort(t), loopbackPort(t)
			reg := testenv.StartRegistry(t, testenv.WithNotifications(
				"http://127.0.0.1:"+webhookPort+"/webhook?type=distribution", map[string]string{"Authorization": "Bearer " + secret}))
			counter := startTagListCounter(t, reg.Host)
			conf := filepath.Join(t.TempDir(), "registries.conf")
			if err := os.WriteFile(conf, []byte(fmt.Sprintf("registries:\n- name: test\n  prefix: %s\n  api_url: http://%s\n  credentials: env:REGISTRY_CREDS\n",
				reg.Host, counter.host)), 0o600); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"REGISTRY_CREDS": reg.Username + ":" + reg.Password, "DISTRIBUTION_WEBHOOK_SECRET": secret}
			reg.PushImage(t, "hooked", []string{"1.0.0"})
			reg.PushImage(t, "quiet", []string{"1.0.0"})
			hooked, quiet := tt.command+"-hooked", tt.command+"-quiet"
			createApplication(t, dyn, hooked, reg.Repo("hooked"), "1.0.0")
			createApplication(t, dyn, quiet, reg.Repo("quiet"), "1.0.0")

			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			var out testenv.SyncBuffer
			done := make(chan int, 1)
			args := append([]string{tt.command, "--kubeconfig", kubeconfig, "--registries-conf-path", conf,
				"--listen-address", "127.0.0.1", "--health-port", "0", "--metrics-port", metricsPort,
				"--webhook-port", webhookPort, "--match-application-name", tt.command + "-*"}, tt.args...)
			go func() {
				done <- execute(ctx, args, &bytes.Buffer{}, &out, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			}()
			metric := func(name string) float64 {
				resp, err := http.Get("http://127.0.0.1:" + metricsPort + "/metrics")
				if err != nil {
					return -1
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				for _, line := range strings.Split(string(body), "\n") {
					if v, ok := strings.CutPrefix(line, name+" "); ok {
						f, _ := strconv.ParseFloat(v, 64)
						return f
					}
				}
				return 0
			}
			poll.True(t, 60*time.Second, "the controller to be elected leader", func() bool { return strings.Contains(out.String(), "elected leader") })
			// checked tells how many checks the notifications started, how
			// many of them named each repository, and whether all have
			// finished. The finished count is read before the log, so that
			// a check that starts in between is seen as running.
			checked := func() (started int, named map[string]int, finished bool) {
				done := int(metric("argocd_image_updater_webhook_checks_total"))
				named = map[string]int{}
				for _, line := range strings.Split(out.String(), "\n") {
					if !strings.Contains(line, "checking after push notifications") {
						continue
					}
					started++
					for _, repo := range []string{"hooked", "quiet"} {
						if strings.Contains(line, reg.Repo(repo)) {
							named[repo]++
						}
					}
				}
				return started, named, done == started
			}
			// The registry retries the notifications of the pushes above,
			// sent before the endpoint was up, until they are delivered:
			// wait until both repositories were checked after them, no
			// check runs, and, for run, its first cycle is over, so that
			// the listings counted next are those of the push below only.
			poll.Until(t, 60*time.Second, "the checks after the notifications of the first pushes to finish", func() (bool, string) {
				started, named, finished := checked()
				cycled := tt.command != "run" || strings.Contains(out.String(), "update cycle finished")
				return named["hooked"] > 0 && named["quiet"] > 0 && finished && cycled,
					fmt.Sprintf("%d checks started, by repository %v, all finished: %t, first cycle over: %t", started, named, finished, cycled)
			})
			_, named, _ := checked()
			hookedChecks := named["hooked"]
			quietLists, hookedLists := counter.count("quiet"), counter.count("hooked")

			start := time.Now()
			reg.PushImage(t, "hooked", []string{"1.1.0"})
			want := []string{reg.Repo("hooked") + ":1.1.0"}
			poll.True(t, 30*time.Second, "the pushed image to be written to the Application hooked", func() bool { return slices.Equal(applicationImages(t, dyn, hooked), want) })
			t.Logf("%s: updated %s after the push", tt.command, time.Since(start).Round(time.Millisecond))
			// The check that wrote the image is over, with its latency
			// observed: whatever it listed has been counted.
			poll.Until(t, 30*time.Second, "the check after the notification of the push to finish", func() (bool, string) {
				started, named, finished := checked()
				observed := metric("argocd_image_updater_webhook_update_latency_seconds_count")
				return named["hooked"] > hookedChecks && finished && observed >= 1,
					fmt.Sprintf("%d checks started, by repository %v, all finished: %t, latencies observed: %v", started, named, finished, observed)
			})

			if got := applicationImages(t, dyn, quiet); len(got) != 0 {
				t.Errorf("the other Application was written: %v", got)
			}
			if got := counter.count("quiet"); got != quietLists {
				t.Errorf("the other repository was listed %d more times", got-quietLists)
			}
			if got := counter.count("hooked"); got <= hookedLists {
				t.Errorf("the pushed repository was not listed again")
			}
			if tt.command == "webhook" && strings.Contains(out.String(), "update cycle finished") {
				t.Error("the webhook command ran a cycle")
			}
			events, err := cs.CoreV1().Events(testenv.ArgoCDNamespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + hooked})
			if err != nil {
				t.Fatal(err)
			}
			var messages []string
			for _, e := range events.Items {
				messages = append(messages, e.Reason+": "+e.Message)
			}
			if !slices.ContainsFunc(messages, func(m string) bool {
				return strings.HasPrefix(m, "ImagesUpdated: updated 1 image(s) after a push notification from distribution: ")
			}) {
				t.Errorf("no ImagesUpdated event naming the notification: %q", messages)
			}
			if n := metric("argocd_image_updater_webhook_update_latency_seconds_count"); n < 1 {
				t.Errorf("latency observed %v times", n)
			}
			stop()
			if code := <-done; code != 0 {
				t.Errorf("exit code %d:\n%s", code, out.String())
			}
			if t.Failed() {
				t.Logf("controller log:\n%s", out.String())
			}
		})
	}
}

func createApplication(t *testing.T, dyn dynamic.Interface, name, image, running string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": testenv.ArgoCDNamespace, "annotations": map[string]any{
			settings.AnnotationPrefix + "image-list": "app=" + image,
		}},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "https://git.example.com/d.git", "path": "p", "kustomize": map[string]any{}},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"},
		},
		"status": map[string]any{"summary": map[string]any{"images": []any{image + ":" + running}}},
	}}
	if _, err := dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func applicationImages(t *testing.T, dyn dynamic.Interface, name string) []string {
	t.Helper()
	obj, err := dyn.Resource(application.Resource()).Namespace(testenv.ArgoCDNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return testenv.KustomizeImages(t, obj)
}

// The webhook endpoint's TLS as each line's install asks for it: the
// operator's files; the v1.x Secret when mounted (self-signed while it is
// empty, as that install creates it); --disable-tls; plain HTTP where
// neither is found, as v0.18 serves it.
func TestWebhookTLSChoice(t *testing.T) {
	ca := testenv.NewCA(t, "operator-ca")
	certPEM, keyPEM := ca.ServerCertPEM(t)
	writeDir := func(t *testing.T, cert, key []byte) string {
		dir := t.TempDir()
		for name, b := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	operatorDir := writeDir(t, certPEM, keyPEM)
	tests := []struct {
		name       string
		dir        string // the mounted Secret; "" for none
		operator   bool   // --webhook-tls-cert-file given
		v1TLS      v1TLS
		wantIssuer string // "" for plain HTTP
		wantErr    string
	}{
		{name: "nothing mounted: plain HTTP as v0.18", dir: "none"},
		{name: "the v1.x Secret with a certificate", dir: "full", wantIssuer: "operator-ca"},
		{name: "the v1.x Secret as its install creates it: self-signed", dir: "empty", wantIssuer: "argocd-image-updater webhook"},
		{name: "--disable-tls=false without a Secret: self-signed", dir: "none", v1TLS: v1TLSOn, wantIssuer: "argocd-image-updater webhook"},
		{name: "--disable-tls with the Secret: plain HTTP", dir: "full", v1TLS: v1TLSOff},
		{name: "the operator's files win", dir: "empty", operator: true, wantIssuer: "operator-ca"},
		{name: "a broken Secret stops the start", dir: "broken", wantErr: "tls.crt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := webhookOptions{v1TLS: tt.v1TLS}
			switch tt.dir {
			case "none":
				w.v1TLSDir = filepath.Join(t.TempDir(), "absent")
			case "full":
				w.v1TLSDir = operatorDir
			case "empty":
				w.v1TLSDir = writeDir(t, nil, nil)
			case "broken":
				w.v1TLSDir = writeDir(t, []byte("not a certificate"), []byte("not a key"))
			}
			if tt.operator {
				w.tlsCertFile, w.tlsKeyFile = filepath.Join(operatorDir, "tls.crt"), filepath.Join(operatorDir, "tls.key")
			}
			cfg, err := w.serverTLS(servertls.Settings{}, slog.New(slog.DiscardHandler))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := handshakeIssuer(t, cfg); got != tt.wantIssuer {
				t.Errorf("served a certificate issued by %q, want %q", got, tt.wantIssuer)
			}
			// TLS 1.3 only by default, as v1.3.0's endpoint.
			if cfg != nil && handshake(cfg, &tls.Config{MaxVersion: tls.VersionTLS12}) == nil {
				t.Error("a TLS 1.2 client was served")
			}
		})
	}
}

// handshake is the error of a client's handshake with a server with cfg.
func handshake(cfg, client *tls.Config) error {
	serverConn, clientConn := net.Pipe()
	defer serverConn.Close()
	defer clientConn.Close()
	go func() { _ = tls.Server(serverConn, cfg).Handshake(); serverConn.Close() }()
	client.InsecureSkipVerify = true
	return tls.Client(clientConn, client).Handshake()
}

// handshakeIssuer is the issuer of the certificate a server with cfg
// presents; "" when cfg is nil (plain HTTP).
func handshakeIssuer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	if cfg == nil {
		return ""
	}
	serverConn, clientConn := net.Pipe()
	defer serverConn.Close()
	defer clientConn.Close()
	go func() { _ = tls.Server(serverConn, cfg).Handshake() }()
	client := tls.Client(clientConn, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // reads what is served
	if err := client.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return client.ConnectionState().PeerCertificates[0].Issuer.CommonName
}

// Two replicas, and the registry notifies the one that does not lead (as
// a Service in front of both may send it there): it forwards the
// notification to the leader, which checks it and updates the
// Application at once, though the interval is an hour. Each replica
// advertises its address on the Lease from POD_IP.
func TestWebhookRelaysToTheLeader(t *testing.T) {
	t.Parallel()
	k := testenv.StartKube(t)
	installRBAC(t, k)
	kubeconfig := testenv.WriteKubeconfig(t, k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater"), testenv.ArgoCDNamespace)
	dyn := dynamic.NewForConfigOrDie(k.Config)
	const secret = "distribution-notification-secret"
	leaderPort, followerPort := loopbackPort(t), loopbackPort(t)
	reg := testenv.StartRegistry(t, testenv.WithNotifications(
		"http://127.0.0.1:"+followerPort+"/webhook?type=distribution", map[string]string{"Authorization": "Bearer " + secret}))
	conf := filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("registries:\n- name: test\n  prefix: %s\n  api_url: http://%s\n  credentials: env:REGISTRY_CREDS\n",
		reg.Host, reg.Host)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"REGISTRY_CREDS": reg.Username + ":" + reg.Password, "DISTRIBUTION_WEBHOOK_SECRET": secret, "POD_IP": "127.0.0.1"}
	reg.PushImage(t, "relayed", []string{"1.0.0"})
	createApplication(t, dyn, "relayed", reg.Repo("relayed"), "1.0.0")

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	start := func(port string, out *testenv.SyncBuffer) <-chan int {
		done := make(chan int, 1)
		args := []string{"run", "--enable-webhook", "--interval", "1h", "--kubeconfig", kubeconfig, "--registries-conf-path", conf,
			"--listen-address", "127.0.0.1", "--health-port", "0", "--metrics-port", loopbackPort(t),
			"--webhook-port", port, "--match-application-name", "relayed"}
		go func() {
			done <- execute(ctx, args, &bytes.Buffer{}, out, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		}()
		return done
	}
	var leaderOut, followerOut testenv.SyncBuffer
	leaderDone := start(leaderPort, &leaderOut)
	poll.True(t, 60*time.Second, "the leader's first update cycle to finish", func() bool { return strings.Contains(leaderOut.String(), "update cycle finished") })
	followerDone := start(followerPort, &followerOut)
	poll.True(t, 60*time.Second, "the follower to wait for the leader", func() bool { return strings.Contains(followerOut.String(), "another replica leads; waiting") })

	reg.PushImage(t, "relayed", []string{"1.1.0"})
	want := []string{reg.Repo("relayed") + ":1.1.0"}
	poll.Until(t, 30*time.Second, "the leader to update the Application after the notification the other replica received", func() (bool, string) {
		got := applicationImages(t, dyn, "relayed")
		return slices.Equal(got, want), strings.Join(got, ",")
	})
	if !strings.Contains(followerOut.String(), "push notifications forwarded to the leader") {
		t.Error("the replica that does not lead did not log forwarding")
	}
	if strings.Contains(followerOut.String(), "checking after push notifications") {
		t.Error("the replica that does not lead ran a check")
	}
	stop()
	for name, done := range map[string]<-chan int{"leader": leaderDone, "follower": followerDone} {
		if code := <-done; code != 0 {
			t.Errorf("%s: exit code %d", name, code)
		}
	}
	if t.Failed() {
		t.Logf("leader's log:\n%s\nother replica's log:\n%s", leaderOut.String(), followerOut.String())
	}
}
