package appwatch

import (
	"strings"
	"testing"
)

func TestInternerIsBounded(t *testing.T) {
	in := newInterner()
	for i := range maxInternedStrings + 10 {
		in.str(strings.Repeat("a", i%100) + string(rune('a'+i%26)) + strings.Repeat("b", i/2600))
	}
	if n := len(in.strings); n > maxInternedStrings {
		t.Fatalf("%d strings kept, want at most %d", n, maxInternedStrings)
	}
}
