package servertls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseVersion(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    uint16
		wantErr bool
	}{
		{in: "", want: 0},
		{in: "1.1", want: tls.VersionTLS11},
		{in: "1.2", want: tls.VersionTLS12},
		{in: "1.3", want: tls.VersionTLS13},
		{in: "TLS1.2", want: tls.VersionTLS12},
		{in: "tls1.3", want: tls.VersionTLS13},
		{in: " 1.2 ", want: tls.VersionTLS12},
		{in: "1.0", wantErr: true},
		{in: "VersionTLS12", wantErr: true},
		{in: "1.4", wantErr: true},
	} {
		got, err := ParseVersion(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseCipherSuites(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    []uint16
		wantErr string
	}{
		{in: ""},
		{in: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
			want: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}},
		{in: " TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 :: ", want: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}},
		{in: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", wantErr: "unknown cipher suite"},
		{in: "TLS_RSA_WITH_RC4_128_SHA", wantErr: "insecure"},
		{in: "AES256", wantErr: `"AES256"`},
	} {
		got, err := ParseCipherSuites(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseCipherSuites(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseCipherSuites(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestChecks(t *testing.T) {
	for _, tt := range []struct {
		name                     string
		s                        Settings
		versions, ciphers, http2 string // "" when no error
	}{
		{name: "nothing given", s: Settings{}},
		{name: "a range", s: Settings{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13}},
		{name: "minimum above maximum", s: Settings{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS12}, versions: "1.3 is above the maximum 1.2"},
		{name: "a TLS 1.2 suite with 1.2", s: Settings{MinVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}},
		{name: "a TLS 1.3 suite with 1.2", s: Settings{MinVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_AES_128_GCM_SHA256}},
			ciphers: "TLS_AES_128_GCM_SHA256 cannot be used with TLS 1.2"},
		{name: "a TLS 1.2-only suite with 1.1", s: Settings{MinVersion: tls.VersionTLS11, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}},
			ciphers: "cannot be used with TLS 1.1"},
		{name: "any suite with 1.3, where they do not apply", s: Settings{MinVersion: tls.VersionTLS13, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}},
		{name: "HTTP/2 without its suite", s: Settings{HTTP2: true, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}, http2: "HTTP/2 needs"},
		{name: "HTTP/2 with its suite", s: Settings{HTTP2: true, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}},
		{name: "HTTP/2 with TLS 1.3 only", s: Settings{HTTP2: true, MinVersion: tls.VersionTLS13, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				err  error
				want string
			}{{tt.s.CheckVersions(), tt.versions}, {tt.s.CheckCipherSuites(), tt.ciphers}, {tt.s.CheckHTTP2(), tt.http2}} {
				if (c.err == nil) != (c.want == "") || c.err != nil && !strings.Contains(c.err.Error(), c.want) {
					t.Errorf("error %v, want %q", c.err, c.want)
				}
			}
		})
	}
}

func TestApply(t *testing.T) {
	webhook := Defaults{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13}
	suites := []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}
	for _, tt := range []struct {
		name             string
		s                Settings
		d                Defaults
		wantMin, wantMax uint16
		wantSuites       []uint16
		wantIgnored      bool
		wantProtos       []string
	}{
		{name: "the webhook's defaults", d: webhook, wantMin: tls.VersionTLS13, wantMax: tls.VersionTLS13, wantProtos: []string{"http/1.1"}},
		{name: "the metrics' defaults: the base's", wantMin: tls.VersionTLS12, wantProtos: []string{"http/1.1"}},
		{name: "the operator's versions", s: Settings{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12}, d: webhook,
			wantMin: tls.VersionTLS12, wantMax: tls.VersionTLS12, wantProtos: []string{"http/1.1"}},
		{name: "a default minimum follows the maximum given down", s: Settings{MaxVersion: tls.VersionTLS12}, d: webhook,
			wantMin: tls.VersionTLS12, wantMax: tls.VersionTLS12, wantProtos: []string{"http/1.1"}},
		{name: "suites with 1.2", s: Settings{MinVersion: tls.VersionTLS12, CipherSuites: suites}, d: webhook,
			wantMin: tls.VersionTLS12, wantMax: tls.VersionTLS13, wantSuites: suites, wantProtos: []string{"http/1.1"}},
		{name: "suites with 1.3 only are ignored", s: Settings{CipherSuites: suites}, d: webhook,
			wantMin: tls.VersionTLS13, wantMax: tls.VersionTLS13, wantIgnored: true, wantProtos: []string{"http/1.1"}},
		{name: "HTTP/2", s: Settings{HTTP2: true}, wantMin: tls.VersionTLS12, wantProtos: []string{"h2", "http/1.1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &tls.Config{MinVersion: tls.VersionTLS12}
			ignored := tt.s.Apply(c, tt.d)
			if c.MinVersion != tt.wantMin || c.MaxVersion != tt.wantMax || !slices.Equal(c.CipherSuites, tt.wantSuites) ||
				ignored != tt.wantIgnored || !slices.Equal(c.NextProtos, tt.wantProtos) {
				t.Errorf("min %x max %x suites %v ignored %t protos %q; want %x %x %v %t %q", c.MinVersion, c.MaxVersion, c.CipherSuites, ignored, c.NextProtos,
					tt.wantMin, tt.wantMax, tt.wantSuites, tt.wantIgnored, tt.wantProtos)
			}
		})
	}
}

// A real server with the settings applied: what a client gets.
func TestServer(t *testing.T) {
	cert := selfSigned(t)
	start := func(t *testing.T, s Settings, d Defaults) string {
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.Apply(cfg, d)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(r.Proto)) }))
		srv.TLS = cfg
		srv.Config.Protocols = Protocols(cfg)
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	type result struct {
		err     bool
		version uint16
		suite   uint16
		proto   string
	}
	dial := func(addr string, client *tls.Config) result {
		client.InsecureSkipVerify = true
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, client)
		if err != nil {
			return result{err: true}
		}
		defer conn.Close()
		st := conn.ConnectionState()
		return result{version: st.Version, suite: st.CipherSuite, proto: st.NegotiatedProtocol}
	}
	chacha := tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
	aes := tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
	for _, tt := range []struct {
		name   string
		s      Settings
		d      Defaults
		client *tls.Config
		want   result
	}{
		{name: "TLS 1.3 only refuses a TLS 1.2 client", s: Settings{MinVersion: tls.VersionTLS13},
			client: &tls.Config{MaxVersion: tls.VersionTLS12}, want: result{err: true}},
		{name: "the webhook's default refuses a TLS 1.2 client", d: Defaults{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13},
			client: &tls.Config{MaxVersion: tls.VersionTLS12}, want: result{err: true}},
		{name: "and serves TLS 1.3", d: Defaults{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13},
			client: &tls.Config{}, want: result{version: tls.VersionTLS13, suite: tls.TLS_AES_128_GCM_SHA256}},
		{name: "TLS 1.2 only refuses a TLS 1.3 client", s: Settings{MaxVersion: tls.VersionTLS12},
			client: &tls.Config{MinVersion: tls.VersionTLS13}, want: result{err: true}},
		// Go's server would choose AES-GCM for this client on hardware
		// with AES instructions.
		{name: "a cipher list is applied", s: Settings{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{chacha}},
			client: &tls.Config{CipherSuites: []uint16{aes, chacha}}, want: result{version: tls.VersionTLS12, suite: chacha}},
		{name: "a client without the listed suites is refused", s: Settings{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{chacha}},
			client: &tls.Config{CipherSuites: []uint16{aes}}, want: result{err: true}},
		{name: "HTTP/2 is not offered by default", client: &tls.Config{NextProtos: []string{"h2", "http/1.1"}},
			want: result{version: tls.VersionTLS13, suite: tls.TLS_AES_128_GCM_SHA256, proto: "http/1.1"}},
		{name: "HTTP/2 when asked for", s: Settings{HTTP2: true}, client: &tls.Config{NextProtos: []string{"h2", "http/1.1"}},
			want: result{version: tls.VersionTLS13, suite: tls.TLS_AES_128_GCM_SHA256, proto: "h2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := start(t, tt.s, tt.d)
			if got := dial(addr, tt.client); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("1.2")
	f.Add("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256")
	f.Add(":: tls1.3 ")
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseVersion(s); err == nil && v != 0 {
			if back, err := ParseVersion(VersionName(v)); err != nil || back != v {
				t.Fatalf("%q: %d does not read back from %q", s, v, VersionName(v))
			}
		}
		ids, err := ParseCipherSuites(s)
		if err != nil {
			return
		}
		for _, id := range ids {
			if _, ok := suiteID(tls.CipherSuites(), tls.CipherSuiteName(id)); !ok {
				t.Fatalf("%q: suite %x is not one of Go's secure suites", s, id)
			}
		}
	})
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
