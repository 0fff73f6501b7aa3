package repoyaml

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// bomb is an alias bomb: each level names the one before it ten times,
// so levels+1 lines expand to over 10^levels values.
func bomb(levels int) string {
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= levels; i++ {
		prev := "*l" + string(rune('0'+i-1))
		b.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" + strings.Repeat(prev+", ", 9) + prev + "]\n")
	}
	return b.String()
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, src string
		max       int
		want      string // "" for no error, else a part of the error
		tooLarge  bool
	}{
		{name: "plain", src: "a: 1\nb: [1, 2]\n", max: 7},
		{name: "plain past the bound", src: "a: 1\nb: [1, 2]\n", max: 6, want: "f.yaml: about 7 values, more than the 6 a write-back edits", tooLarge: true},
		{name: "empty", src: "", max: 1},
		{name: "aliases within the bound", src: "a: &a [1, 2, 3]\nb: *a\nc: *a\n", max: 16},
		{name: "aliases past the bound", src: "a: &a [1, 2, 3]\nb: *a\nc: *a\n", max: 15, want: "f.yaml:3: the alias *a takes the file past the 15 values", tooLarge: true},
		{name: "merge keys count", src: "base: &b {x: 1, y: 2}\nthis:\n  <<: *b\n  z: 3\n", max: 17},
		{name: "merge keys past the bound", src: "base: &b {x: 1, y: 2}\nthis:\n  <<: *b\n  z: 3\n", max: 16, want: "f.yaml:4: the file passes the 16 values a write-back edits here, counted with aliases expanded", tooLarge: true},
		{name: "alias bomb", src: bomb(9), max: MaxValues, want: "f.yaml:5: the alias *l3 takes the file past the 50000 values a write-back edits, counted with aliases expanded", tooLarge: true},
		{name: "alias inside its own value", src: "a: &a [1, *a]\n", max: MaxValues, want: "f.yaml:1: invalid YAML: the alias *a is inside the value it names"},
		{name: "text past the bound", src: "a: [" + strings.Repeat("0,", 100) + "0]\n", max: 50, want: "f.yaml: about 104 values, more than the 50", tooLarge: true},
		{name: "invalid", src: "a: [\n", max: MaxValues, want: "f.yaml: invalid YAML: yaml: line 1"},
		{name: "unknown anchor", src: "a: *b\n", max: MaxValues, want: "f.yaml: invalid YAML: yaml: unknown anchor 'b'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tt.src), WithMaxValues(tt.max))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
			if errors.Is(err, ErrTooLarge) != tt.tooLarge {
				t.Errorf("errors.Is(%v, ErrTooLarge) = %v, want %v", err, !tt.tooLarge, tt.tooLarge)
			}
		})
	}
}

// TestDecodeOfParsedIsBounded: whatever Parse accepts decodes to no more
// values than the bound, the property the callers rely on.
func TestDecodeOfParsedIsBounded(t *testing.T) {
	for _, src := range []string{
		bomb(2),
		"base: &b {x: 1, y: [1, 2]}\nthis:\n  <<: [*b, *b]\n  z: *b\nlist: [*b, *b, *b]\n",
	} {
		for max := 1; max < 400; max++ {
			checkDecodeBounded(t, []byte(src), max)
		}
	}
}

func checkDecodeBounded(t *testing.T, src []byte, max int) {
	t.Helper()
	var v any
	if err := Unmarshal("f.yaml", src, &v, WithMaxValues(max)); err != nil {
		return
	}
	if n := decodedValues(v); n > max {
		t.Fatalf("%q accepted under a bound of %d values decodes to %d", src, max, n)
	}
}

// decodedValues counts the values of a decoded document as Parse counts
// nodes: each map, list and scalar, and each key.
func decodedValues(v any) int {
	switch t := v.(type) {
	case map[string]any:
		n := 1
		for _, e := range t {
			n += 1 + decodedValues(e)
		}
		return n
	case map[any]any:
		n := 1
		for _, e := range t {
			n += 1 + decodedValues(e)
		}
		return n
	case []any:
		n := 1
		for _, e := range t {
			n += decodedValues(e)
		}
		return n
	default:
		return 1
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{bomb(3), "a: &a [1, *a]\n", "base: &b {x: 1}\nthis:\n  <<: *b\n", "a: 1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		checkDecodeBounded(t, src, 100)
	})
}

// TestEveryRepositoryYAMLIsBounded: the packages that read files from
// repositories parse YAML only through this package.
func TestEveryRepositoryYAMLIsBounded(t *testing.T) {
	unbounded := regexp.MustCompile(`\byaml\.(Unmarshal|UnmarshalStrict|NewDecoder|YAMLToJSON)\(`)
	err := filepath.WalkDir("../../writeback", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if unbounded.MatchString(line) {
				t.Errorf("%s:%d parses YAML without repoyaml: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
