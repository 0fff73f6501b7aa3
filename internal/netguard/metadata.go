package netguard

import (
	"net"
	"net/netip"
	"syscall"
)

// metadataPrefixes hold the link-local ranges, where the clouds' instance
// metadata services answer (169.254.169.254 for AWS, Google and Azure,
// fd00:ec2::254 for AWS over IPv6), and Alibaba Cloud's 100.100.100.200.
// No registry or git server lives there, whoever names the host.
var metadataPrefixes = prefixes("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "100.100.100.200/32")

// MetadataAddr tells whether a is link-local or a cloud metadata service's
// address, also when written inside an IPv6 address (IPv4-mapped, NAT64,
// 6to4).
func MetadataAddr(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64WellKnown.Contains(a):
			a = netip.AddrFrom4([4]byte(b[12:16]))
		case sixToFour.Contains(a):
			a = netip.AddrFrom4([4]byte(b[2:6]))
		}
	}
	return inAny(metadataPrefixes, a)
}

// MetadataControl is a net.Dialer's Control for the hosts a tenant names
// (an image's registry, a repository URL): unlike Control, which refuses
// every internal address, it refuses only MetadataAddr, since in-cluster
// registries and git servers on private addresses are common and are the
// operator's to allow or not (NetworkPolicies, registries.conf).
func MetadataControl(_, address string, _ syscall.RawConn) error {
	return refuseDial(address, MetadataAddr)
}

// CheckMetadataConn refuses a connection already made to a MetadataAddr,
// for dialers that take no Control (SSH through golang.org/x/net/proxy):
// it is closed before anything is sent.
func CheckMetadataConn(conn net.Conn) error {
	ap, err := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err == nil && !MetadataAddr(ap.Addr()) {
		return nil
	}
	_ = conn.Close()
	return &RefusedError{Host: conn.RemoteAddr().String()}
}
