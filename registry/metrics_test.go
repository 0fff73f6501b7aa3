package registry

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

func TestMetrics(t *testing.T) {
	reg := testenv.StartRegistry(t)
	reg.PushTags(t, "team/app", []string{"1.0"})
	promReg := prometheus.NewRegistry()
	m, err := NewMetrics(promReg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(promReg); err == nil {
		t.Error("registering the metrics twice should fail")
	}
	// The label is the registries.conf prefix, here one with a path.
	prefix := reg.Host + "/team"
	c := NewClient(
		WithConfig(testConfigPrefix(t, prefix, reg.Host, "credentials: env:CREDS")),
		WithCredentialResolver(envResolver(map[string]string{
			"CREDS": reg.Username + ":" + reg.Password,
			"WRONG": reg.Username + ":wrong",
		})),
		WithMetrics(m),
	)
	ref := imageRef(t, reg.Host+"/team/app:1.0")
	if _, err := c.Tags(t.Context(), ref, credref.Ref{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Metadata(t.Context(), ref, credref.Ref{}, nil); err != nil {
		t.Fatal(err)
	}
	// ping (401 challenge), tag list, HEAD, manifest, config.
	if got := testutil.ToFloat64(m.requests.WithLabelValues(prefix)); got != 5 {
		t.Errorf("requests_total = %v, want 5", got)
	}
	if got := testutil.ToFloat64(m.failed.WithLabelValues(prefix)); got != 0 {
		t.Errorf("requests_failed_total = %v after successful calls: the challenge must not count", got)
	}
	if got := testutil.ToFloat64(m.cacheHits.WithLabelValues(cacheAuth)); got != 1 {
		t.Errorf("the session was reused %v times, want 1", got)
	}

	if _, err := c.Tags(t.Context(), ref, envRef("WRONG")); err == nil {
		t.Fatal("want an error for a wrong password")
	}
	// The refused credentials are read again and tried once more.
	if got := testutil.ToFloat64(m.failed.WithLabelValues(prefix)); got != 2 {
		t.Errorf("requests_failed_total = %v after a refused tag list, want 2", got)
	}

	families, err := promReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string][]string{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if !slices.Contains(labels[f.GetName()], l.GetName()) {
					labels[f.GetName()] = append(labels[f.GetName()], l.GetName())
				}
			}
		}
	}
	for name, want := range map[string]string{
		"argocd_image_updater_registry_requests_total":           "registry",
		"argocd_image_updater_registry_requests_failed_total":    "registry",
		"argocd_image_updater_registry_request_duration_seconds": "registry",
		"argocd_image_updater_registry_cache_hits_total":         "cache",
		"argocd_image_updater_registry_cache_misses_total":       "cache",
	} {
		if !slices.Equal(labels[name], []string{want}) {
			t.Errorf("%s has labels %v, want [%s]", name, labels[name], want)
		}
	}
	if n := testutil.CollectAndCount(m.duration); n != 1 {
		t.Errorf("%d latency series, want 1", n)
	}
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.request("r", 0, true)
	m.retry("r")
	m.cache(cacheMetadata, true)
}
