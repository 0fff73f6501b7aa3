package transient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
)

func TestNetwork(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("list: %w", io.ErrUnexpectedEOF), true},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{errors.New("stream error: stream ID 3; INTERNAL_ERROR; received from peer"), true},
		{errors.New("read tcp: connection reset by peer"), true},
		{context.Canceled, false},
		{fmt.Errorf("get: %w", context.DeadlineExceeded), false},
		{errors.New("x509: certificate signed by unknown authority"), false},
		{errors.New("command error on refs/heads/main: pre-receive hook declined"), false},
	} {
		if got := Network(tc.err); got != tc.want {
			t.Errorf("Network(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}
