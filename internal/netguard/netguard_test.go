package netguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestInternalAddr(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		internal bool
	}{
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"100.63.255.255", false},
		{"100.128.0.0", false},
		{"172.32.0.1", false},
		{"2606:4700:4700::1111", false},
		{"64:ff9b::808:808", false},      // NAT64 of 8.8.8.8
		{"64:ff9b::8.8.8.8", false},      // the same, written as IPv4
		{"2002:808:808::1", false},       // 6to4 of 8.8.8.8
		{"::ffff:8.8.8.8", false},        // IPv4-mapped
		{"64:ff9b:2::a00:1", false},      // outside both NAT64 prefixes
		{"0.0.0.0", true},                // unspecified
		{"0.1.2.3", true},                // 0/8
		{"10.0.0.1", true},               // private
		{"172.16.0.1", true},             // private
		{"192.168.1.1", true},            // private
		{"127.0.0.1", true},              // loopback
		{"127.255.255.254", true},        // loopback
		{"169.254.169.254", true},        // link-local: AWS, GCP, Azure metadata
		{"100.64.0.1", true},             // carrier-grade NAT
		{"100.100.100.200", true},        // Alibaba Cloud metadata, in 100.64/10
		{"100.127.255.255", true},        // carrier-grade NAT, last address
		{"192.0.0.1", true},              // IETF protocol assignments
		{"198.18.0.1", true},             // benchmarking
		{"224.0.0.1", true},              // multicast
		{"255.255.255.255", true},        // broadcast
		{"240.0.0.1", true},              // reserved
		{"::", true},                     // unspecified
		{"::1", true},                    // loopback
		{"::127.0.0.1", true},            // IPv4-compatible
		{"::ffff:127.0.0.1", true},       // IPv4-mapped loopback
		{"::ffff:169.254.169.254", true}, // IPv4-mapped metadata
		{"::ffff:100.100.100.200", true}, // IPv4-mapped CGNAT
		{"64:ff9b::127.0.0.1", true},     // NAT64 of loopback
		{"64:ff9b::a9fe:a9fe", true},     // NAT64 of 169.254.169.254
		{"64:ff9b::100.100.100.200", true},
		{"64:ff9b::10.0.0.1", true},
		{"64:ff9b:1::808:808", true}, // local-use NAT64: any address
		{"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", true},
		{"2002:7f00:1::1", true},   // 6to4 of 127.0.0.1
		{"2002:a9fe:a9fe::", true}, // 6to4 of 169.254.169.254
		{"fe80::1", true},          // link-local
		{"fe80::1%eth0", true},     // with a zone
		{"febf::1", true},          // link-local, last /16
		{"fec0::1", true},          // site-local
		{"fc00::1", true},          // unique-local
		{"fd00:ec2::254", true},    // AWS metadata over IPv6
		{"ff02::1", true},          // multicast
		{"100::1", true},           // discard
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := InternalAddr(a); got != tc.internal {
			t.Errorf("InternalAddr(%s) = %v, want %v", tc.addr, got, tc.internal)
		}
		if got := InternalHost(a.String()); got != tc.internal {
			t.Errorf("InternalHost(%s) = %v, want %v", a, got, tc.internal)
		}
	}
	if !InternalAddr(netip.Addr{}) {
		t.Error("the zero address counts as public")
	}
}

func TestInternalHost(t *testing.T) {
	for _, tc := range []struct {
		host     string
		internal bool
	}{
		{"registry.example.com", false},
		{"auth.docker.io", false},
		{"storage.googleapis.com", false},
		{"[2606:4700:4700::1111]", false},
		{"host-127.example.com", false},
		{"example.com.", false},
		{"metadata.google.com", false},
		{"localhost", true},
		{"LOCALHOST", true},
		{"localhost.", true},
		{"app.localhost", true},
		{"localhost.localdomain", true},
		{"kube-apiserver", true},
		{"metadata", true},
		{"instance-data", true},
		{"argocd-server.argocd.svc", true},
		{"argocd-server.argocd.svc.cluster.local", true},
		{"argocd-server.argocd.svc.cluster.local.", true},
		{"metadata.google.internal", true},
		{"instance-data.ec2.internal", true},
		{"metadata.goog", true},
		{"METADATA.GOOG.", true},
		{"printer.local", true},
		{"nas.home.arpa", true},
		{"[::1]", true},
		{"[::ffff:127.0.0.1]", true},
		{"[fe80::1%25eth0]", true},
		{"127.1", true},
		{"0x7f.1", true},
		{"0177.0.0.1", true},
		{"2130706433", true},
		{"0x7f000001", true},
		{"1.2.3.4.5", true},
		{"", true},
		{"a:b", true},
	} {
		if got := InternalHost(tc.host); got != tc.internal {
			t.Errorf("InternalHost(%q) = %v, want %v", tc.host, got, tc.internal)
		}
	}
}

// FuzzInternalHost checks that the ways of writing one address agree,
// and that an IPv4 address is judged the same in every IPv6 form that
// carries it.
func FuzzInternalHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::1", "8.8.8.8", "100.100.100.200", "64:ff9b::a9fe:a9fe", "localhost", "example.com", "fe80::1%eth0", "0x7f.1", "[::ffff:10.0.0.1]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		internal := InternalHost(s) // must not panic
		if strings.EqualFold(s, "localhost") && !internal {
			t.Fatalf("%q counts as public", s)
		}
		if !internal && !strings.Contains(s, ".") && !strings.Contains(s, ":") {
			t.Fatalf("the single-label name %q counts as public", s)
		}
		if u := strings.ToUpper(s); InternalHost(u) != internal {
			t.Fatalf("%q and %q are judged differently", s, u)
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return
		}
		if InternalAddr(a) != internal {
			t.Fatalf("InternalHost(%q) = %v, InternalAddr = %v", s, internal, !internal)
		}
		if InternalHost("["+s+"]") != internal {
			t.Fatalf("%q and its bracketed form are judged differently", s)
		}
		if !a.Is4() {
			return
		}
		b := a.As4()
		mapped := netip.AddrFrom16(a.As16())
		nat64 := netip.AddrFrom16([16]byte{0, 0x64, 0xff, 0x9b, 12: b[0], b[1], b[2], b[3]})
		sixToFour := netip.AddrFrom16([16]byte{0x20, 0x02, b[0], b[1], b[2], b[3]})
		for _, form := range []netip.Addr{mapped, nat64, sixToFour} {
			if InternalAddr(form) != internal {
				t.Fatalf("%s is internal=%v, but %s is not", a, internal, form)
			}
		}
		if local := netip.AddrFrom16([16]byte{0, 0x64, 0xff, 0x9b, 0, 1, 12: b[0], b[1], b[2], b[3]}); !InternalAddr(local) {
			t.Fatalf("%s in the local-use NAT64 prefix counts as public", local)
		}
	})
}

func TestControl(t *testing.T) {
	for _, tc := range []struct {
		address string
		ok      bool
	}{
		{"8.8.8.8:443", true},
		{"[2606:4700:4700::1111]:443", true},
		{"127.0.0.1:80", false},
		{"[::1]:80", false},
		{"169.254.169.254:80", false},
		{"100.100.100.200:80", false},
		{"[64:ff9b::a9fe:a9fe]:80", false},
		{"[::ffff:10.0.0.1]:443", false},
		{"not-an-address:80", false},
	} {
		err := Control("tcp", tc.address, nil)
		if (err == nil) != tc.ok {
			t.Errorf("Control(%s) = %v, want allowed=%v", tc.address, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInternal) {
			t.Errorf("Control(%s): %v does not match ErrInternal", tc.address, err)
		}
	}
}

// A request for a context marked PublicOnly may not reach an internal
// address, whatever name led there, and reuses no connection an unmarked
// request opened; other requests connect as usual.
func TestTransport(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "internal answer") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	d := &net.Dialer{Timeout: 5 * time.Second}
	rt := NewTransport(&http.Transport{DialContext: d.DialContext}, &http.Transport{DialContext: PublicDialer(d).DialContext})
	defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	// "localhost" resolves to the loopback address; the name alone
	// passes the dialer, the address does not.
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("an unmarked request: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close() // the connection stays open, idle

	resp, err = rt.RoundTrip(req.WithContext(PublicOnly(req.Context())))
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("a public-only request reached the loopback address")
	}
	if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "refusing to connect to the internal address") {
		t.Errorf("got %v, want the internal address refused", err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the server saw %d connections, want the unmarked request's only", n)
	}
}
