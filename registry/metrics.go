package registry

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Cache names used as the "cache" label of the cache metrics.
const (
	cacheMetadata         = "metadata"          // metadata by digest (bounded LRU)
	cacheMetadataInflight = "metadata-inflight" // a metadata fetch shared with a concurrent caller
	cacheTagsInflight     = "tags-inflight"     // a tag listing shared with a concurrent caller
	cacheAuth             = "auth"              // an authenticated session (ping and token) reused
	cacheTagDigest        = "tag-digest"        // a tag's digest known while its repository's listing stays the same
)

// Metrics are the registry client's Prometheus metrics. A nil *Metrics
// records nothing.
//
// Every HTTP request the client makes counts once in requests_total, token
// requests to a registry's auth server included, under the registry's
// label: its registries.conf prefix, or its host when it has no entry. A
// request is counted as it is seen by the caller, after rate limiting and
// retries; each retry is counted in request_retries_total. A request fails
// (requests_failed_total) when it ends in a network error or a status of
// 400 or more, with one exception: a 401 to a request that carried no
// Authorization header is the registry's challenge that starts every
// authenticated session, not a failure. A 401 to a request that did carry
// credentials or a token is a failure.
type Metrics struct {
	requests    *prometheus.CounterVec
	failed      *prometheus.CounterVec
	retries     *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	cacheHits   *prometheus.CounterVec
	cacheMisses *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg. It fails if
// they are registered there already.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_registry_requests_total",
			Help: "HTTP requests sent to container registries, token requests included.",
		}, []string{"registry"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_registry_requests_failed_total",
			Help: "HTTP requests to container registries that ended in a network error or an error status (the 401 challenge before authentication excluded).",
		}, []string{"registry"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_registry_request_retries_total",
			Help: "HTTP requests to container registries sent again after a 429, a 5xx or a connection error.",
		}, []string{"registry"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "argocd_image_updater_registry_request_duration_seconds",
			Help:    "Time until a container registry answered an HTTP request, including rate-limit waits and retries.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"registry"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_registry_cache_hits_total",
			Help: "Registry lookups answered from a cache or shared with a concurrent identical lookup.",
		}, []string{"cache"}),
		cacheMisses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_registry_cache_misses_total",
			Help: "Registry lookups that had to go to the registry.",
		}, []string{"cache"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.failed, m.retries, m.duration, m.cacheHits, m.cacheMisses} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering registry metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) request(registry string, d time.Duration, failed bool) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(registry).Inc()
	m.duration.WithLabelValues(registry).Observe(d.Seconds())
	if failed {
		m.failed.WithLabelValues(registry).Inc()
	}
}

func (m *Metrics) retry(registry string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(registry).Inc()
}

func (m *Metrics) cache(name string, hit bool) {
	if m == nil {
		return
	}
	if hit {
		m.cacheHits.WithLabelValues(name).Inc()
	} else {
		m.cacheMisses.WithLabelValues(name).Inc()
	}
}
