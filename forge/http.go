package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
)

// ClientOption configures a Client.
type ClientOption func(*caller)

// WithCallTimeout bounds each API call, from sending the request to the end
// of the answer, in place of callTimeout (30 s); a non-positive value keeps
// it.
func WithCallTimeout(d time.Duration) ClientOption {
	return func(c *caller) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// Client returns a client of the repository's requests that authenticates
// with token and sends its requests through rt (nil: Go's default), which
// carries the TLS and proxy settings for the API's host.
func (r Repository) Client(token string, rt http.RoundTripper, opts ...ClientOption) (Client, error) {
	if token == "" {
		return nil, fmt.Errorf("no token for the %s API", r.Kind)
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	c := &caller{
		kind:    r.Kind,
		base:    strings.TrimSuffix(r.API, "/"),
		token:   token,
		timeout: callTimeout,
		http: &http.Client{
			Transport: rt,
			// A redirect could carry the token's header to another host.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	for _, opt := range opts {
		opt(c)
	}
	switch r.Kind {
	case GitHub:
		c.auth, c.message = githubAuth, githubMessage
		return &gitHub{caller: c, project: r.Project}, nil
	case GitLab:
		c.auth, c.message = gitlabAuth, gitlabMessage
		return &gitLab{caller: c, project: r.Project}, nil
	}
	return nil, fmt.Errorf("unknown pull request service %q", r.Kind)
}

// callTimeout bounds one API call.
const callTimeout = 30 * time.Second

// maxAnswer bounds what is read of an answer: a few requests' JSON.
const maxAnswer = 4 << 20

// userAgent identifies the client, which GitHub requires.
const userAgent = "argocd-image-updater"

// caller makes the JSON calls of one service.
type caller struct {
	kind  Kind
	base  string
	token string
	http  *http.Client
	// timeout bounds one call: callTimeout unless WithCallTimeout.
	timeout time.Duration
	// auth sets the token's header.
	auth func(h http.Header, token string)
	// message reads the service's error message from an error answer.
	message func(body []byte) string
}

// call sends in (if not nil) as JSON to base+path and decodes a 2xx
// answer into out. Other answers become an *Error.
func (c *caller) call(ctx context.Context, method, path string, in, out any) error {
	return c.callURL(ctx, method, c.base+path, in, out)
}

// callURL is call at a whole URL, on the API's host.
func (c *caller) callURL(ctx context.Context, method, endpoint string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", userAgent)
	c.auth(req.Header, c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return c.scrub(fmt.Errorf("%s %s: %w", method, endpoint, err))
	}
	defer resp.Body.Close()
	answer, err := bounded.ReadAll(resp.Body, maxAnswer, string(c.kind)+" API answer")
	if err != nil {
		return c.scrub(fmt.Errorf("%s %s: %w", method, endpoint, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &Error{
			Service: c.kind, Method: method, URL: endpoint,
			StatusCode: resp.StatusCode, Status: resp.Status,
			Message: c.scrubText(cut(c.message(answer))),
		}
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return fmt.Errorf("%s %s: the answer is not the JSON the %s API documents: %w", method, endpoint, c.kind, err)
		}
	}
	return nil
}

// scrub and scrubText hide the token should a message ever repeat it.
func (c *caller) scrub(err error) error {
	if msg := err.Error(); strings.Contains(msg, c.token) {
		return errors.New(c.scrubText(msg))
	}
	return err
}

func (c *caller) scrubText(s string) string { return strings.ReplaceAll(s, c.token, "xxxxx") }

// cut keeps a service's message short and on one line, quoted.
func cut(msg string) string { return bounded.Excerpt(msg, bounded.MessageLength) }

func statusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}
