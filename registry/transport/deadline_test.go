package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// stallingBody returns part, then blocks until the request's context ends.
type stallingBody struct {
	ctx  context.Context
	part io.Reader
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if n, err := b.part.Read(p); err != io.EOF {
		return n, err
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *stallingBody) Close() error { return nil }

func TestDeadline(t *testing.T) {
	const d = 50 * time.Millisecond
	for _, tc := range []struct {
		name     string
		answer   func(r *http.Request) (*http.Response, error)
		readBody bool
		wantErr  string // "": no error
	}{
		{
			name:   "answer in time",
			answer: func(r *http.Request) (*http.Response, error) { return statusResponse(r, 200), nil },
		},
		{
			name: "no answer",
			answer: func(r *http.Request) (*http.Response, error) {
				<-r.Context().Done()
				return nil, r.Context().Err()
			},
			wantErr: "no complete answer within 50ms",
		},
		{
			name: "body stops halfway",
			answer: func(r *http.Request) (*http.Response, error) {
				resp := statusResponse(r, 200)
				resp.Body = &stallingBody{ctx: r.Context(), part: strings.NewReader(`{"tags":[`)}
				return resp, nil
			},
			readBody: true,
			wantErr:  "GET http://registry.test/v2/app/tags/list: no complete answer within 50ms",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := NewDeadline(roundTripFunc(tc.answer), d)
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://registry.test/v2/app/tags/list", nil)
			resp, err := rt.RoundTrip(req)
			if err == nil && tc.readBody {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return
			}
			var te *TimeoutError
			if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) || err.Error() != tc.wantErr {
				t.Errorf("got %v, want a *TimeoutError %q", err, tc.wantErr)
			}
		})
	}

	// The caller's own cancellation is not a timeout.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := NewDeadline(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, r.Context().Err()
	}), time.Hour).RoundTrip(httptest.NewRequestWithContext(ctx, http.MethodGet, "http://registry.test/v2/", nil))
	var te *TimeoutError
	if !errors.Is(err, context.Canceled) || errors.As(err, &te) {
		t.Errorf("a cancelled caller: %v, want context.Canceled", err)
	}
}
