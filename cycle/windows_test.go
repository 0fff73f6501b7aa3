package cycle

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// TestHeldByWindow: outside its windows an Application's chart changes
// wait as its image changes do, each told once; inside, all are written.
func TestHeldByWindow(t *testing.T) {
	opens := time.Date(2026, 12, 2, 14, 0, 1, 0, time.UTC)
	app := &application.Application{Namespace: "argocd", Name: "shop"}
	updates := func() []*appUpdate {
		return []*appUpdate{{app: app,
			changes: []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "web"}, New: imageref.Version{Tag: "1.1.0"}}},
			charts:  []writeback.ChartUpdate{{ChartSpec: settings.ChartSpec{Alias: "db", Chart: "db"}, New: "2.0.0"}},
		}}
	}
	var logs strings.Builder
	r := &run{u: &Updater{logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}}
	if got := r.heldByWindow(&appWork{app: app, window: windowState{open: true}}, updates()); len(got) != 1 {
		t.Fatalf("inside its windows: %d updates, want 1", len(got))
	}
	w := &appWork{app: app, window: windowState{opens: opens, reason: "outside its update windows until 2026-12-02T14:00:01Z"}}
	if got := r.heldByWindow(w, updates()); len(got) != 0 {
		t.Fatalf("outside its windows: %d updates written", len(got))
	}
	if r.sum.WaitingWindow != 2 || !r.sum.NextWindow.Equal(opens) {
		t.Errorf("summary %+v, want the image and the chart waiting until %v", r.sum, opens)
	}
	if !strings.Contains(logs.String(), "chart db: version 2.0.0 waits: the Application is outside its update windows") {
		t.Errorf("the chart's wait is not told:\n%s", logs.String())
	}
}
