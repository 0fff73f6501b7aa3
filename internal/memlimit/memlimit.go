// Package memlimit sets Go's soft memory limit (GOMEMLIMIT) from the
// memory limit of the container the controller runs in, so that the
// collector runs harder as the heap nears the limit instead of the kernel
// killing the process at it.
package memlimit

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	aml "github.com/KimMachineGun/automemlimit/memlimit"
)

// Ratio is the share of the container's memory limit given to the Go
// runtime. The rest is for what the limit counts besides: the program's
// own file-backed pages (about 40 MiB, docs/benchmarks.md) and the page
// cache of the git clones under /tmp.
const Ratio = 0.9

// Provider tells the container's memory limit in bytes, or the
// library's ErrNoLimit.
type Provider = aml.Provider

// FromCgroup reads the limit of the process's cgroup (v1 or v2).
var FromCgroup Provider = aml.FromCgroup

// ForContainer is the soft limit set for a container limit of limit bytes.
func ForContainer(limit uint64) int64 {
	soft, _ := aml.ApplyRatio(aml.Limit(limit), Ratio)()
	return int64(min(soft, math.MaxInt64))
}

// Set sets the soft memory limit to ForContainer of what provider tells,
// unless GOMEMLIMIT is in the environment (the runtime has read it then)
// or AUTOMEMLIMIT is "off"; AUTOMEMLIMIT=0.8 takes another ratio. It
// returns the limit in force afterwards (math.MaxInt64: none) and logs what
// it did. A limit that cannot be read leaves the runtime's as it is.
func Set(logger *slog.Logger, provider Provider) int64 {
	current := debug.SetMemoryLimit(-1)
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		logger.Info("Go memory limit from GOMEMLIMIT", "GOMEMLIMIT", v)
		return current
	}
	limit, err := aml.Set(aml.WithProvider(provider), aml.WithRatio(Ratio))
	switch {
	case err != nil:
		logger.Warn("cannot read the container's memory limit; no Go memory limit set", "error", err)
		return current
	case limit == math.MaxInt64:
		logger.Info("no container memory limit; no Go memory limit set")
	case limit != current:
		logger.Info("Go memory limit set from the container's", "limit", formatMiB(limit))
	}
	return limit
}

func formatMiB(b int64) string { return fmt.Sprintf("%.0fMiB", float64(b)/(1<<20)) }
