package gitauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/net/proxy"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/internal/netguard"
)

// UploadPack opens a fetch session with the repository and reads the
// references it advertises, within MaxAnswerBytes (and, over HTTP,
// MaxAdvertisedRefs); the fetch that follows is bounded by the clones'
// bound. The caller closes the session.
func (acc Remote) UploadPack(ctx context.Context, repoURL string) (transport.UploadPackSession, *packp.AdvRefs, error) {
	sess, adv, bound, err := openSession(ctx, acc, repoURL, acc.Client.NewUploadPackSession)
	if bound != nil {
		bound.release()
	}
	return sess, adv, err
}

// ReceivePack opens a push session with the repository and reads the
// references it advertises, within the bounds of UploadPack; what the
// server sends for the rest of the session (its report of the push) stays
// within MaxAnswerBytes too. The caller closes the session.
func (acc Remote) ReceivePack(ctx context.Context, repoURL string) (transport.ReceivePackSession, *packp.AdvRefs, error) {
	sess, adv, bound, err := openSession(ctx, acc, repoURL, acc.Client.NewReceivePackSession)
	if err != nil || bound == nil {
		return sess, adv, err
	}
	return boundedReceive{sess, bound}, adv, nil
}

// boundedReceive explains the error of a push whose report the bound cut.
type boundedReceive struct {
	transport.ReceivePackSession
	bound *readBound
}

func (s boundedReceive) ReceivePack(ctx context.Context, req *packp.ReferenceUpdateRequest) (*packp.ReportStatus, error) {
	report, err := s.ReceivePackSession.ReceivePack(ctx, req)
	return report, s.bound.explain(err)
}

// advertiser is what UploadPack and ReceivePack need of a session.
type advertiser interface {
	AdvertisedReferencesContext(context.Context) (*packp.AdvRefs, error)
	Close() error
}

// openSession opens a session and reads the advertisement. An SSH
// session's reads are bounded by the readBound it returns until that is
// released; over HTTP, the client's transport bounds the answers.
func openSession[S advertiser](ctx context.Context, acc Remote, repoURL string, open func(*transport.Endpoint, transport.AuthMethod) (S, error)) (S, *packp.AdvRefs, *readBound, error) {
	var none S
	ep, err := acc.Endpoint(repoURL)
	if err != nil {
		return none, nil, nil, err
	}
	var bound *readBound
	if ep.Protocol == "ssh" {
		// go-git reads an SSH session's output itself: the bound is on the
		// connection, through a dialer go-git finds by the proxy URL.
		bound = &readBound{left: MaxAnswerBytes + sshOverhead}
		remove := sshBounds.add(bound, ep.Proxy)
		defer remove()
		ep.Proxy = transport.ProxyOptions{URL: boundedSSHScheme + "://" + bound.token}
	}
	sess, err := open(ep, acc.Auth)
	if err != nil {
		return none, nil, nil, bound.explain(err)
	}
	adv, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		_ = sess.Close()
		return none, nil, nil, bound.explain(err)
	}
	return sess, adv, bound, nil
}

// sshOverhead is what an SSH connection reads besides the advertisement:
// the key exchange, authentication, and the packets' framing.
const sshOverhead = 1 << 20

// readBound bounds the bytes read from a connection until released.
type readBound struct {
	token    string
	mu       sync.Mutex
	left     int64
	released bool
	tripped  bool
}

func (b *readBound) read(n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released {
		return nil
	}
	if b.left -= int64(n); b.left < 0 {
		b.tripped = true
		return errSSHAnswerTooLarge
	}
	return nil
}

func (b *readBound) release() {
	b.mu.Lock()
	b.released = true
	b.mu.Unlock()
}

var errSSHAnswerTooLarge = answerTooLarge{fmt.Sprintf("the server sent more than %s before the fetch or during the push, the most the client reads", bounded.FormatBytes(MaxAnswerBytes))}

// explain replaces the error of a session whose connection the bound
// closed: go-git sees only the connection end.
func (b *readBound) explain(err error) error {
	if b == nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tripped && !errors.Is(err, bounded.ErrTooLarge) {
		return errSSHAnswerTooLarge
	}
	return err
}

// boundedSSHScheme is the proxy scheme of the dialer that bounds SSH
// connections; the URL's host is the token of the readBound.
const boundedSSHScheme = "x-argocd-image-updater-bounded"

// sshBounds are the bounds of the SSH connections being opened, by token:
// go-git dials inside its session, and the proxy URL is the one value
// that reaches the dialer.
var sshBounds = &boundRegistry{entries: map[string]boundEntry{}}

func init() { proxy.RegisterDialerType(boundedSSHScheme, sshBounds.dialer) }

type boundRegistry struct {
	next    atomic.Uint64
	mu      sync.Mutex
	entries map[string]boundEntry
}

type boundEntry struct {
	bound *readBound
	proxy transport.ProxyOptions // the repository's own proxy, if any
}

func (r *boundRegistry) add(b *readBound, p transport.ProxyOptions) (remove func()) {
	b.token = strconv.FormatUint(r.next.Add(1), 10)
	r.mu.Lock()
	r.entries[b.token] = boundEntry{bound: b, proxy: p}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.entries, b.token)
		r.mu.Unlock()
	}
}

// dialer is the proxy.Dialer go-git gets for a bounded SSH connection: it
// dials as go-git would (through the repository's proxy, or the
// environment's), and bounds what the connection reads.
func (r *boundRegistry) dialer(u *url.URL, forward proxy.Dialer) (proxy.Dialer, error) {
	r.mu.Lock()
	e, ok := r.entries[u.Host]
	r.mu.Unlock()
	if !ok {
		return nil, errors.New("SSH connection opened outside its session")
	}
	return boundedDialer{entry: e, forward: forward}, nil
}

type boundedDialer struct {
	entry   boundEntry
	forward proxy.Dialer
}

func (d boundedDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d boundedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	var err error
	if d.entry.proxy.URL != "" {
		u, perr := d.entry.proxy.FullURL()
		if perr != nil {
			return nil, perr
		}
		p, perr := proxy.FromURL(u, d.forward)
		if perr != nil {
			return nil, perr
		}
		cd, ok := p.(proxy.ContextDialer)
		if !ok {
			return nil, fmt.Errorf("the SSH proxy %s cannot be used", u.Redacted())
		}
		conn, err = cd.DialContext(ctx, network, addr)
	} else {
		conn, err = proxy.Dial(ctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	// Checked once connected: the proxy package's dialers take no Control.
	if d.entry.proxy.URL == "" {
		if err := netguard.CheckMetadataConn(conn); err != nil {
			return nil, err
		}
	}
	return boundedConn{Conn: conn, bound: d.entry.bound}, nil
}

type boundedConn struct {
	net.Conn
	bound *readBound
}

func (c boundedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if berr := c.bound.read(n); berr != nil {
		return 0, berr
	}
	return n, err
}
