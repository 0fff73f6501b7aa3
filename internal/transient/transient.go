// Package transient tells a network failure that the same request may not
// meet again (a dropped, reset or refused connection, an answer cut short,
// a timeout) from one that will recur. Each client adds what only it
// knows: the registry's and git's status codes, the API server's.
package transient

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Network reports whether err is a failure of the connection or of the
// answer's transfer. The caller's own cancellation and deadline are not.
func Network(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return true
	case errors.As(err, &opErr), errors.As(err, &netErr) && netErr.Timeout():
		return true
	}
	// HTTP/2 stream resets, and cuts inside parsers that do not wrap
	// their cause, reach here as text only.
	msg := err.Error()
	for _, s := range []string{"unexpected EOF", "connection reset", "stream error:", "GOAWAY", "use of closed network connection", "broken pipe"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
