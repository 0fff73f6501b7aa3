package bounded

import (
	"io"
	"net/http"
)

// Transport reads at most limit bytes of each answer's body through next
// (http.DefaultTransport when nil): a read past it fails with a
// *TooLargeError. For clients whose reading is a library's (the clouds'
// SDKs), which read answers whole.
func Transport(next http.RoundTripper, limit int64, what string) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{next: next, limit: limit, what: what}
}

type transport struct {
	next  http.RoundTripper
	limit int64
	what  string
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = Body(resp.Body, t.limit, t.what)
	return resp, nil
}

// Body reads at most limit bytes of body: a read past it fails with a
// *TooLargeError. For answers read below a library's own transport, such
// as the AWS SDK's middleware stack.
func Body(body io.ReadCloser, limit int64, what string) io.ReadCloser {
	return &limitedBody{body: body, left: limit, err: &TooLargeError{What: what, Limit: limit}}
}

// limitedBody is a body that fails once more than its limit was read.
type limitedBody struct {
	body io.ReadCloser
	left int64
	err  error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.err
	}
	// One byte past the limit tells a body at the limit from a longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - 1, b.err
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }
