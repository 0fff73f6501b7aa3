package imageupdater

import (
	"fmt"
	"strings"
	"testing"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
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
