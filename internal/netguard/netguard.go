// Package netguard decides which addresses and host names are internal
// (the machine's own, the cluster's, a private network's, a cloud's
// metadata service) and refuses connections to them where the host was not
// chosen by the operator: a token realm or a redirect a registry names.
// Internal is decided by InternalAddr for addresses and InternalHost for
// names, and nowhere else.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
)

// ErrInternal is matched (errors.Is) by every refusal of an internal
// address or name.
var ErrInternal = errors.New("internal address")

// RefusedError is the refusal of an internal host or address.
type RefusedError struct {
	Host string // as named or dialed
	Name bool   // refused by its name, before any lookup
}

func (e *RefusedError) Error() string {
	if e.Name {
		return fmt.Sprintf("refusing to connect to the internal host %s", e.Host)
	}
	return fmt.Sprintf("refusing to connect to the internal address %s", e.Host)
}

// Is makes errors.Is(err, ErrInternal) true.
func (e *RefusedError) Is(target error) bool { return target == ErrInternal }

// internal4 are the IPv4 ranges that are not the public Internet: this
// network (0/8), private (10/8, 172.16/12, 192.168/16), carrier-grade NAT
// (100.64/10, where Alibaba Cloud's metadata service answers at
// 100.100.100.200), loopback, link-local (169.254/16, the metadata service
// of most clouds), IETF protocol assignments (192.0.0/24), benchmarking
// (198.18/15), multicast and the reserved rest up to the broadcast address.
var internal4 = prefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
)

// internal6 are the IPv6 ranges that are not the public Internet: the
// unspecified, loopback and IPv4-compatible addresses (::/96), the discard
// prefix, the local-use NAT64 prefix (whose translator maps to whatever
// the local network decides, private addresses included, in a layout the
// address does not tell), unique-local (fc00::/7, fd00:ec2::254 is AWS's
// metadata service), link-local, the old site-local, and multicast.
// IPv4-mapped addresses are unmapped first, and the well-known NAT64
// prefix and 6to4 are judged by the IPv4 address they carry.
var internal6 = prefixes(
	"::/96", "100::/64", "64:ff9b:1::/48", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
)

var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// InternalAddr tells whether a is an address that is not on the public
// Internet (see internal4 and internal6), or an IPv6 address carrying such
// an IPv4 address (IPv4-mapped, NAT64 64:ff9b::/96, 6to4). An invalid
// address counts as internal.
func InternalAddr(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return inAny(internal4, a)
	}
	b := a.As16()
	switch {
	case nat64WellKnown.Contains(a):
		return InternalAddr(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return InternalAddr(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return inAny(internal6, a)
}

func inAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// internalSuffixes end the names of the machine (localhost), of a
// Kubernetes cluster (Services), of clouds' private DNS (*.internal,
// metadata.google.internal among them), of multicast DNS and of home
// networks.
var internalSuffixes = []string{".localhost", ".localdomain", ".svc", ".cluster.local", ".internal", ".local", ".home.arpa"}

// metadataNames are names of cloud metadata services that the suffixes
// do not cover.
var metadataNames = []string{"metadata.goog"}

// InternalHost tells whether host (a name or an address literal, without
// port; brackets and a final dot allowed) is internal: an address
// InternalAddr refuses, localhost, a name without a dot (which the
// cluster's search domains complete), a name under internalSuffixes, a
// cloud metadata service's name, or a name ending in a number (an IPv4
// address in a form such as 127.1 or 0x7f.1 that resolvers may accept). A
// public name may still resolve to an internal address: Control checks
// the address dialed.
func InternalHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")), ".")
	if h == "" {
		return true
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return InternalAddr(a)
	}
	if strings.Contains(h, ":") || strings.Contains(h, "%") {
		// Not a name, and not an address either.
		return true
	}
	if h == "localhost" || !strings.Contains(h, ".") {
		return true
	}
	for _, s := range internalSuffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	for _, n := range metadataNames {
		if h == n {
			return true
		}
	}
	return numeric(h[strings.LastIndexByte(h, '.')+1:])
}

// numeric tells whether a label is a number, decimal, octal or 0x-hex: no
// top-level domain is, while an IPv4 address in a short or unusual form
// ends in one.
func numeric(label string) bool {
	if label == "" {
		return false
	}
	digits := label
	hex := false
	if rest, ok := strings.CutPrefix(label, "0x"); ok {
		digits, hex = rest, true
	}
	for _, c := range digits {
		if !(c >= '0' && c <= '9' || hex && (c >= 'a' && c <= 'f')) {
			return false
		}
	}
	return true
}

// Control is a net.Dialer's Control: it refuses to connect to an internal
// address. It sees the address actually dialed, after name resolution, so
// a public name that resolves to an internal address (or resolves to one
// on a later lookup) is refused too.
func Control(_, address string, _ syscall.RawConn) error {
	return refuseDial(address, InternalAddr)
}

// refuseDial refuses address (host:port, as a dialer's Control sees it)
// when its host is not an address, or one refused says it must not be
// reached.
func refuseDial(address string, refused func(netip.Addr) bool) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	a, err := netip.ParseAddr(host)
	if err != nil || refused(a) {
		return &RefusedError{Host: host}
	}
	return nil
}

type publicOnlyKey struct{}

// PublicOnly marks ctx so that a request made with it goes through the
// public transport of NewTransport: its connection may only reach a public
// address.
func PublicOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, publicOnlyKey{}, true)
}

// IsPublicOnly tells whether ctx was marked by PublicOnly.
func IsPublicOnly(ctx context.Context) bool {
	v, _ := ctx.Value(publicOnlyKey{}).(bool)
	return v
}

// PublicDialer is a copy of d that refuses internal addresses (Control,
// before d's own Control if it has one).
func PublicDialer(d *net.Dialer) *net.Dialer {
	public := *d
	own := d.Control
	public.Control = func(network, address string, c syscall.RawConn) error {
		if err := Control(network, address, c); err != nil {
			return err
		}
		if own != nil {
			return own(network, address, c)
		}
		return nil
	}
	return &public
}

// NewTransport sends the requests whose context PublicOnly marked through
// public, whose dialer must be a PublicDialer, and all others through
// direct. Two transports keep two sets of connections: a connection
// opened for a host the operator configured is never reused for a marked
// request that names the same host.
func NewTransport(direct, public http.RoundTripper) http.RoundTripper {
	return &split{direct: direct, public: public}
}

type split struct{ direct, public http.RoundTripper }

func (s *split) RoundTrip(req *http.Request) (*http.Response, error) {
	if IsPublicOnly(req.Context()) {
		return s.public.RoundTrip(req)
	}
	return s.direct.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of both transports.
func (s *split) CloseIdleConnections() {
	for _, rt := range []http.RoundTripper{s.direct, s.public} {
		if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
}
