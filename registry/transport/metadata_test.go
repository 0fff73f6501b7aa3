package transport

import (
	"errors"
	"net/http"
	"testing"

	"github.com/image-updater/argocd-image-updater/internal/netguard"
)

// TestCloudMetadataRefused: an image naming a cloud's metadata address as
// its registry reaches nothing there, with or without a registries.conf
// entry; the refusal comes before any connection.
func TestCloudMetadataRefused(t *testing.T) {
	rt := NewHTTP(false)
	for _, host := range []string{"169.254.169.254", "100.100.100.200:5000", "169.254.170.2"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+host+"/v2/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, netguard.ErrInternal) {
			t.Errorf("%s: %v, want a refusal", host, err)
		}
	}
}
