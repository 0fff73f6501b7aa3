package appwatch

import "sync"

// Bounds of an interner: the strings it shares stay in memory after the
// Applications that held them are gone, so it takes only short ones, and
// only so many.
const (
	maxInternedLen     = 128
	maxInternedStrings = 1 << 15
)

// interner shares one copy of each string that cached Applications repeat:
// field names, annotation keys, strategies, image names, namespaces. The
// JSON decoder gives every object its own copies, which at 5,000
// Applications were about a third of the Application cache.
type interner struct {
	mu      sync.Mutex
	strings map[string]string
}

// unshared are fields whose values differ between every object: sharing
// them saves nothing and would fill the interner.
var unshared = map[string]bool{"uid": true, "resourceVersion": true}

func newInterner() *interner { return &interner{strings: map[string]string{}} }

func (in *interner) str(s string) string {
	if len(s) > maxInternedLen {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.strings[s]; ok {
		return v
	}
	if len(in.strings) < maxInternedStrings {
		in.strings[s] = s
	}
	return s
}

// value returns v with its strings, map keys included, interned. Maps are
// built anew (their keys cannot be replaced in place); lists are changed
// in place.
func (in *interner) value(v any) any {
	switch t := v.(type) {
	case string:
		return in.str(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if _, ok := e.(string); ok && unshared[k] {
				out[in.str(k)] = e
				continue
			}
			out[in.str(k)] = in.value(e)
		}
		return out
	case []any:
		for i, e := range t {
			t[i] = in.value(e)
		}
		return t
	}
	return v
}
