package cycle

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/image-updater/argocd-image-updater/appwatch"
)

// Metrics of the update cycle. The names are those users of Argo CD Image
// Updater already scrape; every one declared here is filled.
type Metrics struct {
	appsWatchedGauge prometheus.Gauge
	imagesWatchedVec *prometheus.GaugeVec
	imagesUpdatedVec *prometheus.CounterVec
	imagesErrorsVec  *prometheus.CounterVec
	cycleDuration    prometheus.Histogram
	appsProcessed    prometheus.Counter
	imagesProcessed  prometheus.Counter
	kubeRequests     prometheus.Counter
	kubeErrors       prometheus.Counter

	// series are the Applications that have per-Application series, so
	// those of Applications that are gone can be deleted. Only the cycle,
	// which never overlaps itself, touches it.
	series map[string]bool
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		appsWatchedGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "argocd_image_updater_applications_watched_total",
			Help: "Number of Applications whose images are managed.",
		}),
		imagesWatchedVec: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "argocd_image_updater_images_watched_total",
			Help: "Number of images managed, by Application.",
		}, []string{"application"}),
		imagesUpdatedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_images_updated_total",
			Help: "Number of images updated, by Application.",
		}, []string{"application"}),
		imagesErrorsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_images_errors_total",
			Help: "Number of errors while checking or updating images, by Application.",
		}, []string{"application"}),
		cycleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "argocd_image_updater_cycle_duration_seconds",
			Help:    "Duration of update cycles.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}),
		appsProcessed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "argocd_image_updater_applications_processed_total",
			Help: "Applications processed by update cycles.",
		}),
		imagesProcessed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "argocd_image_updater_images_processed_total",
			Help: "Images processed by update cycles.",
		}),
		kubeRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "argocd_image_updater_k8s_api_requests_total",
			Help: "Requests to the Kubernetes API.",
		}),
		kubeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "argocd_image_updater_k8s_api_errors_total",
			Help: "Failed requests to the Kubernetes API (network errors and status 500 or above, 429 and 409).",
		}),
	}
	for _, c := range []prometheus.Collector{m.appsWatchedGauge, m.imagesWatchedVec, m.imagesUpdatedVec, m.imagesErrorsVec,
		m.cycleDuration, m.appsProcessed, m.imagesProcessed, m.kubeRequests, m.kubeErrors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// applicationsWatched records the Applications of this cycle and deletes
// the per-Application series of those that are gone, so that deleted
// Applications do not stay on dashboards and in alerts.
func (m *Metrics) applicationsWatched(apps []*appwatch.Application) {
	if m == nil {
		return
	}
	m.appsWatchedGauge.Set(float64(len(apps)))
	now := make(map[string]bool, len(apps))
	for _, a := range apps {
		now[a.Key()] = true
	}
	for key := range m.series {
		if !now[key] {
			m.imagesWatchedVec.DeleteLabelValues(key)
			m.imagesUpdatedVec.DeleteLabelValues(key)
			m.imagesErrorsVec.DeleteLabelValues(key)
		}
	}
	m.series = now
}

func (m *Metrics) imagesWatched(app *appwatch.Application, n int) {
	if m != nil {
		m.imagesWatchedVec.WithLabelValues(app.Key()).Set(float64(n))
	}
}

func (m *Metrics) imagesUpdated(app *appwatch.Application, n int) {
	if m != nil {
		m.imagesUpdatedVec.WithLabelValues(app.Key()).Add(float64(n))
	}
}

func (m *Metrics) imageError(app *appwatch.Application) {
	if m != nil {
		m.imagesErrorsVec.WithLabelValues(app.Key()).Inc()
	}
}

func (m *Metrics) cycleDone(s Summary) {
	if m == nil {
		return
	}
	m.cycleDuration.Observe(s.Duration.Seconds())
	m.appsProcessed.Add(float64(s.Applications))
	m.imagesProcessed.Add(float64(s.Images))
}

// WrapKubeTransport counts requests to the Kubernetes API. Use it as a
// rest.Config's WrapTransport.
func (m *Metrics) WrapKubeTransport(rt http.RoundTripper) http.RoundTripper {
	if m == nil {
		return rt
	}
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		m.kubeRequests.Inc()
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusConflict {
			m.kubeErrors.Inc()
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
