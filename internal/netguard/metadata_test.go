package netguard

import (
	"errors"
	"net"
	"net/netip"
	"testing"
)

func TestMetadataAddr(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"169.254.169.254", true},
		{"169.254.0.1", true},
		{"100.100.100.200", true},
		{"fd00:ec2::254", true},
		{"fe80::1", true},
		{"::ffff:169.254.169.254", true},
		{"64:ff9b::a9fe:a9fe", true}, // NAT64 of 169.254.169.254
		{"2002:a9fe:a9fe::1", true},  // 6to4 of 169.254.169.254
		// Private and loopback addresses are the operator's to allow:
		// in-cluster registries and git servers live there.
		{"10.0.0.5", false},
		{"192.168.1.10", false},
		{"127.0.0.1", false},
		{"100.100.100.201", false},
		{"fd00:ec2::253", false},
		{"8.8.8.8", false},
	}
	for _, tt := range tests {
		if got := MetadataAddr(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("MetadataAddr(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func TestMetadataControl(t *testing.T) {
	d := net.Dialer{Control: MetadataControl}
	_, err := d.Dial("tcp4", "169.254.169.254:80")
	if !errors.Is(err, ErrInternal) {
		t.Errorf("dial 169.254.169.254: %v, want a refusal", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial loopback: %v", err)
	}
	if err := CheckMetadataConn(c); err != nil {
		t.Errorf("CheckMetadataConn(loopback): %v", err)
	}
	c.Close()
}
