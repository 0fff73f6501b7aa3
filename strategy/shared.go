package strategy

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"weak"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// shared holds one Policy per distinct Settings for as long as anyone
// holds that Policy. Tens of thousands of Applications repeat a few
// settings; compiled once each, their constraints and expressions would
// cost more than the rest of the Applications' settings together
// (BenchmarkSharedPolicies). Entries are weak, so the table never holds
// more than the policies in use: settings a tenant wrote and removed
// leave nothing behind.
var shared = struct {
	mu       sync.Mutex
	policies map[string]weak.Pointer[Policy]
}{policies: map[string]weak.Pointer[Policy]{}}

// Shared is New for settings that many images have in common: while any
// caller holds the Policy made for equal settings, it returns that one
// instead of compiling another. Settings are equal when they name the
// same strategy, constraint, allow-tags, ignore-tags and platforms as New
// reads them (surrounding space and the strategy's letter case and alias
// aside). Errors are New's and are not kept.
func Shared(s Settings) (*Policy, error) {
	name, err := ParseName(s.Strategy)
	if err != nil {
		return nil, err
	}
	key := sharedKey(name, s)
	shared.mu.Lock()
	w, ok := shared.policies[key]
	shared.mu.Unlock()
	if ok {
		if p := w.Value(); p != nil {
			return p, nil
		}
	}
	p, err := New(s)
	if err != nil {
		return nil, err
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if w, ok := shared.policies[key]; ok {
		// Another caller compiled the same settings meanwhile.
		if q := w.Value(); q != nil {
			return q, nil
		}
	}
	shared.policies[key] = weak.Make(p)
	runtime.AddCleanup(p, forget, key)
	return p, nil
}

// forget drops the entry of a Policy nobody holds any more, unless the
// key was given to a newer one meanwhile.
func forget(key string) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if w, ok := shared.policies[key]; ok && w.Value() == nil {
		delete(shared.policies, key)
	}
}

// sharedKey is s as New reads it, each value preceded by its length so
// that no two different settings give the same key.
func sharedKey(name Name, s Settings) string {
	var b strings.Builder
	put := func(v string) {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	put(string(name))
	put(strconv.FormatBool(s.ChartVersions))
	put(strings.TrimSpace(s.Constraint))
	put(strings.TrimSpace(s.AllowTags))
	put(strconv.Itoa(len(s.IgnoreTags)))
	for _, g := range s.IgnoreTags {
		put(g)
	}
	put(strconv.Itoa(len(s.Platforms)))
	for _, p := range s.Platforms {
		put(p.OS)
		put(p.Architecture)
		put(p.Variant)
		put(p.OSVersion)
		for _, list := range [][]string{p.OSFeatures, p.Features} {
			put(strconv.Itoa(len(list)))
			for _, f := range list {
				put(f)
			}
		}
	}
	return b.String()
}

// WithPlatforms is p for the platforms ps: p itself when it names
// platforms of its own or ps is empty, else a copy that shares p's
// compiled filters and constraint. Callers apply their default platforms
// with it, to a Policy compiled once for every image that names none.
func (p *Policy) WithPlatforms(ps []v1.Platform) *Policy {
	if len(p.platforms) > 0 || len(ps) == 0 {
		return p
	}
	q := *p
	q.platforms = slices.Clone(ps)
	return &q
}

// sharedCount is how many policies the table holds, for tests.
func sharedCount() int {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return len(shared.policies)
}
