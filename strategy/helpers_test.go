package strategy_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/image-updater/argocd-image-updater/strategy"
)

// permutations returns every ordering of s (fine for the handful of tags the
// order-independence tests use).
func permutations(s []string) [][]string {
	if len(s) <= 1 {
		return [][]string{append([]string(nil), s...)}
	}
	var out [][]string
	for i := range s {
		rest := make([]string, 0, len(s)-1)
		rest = append(rest, s[:i]...)
		rest = append(rest, s[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{s[i]}, p...))
		}
	}
	return out
}

// fakeRegistry serves TagInfo from a map and records which tags were asked.
type fakeRegistry struct {
	mu    sync.Mutex
	infos map[string]strategy.TagInfo
	fail  map[string]error
	calls []string
	// after is called after each lookup, e.g. to cancel a context.
	after func(tag string)
}

var errNotFound = errors.New("manifest unknown")

func (r *fakeRegistry) meta(ctx context.Context, tag string) (strategy.TagInfo, error) {
	r.mu.Lock()
	r.calls = append(r.calls, tag)
	r.mu.Unlock()
	if r.after != nil {
		defer r.after(tag)
	}
	if err := r.fail[tag]; err != nil {
		return strategy.TagInfo{}, err
	}
	info, ok := r.infos[tag]
	if !ok {
		return strategy.TagInfo{}, errNotFound
	}
	info.Tag = tag
	return info, nil
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(hours int) time.Time { return t0.Add(time.Duration(hours) * time.Hour) }

func digestOf(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return "sha256:" + string(b)
}
