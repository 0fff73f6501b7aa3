package repourl

import (
	"net/url"
	"regexp"
	"strings"
)

// RedactURL hides credentials written into a repository URL, for logs
// and messages:
//   - a password becomes xxxxx (url.URL.Redacted);
//   - a user name alone is replaced by xxxxx too, except over SSH: HTTPS
//     servers take tokens as the user name (https://TOKEN@github.com/...),
//     while an SSH user name such as git@ authenticates nothing by itself;
//   - scp-like addresses (git@github.com:org/repo) keep their user name, and
//     lose anything after a ':' in it;
//   - input url.Parse refuses loses everything up to its last '@' after the
//     scheme, since its secret may hold an unescaped '/', '?' or '#' that
//     hides where the authority ends.
func RedactURL(raw string) string {
	if IsSCPLikeURL(raw) {
		return redactSCPLikeURL(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		scheme, rest := "", raw
		if i := strings.Index(raw, "://"); i >= 0 {
			scheme, rest = raw[:i+len("://")], raw[i+len("://"):]
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			return scheme + redacted + rest[at:]
		}
		return raw
	}
	if u.User == nil {
		return raw
	}
	if _, hasPassword := u.User.Password(); !hasPassword && !isSSHScheme(u.Scheme) {
		u.User = url.User(redacted)
	}
	return u.Redacted()
}

// redacted is what stands in for a secret; url.URL.Redacted uses it too.
const redacted = "xxxxx"

func isSSHScheme(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "ssh", "git+ssh", "ssh+git":
		return true
	}
	return false
}

// IsSCPLikeURL tells [user@]host:path apart from URLs the way git does: no
// "://", and a ':' before the first '/'.
func IsSCPLikeURL(raw string) bool {
	if strings.Contains(raw, "://") {
		return false
	}
	colon := strings.Index(raw, ":")
	slash := strings.Index(raw, "/")
	return colon > 0 && (slash < 0 || colon < slash)
}

func redactSCPLikeURL(raw string) string {
	authority := raw
	if slash := strings.Index(raw, "/"); slash >= 0 {
		authority = raw[:slash]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return raw
	}
	if colon := strings.Index(raw[:at], ":"); colon >= 0 {
		return raw[:colon+1] + redacted + raw[at:]
	}
	return raw
}

// urlInText finds what looks like a URL in a message.
var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

// redactedError is an error whose message has the credentials of the
// URLs in it hidden; errors.Is and errors.As still see the error.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// RedactErrorURLs hides the credentials of every URL in err's message: a
// URL given with user info in it can come back in the message of any
// layer below (a URL parser, an HTTP client, go-git), and the message
// goes to logs and to Kubernetes events that tenants can read.
func RedactErrorURLs(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := urlInText.ReplaceAllStringFunc(msg, RedactURL)
	if clean == msg {
		return err
	}
	return redactedError{msg: clean, err: err}
}
