package cycle

import (
	"fmt"
	"strings"
	"sync"

	"github.com/image-updater/argocd-image-updater/strategy"
)

// policyCache shares one strategy.Policy among the image entries with the
// same settings, within a cycle and from one cycle to the next. Built per
// entry and cycle, the compiled constraints and allow-tags expressions
// grew a cycle's working set with the number of entries, though most
// entries share a handful of settings; a Policy is immutable once built,
// so any number of jobs may use one at once. It keeps the policies used
// in the current and the previous full cycle.
type policyCache struct {
	mu        sync.Mutex
	cur, prev map[string]policyEntry
}

type policyEntry struct {
	policy *strategy.Policy
	err    error
}

func newPolicyCache() *policyCache {
	return &policyCache{cur: map[string]policyEntry{}, prev: map[string]policyEntry{}}
}

// rotate starts a full cycle: policies not used since the one before it
// are dropped at the next rotate.
func (c *policyCache) rotate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prev, c.cur = c.cur, map[string]policyEntry{}
}

// get returns the policy of s, built once (its error too); a nil cache
// builds a new one each time.
func (c *policyCache) get(s strategy.Settings) (*strategy.Policy, error) {
	if c == nil {
		return strategy.New(s)
	}
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%v", s.Strategy, s.Constraint, s.AllowTags, strings.Join(s.IgnoreTags, "\x01"), s.Platforms)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cur[key]
	if !ok {
		if e, ok = c.prev[key]; !ok {
			e.policy, e.err = strategy.New(s)
		}
		c.cur[key] = e
	}
	return e.policy, e.err
}
