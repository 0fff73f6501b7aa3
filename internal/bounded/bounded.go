// Package bounded reads the answers of servers others choose (registries,
// their token servers, forges) within a size, and quotes their messages
// in errors within a length: nothing such a server sends may exhaust the
// controller's memory or fill an event with its text.
package bounded

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// ErrTooLarge is matched (errors.Is) by the error of an answer larger
// than the most that is read of it.
var ErrTooLarge = errors.New("answer too large")

// TooLargeError is the error of ReadAll past its limit.
type TooLargeError struct {
	What  string // what the answer is: "token answer", "GitHub API answer"
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the %s is larger than %s, the most the client reads", e.What, FormatBytes(e.Limit))
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ReadAll reads r to its end, what (for the error) being at most limit
// bytes: one byte more fails with a *TooLargeError, having read no more
// than that.
func ReadAll(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{What: what, Limit: limit}
	}
	return b, nil
}

// FormatBytes writes n in MiB or KiB when it is a whole number of them.
func FormatBytes(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// MessageLength is how many characters of a server's message Excerpt
// keeps unless told otherwise.
const MessageLength = 300

// Excerpt is a server's message fit to be quoted in an error: on one line
// (control characters and runs of white space become one space), cut to
// at most n characters, and quoted; "" when nothing printable is left.
func Excerpt(msg string, n int) string {
	var b strings.Builder
	count, space := 0, false
	for _, r := range msg {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			space = b.Len() > 0
			continue
		}
		if count == n {
			b.WriteString("...")
			break
		}
		if space {
			if count++; count == n {
				b.WriteString("...")
				break
			}
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
		count++
	}
	if b.Len() == 0 {
		return ""
	}
	return strconv.Quote(b.String())
}
