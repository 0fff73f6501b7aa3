package bench

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		method, path string
		kind, repo   string
	}{
		{"GET", "/v2/", regPing, ""},
		{"GET", "/token", regToken, ""},
		{"GET", "/v2/bench/semver-0001/tags/list", regTagPages, "bench/semver-0001"},
		{"HEAD", "/v2/bench/build-0001/manifests/build-0001", regManHead, "bench/build-0001"},
		{"GET", "/v2/a/b/c/manifests/sha256:00", regManGet, "a/b/c"},
		{"GET", "/v2/x/blobs/sha256:00", regBlob, "x"},
		{"POST", "/v2/x/blobs/uploads/", regOther, ""},
	}
	for _, tt := range tests {
		kind, repo, _ := classify(tt.method, tt.path)
		if kind != tt.kind || repo != tt.repo {
			t.Errorf("%s %s: %s %q, want %s %q", tt.method, tt.path, kind, repo, tt.kind, tt.repo)
		}
	}
}

func TestKubeRequestKind(t *testing.T) {
	tests := []struct{ method, url, want string }{
		{http.MethodGet, "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications?limit=500", "list applications"},
		{http.MethodGet, "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications?watch=true", "watch applications"},
		{http.MethodPatch, "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/app-1", "patch applications"},
		{http.MethodGet, "/api/v1/namespaces/argocd/secrets/bench-pull", "get secrets"},
		{http.MethodGet, "/api/v1/namespaces/argocd/secrets?labelSelector=x", "list secrets"},
		{http.MethodPost, "/api/v1/namespaces/argocd/events", "create events"},
		{http.MethodGet, "/api/v1/namespaces", "list namespaces"},
		{http.MethodGet, "/apis", "discovery"},
	}
	for _, tt := range tests {
		u, _ := url.Parse(tt.url)
		if got := kubeRequestKind(tt.method, u); got != tt.want {
			t.Errorf("%s %s: %q, want %q", tt.method, tt.url, got, tt.want)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# HELP x y
argocd_image_updater_registry_requests_total{registry="a b"} 3
argocd_image_updater_registry_requests_total{registry="c"} 4
argocd_image_updater_cycle_duration_seconds_sum 1.5
process_resident_memory_bytes 1.2e+08
`))
	if err != nil {
		t.Fatal(err)
	}
	if m["argocd_image_updater_registry_requests_total"] != 7 || m["argocd_image_updater_cycle_duration_seconds_sum"] != 1.5 ||
		m["process_resident_memory_bytes"] != 1.2e8 {
		t.Errorf("parsed %v", m)
	}
}

// TestWorkloadSettled checks that a fresh workload has nothing to update,
// which the cold and steady cycles rely on.
func TestWorkloadSettled(t *testing.T) {
	w, err := newWorkload(smoke, "127.0.0.1:5000", "http://127.0.0.1/deploy.git")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range w.apps {
		for _, e := range a.Images {
			res, err := w.choose(e)
			if err != nil || res.Update {
				t.Errorf("%s %s: update %v, %v", a.Name, e.Alias, res.Update, err)
			}
		}
	}
	cs := w.planChange()
	if _, err := w.apply(cs); err != nil {
		t.Fatal(err)
	}
	if cs.GitChanged != smoke.GitApps || cs.Patched == 0 {
		t.Errorf("change: %d git Applications, %d patched", cs.GitChanged, cs.Patched)
	}
}
