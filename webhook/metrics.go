package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a request is rejected, the reason label of
// argocd_image_updater_webhook_rejected_total.
const (
	RejectMethod        = "method"         // not POST: 405
	RejectUnknownSource = "unknown_source" // no or unknown ?type=: 400
	RejectRateLimited   = "rate_limited"   // over --webhook-ratelimit-allowed: 429
	RejectNoSecret      = "no_secret"      // the source has no secret and open sources are not allowed: 403
	RejectUnauthorized  = "unauthorized"   // missing or wrong secret or signature: 401
	RejectTooLarge      = "too_large"      // body over the limit: 413
	RejectMalformed     = "malformed"      // unreadable payload: 400
	RejectUnavailable   = "unavailable"    // no checks run here now (not the leader), or too many pending: 503
)

// unknownSource labels requests whose source is not one of Sources, so
// that senders cannot make up label values.
const unknownSource = "unknown"

// Metrics of the webhook endpoint.
type Metrics struct {
	received *prometheus.CounterVec
	rejected *prometheus.CounterVec
	checks   prometheus.Counter
	latency  prometheus.Histogram
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_webhook_requests_total",
			Help: "Requests received on the webhook endpoint, by source (registry type; unknown when none or an unknown one was given).",
		}, []string{"source"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_webhook_rejected_total",
			Help: "Webhook requests rejected, by source and reason.",
		}, []string{"source", "reason"}),
		checks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "argocd_image_updater_webhook_checks_total",
			Help: "Targeted checks run for push notifications; notifications that arrive while one runs share the next.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "argocd_image_updater_webhook_update_latency_seconds",
			Help:    "Time from receiving a push notification to the end of the write-back of the check it caused, for checks that updated images.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 12),
		}),
	}
	for _, c := range []prometheus.Collector{m.received, m.rejected, m.checks, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every known source and reason starts at zero, so that rates and
	// alerts work before the first request.
	for _, s := range append(Sources(), unknownSource) {
		m.received.WithLabelValues(s)
	}
	return m, nil
}

func (m *Metrics) request(source string) {
	if m != nil {
		m.received.WithLabelValues(source).Inc()
	}
}

func (m *Metrics) reject(source, reason string) {
	if m != nil {
		m.rejected.WithLabelValues(source, reason).Inc()
	}
}

func (m *Metrics) checked(updated bool, received []time.Time, now time.Time) {
	if m == nil {
		return
	}
	m.checks.Inc()
	if !updated {
		return
	}
	for _, r := range received {
		m.latency.Observe(now.Sub(r).Seconds())
	}
}
