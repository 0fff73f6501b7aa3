package repourl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// URL is a repository URL parsed once, the identity of a repository
// wherever one is compared: Argo CD's repository Secrets and repo-creds,
// AppProject sourceRepos, TLS certificates and known hosts, forge hosts.
// It is parsed as go-git and net/http parse it to dial, and its host is
// ASCII: a host that differs from the one dialled only once case is
// folded or IDNA applied (https://charts.İnternal.example, dialled as
// charts.xn--internal-o0e.example) is refused, never compared equal to
// the host it resembles.
type URL struct {
	raw string
	// scheme is lower case; "ssh" for user@host:path.
	scheme string
	// user is the SSH user, part of the identity (git@github.com:org/r);
	// an HTTP user is a credential and is left out.
	user string
	// host is ASCII, lower case, without port; an IPv6 address in [].
	host string
	// port is "" for the scheme's default.
	port string
	// path is as dialled, with its query if any.
	path string
	// userinfo tells that the URL holds credentials: an HTTP user or
	// any password.
	userinfo bool
}

// ParseURL parses a repository URL: scheme://[user@]host[:port]/path
// or user@host:path, as go-git reads it (a local path or file:// URL
// parses with scheme "file" and no host). It refuses a URL without a host,
// a host that is not ASCII letters, digits, '-', '_' and '.' (or an IP
// address), and a path with an escaped '/'.
func ParseURL(raw string) (URL, error) {
	s := strings.TrimSpace(raw)
	bad := func(why string) (URL, error) {
		return URL{}, fmt.Errorf("repository URL %q: %s", RedactURL(s), why)
	}
	if s == "" {
		return bad("empty")
	}
	ep, err := transport.NewEndpoint(s)
	if err != nil {
		// The parser's error repeats the URL, credentials and all.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return bad(err.Error())
	}
	if ep.Protocol == "file" {
		// A local path: no host, and no Remote.
		return URL{raw: s, scheme: "file", path: ep.Path}, nil
	}
	if ep.Host == "" {
		return bad("names no host")
	}
	host, err := CanonicalHost(ep.Host)
	if err != nil {
		return bad(err.Error())
	}
	if strings.Contains(s, "://") {
		// go-git dials the path unescaped, net/http as written: they would
		// name two repositories.
		if pu, err := url.Parse(s); err == nil && strings.Contains(strings.ToLower(pu.EscapedPath()), "%2f") {
			return bad("an escaped '/' in the path")
		}
	}
	return fromEndpoint(s, ep, host), nil
}

var defaultPort = map[string]int{"https": 443, "http": 80, "ssh": 22}

// fromEndpoint is the URL raw that go-git parsed into ep, with host
// spelt as compared.
func fromEndpoint(raw string, ep *transport.Endpoint, host string) URL {
	u := URL{raw: raw, scheme: strings.ToLower(ep.Protocol), host: host, path: ep.Path}
	if u.scheme == "ssh" {
		u.user = ep.User
	}
	u.userinfo = ep.Password != "" || u.scheme != "ssh" && ep.User != ""
	if ep.Port != 0 && ep.Port != defaultPort[u.scheme] {
		u.port = strconv.Itoa(ep.Port)
	}
	return u
}

// CanonicalHost is host as compared: ASCII in lower case. It refuses
// any other character than letters, digits, '-', '_' and '.', and empty
// labels, unless host is an IP address (IPv6 in [] or not).
func CanonicalHost(host string) (string, error) {
	if ip := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"); strings.Contains(ip, ":") {
		if net.ParseIP(ip) == nil {
			return "", fmt.Errorf("host %q is not an IP address", host)
		}
		return "[" + strings.ToLower(ip) + "]", nil
	}
	if host == "" {
		return "", errors.New("empty host")
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" {
			return "", fmt.Errorf("host %q has an empty label", host)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host %q holds %q: only ASCII letters, digits, '-', '_' and '.' are accepted (write an international name in its xn-- form)", host, firstBad(host))
			}
		}
	}
	return asciiLower(host), nil
}

func firstBad(host string) string {
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return string(r)
		}
	}
	return ""
}

// asciiLower lower-cases A-Z alone: Unicode case mapping turns other
// characters into ASCII ones (İ into i, K into k).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// SameHost tells whether two host names (without port) name one host:
// equal once ASCII letters are lower-cased, and both ASCII.
func SameHost(a, b string) bool {
	ca, err := CanonicalHost(a)
	if err != nil {
		return false
	}
	cb, err := CanonicalHost(b)
	return err == nil && ca == cb
}

// Scheme is the URL's scheme in lower case: "ssh" for user@host:path.
func (u URL) Scheme() string { return u.scheme }

// Host is the host dialled, in ASCII lower case, without port.
func (u URL) Host() string { return u.host }

// Path is the repository's path as dialled, without '/' around it and
// without ".git".
func (u URL) Path() string {
	return strings.TrimSuffix(strings.Trim(u.path, "/"), ".git")
}

// HoldsCredentials tells whether credentials are written into the URL:
// an HTTP user (often a token) or a password.
func (u URL) HoldsCredentials() bool { return u.userinfo }

// String is the URL as given, its credentials hidden.
func (u URL) String() string { return RedactURL(u.raw) }

// Loopback tells whether the URL's host is localhost or a loopback
// address.
func (u URL) Loopback() bool { return LoopbackHost(u.host) }

// LoopbackHost tells whether host (without port) is localhost or a
// loopback address.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Remote tells whether the URL reaches a server over HTTPS, HTTP or SSH:
// go-git also opens file:// URLs, local paths and git://, the first two
// in-process, where they would reach the controller's own files.
func (u URL) Remote() bool {
	switch u.scheme {
	case "https", "http", "ssh":
		return true
	}
	return false
}

// HasDotSegment tells whether the path holds a "." or ".." segment,
// escaped or not: the server may resolve it to a repository that neither
// a credentials prefix nor an AppProject covers.
func (u URL) HasDotSegment() bool {
	p, _, _ := strings.Cut(u.path, "?")
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// authority is the part of the key that names the server.
func (u URL) authority() string {
	hp := u.host
	if u.port != "" {
		hp += ":" + u.port
	}
	if u.scheme == "ssh" {
		// Argo CD compares both SSH spellings without "ssh://".
		if u.user != "" {
			hp = asciiLower(u.user) + "@" + hp
		}
		return hp
	}
	return u.scheme + "://" + hp
}

// Key is the spelling repositories are compared in, as Argo CD
// normalises them: ASCII case folded, no default port, both SSH
// spellings alike, without ".git" or a trailing '/'. It holds no
// credentials.
func (u URL) Key() string { return u.authority() + pathKey(u.path) }

func pathKey(p string) string {
	p = strings.TrimSuffix(strings.TrimSuffix(asciiLower(p), "/"), ".git")
	p = strings.Trim(p, "/")
	if p == "" {
		return ""
	}
	return "/" + p
}

// Same tells whether u and v name one repository.
func (u URL) Same(v URL) bool { return u.raw != "" && u.Key() == v.Key() }

// Within tells whether prefix (a repo-creds URL, or the url of a
// credentials Secret) covers u: the same scheme, user, host and port,
// and a path under prefix's on a segment boundary, so that credentials
// for https://git.example.com never go to https://git.example.com.evil.io
// and those for https://git.example.com/org never to .../organic.
func (u URL) Within(prefix URL) bool {
	if u.raw == "" || prefix.raw == "" || u.authority() != prefix.authority() {
		return false
	}
	p, r := pathKey(prefix.path), pathKey(u.path)
	return r == p || strings.HasPrefix(r, p+"/")
}

// SameRepository reports whether two URLs name one repository, spelt as
// Argo CD compares them (ASCII case, ".git", a trailing '/', both SSH
// forms); false when either does not parse.
func SameRepository(a, b string) bool {
	ua, err := ParseURL(a)
	if err != nil {
		return false
	}
	ub, err := ParseURL(b)
	return err == nil && ua.Same(ub)
}

// Covers reports whether the credentials URL prefix covers repository
// URL repo (URL.Within); false when either does not parse.
func Covers(prefix, repo string) bool {
	p, err := ParseURL(prefix)
	if err != nil {
		return false
	}
	r, err := ParseURL(repo)
	return err == nil && r.Within(p)
}
