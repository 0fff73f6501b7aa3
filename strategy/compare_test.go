package strategy

import "testing"

func TestCompareTags(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		cmp  int
		ok   bool
	}{
		{"1.2.0", "1.10.0", -1, true},
		{"v2", "1.9.9", 1, true},
		{"1.2.0-rc.1", "1.2.0", -1, true},
		{"1.2", "v1.2.0", 0, true},
		{"latest", "1.0.0", 0, false},
		{"1.0.0", "", 0, false},
	} {
		if cmp, ok := CompareTags(tt.a, tt.b); cmp != tt.cmp || ok != tt.ok {
			t.Errorf("CompareTags(%q, %q) = %d, %v; want %d, %v", tt.a, tt.b, cmp, ok, tt.cmp, tt.ok)
		}
	}
}
