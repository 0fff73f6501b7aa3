package cycle

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/chartrepo"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/writeback"
)

type benchApps []*application.Application

func (a benchApps) Applications(...imageref.Option) []*application.Application { return a }

// benchRegistry lists the same versions for every OCI chart, counting
// the listings.
type benchRegistry struct {
	tags     []string
	listings atomic.Int64
}

func (r *benchRegistry) Tags(context.Context, imageref.Reference, credref.Ref) ([]string, error) {
	r.listings.Add(1)
	return r.tags, nil
}
func (r *benchRegistry) Metadata(context.Context, imageref.Reference, credref.Ref, []v1.Platform, ...registry.MetadataOption) (registry.ImageMetadata, error) {
	return registry.ImageMetadata{}, nil
}
func (r *benchRegistry) ForgetTags(imageref.Reference) {}
func (*benchRegistry) PushTimes(context.Context, imageref.Reference, credref.Ref, []string) (map[string]time.Time, error) {
	return nil, registry.ErrNoPushTimes
}
func (r *benchRegistry) Endpoint(imageref.Reference) config.Endpoint { return config.Endpoint{} }

// benchWriter accepts every change without writing.
type benchWriter struct{ changes atomic.Int64 }

func (w *benchWriter) Write(_ context.Context, changes []writeback.Change) []writeback.Result {
	w.changes.Add(int64(len(changes)))
	out := make([]writeback.Result, len(changes))
	for i, c := range changes {
		out[i] = writeback.Result{Namespace: c.App.Namespace, Name: c.App.Name}
	}
	return out
}
func (w *benchWriter) Refresh(context.Context, string, string, map[string]string) error {
	return nil
}

type noSecrets struct{}

func (noSecrets) RepositorySecrets(context.Context, string) ([]corev1.Secret, error) { return nil, nil }
func (noSecrets) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}
func (noSecrets) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

type anyRepo struct{}

func (anyRepo) AppProject(context.Context, string, string) (*repoaccess.AppProject, error) {
	return &repoaccess.AppProject{SourceRepos: []string{"*"}}, nil
}

// BenchmarkChartCycle is one cycle over 1,000 Applications whose charts
// are 50 charts, 25 in one HTTP Helm repository (an index of 25 charts of
// 400 versions each, 10,000 entries, some 2 MiB) and 25 in OCI
// repositories of 400 tags each, every Application already at the highest
// version: the steady state of a cycle. The index is asked for once a
// cycle and answered 304 after the first; each OCI repository is listed
// once; the 1,000 choices are the rest.
func BenchmarkChartCycle(b *testing.B) {
	const apps, charts, versions = 1000, 50, 400
	var index strings.Builder
	index.WriteString("apiVersion: v1\nentries:\n")
	var tags []string
	for v := range versions {
		tags = append(tags, fmt.Sprintf("1.%d.%d", v/20, v%20))
	}
	latest := tags[len(tags)-1]
	for c := range charts / 2 {
		fmt.Fprintf(&index, "  chart-%d:\n", c)
		for _, v := range tags {
			fmt.Fprintf(&index, "  - apiVersion: v2\n    created: \"2026-01-01T00:00:00Z\"\n    description: The chart %d, a chart of the benchmark.\n    digest: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n    name: chart-%d\n    urls:\n    - https://charts.example.com/chart-%d-%s.tgz\n    version: %s\n", c, c, c, v, v)
		}
	}
	body := index.String()
	var full, notModified atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"1"`)
		if r.Header.Get("If-None-Match") == `"1"` {
			notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		full.Add(1)
		_, _ = w.Write([]byte(body))
	}))
	b.Cleanup(srv.Close)

	list := make(benchApps, apps)
	for i := range list {
		c := i % charts
		repoURL := srv.URL
		if c >= charts/2 {
			repoURL = "oci://registry.example.com/charts"
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": fmt.Sprintf("app-%04d", i), "namespace": "argocd", "annotations": map[string]any{
				"argocd-image-updater.argoproj.io/chart-list":        fmt.Sprintf("c=chart-%d:^1", c),
				"argocd-image-updater.argoproj.io/write-back-method": "argocd",
			}},
			"spec": map[string]any{"project": "default", "source": map[string]any{"repoURL": repoURL, "chart": fmt.Sprintf("chart-%d", c), "targetRevision": latest}},
		}}
		app, err := application.FromUnstructured(obj)
		if err != nil {
			b.Fatal(err)
		}
		list[i] = app
	}
	reg := &benchRegistry{tags: tags}
	w := &benchWriter{}
	u := mustNew(b, list, reg, w, WithChartRepositories(chartrepo.NewClient(noSecrets{}, anyRepo{}, "argocd")))
	b.ReportAllocs()
	for b.Loop() {
		sum := u.RunOnce(b.Context())
		if sum.Errors != 0 || sum.Updated != 0 || sum.Charts != apps || sum.ChartListings != charts/2+1 {
			b.Fatalf("summary %+v", sum)
		}
	}
	if w.changes.Load() != 0 || full.Load() != 1 {
		b.Fatalf("%d changes written, index read whole %d times", w.changes.Load(), full.Load())
	}
	b.ReportMetric(float64(reg.listings.Load())/float64(b.N), "oci-listings/cycle")
	b.ReportMetric(float64(full.Load()+notModified.Load())/float64(b.N), "index-requests/cycle")
	// The index is read whole once, then answered 304 by its ETag.
	b.ReportMetric(float64(full.Load())*float64(len(body))/float64(b.N), "index-bytes/cycle")
	b.ReportMetric(float64(len(body)), "index-bytes")
}
