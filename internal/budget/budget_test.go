package budget

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestBudget(t *testing.T) {
	b := New(100)
	if err := b.Take(60); err != nil {
		t.Fatal(err)
	}
	if err := b.Take(41); !errors.Is(err, ErrExceeded) || err.Error() != "byte budget exceeded: 41 B more would pass 100 B" {
		t.Fatalf("error %v, want ErrExceeded", err)
	}
	if b.Used() != 60 {
		t.Fatalf("used %d after a refused take, want 60", b.Used())
	}
	if err := b.Take(40); err != nil {
		t.Fatal(err)
	}
	b.Release(100)
	if b.Used() != 0 || b.Limit() != 100 {
		t.Fatalf("used %d of %d", b.Used(), b.Limit())
	}
}

// TestBudgetConcurrent: takes racing for the last bytes never pass the
// limit together.
func TestBudgetConcurrent(t *testing.T) {
	b := New(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 50 {
		wg.Go(func() {
			for range 100 {
				if b.Take(3) == nil {
					mu.Lock()
					taken += 3
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if taken != 999 || b.Used() != 999 {
		t.Fatalf("%d taken, %d used, want 999", taken, b.Used())
	}
}

type blob int64

func (b blob) Bytes() int64 { return int64(b) }

func TestLRU(t *testing.T) {
	c := NewLRU[string, blob](10)
	c.Put("a", 4)
	c.Put("b", 4)
	if _, ok := c.Get("a"); !ok { // a is now used after b
		t.Fatal("a not kept")
	}
	c.Put("c", 4) // 12 > 10: b, the least recently used, goes
	if _, ok := c.Get("b"); ok {
		t.Error("b kept past the limit")
	}
	if _, ok := c.Get("a"); !ok {
		t.Error("a, used since b, dropped")
	}
	if c.Used() != 8 || c.Len() != 2 {
		t.Errorf("%d bytes in %d values, want 8 in 2", c.Used(), c.Len())
	}
	c.Put("a", 2) // replaced, not counted twice
	if c.Used() != 6 {
		t.Errorf("%d bytes after a replacement, want 6", c.Used())
	}
	if c.Put("big", 11) {
		t.Error("a value larger than the limit kept")
	}
	if c.Put("a", 11); c.Used() != 4 || c.Len() != 1 {
		t.Errorf("a value too large by itself: %d bytes in %d values, want c's 4 alone", c.Used(), c.Len())
	}
	c.Remove("c")
	if c.Used() != 0 || c.Len() != 0 {
		t.Errorf("%d bytes in %d values after removal", c.Used(), c.Len())
	}
}

// TestLRUAll: what is kept, most recently used first, without marking
// any used.
func TestLRUAll(t *testing.T) {
	c := NewLRU[string, blob](10)
	c.Put("a", 3)
	c.Put("b", 3)
	c.Put("c", 3)
	c.Get("a")
	var got []string
	for k, v := range c.All() {
		got = append(got, fmt.Sprintf("%s=%d", k, v))
	}
	if fmt.Sprint(got) != "[a=3 c=3 b=3]" {
		t.Errorf("all %v, want a, c, b", got)
	}
	c.Put("d", 3) // b is still the least recently used: All used none
	if _, ok := c.Get("b"); ok {
		t.Error("b kept: All marked it used")
	}
	n := 0
	for range c.All() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("%d values after a break", n)
	}
}

// TestLRUGrow: a value that grows is counted as it grows; the least
// recently used others make room for it, and one that outgrows the limit
// by itself is forgotten.
func TestLRUGrow(t *testing.T) {
	c := NewLRU[string, blob](10)
	c.Put("a", 3)
	c.Put("b", 3)
	if !c.Grow("b", 3) || c.Used() != 9 {
		t.Fatalf("%d bytes after b grew by 3, want 9", c.Used())
	}
	if !c.Grow("b", 2) { // 11 > 10: a, the least recently used, goes
		t.Fatal("b forgotten, though it fits by itself")
	}
	if _, ok := c.Get("a"); ok || c.Used() != 8 {
		t.Errorf("a kept, or %d bytes, want 8 of b alone", c.Used())
	}
	if c.Grow("b", 3) || c.Len() != 0 || c.Used() != 0 {
		t.Errorf("b outgrew the limit by itself: %d values, %d bytes kept", c.Len(), c.Used())
	}
	if c.Grow("gone", 1) || c.Used() != 0 {
		t.Error("a key not kept grew")
	}
}

func TestSizes(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want int64
	}{{0, 0}, {1, 8}, {8, 8}, {9, 16}, {32, 32}, {33, 48}, {64 << 10, 64 << 10}} {
		if got := Data(tt.n); got != tt.want {
			t.Errorf("Data(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
	if String("1.2.3") != 24 {
		t.Errorf("String(1.2.3) = %d, want 24", String("1.2.3"))
	}
	for n, want := range map[int64]string{100: "100 B", 2048: "2 KiB", 64 << 20: "64 MiB", 3 << 19: "1.5 MiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
