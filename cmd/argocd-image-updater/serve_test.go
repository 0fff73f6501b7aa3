package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// The servers close idle keep-alive connections, cut clients slow to send
// their headers or their request, refuse oversized headers and serve a
// bounded number of connections at once: an idle or slow client costs a
// goroutine and its buffers only for so long.
func TestServerLimits(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	startWith := func(lim serverLimits, h http.Handler) string {
		port := testenv.FreePort(t)
		go serveWithin(t.Context(), lim, "test", "127.0.0.1", port, h, nil, slog.New(slog.DiscardHandler), make(chan error, 1))
		return fmt.Sprintf("127.0.0.1:%d", port)
	}
	start := func(lim serverLimits) string { return startWith(lim, ok) }
	lim := serverLimits{idle: 200 * time.Millisecond, read: 5 * time.Second, headerBytes: 4 << 10, connections: 3}
	addr := start(lim)
	dial := func() net.Conn {
		var c net.Conn
		testenv.WaitFor(t, 10*time.Second, "the server listening", func() (bool, string) {
			var err error
			c, err = net.Dial("tcp", addr)
			return err == nil, fmt.Sprint(err)
		})
		t.Cleanup(func() { c.Close() })
		return c
	}
	get := func(c net.Conn, header string) (int, error) {
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", header); err != nil {
			return 0, err
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	t.Run("an idle keep-alive connection is closed", func(t *testing.T) {
		c := dial()
		if code, err := get(c, ""); err != nil || code != http.StatusOK {
			t.Fatalf("GET: %d, %v", code, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("idle connection: read %v, want the server to close it (EOF)", err)
		}
	})
	t.Run("oversized headers are refused", func(t *testing.T) {
		c := dial()
		code, err := get(c, "X-Big: "+strings.Repeat("a", 8<<10)+"\r\n")
		if err != nil || code != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("GET with 8 KiB of headers: %d, %v; want 431", code, err)
		}
	})
	// A client that stops halfway is cut near the bound, not at the
	// test's own deadline of 5 s.
	const slow = 200 * time.Millisecond
	near := func(t *testing.T, took time.Duration) {
		t.Helper()
		if took < slow || took > slow+time.Second {
			t.Errorf("cut after %s, want about %s", took, slow)
		}
	}
	t.Run("headers not sent in time", func(t *testing.T) {
		addr = start(serverLimits{idle: time.Minute, header: slow, read: time.Minute, headerBytes: 4 << 10, connections: 3})
		// Before the dial: the server's deadline starts when it accepts.
		begin := time.Now()
		c := dial()
		fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n") // and no blank line
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read %v, want the server to close the connection (EOF)", err)
		}
		near(t, time.Since(begin))
	})
	t.Run("a request not sent in time", func(t *testing.T) {
		readBody := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
			}
		})
		addr = startWith(serverLimits{idle: time.Minute, header: time.Minute, read: slow, headerBytes: 4 << 10, connections: 3}, readBody)
		// Before the dial: the server's deadline starts when it accepts.
		begin := time.Now()
		c := dial()
		fmt.Fprint(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to a stalled request: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d, want the handler's 400 for a body cut short", resp.StatusCode)
		}
		near(t, time.Since(begin))
	})
	t.Run("connections past the bound wait", func(t *testing.T) {
		lim.idle = time.Minute // the held connections stay
		addr = start(lim)
		var held []net.Conn
		for range lim.connections {
			c := dial()
			if code, err := get(c, ""); err != nil || code != http.StatusOK {
				t.Fatalf("GET: %d, %v", code, err)
			}
			held = append(held, c)
		}
		extra := dial()
		br := bufio.NewReader(extra)
		fmt.Fprint(extra, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = extra.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := http.ReadResponse(br, nil); err == nil {
			t.Fatalf("a connection past the bound of %d was served at once", lim.connections)
		}
		// Once one is closed (by its client, or as idle), it is served.
		held[0].Close()
		_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("after a connection closed: %v, %v", resp, err)
		}
		resp.Body.Close()
	})
}
