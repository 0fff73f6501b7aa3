package application

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/settings"
)

func TestChartRepository(t *testing.T) {
	tests := []struct {
		repoURL, chart string
		want           string // String(), or "error"
		oci            bool
	}{
		{"https://charts.example.com/stable/", "podinfo", "https://charts.example.com/stable", false},
		{"http://127.0.0.1:8080", "podinfo", "http://127.0.0.1:8080", false},
		{"oci://ghcr.io/stefanprodan/charts", "podinfo", "oci://ghcr.io/stefanprodan/charts/podinfo", true},
		{"OCI://localhost:5000/charts", "podinfo", "oci://localhost:5000/charts/podinfo", true},
		{"registry.example.com:5000/charts", "app", "oci://registry.example.com:5000/charts/app", true},
		{"git@github.com:org/repo.git", "app", "error", false},
		{"ssh://git@github.com/org/repo", "app", "error", false},
		{"", "app", "error", false},
		{"oci://ghcr.io/charts", "app:1.0", "error", false},
		{"oci://ghcr.io/Charts", "app", "error", false},
	}
	for _, tt := range tests {
		t.Run(tt.repoURL+" "+tt.chart, func(t *testing.T) {
			r := chartRepository(tt.repoURL, tt.chart, "1.0.0")
			got := r.String()
			if r.Err != nil {
				got = "error"
			}
			if got != tt.want || r.IsOCI() != tt.oci {
				t.Errorf("got %q (oci %v, err %v), want %q (oci %v)", got, r.IsOCI(), r.Err, tt.want, tt.oci)
			}
		})
	}
}

func TestChartOnlyApplicationIsManaged(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "a", "namespace": "argocd", "annotations": map[string]any{
			settings.AnnotationPrefix + settings.KeyChartList: "db=postgresql:^15",
		}},
		"spec": map[string]any{"sources": []any{
			map[string]any{"repoURL": "https://github.com/org/values", "ref": "values"},
			map[string]any{"repoURL": "oci://registry-1.docker.io/bitnamicharts", "chart": "postgresql", "targetRevision": "15.1.0"},
		}},
	}}
	s := SnapshotOf(obj, KeepSpec(false))
	if !s.Managed() {
		t.Fatal("not managed")
	}
	app, err := s.Application()
	if err != nil {
		t.Fatal(err)
	}
	for rev, isRange := range map[string]bool{"1.2.3": false, "v1.2.3": false, "1.2": false, "^1.2": true, "1.2.*": true, "": true, ">=1 <2": true} {
		if r := chartRepository("https://charts.example.com", "c", rev); r.Range != isRange {
			t.Errorf("targetRevision %q: range %v", rev, r.Range)
		}
	}
	src, ok := app.ChartSource(app.Settings.Charts[0])
	if !ok || src.Index != 1 || src.TargetRevision != "15.1.0" || src.ChartRepo.String() != "oci://docker.io/bitnamicharts/postgresql" {
		t.Fatalf("source %+v, %v", src, ok)
	}
}
