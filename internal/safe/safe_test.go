package safe

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
)

func TestCall(t *testing.T) {
	want := errors.New("plain")
	if err := Call(func() error { return want }); err != want {
		t.Errorf("Call = %v, want the function's own error", err)
	}
	err := Call(func() error {
		var m map[string]int
		m["x"] = 1 // a runtime error, as a bug would make
		return nil
	})
	var p *PanicError
	if !errors.As(err, &p) || !strings.Contains(err.Error(), "internal error: assignment to entry in nil map") || len(p.Stack) == 0 {
		t.Errorf("Call = %v, want the panic with its stack", err)
	}
	v, err := Value(func() (int, error) { panic("in Value") })
	if v != 0 || !errors.As(err, &p) || p.Value != "in Value" {
		t.Errorf("Value = %d, %v", v, err)
	}
}

func TestGoLogsAndSurvives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		Go(log, "testing", func() { panic("in a goroutine") })
		synctest.Wait() // the goroutine has ended, and the process with it had it not been contained
		out := buf.String()
		if !strings.Contains(out, "in a goroutine") || !strings.Contains(out, "while=testing") || !strings.Contains(out, "stack=") {
			t.Errorf("log: %q", out)
		}
	})
}
