package webhook

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/test/poll"
)

// inProcess sends a client's requests to a handler in this process, as a
// server would hand them over, so that the relay runs inside a synctest
// bubble; requests counts them.
type inProcess struct {
	h        http.Handler
	requests atomic.Int32
}

func (t *inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	sr := r.Clone(r.Context())
	sr.RequestURI = r.URL.RequestURI()
	sr.RemoteAddr = "192.0.2.7:40000"
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, sr)
	return rec.Result(), nil
}

// leaderView is what a replica knows of the leader, changed by a test.
type leaderView struct {
	mu sync.Mutex
	l  Leader
}

func (v *leaderView) set(l Leader) { v.mu.Lock(); v.l = l; v.mu.Unlock() }
func (v *leaderView) get() Leader  { v.mu.Lock(); defer v.mu.Unlock(); return v.l }

var relayTestKey = RelayKey(map[string]string{Quay: "quay-secret", Harbor: "harbor-secret"})

// replicas are two replicas' dispatchers: the leader, whose checks run
// (Run), and a follower that relays through Forward to the leader's
// RelayHandler.
type replicas struct {
	leader, follower        *Dispatcher
	leaderChecks, ownChecks *fakeChecker
	view                    *leaderView
	transport               *inProcess
	ctx                     context.Context
	done                    sync.WaitGroup
}

func startReplicas(t *testing.T, followerKey []byte, view Leader, leaderRuns bool) *replicas {
	t.Helper()
	r := &replicas{
		leaderChecks: &fakeChecker{start: time.Now()},
		ownChecks:    &fakeChecker{start: time.Now()},
		view:         &leaderView{l: view},
	}
	r.leader = NewDispatcher(r.leaderChecks, WithRelay(relayTestKey, func() Leader { return Leader{} }))
	r.follower = NewDispatcher(r.ownChecks, WithRelay(followerKey, r.view.get))
	r.transport = &inProcess{h: r.leader.RelayHandler()}
	r.follower.relay.client.Transport = r.transport
	var cancel context.CancelFunc
	r.ctx, cancel = context.WithCancel(t.Context())
	if leaderRuns {
		r.runLeader()
	}
	r.done.Go(func() { r.follower.Forward(r.ctx) })
	t.Cleanup(func() { cancel(); r.done.Wait() })
	synctest.Wait()
	return r
}

func (r *replicas) runLeader() { r.done.Go(func() { r.leader.Run(r.ctx) }) }

func (r *replicas) runFollower() { r.done.Go(func() { r.follower.Run(r.ctx) }) }

func notification(t *testing.T, source string, repos ...string) Notification {
	t.Helper()
	n := Notification{Source: source, Received: time.Now()}
	for _, s := range repos {
		n.Repositories = append(n.Repositories, mustRef(t, s))
	}
	return n
}

func sameChecks(got, want []check) bool {
	return slices.EqualFunc(got, want, func(a, b check) bool {
		return a.at == b.at && slices.Equal(a.repos, b.repos) && a.trigger == b.trigger
	})
}

// A replica that does not lead takes a notification and it is checked:
// forwarded to the leader, or kept while no replica leads and checked by
// whichever comes to lead, within relayMaxAge; never by two replicas.
func TestRelay(t *testing.T) {
	const leaderURL = "http://10.0.0.5:8082"
	const trigger = "a push notification from quay.io"
	x := []string{"quay.io/a/x"}
	tests := []struct {
		name        string
		notified    []string // x unless set
		followerKey []byte
		view        Leader
		leaderRuns  bool
		// then, 20.5 seconds after the notification
		thenView         *Leader
		thenLeaderRuns   bool
		thenFollowerRuns bool
		after            time.Duration // when "then" happens; 20.5s by default
		wantErr          error
		wantLeader       []check
		wantOwn          []check
	}{
		{
			name: "forwarded to the leader at once",
			view: Leader{Known: true, URL: leaderURL}, leaderRuns: true,
			wantLeader: []check{{at: 0, repos: x, trigger: trigger}},
		},
		{
			name: "the tag travels with it", notified: []string{"quay.io/a/x:v2"},
			view: Leader{Known: true, URL: leaderURL}, leaderRuns: true,
			wantLeader: []check{{at: 0, repos: []string{"quay.io/a/x:v2"}, trigger: trigger}},
		},
		{
			name: "no leader yet; this replica comes to lead and checks it at once",
			view: Leader{}, thenFollowerRuns: true,
			wantOwn: []check{{at: 20500 * time.Millisecond, repos: x, trigger: trigger}},
		},
		{
			name: "no leader yet; another comes to lead and is forwarded it",
			view: Leader{}, leaderRuns: true, thenView: &Leader{Known: true, URL: leaderURL},
			// Tried again every relayRetry.
			wantLeader: []check{{at: 21 * time.Second, repos: x, trigger: trigger}},
		},
		{
			name: "the leader has not started its checks: forwarded again until it has",
			view: Leader{Known: true, URL: leaderURL}, thenLeaderRuns: true, after: 5 * time.Second,
			// Tries at 0, 1, 3 and 7 s (backoff): taken at 7 s.
			wantLeader: []check{{at: 7 * time.Second, repos: x, trigger: trigger}},
		},
		{
			name: "kept for relayMaxAge at most",
			view: Leader{}, thenFollowerRuns: true, after: relayMaxAge + 2*time.Second,
		},
		{
			name: "a leader that advertises no address: refused, as before",
			view: Leader{Known: true}, leaderRuns: true,
			wantErr: ErrNotRunning,
		},
		{
			name: "no relay key: nothing is forwarded",
			view: Leader{Known: true, URL: leaderURL}, followerKey: []byte{}, leaderRuns: true,
			wantErr: ErrNotRunning,
		},
		{
			name: "another key: the leader refuses; kept until this replica leads",
			view: Leader{Known: true, URL: leaderURL}, followerKey: RelayKey(map[string]string{Quay: "another"}), leaderRuns: true,
			thenView: &Leader{}, thenFollowerRuns: true,
			wantOwn: []check{{at: 20500 * time.Millisecond, repos: x, trigger: trigger}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				key := relayTestKey
				if tt.followerKey != nil {
					key = tt.followerKey
				}
				if len(key) == 0 {
					key = nil
				}
				r := startReplicas(t, key, tt.view, tt.leaderRuns)
				notified := x
				if tt.notified != nil {
					notified = tt.notified
				}
				err := r.follower.Notify(notification(t, Quay, notified...))
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Notify: %v, want %v", err, tt.wantErr)
				}
				time.Sleep(cmp.Or(tt.after, 20500*time.Millisecond))
				if tt.thenView != nil {
					r.view.set(*tt.thenView)
				}
				if tt.thenLeaderRuns {
					r.runLeader()
				}
				if tt.thenFollowerRuns {
					r.runFollower()
				}
				time.Sleep(10 * time.Minute)
				if !sameChecks(r.leaderChecks.recorded(), tt.wantLeader) {
					t.Errorf("the leader's checks\n%+v\nwant\n%+v", r.leaderChecks.recorded(), tt.wantLeader)
				}
				if !sameChecks(r.ownChecks.recorded(), tt.wantOwn) {
					t.Errorf("this replica's checks\n%+v\nwant\n%+v", r.ownChecks.recorded(), tt.wantOwn)
				}
			})
		})
	}
}

// Notifications kept while the leader cannot be reached are merged and
// forwarded together, in bounded messages; attempts back off.
func TestRelayBatchesAndBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplicas(t, relayTestKey, Leader{Known: true, URL: "https://10.0.0.5:8082"}, false)
		var repos []string
		for i := range 3 * relayBatch / 2 {
			repos = append(repos, fmt.Sprintf("harbor.example.com/p/r%03d", i))
		}
		for i := 0; i < len(repos); i += 50 {
			if err := r.follower.Notify(notification(t, Harbor, repos[i:i+50]...)); err != nil {
				t.Fatal(err)
			}
		}
		// Again and again for one of them: one repository, many receipts.
		for range 3 * maxReceived {
			if err := r.follower.Notify(notification(t, Quay, "harbor.example.com/p/r000")); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		before := r.transport.requests.Load()
		time.Sleep(time.Minute)
		// relayRetry after the first failure, then doubling up to
		// relayMaxRetry: 1, 2, 4, 8, 10, 10... seconds.
		if n := r.transport.requests.Load() - before; n < 5 || n > 10 {
			t.Errorf("%d attempts in a minute, want 5 to 10", n)
		}
		r.runLeader()
		time.Sleep(time.Minute)
		var got []string
		for _, c := range r.leaderChecks.recorded() {
			got = append(got, c.repos...)
		}
		slices.Sort(got)
		got = slices.Compact(got)
		if !slices.Equal(got, repos) {
			t.Errorf("checked %d repositories, want %d", len(got), len(repos))
		}
		// Two messages (relayBatch each at most), then nothing more.
		if n := len(r.leaderChecks.recorded()); n > 2 {
			t.Errorf("%d checks on the leader, want 2 at most", n)
		}
		if n := len(r.ownChecks.recorded()); n != 0 {
			t.Errorf("%d checks on the follower", n)
		}
	})
}

func relayRequest(t *testing.T, key []byte, msg any, sig string) *http.Request {
	t.Helper()
	body, ok := msg.([]byte)
	if !ok {
		var err error
		if body, err = json.Marshal(msg); err != nil {
			t.Fatal(err)
		}
	}
	req := httptest.NewRequest(http.MethodPost, RelayPath, bytes.NewReader(body))
	switch sig {
	case "":
		sig = "sha256=" + hex.EncodeToString(relayMAC(key, body))
	case "none":
		sig = ""
	}
	if sig != "" {
		req.Header.Set(relaySignatureHeader, sig)
	}
	sent := time.Now()
	if m, ok := msg.(relayMessage); ok {
		sent = m.Sent
	}
	req.Header.Set(relayProofHeader, relayProof(key, sent, sig))
	return req
}

// What a replica accepts as forwarded by another: signed with the relay
// key, recent, well formed, and only while it leads.
func TestRelayHandler(t *testing.T) {
	good := func() relayMessage {
		return relayMessage{Sent: time.Now(), Repositories: []relayRepository{
			{Name: "quay.io/a/x", Sources: []string{Quay}, Received: []time.Time{time.Now().Add(-time.Second)}},
		}}
	}
	tests := []struct {
		name       string
		method     string
		key        []byte // the dispatcher's; relayTestKey unless set
		notRunning bool
		msg        func() any
		sig        string
		proof      func(*http.Request) // changes the X-Relay-Proof header
		twice      bool                // the same request sent again
		wantStatus int
		wantBody   string
	}{
		{name: "accepted", msg: func() any { return good() }, wantStatus: http.StatusAccepted},
		{name: "no proof", msg: func() any { return good() }, proof: func(r *http.Request) { r.Header.Del(relayProofHeader) },
			wantStatus: http.StatusUnauthorized, wantBody: relayProofHeader},
		{name: "proof for another signature", msg: func() any { return good() }, proof: func(r *http.Request) {
			r.Header.Set(relayProofHeader, relayProof(relayTestKey, time.Now(), "sha256="+strings.Repeat("00", 32)))
		}, wantStatus: http.StatusUnauthorized, wantBody: relayProofHeader},
		{name: "proof of an older time", msg: func() any { return good() }, proof: func(r *http.Request) {
			old := time.Now().Add(-relayMaxSkew - time.Second)
			r.Header.Set(relayProofHeader, relayProof(relayTestKey, old, r.Header.Get(relaySignatureHeader)))
		}, wantStatus: http.StatusUnauthorized, wantBody: "from this replica's clock"},
		{name: "proof of another time", msg: func() any { return good() }, proof: func(r *http.Request) {
			t, mac, _ := strings.Cut(r.Header.Get(relayProofHeader), ":")
			r.Header.Set(relayProofHeader, t+"1:"+mac)
		}, wantStatus: http.StatusUnauthorized, wantBody: relayProofHeader},
		{name: "sent again", msg: func() any { return good() }, twice: true, wantStatus: http.StatusUnauthorized, wantBody: "taken before"},
		{name: "no signature", msg: func() any { return good() }, sig: "none", wantStatus: http.StatusUnauthorized, wantBody: relaySignatureHeader},
		{name: "wrong signature", msg: func() any { return good() }, sig: "sha256=" + strings.Repeat("00", 32), wantStatus: http.StatusUnauthorized},
		{name: "signed with another key", key: RelayKey(map[string]string{Quay: "another"}), msg: func() any { return good() },
			wantStatus: http.StatusUnauthorized, wantBody: "same webhook secrets"},
		{name: "replayed later", msg: func() any { m := good(); m.Sent = m.Sent.Add(-relayMaxSkew - time.Second); return m },
			wantStatus: http.StatusUnauthorized, wantBody: "from this replica's clock"},
		{name: "from the future", msg: func() any { m := good(); m.Sent = m.Sent.Add(relayMaxSkew + time.Second); return m },
			wantStatus: http.StatusUnauthorized},
		{name: "not JSON", msg: func() any { return []byte("{") }, wantStatus: http.StatusBadRequest},
		{name: "a tag in the name", msg: func() any { m := good(); m.Repositories[0].Name = "quay.io/a/x:1.0"; return m },
			wantStatus: http.StatusBadRequest, wantBody: "repositories[0].name"},
		{name: "unknown source", msg: func() any { m := good(); m.Repositories[0].Sources = []string{"gitlab"}; return m },
			wantStatus: http.StatusBadRequest, wantBody: "unknown source"},
		{name: "no source", msg: func() any { m := good(); m.Repositories[0].Sources = nil; return m }, wantStatus: http.StatusBadRequest},
		{name: "with tags", msg: func() any { m := good(); m.Repositories[0].Tags = []string{"1.0", "1.1"}; return m }, wantStatus: http.StatusAccepted},
		{name: "not a tag", msg: func() any { m := good(); m.Repositories[0].Tags = []string{"-1.0"}; return m },
			wantStatus: http.StatusBadRequest, wantBody: "repositories[0].tags"},
		{name: "too many tags", msg: func() any {
			m := good()
			for i := range maxTags + 1 {
				m.Repositories[0].Tags = append(m.Repositories[0].Tags, fmt.Sprintf("v%d", i))
			}
			return m
		}, wantStatus: http.StatusBadRequest, wantBody: "more than 16 tags"},
		{name: "too many receipts", msg: func() any {
			m := good()
			m.Repositories[0].Received = make([]time.Time, maxReceived+1)
			return m
		}, wantStatus: http.StatusBadRequest},
		{name: "too many repositories", msg: func() any {
			m := good()
			for i := range relayBatch {
				m.Repositories = append(m.Repositories, relayRepository{Name: fmt.Sprintf("quay.io/a/r%d", i), Sources: []string{Quay}})
			}
			return m
		}, wantStatus: http.StatusBadRequest, wantBody: "more than"},
		{name: "too large", msg: func() any { return bytes.Repeat([]byte(" "), relayMaxBody+1) }, wantStatus: http.StatusRequestEntityTooLarge},
		{name: "not POST", method: http.MethodGet, msg: func() any { return good() }, wantStatus: http.StatusMethodNotAllowed},
		{name: "not leading", notRunning: true, msg: func() any { return good() }, wantStatus: http.StatusServiceUnavailable, wantBody: "does not lead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &fakeChecker{start: time.Now()}
				d := NewDispatcher(c, WithRelay(relayTestKey, func() Leader { return Leader{} }))
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if !tt.notRunning {
					go d.Run(ctx)
					synctest.Wait()
				}
				key := relayTestKey
				if tt.key != nil {
					key = tt.key
				}
				msg := tt.msg()
				req := relayRequest(t, key, msg, tt.sig)
				if tt.method != "" {
					req.Method = tt.method
				}
				if tt.proof != nil {
					tt.proof(req)
				}
				if tt.twice {
					first := httptest.NewRecorder()
					d.RelayHandler().ServeHTTP(first, relayRequest(t, key, msg, tt.sig))
					if first.Code != http.StatusAccepted {
						t.Fatalf("the first time: status %d %q, want 202", first.Code, first.Body.String())
					}
				}
				rec := httptest.NewRecorder()
				d.RelayHandler().ServeHTTP(rec, req)
				if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
					t.Errorf("status %d %q, want %d with %q", rec.Code, rec.Body.String(), tt.wantStatus, tt.wantBody)
				}
				synctest.Wait()
				wantChecks := 0
				if tt.wantStatus == http.StatusAccepted || tt.twice {
					wantChecks = 1
				}
				if len(c.recorded()) != wantChecks {
					t.Errorf("%d checks, want %d", len(c.recorded()), wantChecks)
				}
			})
		})
	}
}

// Without a relay key (no webhook secret), nothing is taken from other
// replicas.
func TestRelayHandlerWithoutKey(t *testing.T) {
	for _, d := range []*Dispatcher{
		NewDispatcher(&fakeChecker{}),
		NewDispatcher(&fakeChecker{}, WithRelay(nil, func() Leader { return Leader{} })),
	} {
		rec := httptest.NewRecorder()
		d.RelayHandler().ServeHTTP(rec, relayRequest(t, nil, relayMessage{Sent: time.Now()}, ""))
		if rec.Code != http.StatusNotFound {
			t.Errorf("status %d, want 404", rec.Code)
		}
	}
}

// The relay key takes every secret: one registry's secret does not give
// it, and it does not depend on which source holds which secret.
func TestRelayKey(t *testing.T) {
	both := RelayKey(map[string]string{Quay: "q", Harbor: "h"})
	for name, other := range map[string][]byte{
		"one of them":   RelayKey(map[string]string{Quay: "q"}),
		"swapped":       RelayKey(map[string]string{Quay: "h", Harbor: "q"}),
		"another split": RelayKey(map[string]string{Quay: "qh", Harbor: ""}),
	} {
		if bytes.Equal(both, other) {
			t.Errorf("%s: the same key", name)
		}
	}
	if again := RelayKey(map[string]string{Harbor: "h", Quay: "q", DockerHub: ""}); !bytes.Equal(both, again) {
		t.Error("the same secrets give another key")
	}
	if k := RelayKey(map[string]string{Quay: ""}); k != nil {
		t.Errorf("a key without secrets: %x", k)
	}
}

// The address a leader advertises must be an http(s) address and nothing
// more; only RelayPath is asked.
func TestRelayURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://10.0.0.5:8082":      "http://10.0.0.5:8082" + RelayPath,
		"https://[fd00::5]:8082/":   "https://[fd00::5]:8082" + RelayPath,
		"ftp://10.0.0.5":            "",
		"http://u:p@10.0.0.5:8082":  "",
		"http://10.0.0.5:8082/x":    "",
		"http://10.0.0.5:8082/?a=b": "",
		"10.0.0.5:8082":             "",
		"":                          "",
	} {
		got, err := relayURL(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("relayURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// Over a real connection: a leader that serves TLS with a certificate
// for another name (its public one, or self-signed) takes what is
// forwarded to its Pod address.
func TestRelayOverTLS(t *testing.T) {
	c := &fakeChecker{start: time.Now()}
	leader := NewDispatcher(c, WithRelay(relayTestKey, func() Leader { return Leader{} }))
	srv := httptest.NewTLSServer(leader.RelayHandler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go leader.Run(ctx)
	follower := NewDispatcher(&fakeChecker{}, WithRelay(relayTestKey, func() Leader { return Leader{Known: true, URL: srv.URL} }))
	go follower.Forward(ctx)
	if err := follower.Notify(Notification{Source: Quay, Repositories: []imageref.Reference{mustRef(t, "quay.io/a/x")}, Received: time.Now()}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 30*time.Second, "a check on the leader", func() bool {
		return len(c.recorded()) == 1
	})
}

// firstRead counts, in reading, the bodies a handler started to read.
type firstRead struct {
	io.ReadCloser
	reading *atomic.Int32
	once    sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { f.reading.Add(1) })
	return f.ReadCloser.Read(p)
}

// Senders who know no relay key, each trickling a message over a real
// connection, are refused before their body is read: they hold nothing
// that a replica's signed message waits for, which is taken meanwhile.
func TestRelaySendersWithoutKey(t *testing.T) {
	const senders = 4 // as many as there were places for unverified messages
	c := &fakeChecker{start: time.Now()}
	d := NewDispatcher(c, WithRelay(relayTestKey, func() Leader { return Leader{} }))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go d.Run(ctx)
	poll.True(t, 10*time.Second, "the leader running", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.running
	})
	var reading, answered atomic.Int32
	relayed := d.RelayHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A copy: the server decides from its own request's body what to
		// do with what the handler did not read.
		counted := r.Clone(r.Context())
		counted.Body = &firstRead{ReadCloser: r.Body, reading: &reading}
		relayed.ServeHTTP(w, counted)
		answered.Add(1)
	}))
	defer srv.Close()

	var conns []net.Conn
	for range senders {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n%s: sha256=%s\r\n%s: 1:%s\r\nContent-Length: %d\r\n\r\n{\"sent\":",
			RelayPath, relaySignatureHeader, strings.Repeat("00", 32), relayProofHeader, strings.Repeat("00", 32), relayMaxBody)
		conns = append(conns, conn)
	}
	poll.Until(t, 10*time.Second, "each sender without the key reading its body or answered", func() (bool, string) {
		r, a := reading.Load(), answered.Load()
		return r+a == senders, fmt.Sprintf("%d reading, %d answered", r, a)
	})
	unkeyedRead := reading.Load()

	sender := &relay{key: relayTestKey, client: relayClient()}
	now := time.Now()
	p := &pendingRepo{ref: mustRef(t, "quay.io/a/x"), sources: map[string]bool{Quay: true}, received: []time.Time{now}, last: now}
	if err := sender.post(t.Context(), srv.URL+RelayPath, []*pendingRepo{p}, now); err != nil {
		t.Fatalf("a signed message while %d senders without the key trickle theirs: %v", senders, err)
	}
	poll.True(t, 10*time.Second, "a check of the forwarded repository", func() bool { return len(c.recorded()) == 1 })
	for i, conn := range conns {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("sender %d: no answer: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("sender %d without the key: status %d, want 401", i, resp.StatusCode)
		}
	}
	if unkeyedRead != 0 {
		t.Errorf("%d bodies of senders without the key read", unkeyedRead)
	}
}

// Failed signatures of forwarded messages spend a budget of their own
// (429 past it), which a message signed with the relay key never spends.
func TestRelayFailureBudget(t *testing.T) {
	good := func() relayMessage {
		return relayMessage{Sent: time.Now(), Repositories: []relayRepository{
			{Name: "quay.io/a/x", Sources: []string{Quay}, Received: []time.Time{time.Now()}}}}
	}
	serve := func(d *Dispatcher, req *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		d.RelayHandler().ServeHTTP(rec, req)
		return rec
	}
	start := func(t *testing.T) *Dispatcher {
		d := NewDispatcher(&fakeChecker{start: time.Now()}, WithRelay(relayTestKey, func() Leader { return Leader{} }))
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		go d.Run(ctx)
		synctest.Wait()
		return d
	}

	t.Run("failed signatures", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := start(t)
			forged := func() int {
				return serve(d, relayRequest(t, relayTestKey, good(), "sha256="+strings.Repeat("00", 32))).Code
			}
			for i := range defaultFailureBurst {
				if code := forged(); code != http.StatusUnauthorized {
					t.Fatalf("forged message %d: status %d, want 401", i+1, code)
				}
			}
			rec := serve(d, relayRequest(t, relayTestKey, good(), "sha256="+strings.Repeat("00", 32)))
			if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
				t.Errorf("forged message past the budget: status %d, Retry-After %q; want 429 with 1", rec.Code, rec.Header().Get("Retry-After"))
			}
			if rec := serve(d, relayRequest(t, relayTestKey, good(), "")); rec.Code != http.StatusAccepted {
				t.Errorf("a signed message once the budget is spent: status %d, want 202", rec.Code)
			}
			time.Sleep(time.Second) // the budget's rate gives one more
			if code := forged(); code != http.StatusUnauthorized {
				t.Errorf("a second later: status %d, want 401", code)
			}
			if code := forged(); code != http.StatusTooManyRequests {
				t.Errorf("then: status %d, want 429", code)
			}
		})
	})
}
