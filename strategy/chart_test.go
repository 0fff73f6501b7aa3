package strategy

import (
	"context"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// Chart versions may carry build metadata after '+', which no image tag
// may: a chart policy reads them, an image policy drops them.
func TestChartVersions(t *testing.T) {
	versions := []string{"6.4.0", "6.5.0", "6.5.1+build.1", "7.0.0-rc.1", "bad/version"}
	tests := []struct {
		charts     bool
		constraint string
		want       string
	}{
		{true, "", "6.5.1+build.1"},
		{true, "~6.5.0", "6.5.1+build.1"},
		{true, ">=7.0.0-0", "7.0.0-rc.1"},
		{false, "", "6.5.0"},
	}
	for _, tt := range tests {
		p, err := Shared(Settings{Constraint: tt.constraint, ChartVersions: tt.charts})
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Choose(context.Background(), versions, imageref.Version{Tag: "6.4.0"}, nil)
		if err != nil || r.Tag != tt.want || !r.Update {
			t.Errorf("charts %v, constraint %q: %+v, %v; want %s", tt.charts, tt.constraint, r, err, tt.want)
		}
	}
	a, _ := Shared(Settings{ChartVersions: true})
	b, _ := Shared(Settings{})
	if a == b {
		t.Error("a chart policy is shared with an image policy")
	}
}
