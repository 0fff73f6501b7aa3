package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// TestSecureMetrics: --metrics-secure serves the metrics over HTTPS to a
// scraper the API server authorizes for GET /metrics, as v1.x does, with
// the ClusterRoles of manifests/metrics-auth; everyone else is refused.
func TestSecureMetrics(t *testing.T) {
	t.Parallel()
	w := newControllerWorld(t)
	w.k.Apply(t, "kubectl", testenv.ArgoCDNamespace, testenv.DecodeYAML(t, testenv.Kustomize(t, "../../manifests/metrics-auth")))
	scraper := w.k.ServiceAccountConfig(t, "default", "prometheus").BearerToken
	nobody := w.k.ServiceAccountConfig(t, "default", "nobody").BearerToken
	w.k.Create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "argocd-image-updater-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: "default"}},
	})
	port := loopbackPort(t)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var out testenv.SyncBuffer
	go func() {
		done <- execute(ctx, []string{"run", "--kubeconfig", w.kubeconfig, "--registries-conf-path", w.conf,
			"--listen-address", "127.0.0.1", "--health-port", "0", "--metrics-bind-address", ":" + port, "--interval", "1h"},
			&bytes.Buffer{}, &out, func(k string) (string, bool) { v, ok := w.env[k]; return v, ok })
	}()
	defer func() {
		stop()
		<-done
	}()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(scheme, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, scheme+"://127.0.0.1:"+port+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	testenv.WaitFor(t, 30*time.Second, "the metrics server", func() (bool, string) {
		code, body := get("https", scraper)
		return code == http.StatusOK && strings.Contains(body, "argocd_image_updater_"), body + out.String()
	})
	for _, tt := range []struct {
		name, scheme, token string
		want                int
	}{
		{"no token", "https", "", http.StatusUnauthorized},
		{"a token without the grant", "https", nobody, http.StatusForbidden},
		{"a token that is no token", "https", "not-a-token", http.StatusForbidden},
		{"plain HTTP", "http", scraper, http.StatusBadRequest},
	} {
		if code, body := get(tt.scheme, tt.token); code != tt.want {
			t.Errorf("%s: %d %q, want %d", tt.name, code, body, tt.want)
		}
	}
	// A flood of forged tokens is answered 429 past the review rate,
	// without asking the API server, and the scraper's remembered token
	// still reads the metrics.
	limited := 0
	for i := range 30 {
		if code, _ := get("https", fmt.Sprintf("forged-%d", i)); code == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Error("30 forged tokens were all reviewed: no 429")
	}
	if code, body := get("https", scraper); code != http.StatusOK {
		t.Errorf("the scraper after the flood: %d %q", code, body)
	}
}
