// Package servertls holds the TLS settings every HTTPS server of the
// controller takes: the versions, the cipher suites and whether HTTP/2 is
// offered, which the operator gives as the v1.x line's --tlsminversion,
// --tlsmaxversion, --tlsciphers and --enable-http2, and reads them as that
// line does.
package servertls

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Settings are the operator's TLS settings. A zero version leaves the
// server's default (see Defaults); no cipher suites leave Go's. HTTP/2 is
// off unless asked for: the HTTP/2 rapid-reset and stream-cancellation
// attacks are why the v1.x line turns it off, and so does this one.
type Settings struct {
	MinVersion   uint16
	MaxVersion   uint16
	CipherSuites []uint16
	HTTP2        bool
}

// Defaults are a server's versions when the operator gives none.
type Defaults struct {
	MinVersion, MaxVersion uint16
}

// versions are the names the v1.x line accepts, in any case, spaces
// around ignored. TLS 1.0 is not one of them.
var versions = map[string]uint16{
	"1.1": tls.VersionTLS11, "tls1.1": tls.VersionTLS11,
	"1.2": tls.VersionTLS12, "tls1.2": tls.VersionTLS12,
	"1.3": tls.VersionTLS13, "tls1.3": tls.VersionTLS13,
}

// ParseVersion reads "1.2", "TLS1.3" and the like; "" is 0, the server's
// default.
func ParseVersion(s string) (uint16, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return 0, nil
	}
	v, ok := versions[s]
	if !ok {
		return 0, fmt.Errorf("unsupported TLS version %q: want 1.1, 1.2 or 1.3", s)
	}
	return v, nil
}

// VersionName is the version as ParseVersion reads it: "1.2".
func VersionName(v uint16) string {
	switch v {
	case tls.VersionTLS11:
		return "1.1"
	case tls.VersionTLS12:
		return "1.2"
	case tls.VersionTLS13:
		return "1.3"
	}
	return tls.VersionName(v)
}

// ParseCipherSuites reads a colon-separated list of Go's cipher suite
// names (tls.CipherSuites: the ones Go deems secure); "" is none, Go's
// defaults. Empty names between colons are skipped.
func ParseCipherSuites(s string) ([]uint16, error) {
	var ids []uint16
	for name := range strings.SplitSeq(s, ":") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		id, ok := suiteID(tls.CipherSuites(), name)
		if !ok {
			if _, insecure := suiteID(tls.InsecureCipherSuites(), name); insecure {
				return nil, fmt.Errorf("cipher suite %s is insecure and not accepted", name)
			}
			return nil, fmt.Errorf("unknown cipher suite %q (see Go's tls.CipherSuites for the names)", name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func suiteID(suites []*tls.CipherSuite, name string) (uint16, bool) {
	for _, cs := range suites {
		if cs.Name == name {
			return cs.ID, true
		}
	}
	return 0, false
}

// CheckVersions reports a minimum above the maximum, both given.
func (s Settings) CheckVersions() error {
	if s.MinVersion != 0 && s.MaxVersion != 0 && s.MinVersion > s.MaxVersion {
		return fmt.Errorf("the minimum TLS version %s is above the maximum %s", VersionName(s.MinVersion), VersionName(s.MaxVersion))
	}
	return nil
}

// CheckCipherSuites reports a cipher suite the minimum version given
// cannot use (a TLS 1.3 suite, or a TLS 1.2 one with a minimum of 1.1), as
// the v1.x line does. With a minimum of 1.3 the suites do not apply.
func (s Settings) CheckCipherSuites() error {
	if s.MinVersion == 0 || s.MinVersion >= tls.VersionTLS13 {
		return nil
	}
	for _, id := range s.CipherSuites {
		for _, cs := range tls.CipherSuites() {
			if cs.ID == id && !slices.Contains(cs.SupportedVersions, s.MinVersion) {
				return fmt.Errorf("cipher suite %s cannot be used with TLS %s, the minimum version", cs.Name, VersionName(s.MinVersion))
			}
		}
	}
	return nil
}

// CheckHTTP2 reports a cipher list without the suite HTTP/2 requires
// (RFC 7540, 9.2.2), which net/http refuses to serve; the list applies
// unless the minimum is 1.3.
func (s Settings) CheckHTTP2() error {
	if !s.HTTP2 || len(s.CipherSuites) == 0 || s.MinVersion >= tls.VersionTLS13 {
		return nil
	}
	if slices.Contains(s.CipherSuites, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) || slices.Contains(s.CipherSuites, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) {
		return nil
	}
	return fmt.Errorf("HTTP/2 needs TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 among the cipher suites")
}

// Apply sets c's versions (the operator's, else d's; a default minimum
// above the operator's maximum follows it down), its cipher suites and its
// application protocols. ciphersIgnored tells that cipher suites were
// given but the server takes TLS 1.3 only, whose suites Go does not let
// anyone choose.
func (s Settings) Apply(c *tls.Config, d Defaults) (ciphersIgnored bool) {
	if v := cmp.Or(s.MaxVersion, d.MaxVersion); v != 0 {
		c.MaxVersion = v
	}
	if v := cmp.Or(s.MinVersion, d.MinVersion); v != 0 {
		c.MinVersion = v
	}
	if s.MinVersion == 0 && c.MaxVersion != 0 && c.MinVersion > c.MaxVersion {
		c.MinVersion = c.MaxVersion
	}
	if len(s.CipherSuites) > 0 {
		if c.MinVersion >= tls.VersionTLS13 {
			ciphersIgnored = true
		} else {
			c.CipherSuites = slices.Clone(s.CipherSuites)
		}
	}
	c.NextProtos = []string{"http/1.1"}
	if s.HTTP2 {
		c.NextProtos = []string{"h2", "http/1.1"}
	}
	return ciphersIgnored
}

// Protocols are the protocols an http.Server serving c speaks: HTTP/1.1,
// and HTTP/2 only where c offers it. net/http would otherwise add HTTP/2
// to any TLS configuration it serves.
func Protocols(c *tls.Config) *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	if c != nil && slices.Contains(c.NextProtos, "h2") {
		p.SetHTTP2(true)
	}
	return p
}
