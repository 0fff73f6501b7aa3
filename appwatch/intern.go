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
// annotation keys and values, image names, namespaces, repositories. The
// JSON decoder gives every object its own copies.
type interner struct {
	mu      sync.Mutex
	strings map[string]string
}

func newInterner() *interner { return &interner{strings: map[string]string{}} }

// str is s's shared copy; a nil interner shares nothing.
func (in *interner) str(s string) string {
	if in == nil || len(s) > maxInternedLen {
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
