package gitauth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"golang.org/x/crypto/ssh"
)

func pkts(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			b.WriteString("0000")
			continue
		}
		fmt.Fprintf(&b, "%04x%s", len(l)+4, l)
	}
	return b.String()
}

// TestBoundedAnswers: which answers of a repository's HTTP server are
// bounded, and how: the advertisement and a push's report by pkt-lines
// and bytes, whatever the reads' sizes; error bodies cut; the fetched pack
// left alone.
func TestBoundedAnswers(t *testing.T) {
	refs := func(n int) string {
		lines := []string{"# service=git-upload-pack\n", "", "h HEAD\x00caps\n"}
		for i := range n {
			lines = append(lines, fmt.Sprintf("h refs/tags/%d\n", i))
		}
		return pkts(append(lines, "")...)
	}
	tests := []struct {
		name, method, path string
		status             int
		body               string
		maxLines, maxBytes int
		want               string // "" reads the whole body
		wantLen            int    // the bytes read, when not the whole body
	}{
		{name: "advertisement within the bounds", method: "GET", path: "/r.git/info/refs", body: refs(10), maxLines: 10, maxBytes: 1 << 20},
		{name: "advertisement past the lines", method: "GET", path: "/r.git/info/refs", body: refs(11), maxLines: 10, maxBytes: 1 << 20, want: "lists more than 10 references"},
		{name: "advertisement past the bytes", method: "GET", path: "/r.git/info/refs", body: refs(10), maxLines: 10, maxBytes: 100, want: "larger than"},
		{name: "not pkt-lines", method: "GET", path: "/r.git/info/refs", body: "zzzz" + strings.Repeat("x", 500), maxLines: 1, maxBytes: 1 << 20},
		{name: "push report past the lines", method: "POST", path: "/r.git/git-receive-pack", body: pkts("unpack ok\n", "ok refs/heads/a\n", "ok refs/heads/b\n", ""), maxLines: 2, maxBytes: 1 << 20, want: "report of the push lists more than"},
		{name: "pack not bounded here", method: "POST", path: "/r.git/git-upload-pack", body: strings.Repeat("p", 5000), maxLines: 1, maxBytes: 100},
		{name: "error body cut", method: "GET", path: "/r.git/info/refs", status: 500, body: strings.Repeat("e", 100_000), maxLines: 1, maxBytes: 1 << 20, wantLen: maxErrorBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.status != 0 {
					w.WriteHeader(tt.status)
				}
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			for _, oneByte := range []bool{false, true} {
				rt := boundedAnswers{next: http.DefaultTransport, maxLines: tt.maxLines, maxBytes: int64(tt.maxBytes)}
				req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				var r io.Reader = resp.Body
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				got, err := io.ReadAll(r)
				resp.Body.Close()
				switch {
				case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, bounded.ErrTooLarge)):
					t.Errorf("one byte at a time %v: got %v, want an error with %q", oneByte, err, tt.want)
				case tt.want == "" && err != nil:
					t.Errorf("one byte at a time %v: %v", oneByte, err)
				case tt.want == "" && tt.wantLen == 0 && string(got) != tt.body:
					t.Errorf("one byte at a time %v: read %d bytes of %d", oneByte, len(got), len(tt.body))
				case tt.wantLen != 0 && len(got) != tt.wantLen:
					t.Errorf("one byte at a time %v: read %d bytes, want %d", oneByte, len(got), tt.wantLen)
				}
			}
		})
	}
}

// FuzzPktLineBound: the count of pkt-lines never panics and never counts
// more lines than the data holds.
func FuzzPktLineBound(f *testing.F) {
	f.Add([]byte(pkts("a\n", "", "bb\n")), 3)
	f.Add([]byte("0004000500010002zzzz"), 1)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		b := &pktLineBound{}
		chunk = max(chunk%64, 1)
		for p := data; len(p) > 0; {
			n := min(chunk, len(p))
			b.count(p[:n])
			p = p[n:]
		}
		if b.seen > len(data)/5 {
			t.Fatalf("%d lines counted in %d bytes", b.seen, len(data))
		}
	})
}

// sshRepoServer is an SSH server whose git-upload-pack and
// git-receive-pack write what answer writes, whatever the client asks.
func sshRepoServer(t *testing.T, answer func(io.Writer)) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil }}
	cfg.AddHostKey(hostKey)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	serve := func(c net.Conn) {
		defer c.Close()
		_, chans, reqs, err := ssh.NewServerConn(c, cfg)
		if err != nil {
			return
		}
		go ssh.DiscardRequests(reqs)
		for nc := range chans {
			ch, reqs, err := nc.Accept()
			if err != nil {
				return
			}
			go func() {
				for r := range reqs {
					_ = r.Reply(r.Type == "exec", nil)
					if r.Type == "exec" {
						answer(ch)
						_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
						ch.Close()
					}
				}
			}()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); serve(c) }()
		}
	}()
	return "ssh://git@" + l.Addr().String() + "/team/repo.git"
}

// TestSSHAnswersBounded: over SSH, where go-git reads the session itself,
// an advertisement without end is cut at MaxAnswerBytes with an error
// saying so, and costs little heap; one within the bounds is read.
func TestSSHAnswersBounded(t *testing.T) {
	const hash = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name   string
		refs   int // < 0: without end
		want   string
		maxMiB uint64
	}{
		{name: "within the bounds", refs: 10},
		{name: "without end", refs: -1, want: "the server sent more than 16 MiB before the fetch or during the push, the most the client reads", maxMiB: 160},
	}
	r := NewResolver(noObjects{}, "argocd", t.TempDir(), nil)
	key := string(testSSHKey(t))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := sshRepoServer(t, func(w io.Writer) {
				_, _ = io.WriteString(w, pkts(hash+" HEAD\x00symref=HEAD:refs/heads/main ofs-delta\n", hash+" refs/heads/main\n"))
				// Written a thousand at a time, so that the server allocates
				// little of what the test measures.
				var chunk strings.Builder
				for i := range 1000 {
					chunk.WriteString(pkts(fmt.Sprintf("%s refs/tags/%s%d\n", hash, strings.Repeat("x", 200), i)))
				}
				block := []byte(chunk.String())
				for i := 0; tt.refs < 0 || i < tt.refs; i += 1000 {
					if tt.refs < 0 || i+1000 <= tt.refs {
						if _, err := w.Write(block); err != nil {
							return
						}
						continue
					}
					for j := i; j < tt.refs; j++ {
						_, _ = io.WriteString(w, pkts(fmt.Sprintf("%s refs/tags/%s%d\n", hash, strings.Repeat("x", 200), j)))
					}
				}
				_, _ = io.WriteString(w, "0000")
			})
			acc, err := r.Access(context.Background(), url, repoaccess.Credentials{Source: "x", SSHPrivateKey: key}, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, pushing := range []bool{false, true} {
				var adv *packp.AdvRefs
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				if pushing {
					var s transport.ReceivePackSession
					if s, adv, err = acc.ReceivePack(context.Background(), url); err == nil {
						s.Close()
					}
				} else {
					var s transport.UploadPackSession
					if s, adv, err = acc.UploadPack(context.Background(), url); err == nil {
						s.Close()
					}
				}
				runtime.ReadMemStats(&after)
				grew := (after.TotalAlloc - before.TotalAlloc) >> 20
				t.Logf("push %v: %d MiB allocated: %v", pushing, grew, err)
				if tt.want == "" {
					if err != nil || len(adv.References) != tt.refs+1 {
						t.Errorf("push %v: %v; want %d references", pushing, err, tt.refs+1)
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, bounded.ErrTooLarge) {
					t.Errorf("push %v: got %v, want an error with %q", pushing, err, tt.want)
				}
				if grew > tt.maxMiB {
					t.Errorf("push %v: the refused answer allocated %d MiB", pushing, grew)
				}
			}
		})
	}
}
