package healthgate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the health gate.
type Metrics struct {
	reverts      *prometheus.CounterVec
	verified     prometheus.Counter
	toVerified   prometheus.Histogram
	pending      prometheus.Gauge
	revertErrors prometheus.Counter
}

// NewMetrics registers the health gate's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reverts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_health_gate_reverts_total",
			Help: "Versions the health gate found broken and wrote back, by cause (sync_failed, degraded).",
		}, []string{"cause"}),
		verified: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "argocd_image_updater_health_gate_verified_total",
			Help: "Versions the health gate verified: Healthy at the end of their window.",
		}),
		toVerified: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "argocd_image_updater_health_gate_write_to_verified_seconds",
			Help:    "Time from the write of a version to its verification by the health gate.",
			Buckets: prometheus.ExponentialBuckets(5, 2, 12),
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "argocd_image_updater_health_gate_pending",
			Help: "Versions the health gate follows: written and not judged yet, or being written back.",
		}),
		revertErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "argocd_image_updater_health_gate_revert_errors_total",
			Help: "Failed attempts to write back a version the health gate found broken (each is tried again).",
		}),
	}
	for _, cause := range []string{causeSyncFailed, causeDegraded} {
		m.reverts.WithLabelValues(cause)
	}
	for _, c := range []prometheus.Collector{m.reverts, m.verified, m.toVerified, m.pending, m.revertErrors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) reverted(cause string) {
	if m != nil {
		m.reverts.WithLabelValues(cause).Inc()
	}
}

func (m *Metrics) verifiedAfter(d time.Duration) {
	if m != nil {
		m.verified.Inc()
		m.toVerified.Observe(d.Seconds())
	}
}

func (m *Metrics) following(n int) {
	if m != nil {
		m.pending.Set(float64(n))
	}
}

func (m *Metrics) revertFailed() {
	if m != nil {
		m.revertErrors.Inc()
	}
}
