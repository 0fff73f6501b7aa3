package transport

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sync/atomic"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
)

// ErrBodyTooLarge is wrapped by the error of a response body that went
// past its limit; it is bounded.ErrTooLarge, which every answer read past
// its size matches.
var ErrBodyTooLarge = bounded.ErrTooLarge

// BodyTooLargeError is the error of reading a response body past its
// limit (or of a Content-Length announcing as much). errors.Is finds
// ErrBodyTooLarge in it.
type BodyTooLargeError struct {
	Method string
	URL    string // redacted; "" when RoundTrip returns it, as http.Client's *url.Error names the request
	What   string // what the body is: "manifest", "tag list"
	Limit  int64
	Shared bool // the limit is a Budget shared by several bodies
}

func (e *BodyTooLargeError) Error() string {
	what := e.What
	if what == "" {
		what = "response body"
	}
	in := ""
	if e.Shared {
		in = " in all"
	}
	msg := fmt.Sprintf("the %s is larger than %s%s, the most the client reads", what, bounded.FormatBytes(e.Limit), in)
	if e.URL == "" {
		return msg
	}
	return e.Method + " " + e.URL + ": " + msg
}

func (e *BodyTooLargeError) Is(target error) bool { return target == ErrBodyTooLarge }

// Budget is a number of bytes that several response bodies share, such
// as the pages of one tag list. It is safe for concurrent use.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Limit says how much of one response body is read.
type Limit struct {
	What   string  // what the body is, for errors
	Bytes  int64   // the most bytes of this body; 0 or less: no limit of its own
	Budget *Budget // also counts against this budget, if not nil
	// Scan, if set, sees each chunk of the body as it is read, within the
	// limits; an error it returns ends the body with that error. It lets
	// a caller bound what the body holds, not only its size.
	Scan func(chunk []byte) error
}

// NewBodyLimit reads at most what limitOf says of each response body; a
// read past it fails with a *BodyTooLargeError, and so does, at once, a
// response whose Content-Length is larger. limitOf is asked about the
// request that started a redirect chain, so a blob redirected to a
// storage host keeps the limit of a blob.
func NewBodyLimit(next http.RoundTripper, limitOf func(*http.Request) Limit) http.RoundTripper {
	return &bodyLimit{next: next, limitOf: limitOf}
}

type bodyLimit struct {
	next    http.RoundTripper
	limitOf func(*http.Request) Limit
}

func (t *bodyLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	lim := t.limitOf(Origin(req))
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method == http.MethodHead || (lim.Bytes <= 0 && lim.Budget == nil && lim.Scan == nil) {
		return resp, err
	}
	b := &limitedBody{ReadCloser: resp.Body, lim: lim, method: req.Method, url: req.URL.Redacted()}
	if left, _, _ := b.left(); resp.ContentLength > left {
		resp.Body.Close()
		err := b.tooLarge()
		// http.Client names the request in its *url.Error.
		err.Method, err.URL = "", ""
		return nil, err
	}
	resp.Body = b
	return resp, nil
}

// Origin is the request that started req's redirect chain: req itself
// unless http.Client made it to follow a redirect.
func Origin(req *http.Request) *http.Request {
	for req.Response != nil && req.Response.Request != nil {
		req = req.Response.Request
	}
	return req
}

type limitedBody struct {
	io.ReadCloser
	lim         Limit
	method, url string
	read        int64
	err         error
}

// left is how many more bytes may be read, and the limit that says so.
func (b *limitedBody) left() (n, limit int64, shared bool) {
	n = math.MaxInt64
	if b.lim.Bytes > 0 {
		n, limit = b.lim.Bytes-b.read, b.lim.Bytes
	}
	if bud := b.lim.Budget; bud != nil {
		if l := bud.max - bud.used.Load(); l <= n {
			n, limit, shared = l, bud.max, true
		}
	}
	return max(n, 0), limit, shared
}

func (b *limitedBody) tooLarge() *BodyTooLargeError {
	_, limit, shared := b.left()
	return &BodyTooLargeError{Method: b.method, URL: b.url, What: b.lim.What, Limit: limit, Shared: shared}
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	left, _, _ := b.left()
	if int64(len(p)) > left {
		// One byte more than allowed tells a body at the limit from one
		// beyond it.
		p = p[:left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if int64(n) > left {
		b.err = b.tooLarge()
		b.consume(left)
		// Nothing more will be read: free the connection now rather than
		// when the caller closes the body, which go-containerregistry
		// does not do after a failed decode.
		b.ReadCloser.Close()
		return int(left), b.err
	}
	b.consume(int64(n))
	if b.lim.Scan != nil && n > 0 {
		if serr := b.lim.Scan(p[:n]); serr != nil {
			b.err = serr
			b.ReadCloser.Close()
			return n, serr
		}
	}
	return n, err
}

func (b *limitedBody) consume(n int64) {
	b.read += n
	if b.lim.Budget != nil {
		b.lim.Budget.used.Add(n)
	}
}
