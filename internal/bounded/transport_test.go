package bounded

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", len(r.URL.Query().Get("n"))))
	}))
	defer srv.Close()
	client := &http.Client{Transport: Transport(nil, 10, "test answer")}
	tests := []struct {
		n       int
		tooLong bool
	}{{0, false}, {9, false}, {10, false}, {11, true}, {100000, true}}
	for _, tt := range tests {
		resp, err := client.Get(srv.URL + "?n=" + strings.Repeat("1", tt.n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if tt.tooLong {
			if !errors.Is(err, ErrTooLarge) || len(b) != 10 {
				t.Errorf("%d bytes: read %d, %v; want 10 and ErrTooLarge", tt.n, len(b), err)
			}
			if err != nil && !strings.Contains(err.Error(), "test answer is larger than 10 bytes") {
				t.Errorf("error %q", err)
			}
			continue
		}
		if err != nil || len(b) != tt.n {
			t.Errorf("%d bytes: read %d, %v", tt.n, len(b), err)
		}
	}
}
