package cycle

import (
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/image-updater/argocd-image-updater/application"
)

// Metrics of the update cycle. The names are those users of Argo CD Image
// Updater already scrape; every one declared here is filled. The
// per-Application series carry the labels of both lines, so that both
// lines' dashboards and alerts keep working: v0.18's application, and
// v1.x's image_updater_cr_name and image_updater_cr_namespace (the
// ImageUpdater that configures the Application, empty for annotations).
type Metrics struct {
	appsWatchedVec   *prometheus.GaugeVec
	imagesWatchedVec *prometheus.GaugeVec
	imagesUpdatedVec *prometheus.CounterVec
	imagesErrorsVec  *prometheus.CounterVec
	cycleDuration    prometheus.Histogram
	appsProcessed    prometheus.Counter
	imagesProcessed  prometheus.Counter
	kubeRequests     prometheus.Counter
	kubeErrors       prometheus.Counter

	// series are the label values of the per-Application series, and
	// resources those of applications_watched_total, so that the series
	// of Applications and resources that are gone can be deleted. Only
	// the cycle, which never overlaps itself, touches them.
	series    map[string][]string
	resources map[[2]string]bool
}

// Label names of the per-Application series.
const (
	labelApplication = "application"
	labelCRName      = "image_updater_cr_name"
	labelCRNamespace = "image_updater_cr_namespace"
)

var appLabels = []string{labelApplication, labelCRName, labelCRNamespace}

// appLabelValues are an Application's values of appLabels.
func appLabelValues(app *application.Application) []string {
	return []string{app.Key(), app.ImageUpdater.Name, app.ImageUpdater.Namespace}
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		appsWatchedVec: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "argocd_image_updater_applications_watched_total",
			Help: "Number of Applications whose images are managed, by the ImageUpdater configuring them (empty for annotations).",
		}, []string{labelCRName, labelCRNamespace}),
		imagesWatchedVec: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "argocd_image_updater_images_watched_total",
			Help: "Number of images managed, by Application.",
		}, appLabels),
		imagesUpdatedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_images_updated_total",
			Help: "Number of images updated, by Application.",
		}, appLabels),
		imagesErrorsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "argocd_image_updater_images_errors_total",
			Help: "Number of errors while checking or updating images, by Application.",
		}, appLabels),
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
	for _, c := range []prometheus.Collector{m.appsWatchedVec, m.imagesWatchedVec, m.imagesUpdatedVec, m.imagesErrorsVec,
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
func (m *Metrics) applicationsWatched(apps []*application.Application) {
	if m == nil {
		return
	}
	// Annotated Applications are always counted, under empty resource
	// labels, as v0.18's unlabelled gauge counted them.
	counts := map[[2]string]int{{"", ""}: 0}
	now := make(map[string][]string, len(apps))
	for _, a := range apps {
		values := appLabelValues(a)
		now[a.Key()] = values
		counts[[2]string{values[1], values[2]}]++
	}
	for key, values := range m.series {
		if v, ok := now[key]; !ok || !slices.Equal(v, values) {
			m.imagesWatchedVec.DeleteLabelValues(values...)
			m.imagesUpdatedVec.DeleteLabelValues(values...)
			m.imagesErrorsVec.DeleteLabelValues(values...)
		}
	}
	m.series = now
	for r := range m.resources {
		if _, ok := counts[r]; !ok {
			m.appsWatchedVec.DeleteLabelValues(r[0], r[1])
		}
	}
	m.resources = make(map[[2]string]bool, len(counts))
	for r, n := range counts {
		m.appsWatchedVec.WithLabelValues(r[0], r[1]).Set(float64(n))
		m.resources[r] = true
	}
}

func (m *Metrics) imagesWatched(app *application.Application, n int) {
	if m != nil {
		m.imagesWatchedVec.WithLabelValues(appLabelValues(app)...).Set(float64(n))
	}
}

func (m *Metrics) imagesUpdated(app *application.Application, n int) {
	if m != nil {
		m.imagesUpdatedVec.WithLabelValues(appLabelValues(app)...).Add(float64(n))
	}
}

func (m *Metrics) imageError(app *application.Application) {
	if m != nil {
		m.imagesErrorsVec.WithLabelValues(appLabelValues(app)...).Inc()
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
