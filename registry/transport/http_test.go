package transport

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCheckRedirect(t *testing.T) {
	from := httptest.NewRequest(http.MethodGet, "https://registry.example.com/v2/app/blobs/sha256:abc", nil)
	for _, tc := range []struct {
		to string
		ok bool
	}{
		{"https://registry.example.com/other", true},
		{"https://storage.example.net/blob", true},
		{"http://169.254.169.254/latest/meta-data/", false},
		{"http://10.0.0.1/x", false},
		{"http://localhost:8080/x", false},
		{"http://[::1]:8080/x", false},
	} {
		err := CheckRedirect(httptest.NewRequest(http.MethodGet, tc.to, nil), []*http.Request{from})
		if (err == nil) != tc.ok {
			t.Errorf("redirect to %s: %v, want allowed=%v", tc.to, err, tc.ok)
		}
	}
}
