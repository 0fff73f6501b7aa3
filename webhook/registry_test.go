package webhook

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// The Distribution registry, configured to notify the endpoint, names the
// repository of a push; with a header that lacks the secret, nothing is
// taken.
func TestDistributionRegistryNotifies(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   bool
	}{
		{name: "with the secret", header: "Bearer " + testSecret, want: true},
		{name: "with another secret", header: "Bearer not-" + testSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n recorder
			h, m := newTestHandler(t, &n, Config{Secrets: map[string]string{Distribution: testSecret}})
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			reg := testenv.StartRegistry(t, testenv.WithNotifications(srv.URL+Path+"?type=distribution",
				map[string]string{"Authorization": tt.header}))
			reg.PushImage(t, "team/api", []string{"v1"})

			testenv.WaitFor(t, 15*time.Second, "an outcome", func() (bool, string) {
				if tt.want {
					return slices.Contains(n.repositories(), reg.Repo("team/api")), fmt.Sprintf("notified %v", n.repositories())
				}
				rejected := testutil.ToFloat64(m.rejected.WithLabelValues(Distribution, RejectUnauthorized)) > 0
				return rejected, fmt.Sprintf("%v requests", testutil.ToFloat64(m.received.WithLabelValues(Distribution)))
			})
			if !tt.want {
				if got := n.repositories(); len(got) != 0 {
					t.Fatalf("notified %v without the secret", got)
				}
			}
		})
	}
}
