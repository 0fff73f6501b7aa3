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
	"github.com/image-updater/argocd-image-updater/settings"
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

// WithUsername sets the user name of the credentials the token comes
// with. Only Bitbucket Cloud uses it: a user's app password or API token
// goes with the user's name as basic authentication, an access token
// (user x-token-auth, or none) as a bearer token.
func WithUsername(name string) ClientOption {
	return func(c *caller) { c.username = name }
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
	case settings.ForgeGitHub:
		c.auth, c.message = githubAuth, githubMessage
		return &gitHub{caller: c, project: r.Project}, nil
	case settings.ForgeGitLab:
		c.auth, c.message = gitlabAuth, gitlabMessage
		return &gitLab{caller: c, project: r.Project}, nil
	case settings.ForgeGitea:
		c.auth, c.message = giteaAuth, giteaMessage
		return &gitea{caller: c, project: r.Project}, nil
	case settings.ForgeBitbucket:
		c.auth, c.message = bitbucketAuth(c.username), bitbucketMessage
		return &bitbucket{caller: c, project: r.Project}, nil
	case settings.ForgeBitbucketServer:
		c.auth, c.message = bitbucketServerAuth, bitbucketServerMessage
		return newBitbucketServer(c, r.Project)
	case settings.ForgeAzureDevOps:
		c.auth, c.message = azureAuth, azureMessage
		return newAzureDevOps(c, r.Project)
	}
	return nil, fmt.Errorf("unknown pull request service %q", r.Kind)
}

// callTimeout bounds one API call.
const callTimeout = 30 * time.Second

// maxAnswer bounds what is read of an answer: a few requests' JSON.
const maxAnswer = 4 << 20

// maxPages bounds the pages of a listing that are read: the requests of
// one branch are few, and those past the bound are old.
const maxPages = 10

// userAgent identifies the client, which GitHub requires.
const userAgent = "argocd-image-updater"

// caller makes the JSON calls of one service.
type caller struct {
	kind     settings.Forge
	base     string
	token    string
	username string
	http     *http.Client
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
	_, err := c.do(ctx, method, endpoint, in, out)
	return err
}

// do is callURL that returns the answer's header too.
func (c *caller) do(ctx context.Context, method, endpoint string, in, out any) (http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", userAgent)
	c.auth(req.Header, c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.scrub(fmt.Errorf("%s %s: %w", method, endpoint, err))
	}
	defer resp.Body.Close()
	answer, err := bounded.ReadAll(resp.Body, maxAnswer, string(c.kind)+" API answer")
	if err != nil {
		return nil, c.scrub(fmt.Errorf("%s %s: %w", method, endpoint, err))
	}
	if resp.StatusCode == http.StatusNonAuthoritativeInfo && c.kind == settings.ForgeAzureDevOps {
		// Azure DevOps answers a token it does not take with its sign-in
		// page.
		return nil, &Error{
			Service: c.kind, Method: method, URL: endpoint,
			StatusCode: resp.StatusCode, Status: resp.Status,
			Message: "a sign-in page: the token was not accepted",
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &Error{
			Service: c.kind, Method: method, URL: endpoint,
			StatusCode: resp.StatusCode, Status: resp.Status,
			Message: c.scrubText(cut(c.message(answer))),
		}
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return nil, fmt.Errorf("%s %s: the answer is not the JSON the %s API documents: %w", method, endpoint, c.kind, err)
		}
	}
	return resp.Header, nil
}

// onAPI checks that a URL an answer gave (the next page's) is on the
// API, before the token is sent there.
func (c *caller) onAPI(next string) error {
	if !strings.HasPrefix(next, c.base+"/") {
		return fmt.Errorf("the %s API named a next page off the API: %s", c.kind, bounded.Excerpt(next, bounded.MessageLength))
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
