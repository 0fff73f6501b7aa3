package cycle

import (
	"net/http"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/image-updater/argocd-image-updater/application"
)

// Metrics of the update cycle. The names are those users of Argo CD Image
// Updater already scrape; every one declared here is filled. The
// per-Application series carry the labels of both lines, so that both
// lines' dashboards and alerts keep working: v0.18's application, and
// v1.x's image_updater_cr_name and image_updater_cr_namespace (the
// ImageUpdater that configures the Application, empty for annotations).
//
// At most maxApps Applications have series of their own (each costs
// about 1 KiB of the controller's memory per metric, and a series in
// Prometheus); the others are counted together, per ImageUpdater, under
// an empty application label. An Application keeps its series while it
// is managed, so that the series do not move from one to another.
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
	// versionsWaiting counts, by reason, the images whose newer version
	// the last cycle held back.
	versionsWaiting *prometheus.GaugeVec

	maxApps int

	// mu guards series, read by targeted checks while a cycle may change
	// it. series are the label values of the Applications with series of
	// their own, and resources those of applications_watched_total and of
	// the series of the other Applications, so that the series of
	// Applications and resources that are gone can be deleted. Only the
	// cycle, which never overlaps itself, writes them.
	mu        sync.RWMutex
	series    map[string][]string
	resources map[[2]string]bool
	others    map[[2]string]bool
}

// DefaultMaxApplicationSeries is how many Applications have per-Application
// series unless MaxApplicationSeries says otherwise.
const DefaultMaxApplicationSeries = 1000

// MetricsOption configures Metrics.
type MetricsOption func(*Metrics)

// MaxApplicationSeries bounds the Applications with series of their own;
// 0 or less: every Application has its own.
func MaxApplicationSeries(n int) MetricsOption { return func(m *Metrics) { m.maxApps = n } }

// The reason labels of versions_waiting.
const (
	// waitingMinReleaseAge: waiting for its minimum release age.
	waitingMinReleaseAge = "minimum-release-age"
	// waitingUpdateWindow: waiting for the Application's update window.
	waitingUpdateWindow = "update-window"
	// waitingPromotion: waiting for the stage it is promoted from.
	waitingPromotion = "promotion"
)

// Label names of the per-Application series.
const (
	labelApplication = "application"
	labelCRName      = "image_updater_cr_name"
	labelCRNamespace = "image_updater_cr_namespace"
)

var appLabels = []string{labelApplication, labelCRName, labelCRNamespace}

// appLabelValues are an Application's values of appLabels when it has
// series of its own.
func appLabelValues(app *application.Application) []string {
	return []string{app.Key(), app.ImageUpdater.Name, app.ImageUpdater.Namespace}
}

// labelValues are the values of appLabels app is counted under: its own,
// or those of the other Applications of its ImageUpdater.
func (m *Metrics) labelValues(app *application.Application) []string {
	m.mu.RLock()
	values, ok := m.series[app.Key()]
	m.mu.RUnlock()
	if ok && values[1] == app.ImageUpdater.Name && values[2] == app.ImageUpdater.Namespace {
		return values
	}
	return []string{"", app.ImageUpdater.Name, app.ImageUpdater.Namespace}
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer, opts ...MetricsOption) (*Metrics, error) {
	m := &Metrics{
		maxApps: DefaultMaxApplicationSeries,
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
	m.versionsWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "argocd_image_updater_versions_waiting",
		Help: "Images whose newer version the last cycle held back, by reason (minimum-release-age, update-window, promotion).",
	}, []string{"reason"})
	for _, c := range []prometheus.Collector{m.appsWatchedVec, m.imagesWatchedVec, m.imagesUpdatedVec, m.imagesErrorsVec,
		m.cycleDuration, m.appsProcessed, m.imagesProcessed, m.kubeRequests, m.kubeErrors, m.versionsWaiting} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, o := range opts {
		o(m)
	}
	return m, nil
}

// applicationsWatched records the Applications of this cycle and the
// images each manages, gives series of their own to Applications while
// fewer than maxApps have them, and deletes the series of Applications
// and resources that are gone, so that deleted Applications do not stay
// on dashboards and in alerts.
func (m *Metrics) applicationsWatched(apps []*application.Application) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	managed := make(map[string]*application.Application, len(apps))
	for _, a := range apps {
		managed[a.Key()] = a
	}
	for key, values := range m.series {
		if a, ok := managed[key]; !ok || !slices.Equal(appLabelValues(a), values) {
			m.deleteSeries(values)
			delete(m.series, key)
		}
	}
	if m.series == nil {
		m.series = make(map[string][]string)
	}
	// Annotated Applications are always counted, under empty resource
	// labels, as v0.18's unlabelled gauge counted them.
	counts := map[[2]string]int{{"", ""}: 0}
	others := map[[2]string]int{}
	for _, a := range apps {
		r := [2]string{a.ImageUpdater.Name, a.ImageUpdater.Namespace}
		counts[r]++
		values, ok := m.series[a.Key()]
		if !ok && (m.maxApps <= 0 || len(m.series) < m.maxApps) {
			values, ok = appLabelValues(a), true
			m.series[a.Key()] = values
		}
		if ok {
			m.imagesWatchedVec.WithLabelValues(values...).Set(float64(len(a.Settings.Images)))
			continue
		}
		others[r] += len(a.Settings.Images)
	}
	for r := range m.others {
		if _, ok := others[r]; !ok {
			m.deleteSeries([]string{"", r[0], r[1]})
		}
	}
	m.others = make(map[[2]string]bool, len(others))
	for r, n := range others {
		m.imagesWatchedVec.WithLabelValues("", r[0], r[1]).Set(float64(n))
		m.others[r] = true
	}
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

// deleteSeries deletes the per-Application series with values.
func (m *Metrics) deleteSeries(values []string) {
	m.imagesWatchedVec.DeleteLabelValues(values...)
	m.imagesUpdatedVec.DeleteLabelValues(values...)
	m.imagesErrorsVec.DeleteLabelValues(values...)
}

func (m *Metrics) imagesUpdated(app *application.Application, n int) {
	if m != nil {
		m.imagesUpdatedVec.WithLabelValues(m.labelValues(app)...).Add(float64(n))
	}
}

func (m *Metrics) imageError(app *application.Application) {
	if m != nil {
		m.imagesErrorsVec.WithLabelValues(m.labelValues(app)...).Inc()
	}
}

func (m *Metrics) cycleDone(s Summary) {
	if m == nil {
		return
	}
	m.cycleDuration.Observe(s.Duration.Seconds())
	m.versionsWaiting.WithLabelValues(waitingMinReleaseAge).Set(float64(s.Waiting))
	m.versionsWaiting.WithLabelValues(waitingUpdateWindow).Set(float64(s.WaitingWindow))
	m.versionsWaiting.WithLabelValues(waitingPromotion).Set(float64(s.WaitingPromotion))
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
