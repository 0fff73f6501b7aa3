package imageupdater

import (
	"fmt"
	"strings"
	"testing"
	"time"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/cycle"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The status names at most maxErrorsInMessage errors, however many the
// cycle had, and counts them all.
func TestErrorsMessageBound(t *testing.T) {
	errs := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("error %d", i+1))
		}
		return out
	}
	tests := []struct {
		name  string
		errs  []string
		named int
	}{
		{"one", errs(1), 1},
		{"three", errs(3), 3},
		{"four", errs(4), 3},
		{"a thousand", errs(1000), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := errorsMessage(tt.errs)
			if !strings.HasPrefix(msg, fmt.Sprintf("%d error(s) occurred during image update checks: ", len(tt.errs))) {
				t.Errorf("message %q does not count %d errors", msg, len(tt.errs))
			}
			for i, e := range tt.errs {
				if named := strings.Contains(msg, e+";") || strings.HasSuffix(msg, e); named != (i < tt.named) {
					t.Errorf("%q named: %v, want %v (message %.100q)", e, named, i < tt.named, msg)
				}
			}
			if cut := strings.HasSuffix(msg, "; ..."); cut != (len(tt.errs) > tt.named) {
				t.Errorf("message %q ends with \"; ...\": %v, want %v", msg, cut, len(tt.errs) > tt.named)
			}
		})
	}
}

// The cycle's status patch leaves the health gate's lists alone: the copy
// of the status it read may be older than the gate's last write.
func TestStatusPatchLeavesHealthGate(t *testing.T) {
	st := &api.ImageUpdaterStatus{
		ApplicationsMatched: 2,
		HealthGate:          []api.HealthGateRecord{{Application: "shop", Alias: "app", Version: "1", State: api.HealthGatePending}},
		SkippedVersions:     []api.SkippedVersion{{Application: "shop", Alias: "app", Version: "0"}},
	}
	body, err := statusPatch(st)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(body); strings.Contains(s, "healthGate") || strings.Contains(s, "skippedVersions") || !strings.Contains(s, `"applicationsMatched":2`) {
		t.Errorf("patch %s", s)
	}
	if len(st.HealthGate) != 1 {
		t.Error("the status given was changed")
	}
}

// The status lists the versions waiting after the last check; a targeted
// check keeps those of the Applications it did not check, and a check
// that finds none waiting clears the list.
func TestWaitingVersions(t *testing.T) {
	until := time.Date(2026, 12, 9, 12, 0, 0, 0, time.UTC)
	shop := &application.Application{Namespace: "argocd", Name: "shop"}
	blog := &application.Application{Namespace: "argocd", Name: "blog"}
	iu := &api.ImageUpdater{}
	iu.Status.WaitingVersions = []api.WaitingVersion{{Application: "blog", Alias: "web", Version: "2.0.0", Reason: "promotion", Message: "image web: version 2.0.0 waits"}}
	now := metav1.NewTime(until.Add(-time.Hour))
	results := []cycle.AppResult{{App: shop, Waiting: []cycle.WaitingVersion{
		{Key: "web", Version: "1.6.0", Reason: "minimum-release-age", Until: until, Message: "image web: version 1.6.0 waits for its minimum release age (168h0m0s) until 2026-12-09T12:00:00Z"},
		{Key: "chart", Chart: true, Version: "3.1.0", Reason: "update-window", Message: "chart chart: version 3.1.0 waits: the Application is outside its update windows"},
	}}}

	full := nextStatus(iu, nil, append(results, cycle.AppResult{App: blog}), false, now, time.Minute)
	if len(full.WaitingVersions) != 2 || full.WaitingVersions[0].Until == nil || !full.WaitingVersions[0].Until.Time.Equal(until) ||
		!full.WaitingVersions[1].Chart || full.WaitingVersions[1].Until != nil {
		t.Errorf("full check: %+v", full.WaitingVersions)
	}
	targeted := nextStatus(iu, nil, results, true, now, time.Minute)
	if len(targeted.WaitingVersions) != 3 || targeted.WaitingVersions[0].Application != "blog" {
		t.Errorf("targeted check of shop: %+v, want blog's kept", targeted.WaitingVersions)
	}
	none := nextStatus(iu, nil, []cycle.AppResult{{App: shop}, {App: blog}}, false, now, time.Minute)
	if len(none.WaitingVersions) != 0 {
		t.Errorf("nothing waiting: %+v", none.WaitingVersions)
	}
	body, err := statusPatch(none)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"waitingVersions":null`) {
		t.Errorf("patch %s does not clear the list", body)
	}
}
