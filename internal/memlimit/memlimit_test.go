package memlimit

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"testing"

	aml "github.com/KimMachineGun/automemlimit/memlimit"
)

const mib = 1 << 20

func TestForContainer(t *testing.T) {
	for _, tc := range []struct {
		limit uint64
		want  int64
	}{
		{512 * mib, 483183820}, // 460.8 MiB
		{1 << 30, 966367641},
		{100 * mib, 90 * mib},
		{math.MaxUint64, math.MaxInt64},
	} {
		if got := ForContainer(tc.limit); got != tc.want {
			t.Errorf("ForContainer(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}

// TestSet runs in sequence: it changes the process's memory limit and
// environment, and puts both back.
func TestSet(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const preset = 300 * mib
	for _, tc := range []struct {
		name     string
		env      map[string]string
		provider Provider
		want     int64
	}{
		{name: "container limit", provider: aml.Limit(512 * mib), want: 483183820},
		{name: "no container limit", provider: func() (uint64, error) { return 0, aml.ErrNoLimit }, want: math.MaxInt64},
		{name: "limit unreadable: left as it was", provider: func() (uint64, error) { return 0, errors.New("no cgroup") }, want: preset},
		{name: "GOMEMLIMIT wins", env: map[string]string{"GOMEMLIMIT": "300MiB"}, provider: aml.Limit(512 * mib), want: preset},
		{name: "AUTOMEMLIMIT off", env: map[string]string{"AUTOMEMLIMIT": "off"}, provider: aml.Limit(512 * mib), want: preset},
		{name: "AUTOMEMLIMIT ratio", env: map[string]string{"AUTOMEMLIMIT": "0.5"}, provider: aml.Limit(512 * mib), want: 256 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			// What the runtime would hold: GOMEMLIMIT read at start, or
			// a limit set before.
			debug.SetMemoryLimit(preset)
			got := Set(slog.New(slog.NewTextHandler(io.Discard, nil)), tc.provider)
			if got != tc.want {
				t.Errorf("Set returned %d, want %d", got, tc.want)
			}
			if inForce := debug.SetMemoryLimit(-1); inForce != tc.want {
				t.Errorf("limit in force %d, want %d", inForce, tc.want)
			}
		})
	}
}
