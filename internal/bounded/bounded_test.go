package bounded

import (
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestReadAll(t *testing.T) {
	for _, tc := range []struct {
		size, limit int64
		ok          bool
	}{
		{0, 10, true},
		{10, 10, true},
		{11, 10, false},
		{1 << 20, 64 << 10, false},
	} {
		src := &countingReader{r: strings.NewReader(strings.Repeat("x", int(tc.size)))}
		b, err := ReadAll(src, tc.limit, "token answer")
		switch {
		case tc.ok && (err != nil || int64(len(b)) != tc.size):
			t.Errorf("%d bytes, limit %d: got %d bytes, %v", tc.size, tc.limit, len(b), err)
		case !tc.ok && (!errors.Is(err, ErrTooLarge) || b != nil):
			t.Errorf("%d bytes, limit %d: got %d bytes, %v; want ErrTooLarge", tc.size, tc.limit, len(b), err)
		case !tc.ok && err.Error() != "the token answer is larger than "+FormatBytes(tc.limit)+", the most the client reads":
			t.Errorf("error %q", err)
		}
		if src.n > tc.limit+1 {
			t.Errorf("%d bytes, limit %d: read %d", tc.size, tc.limit, src.n)
		}
	}
}

func TestExcerpt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"Not Found", 300, `"Not Found"`},
		{"", 300, ""},
		{" \n\t\x00", 300, ""},
		{"Bad\ncredentials\r\n\x1b[31m  here ", 300, `"Bad credentials [31m here"`},
		{"abcdef", 3, `"abc..."`},
		{"ab cdef", 3, `"ab..."`},
		{"héllo wörld", 7, `"héllo w..."`},
		{"\xff\xfe", 300, "\"\ufffd\ufffd\""},
	} {
		if got := Excerpt(tc.in, tc.n); got != tc.want {
			t.Errorf("Excerpt(%q, %d) = %s, want %s", tc.in, tc.n, got, tc.want)
		}
	}
}

func FuzzExcerpt(f *testing.F) {
	f.Add("Not Found\n", 10)
	f.Add("\x00\x01 a  b", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n%500 + 1
		if n < 1 {
			n += 500
		}
		got := Excerpt(s, n)
		if strings.ContainsAny(got, "\n\r") {
			t.Fatalf("Excerpt(%q) = %s spans lines", s, got)
		}
		if got == "" {
			return
		}
		if !utf8.ValidString(got) || got[0] != '"' || got[len(got)-1] != '"' {
			t.Fatalf("Excerpt(%q) = %s is not one quoted string", s, got)
		}
		// Each kept character may take up to 10 bytes quoted (\U0001f600).
		if len(got) > 10*n+5 {
			t.Fatalf("Excerpt(%q, %d) is %d bytes long", s, n, len(got))
		}
	})
}
