package repourl

import (
	"net/url"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// lookAlikes are hosts that Unicode case folding or IDNA makes equal to an
// ASCII host, while another host is dialled.
var lookAlikes = []struct {
	name, operator, tenant string
}{
	{"dotted capital I (U+0130) in a Helm repository", "https://charts.internal.example", "https://charts.\u0130nternal.example"},
	{"dotted capital I (U+0130) in a git repository", "https://github.example/org", "https://g\u0130thub.example/org/repo.git"},
	{"Kelvin sign (U+212A)", "https://kube.example/org", "https://\u212Aube.example/org/repo"},
	{"long s (U+017F)", "https://git.example/org", "https://gi\u017Ft.example/org/repo"},
	{"escaped in the URL", "https://charts.internal.example", "https://charts.%C4%B0nternal.example/"},
	{"scp-like", "git@github.example:org", "git@g\u0130thub.example:org/repo.git"},
	{"ssh://", "ssh://git@github.example/org", "ssh://git@g\u0130thub.example/org/repo.git"},
}

// TestLookAlikeHosts: a repository whose host only resembles the
// operator's once case is folded gets none of its credentials, no
// AppProject pattern written for it, and no TLS settings of its host; it
// is refused, naming the URL.
func TestLookAlikeHosts(t *testing.T) {
	for _, tt := range lookAlikes {
		t.Run(tt.name, func(t *testing.T) {
			if Covers(tt.operator, tt.tenant) {
				t.Errorf("the credentials of %s cover %s", tt.operator, tt.tenant)
			}
			if SameRepository(tt.operator, tt.tenant) {
				t.Errorf("%s is the repository %s", tt.tenant, tt.operator)
			}
			if permitted([]string{tt.operator, tt.operator + "/**", "!https://*.example/**"}, tt.tenant) {
				t.Errorf("sourceRepos of %s permit %s", tt.operator, tt.tenant)
			}
			_, err := ParseURL(tt.tenant)
			if err == nil || !strings.Contains(err.Error(), "only ASCII") {
				t.Errorf("ParseURL(%q) = %v, want a refusal of the host", tt.tenant, err)
			}
			op, err := ParseURL(tt.operator)
			if err != nil {
				t.Fatal(err)
			}
			if SameHost(op.Host(), hostOf(tt.tenant)) {
				t.Errorf("host of %s is %s", tt.tenant, op.Host())
			}
		})
	}
	if LoopbackHost("localho\u017Ft") {
		t.Error("localhoſt is a loopback host")
	}
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Hostname()
	}
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return ""
	}
	return ep.Host
}

// FuzzURLHostMatchedIsDialled: whatever the URL, when it matches the
// operator's credentials or a sourceRepos pattern naming a host, the host
// go-git and net/http dial for it is, byte for byte, that host in ASCII.
func FuzzURLHostMatchedIsDialled(f *testing.F) {
	prefixes := []string{
		"https://github.example/org", "https://charts.internal.example", "git@github.example:org",
		"ssh://git@github.example:2222/org", "http://localhost:8080", "https://kube.example",
	}
	for _, tt := range lookAlikes {
		f.Add(tt.tenant)
	}
	for _, s := range []string{
		"https://github.example/org/repo.git", "https://GITHUB.example:443/org/repo/", "git@github.example:org/repo",
		"https://github.example@evil.example/org/repo", "https://github.example.evil.example/org",
		"https://u:p@charts.internal.example/x", "ssh://git@github.example:2222/org/r", "git@github.example:2222:org/r",
		"https://[::1]/org", "https://charts.internal.example./x", "http://localhost:8080/r.git",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseURL(raw)
		if err != nil {
			return
		}
		if !isASCII(u.Host()) || asciiLower(u.Host()) != u.Host() {
			t.Fatalf("ParseURL(%q).Host() = %q, not ASCII in lower case", raw, u.Host())
		}
		for _, p := range prefixes {
			pu, err := ParseURL(p)
			if err != nil {
				t.Fatal(err)
			}
			matched := u.Within(pu) || u.Same(pu) || u.PermittedBy([]string{p, p + "/**"})
			if !matched {
				continue
			}
			for _, dialled := range dialledHosts(t, strings.TrimSpace(raw)) {
				if !isASCII(dialled) || asciiLower(dialled) != pu.Host() {
					t.Fatalf("%q matches %s but dials %q", raw, p, dialled)
				}
			}
		}
	})
}

// dialledHosts are the hosts go-git and, for HTTP(S), net/http connect
// to for raw.
func dialledHosts(t *testing.T, raw string) []string {
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		t.Fatalf("%q parses, but not for go-git: %v", raw, err)
	}
	hosts := []string{ep.Host}
	if ep.Protocol == "https" || ep.Protocol == "http" {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%q parses, but not for net/http: %v", raw, err)
		}
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
