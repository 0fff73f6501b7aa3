package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/internal/netguard"
)

// roundTripFunc adapts a function to http.RoundTripper, the one-method seam
// each layer wraps.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func statusResponse(r *http.Request, code int) *http.Response {
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}
}

func TestRetryTransport(t *testing.T) {
	refusedErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name      string
		method    string
		body      bool
		answers   []int // status per attempt; -1 = connection refused
		wantCalls int
		wantCode  int // -1: an error
	}{
		{"GET 503 then 200", http.MethodGet, false, []int{503, 200}, 2, 200},
		{"HEAD 502 then 200", http.MethodHead, false, []int{502, 200}, 2, 200},
		{"GET refused then 200", http.MethodGet, false, []int{-1, 200}, 2, 200},
		{"GET 404 is final", http.MethodGet, false, []int{404}, 1, 404},
		{"GET 501 is final", http.MethodGet, false, []int{501}, 1, 501},
		{"GET budget spent", http.MethodGet, false, []int{503, 503, 503, 503, 200}, 4, 503},
		{"GET refused to the end", http.MethodGet, false, []int{-1, -1, -1, -1}, 4, -1},
		{"POST never replayed", http.MethodPost, true, []int{503, 200}, 1, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			rt := NewRetry(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				code := tc.answers[calls]
				calls++
				if code == -1 {
					return nil, refusedErr
				}
				return statusResponse(r, code), nil
			}), WithAttempts(4), WithBackoff(time.Microsecond, time.Millisecond))
			var body io.Reader
			if tc.body {
				body = strings.NewReader("payload")
			}
			req := httptest.NewRequestWithContext(t.Context(), tc.method, "http://registry.test/v2/", body)
			resp, err := rt.RoundTrip(req)
			if calls != tc.wantCalls {
				t.Errorf("%d attempts, want %d", calls, tc.wantCalls)
			}
			switch {
			case tc.wantCode == -1 && err == nil:
				t.Errorf("want an error, got status %d", resp.StatusCode)
			case tc.wantCode != -1 && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.wantCode != -1 && resp.StatusCode != tc.wantCode:
				t.Errorf("status %d, want %d", resp.StatusCode, tc.wantCode)
			}
		})
	}

	t.Run("gives up when the caller's deadline comes before the retry", func(t *testing.T) {
		var calls int
		rt := NewRetry(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			return statusResponse(r, 503), nil
		}), WithAttempts(4), WithBackoff(time.Hour, time.Hour))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		resp, err := rt.RoundTrip(httptest.NewRequestWithContext(ctx, http.MethodGet, "http://registry.test/v2/", nil))
		if err != nil || resp.StatusCode != 503 || calls != 1 {
			t.Errorf("want the 503 at once after one attempt, got %v, %v after %d", resp, err, calls)
		}
	})
}

// endlessBody sends bytes without end, counting what is read.
type endlessBody struct {
	read   int64
	closed bool
}

func (b *endlessBody) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	b.read += int64(len(p))
	return len(p), nil
}

func (b *endlessBody) Close() error { b.closed = true; return nil }

// The body of a failed answer is read, before the retry, no further than
// maxDrained, and closed, whatever the registry sends.
func TestRetryDrainBounded(t *testing.T) {
	var bodies []*endlessBody
	rt := NewRetry(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if len(bodies) == 2 {
			return statusResponse(r, http.StatusOK), nil
		}
		b := &endlessBody{}
		bodies = append(bodies, b)
		resp := statusResponse(r, http.StatusServiceUnavailable)
		resp.Body = b
		return resp, nil
	}), WithAttempts(4), WithBackoff(time.Microsecond, time.Millisecond))
	resp, err := rt.RoundTrip(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://registry.test/v2/", nil))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("got %v, %v; want the 200 of the third attempt", resp, err)
	}
	for i, b := range bodies {
		if b.read > maxDrained || !b.closed {
			t.Errorf("attempt %d: %d bytes read of its failed answer (want at most %d), closed %v", i+1, b.read, maxDrained, b.closed)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"soon", 0, false},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	base, maxDelay := 200*time.Millisecond, 10*time.Second
	for attempt := 1; attempt <= 10; attempt++ {
		full := min(base<<(attempt-1), maxDelay)
		for range 50 {
			d := backoff(attempt, base, maxDelay)
			if d < full/2 || d > full {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", attempt, d, full/2, full)
			}
		}
	}
}

func TestRetryableError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"reset", &url.Error{Op: "Get", Err: syscall.ECONNRESET}, true},
		{"EOF", io.ErrUnexpectedEOF, true},
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"plain HTTP answer to TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, false},
		{"other", errors.New("unsupported protocol scheme"), false},
		{"internal address", &net.OpError{Op: "dial", Err: &netguard.RefusedError{Host: "127.0.0.1"}}, false},
	} {
		if got := retryableError(tc.err); got != tc.want {
			t.Errorf("%s: retryableError = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A body cut short is retried like a failed request (a reset, a proxy that
// gave up in the middle of a tag list); a body past the read-ahead is
// handed on as it streams.
func TestRetryBodyCutShort(t *testing.T) {
	const body = `{"name":"team/web","tags":["v1","v2","v3","v4","v5","v6","v7","v8"]}`
	for _, tc := range []struct {
		name      string
		cuts      int // answers cut short before a whole one
		readAhead int64
		http2     bool
		wantCalls int
		wantErr   bool
	}{
		{name: "cut once", cuts: 1, readAhead: defaultReadAhead, wantCalls: 2},
		{name: "cut once over HTTP/2", cuts: 1, readAhead: defaultReadAhead, http2: true, wantCalls: 2},
		{name: "cut every time", cuts: 4, readAhead: defaultReadAhead, wantCalls: 4, wantErr: true},
		{name: "longer than the read-ahead", cuts: 1, readAhead: 8, wantCalls: 1, wantErr: true},
		{name: "whole", readAhead: defaultReadAhead, wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				calls++
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				if calls <= tc.cuts {
					_, _ = io.WriteString(w, body[:len(body)/2])
					w.(http.Flusher).Flush()
					panic(http.ErrAbortHandler)
				}
				_, _ = io.WriteString(w, body)
			}))
			srv.EnableHTTP2 = tc.http2
			srv.StartTLS()
			defer srv.Close()
			base := srv.Client().Transport
			client := &http.Client{Transport: NewRetry(base, WithAttempts(4), WithBackoff(time.Microsecond, time.Millisecond), WithReadAhead(tc.readAhead))}
			resp, err := client.Get(srv.URL + "/v2/team/web/tags/list")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if tc.wantErr != (err != nil) {
				t.Errorf("reading the body: %v", err)
			}
			if !tc.wantErr && string(got) != body {
				t.Errorf("body %q, want %q", got, body)
			}
			if calls != tc.wantCalls {
				t.Errorf("%d requests, want %d", calls, tc.wantCalls)
			}
		})
	}
}
