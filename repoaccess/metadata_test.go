package repoaccess

import (
	"errors"
	"net/http"
	"testing"

	"github.com/image-updater/argocd-image-updater/internal/netguard"
)

// TestCloudMetadataRefused: a repository URL naming a cloud's metadata
// address reaches nothing there; the refusal comes before any connection.
func TestCloudMetadataRefused(t *testing.T) {
	tr, err := (&Resolver{}).HTTPTransport(t.Context(), "169.254.169.254", Credentials{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://169.254.169.254/deploy.git/info/refs?service=git-upload-pack", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, netguard.ErrInternal) {
		t.Errorf("%v, want a refusal", err)
	}
}
