package gitauth

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
)

// A repository's server, which a tenant may choose, answers before any
// fetch with the list of its references, and go-git decodes that list
// whole into memory: 96 MiB of references took about 600 MiB of heap. The
// fetch itself is bounded by the clones' bound (--git-clone-max-size), so
// the answers bounded here are the others: the reference advertisement,
// the report of a push, and error bodies, which go-git reads whole and
// quotes in its errors.
const (
	// MaxAdvertisedRefs bounds the references an advertisement may list.
	// GitHub advertises the pull requests' references too (two per
	// request), so a busy repository lists tens of thousands.
	MaxAdvertisedRefs = 100_000
	// MaxAnswerBytes bounds an advertisement or a push's report: 100,000
	// references take about 8 MiB.
	MaxAnswerBytes = 16 << 20
	// maxErrorBody is what is read of an error answer's body, which go-git
	// quotes in its error.
	maxErrorBody = 4 << 10
)

// answerTooLarge is the error of an answer with more lines than are read,
// or (over SSH) more bytes: it is bounded.ErrTooLarge.
type answerTooLarge struct{ msg string }

func (e answerTooLarge) Error() string        { return e.msg }
func (e answerTooLarge) Is(target error) bool { return target == bounded.ErrTooLarge }

// boundedAnswers bounds the answers of a repository's HTTP server that
// go-git reads whole: GET .../info/refs (the advertisement) and POST
// .../git-receive-pack (a push's report) in bytes and pkt-lines; every
// error body in bytes. The answer of git-upload-pack (the fetched pack)
// is bounded where it is spooled to disk.
type boundedAnswers struct {
	next http.RoundTripper
	// The bounds, MaxAdvertisedRefs and MaxAnswerBytes when zero.
	maxLines int
	maxBytes int64
}

func (b boundedAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	maxLines, maxBytes := b.maxLines, b.maxBytes
	if maxLines == 0 {
		maxLines = MaxAdvertisedRefs
	}
	if maxBytes == 0 {
		maxBytes = MaxAnswerBytes
	}
	switch path := req.URL.Path; {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		resp.Body = readCloser{io.LimitReader(resp.Body, maxErrorBody), resp.Body}
	case req.Method == http.MethodGet && strings.HasSuffix(path, "/info/refs"):
		// Besides the references, a line naming the service and HEAD.
		resp.Body = &pktLineBound{body: resp.Body, what: "reference advertisement", maxBytes: maxBytes, maxLines: maxLines + 2, lines: "references", extraLines: 2}
	case req.Method == http.MethodPost && strings.HasSuffix(path, "/git-receive-pack"):
		resp.Body = &pktLineBound{body: resp.Body, what: "report of the push", maxBytes: maxBytes, maxLines: maxLines, lines: "lines"}
	}
	return resp, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// pktLineBound fails a read once the body passes maxBytes, or holds more
// than maxLines pkt-lines carrying data (each reference is one; the
// advertisement's first line names the service).
type pktLineBound struct {
	body     io.ReadCloser
	what     string // the answer, for messages
	maxBytes int64
	maxLines int
	// lines names what the lines are, extraLines how many are not that.
	lines      string
	extraLines int

	read int64
	seen int // pkt-lines with data
	// The pkt-line framing as it streams by: header holds the digits of a
	// length being read, skip the payload bytes left of the current line.
	header []byte
	skip   int
	broken bool // not pkt-lines: go-git will say so
	err    error
}

func (b *pktLineBound) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	if b.read += int64(n); b.read > b.maxBytes {
		b.err = &bounded.TooLargeError{What: b.what, Limit: b.maxBytes}
		return 0, b.err
	}
	if !b.broken {
		b.count(p[:n])
		if b.seen > b.maxLines {
			b.err = answerTooLarge{fmt.Sprintf("the %s lists more than %d %s, the most the client reads", b.what, b.maxLines-b.extraLines, b.lines)}
			return 0, b.err
		}
	}
	return n, err
}

// count follows the pkt-line framing: four hex digits of length (header
// included), then the payload; 0000-0002 are flush and delimiter lines
// without payload.
func (b *pktLineBound) count(p []byte) {
	for len(p) > 0 {
		if b.skip > 0 {
			k := min(b.skip, len(p))
			b.skip -= k
			p = p[k:]
			continue
		}
		b.header = append(b.header, p[0])
		p = p[1:]
		if len(b.header) < 4 {
			continue
		}
		n, err := strconv.ParseUint(string(b.header), 16, 16)
		if err != nil {
			b.broken = true
			return
		}
		b.header = b.header[:0]
		if n > 4 {
			b.skip = int(n) - 4
			b.seen++
		}
	}
}

func (b *pktLineBound) Close() error { return b.body.Close() }
