package webhook

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// A replica that does not hold the leader Lease runs no checks, and
// registries do not deliver a notification again (Docker Hub, GitHub and
// others drop it), so such a replica relays what it accepts: it forwards
// the repositories a notification named, never the request with its secret,
// to the leader, signed with a key every replica derives from the webhook
// secrets (RelayKey); while no replica leads it keeps them, and checks
// them itself if it comes to lead.

// RelayPath is where a replica takes the notifications another forwards.
// It is outside Path, so that an Ingress that routes Path does not route
// it.
const RelayPath = "/relay"

// Bounds of the relay.
const (
	// relayMaxAge is how long a notification is kept while no replica
	// can take it (none leads, or the leader cannot be reached); then the
	// next cycle has to find the push.
	relayMaxAge = 5 * time.Minute
	// relayMaxSkew bounds the age of a forwarded message, by the clocks of
	// its sender and receiver: a replayed one is refused after that.
	relayMaxSkew = 2 * time.Minute
	// relayBatch bounds the repositories of one forwarded message, and
	// with maxReceived its size.
	relayBatch = 100
	// relayMaxBody bounds a forwarded message as read.
	relayMaxBody = 1 << 20
	// relayTimeout bounds one forwarding request.
	relayTimeout = 10 * time.Second
	// relayRetry and relayMaxRetry space the attempts to forward while
	// they fail; a new notification tries at once.
	relayRetry    = time.Second
	relayMaxRetry = 10 * time.Second
	// relayMaxProofs bounds the proofs remembered to refuse their reuse:
	// far more messages than replicas forward within relayMaxSkew.
	relayMaxProofs = 10000
)

// relaySignatureHeader carries the HMAC-SHA256 of a forwarded message's
// body, keyed with the relay key: "sha256=" and its hex.
const relaySignatureHeader = "X-Relay-Signature"

// relayProofHeader proves, before the body is read, that the sender knows
// the relay key: "<send time, Unix nanoseconds>:<hex HMAC-SHA256>" of that
// time and the X-Relay-Signature value (relayProof). A sender without the
// key is refused before its body takes anything; a proof is taken once.
const relayProofHeader = "X-Relay-Proof"

// Leader is what this replica knows of the replica that holds the leader
// Lease.
type Leader struct {
	// Known tells that another replica holds the Lease now.
	Known bool
	// URL is where that replica takes forwarded notifications (the scheme
	// and address of its webhook endpoint); empty when it advertises none.
	URL string
}

// errNoLeader: no replica to forward to, for now.
var errNoLeader = errors.New("no replica that leads is known")

// RelayKey derives the key that signs forwarded notifications from the
// webhook secrets, which every replica of an install reads from the same
// Secret: knowing it takes knowing every one of them, not one registry's.
// nil when there is no secret; then nothing is forwarded.
func RelayKey(secrets map[string]string) []byte {
	var material []byte
	for _, source := range Sources() {
		secret := secrets[source]
		if secret == "" {
			continue
		}
		for _, s := range []string{source, secret} {
			material = binary.BigEndian.AppendUint32(material, uint32(len(s)))
			material = append(material, s...)
		}
	}
	if len(material) == 0 {
		return nil
	}
	key, err := hkdf.Key(sha256.New, material, nil, "argocd-image-updater webhook relay v1", sha256.Size)
	if err != nil {
		panic(err) // only for a length SHA-256 cannot give
	}
	return key
}

// WithRelay lets a replica that does not lead accept notifications: it
// forwards them to the leader that leader names, signed with key, and
// keeps them while no replica leads (for relayMaxAge at most, and within
// the bound of pending repositories), to check them itself if it comes to
// lead. A leader known to advertise no address, or a nil key, leaves
// nowhere to forward to: then notifications are refused (ErrNotRunning) as
// without a relay. The same key authenticates what other replicas forward
// to this one (RelayHandler).
func WithRelay(key []byte, leader func() Leader) DispatcherOption {
	return func(d *Dispatcher) {
		d.relay = &relay{key: key, leader: leader, client: relayClient(), failures: failureLimit(0),
			proofs: map[string]time.Time{}}
	}
}

// relayClient sends forwarded notifications. The leader's address comes
// from the Lease, which only the controller's ServiceAccount writes, and
// the message carries no secret: its signature, not the channel, proves
// where it comes from, so the leader's certificate (the operator's, issued
// for the public name, or a self-signed one) is not verified against its
// Pod address. No proxy: the leader is inside the cluster.
func relayClient() *http.Client {
	return &http.Client{
		Timeout: relayTimeout,
		Transport: &http.Transport{
			Proxy:               nil,
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type relay struct {
	key      []byte
	leader   func() Leader
	client   *http.Client
	failures *rate.Limiter // failed authentications of forwarded messages
	// proofs are the relayProofHeader values taken, until their send time
	// is relayMaxSkew past, so that a copy of a request is refused before
	// its body is read.
	proofsMu sync.Mutex
	proofs   map[string]time.Time
}

// admit tells whether a notification can be accepted while this replica
// does not lead: with somewhere to forward it, or while no replica leads.
func (r *relay) admit() error {
	if r == nil {
		return ErrNotRunning
	}
	if l := r.leader(); l.Known && (l.URL == "" || r.key == nil) {
		return ErrNotRunning
	}
	return nil
}

// relayMessage is a forwarded message: the repositories pending on the
// sender, with the sources that named them and when they were received.
type relayMessage struct {
	Sent         time.Time         `json:"sent"`
	Repositories []relayRepository `json:"repositories"`
}

type relayRepository struct {
	Name     string      `json:"name"`
	Sources  []string    `json:"sources"`
	Tags     []string    `json:"tags,omitempty"`
	Received []time.Time `json:"received"`
}

// Forward hands what this replica accepts while it does not lead to the
// replica that does, until ctx ends; it returns at once without a relay.
// What cannot be forwarded now is kept and tried again, with backoff, and
// at once when another notification comes; what was kept for relayMaxAge
// is dropped, with a warning.
func (d *Dispatcher) Forward(ctx context.Context) {
	if d.relay == nil {
		return
	}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := relayRetry
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.forward:
		case <-retry.C:
		}
		batch := d.takeForwarding()
		if len(batch) == 0 {
			continue
		}
		l := d.relay.leader()
		sent, err := d.relay.send(ctx, l, batch, d.now())
		if sent > 0 {
			d.logger.Info("push notifications forwarded to the leader", "repositories", pendingNames(batch[:sent]), "leader", l.URL)
		}
		if err == nil {
			if failing {
				d.logger.Info("forwarding push notifications to the leader works again", "leader", l.URL)
			}
			failing, backoff = false, relayRetry
			continue
		}
		d.putBack(batch[sent:])
		wait := relayRetry
		if !errors.Is(err, errNoLeader) {
			if !failing {
				d.logger.Warn("forwarding push notifications to the leader failed; keeping them and trying again", "leader", l.URL,
					"repositories", len(batch)-sent, "error", err)
			}
			failing, wait = true, backoff
			backoff = min(2*backoff, relayMaxRetry)
		}
		if ctx.Err() == nil {
			retry.Reset(wait)
		}
	}
}

// takeForwarding takes what is pending while this replica does not lead,
// dropping what was kept too long; nil while it leads (Run takes it).
func (d *Dispatcher) takeForwarding() []*pendingRepo {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return nil
	}
	var expired []*pendingRepo
	cutoff := d.now().Add(-relayMaxAge)
	for name, p := range d.pending {
		if p.last.Before(cutoff) {
			expired = append(expired, p)
			delete(d.pending, name)
		}
	}
	if len(expired) > 0 {
		d.logger.Warn("push notifications dropped: no replica took them in time; the next cycle checks their repositories",
			"repositories", pendingNames(expired), "kept", relayMaxAge)
	}
	batch := make([]*pendingRepo, 0, len(d.pending))
	for _, p := range d.pending {
		batch = append(batch, p)
	}
	d.pending = map[string]*pendingRepo{}
	sort.Slice(batch, func(i, j int) bool { return batch[i].ref.Name() < batch[j].ref.Name() })
	return batch
}

// putBack keeps again what could not be forwarded, merged with what
// arrived meanwhile; if this replica leads now, Run checks it.
func (d *Dispatcher) putBack(batch []*pendingRepo) {
	if len(batch) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, p := range batch {
		if !d.merge(p) {
			d.logger.Warn("push notifications dropped: too many repositories are waiting", "repositories", pendingNames(batch[i:]))
			break
		}
	}
	// Forward tries again when its timer says; Run at once.
	if d.running {
		d.signal()
	}
}

// send forwards batch to l, relayBatch repositories a request, and says
// how many of them (from the first) were taken.
func (r *relay) send(ctx context.Context, l Leader, batch []*pendingRepo, now time.Time) (int, error) {
	if !l.Known || l.URL == "" || r.key == nil {
		return 0, errNoLeader
	}
	target, err := relayURL(l.URL)
	if err != nil {
		return 0, err
	}
	sent := 0
	for sent < len(batch) {
		chunk := batch[sent:min(len(batch), sent+relayBatch)]
		if err := r.post(ctx, target, chunk, now); err != nil {
			return sent, err
		}
		sent += len(chunk)
	}
	return sent, nil
}

// relayURL is where the leader that advertises base takes forwarded
// notifications; base must be a scheme and an address, nothing more.
func relayURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("the leader advertises %q, not an http(s) address", base)
	}
	return u.Scheme + "://" + u.Host + RelayPath, nil
}

func (r *relay) post(ctx context.Context, target string, chunk []*pendingRepo, now time.Time) error {
	msg := relayMessage{Sent: now.UTC()}
	for _, p := range chunk {
		rr := relayRepository{Name: p.ref.Name(), Tags: p.tags, Received: p.received}
		for s := range p.sources {
			rr.Sources = append(rr.Sources, s)
		}
		sort.Strings(rr.Sources)
		msg.Repositories = append(msg.Repositories, rr)
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	sig := "sha256=" + hex.EncodeToString(relayMAC(r.key, body))
	req.Header.Set(relaySignatureHeader, sig)
	req.Header.Set(relayProofHeader, relayProof(r.key, now, sig))
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("the leader answered %s: %s", resp.Status, strings.TrimSpace(string(text)))
	}
	return nil
}

func relayMAC(key, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return mac.Sum(nil)
}

// relayProof is the relayProofHeader value of a message sent at sent with
// the X-Relay-Signature value sig. What it covers starts with a byte no
// JSON body starts with, so it never is the signature of a message.
func relayProof(key []byte, sent time.Time, sig string) string {
	t := strconv.FormatInt(sent.UnixNano(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("\x00relay proof\x00" + t + "\x00" + sig))
	return t + ":" + hex.EncodeToString(mac.Sum(nil))
}

// checkProof tells why req's relayProofHeader does not prove the relay
// key, or takes the proof and returns "": forged, for another signature,
// sent more than relayMaxSkew from now, or taken before.
func (r *relay) checkProof(req *http.Request, now time.Time) string {
	proof := req.Header.Get(relayProofHeader)
	t, _, _ := strings.Cut(proof, ":")
	nanos, err := strconv.ParseInt(t, 10, 64)
	if err != nil || !hmac.Equal([]byte(proof), []byte(relayProof(r.key, time.Unix(0, nanos), req.Header.Get(relaySignatureHeader)))) {
		return relayProofHeader + " is missing or does not prove the relay key (do the replicas have the same webhook secrets?)"
	}
	sent := time.Unix(0, nanos)
	if age := now.Sub(sent); age > relayMaxSkew || age < -relayMaxSkew {
		return fmt.Sprintf("the message was sent at %s, more than %s from this replica's clock", sent.UTC().Format(time.RFC3339), relayMaxSkew)
	}
	r.proofsMu.Lock()
	defer r.proofsMu.Unlock()
	if _, ok := r.proofs[proof]; ok {
		return "the message was taken before: " + relayProofHeader + " proves one message once"
	}
	if len(r.proofs) >= relayMaxProofs {
		// Only holders of the key add proofs: those past the skew, which
		// prove nothing any more, are forgotten, or else the oldest.
		oldest := ""
		for p, exp := range r.proofs {
			if !exp.After(now) {
				delete(r.proofs, p)
			} else if oldest == "" || exp.Before(r.proofs[oldest]) {
				oldest = p
			}
		}
		if len(r.proofs) >= relayMaxProofs {
			delete(r.proofs, oldest)
		}
	}
	r.proofs[proof] = sent.Add(relayMaxSkew)
	return ""
}

// RelayHandler takes the notifications other replicas forward (POST
// RelayPath), checked with the relay key: 202 when they are queued for
// this replica's checks, 503 while it does not lead (the sender keeps them
// and tries again). It never forwards them further. Without a relay key it
// answers 404.
func (d *Dispatcher) RelayHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.relay == nil || d.relay.key == nil || r.URL.Path != RelayPath {
			http.NotFound(w, r)
			return
		}
		d.relay.serve(d, w, r)
	})
}

func (r *relay) serve(d *Dispatcher, w http.ResponseWriter, req *http.Request) {
	log := d.logger.With("remote", req.RemoteAddr)
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "only POST is accepted", http.StatusMethodNotAllowed)
		return
	}
	now := d.now()
	unauthorized := func(msg string) {
		if !r.failures.AllowN(now, 1) {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter(r.failures, now)))
			http.Error(w, "too many failed authentications", http.StatusTooManyRequests)
			return
		}
		log.Warn("forwarded notification refused", "status", http.StatusUnauthorized, "message", msg)
		http.Error(w, msg, http.StatusUnauthorized)
	}
	// Before the body is read, so that senders who know no key hold
	// nothing a replica's forwarded message waits for.
	if msg := r.checkProof(req, now); msg != "" {
		unauthorized(msg)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, relayMaxBody))
	if err != nil {
		http.Error(w, fmt.Sprintf("reading the message: %v", err), http.StatusRequestEntityTooLarge)
		return
	}
	sig, ok := strings.CutPrefix(req.Header.Get(relaySignatureHeader), "sha256=")
	got, err := hex.DecodeString(sig)
	if !ok || err != nil || !hmac.Equal(got, relayMAC(r.key, body)) {
		unauthorized(relaySignatureHeader + " is missing or is not the signature of the message with the relay key (do the replicas have the same webhook secrets?)")
		return
	}
	var msg relayMessage
	if err := decode(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if age := now.Sub(msg.Sent); age > relayMaxSkew || age < -relayMaxSkew {
		unauthorized(fmt.Sprintf("the message was sent at %s, more than %s from this replica's clock", msg.Sent.Format(time.RFC3339), relayMaxSkew))
		return
	}
	batch, err := readRelayed(msg, now)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := d.accept(batch); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	log.Debug("forwarded push notifications accepted", "repositories", pendingNames(batch))
	w.WriteHeader(http.StatusAccepted)
}

// errNotLeading answers a forwarded message that reaches a replica that
// does not lead, or no longer does.
var errNotLeading = errors.New("this replica does not lead; forward to the one that does")

// accept queues what another replica forwarded, only while this one leads:
// a forwarded notification is never forwarded again.
func (d *Dispatcher) accept(batch []*pendingRepo) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		return errNotLeading
	}
	defer d.signal()
	for _, p := range batch {
		if !d.merge(p) {
			return ErrBusy
		}
	}
	return nil
}

// readRelayed checks a forwarded message as strictly as a registry's
// payload: repository names, known sources, bounded lists. Receipt times
// are kept no later than now.
func readRelayed(msg relayMessage, now time.Time) ([]*pendingRepo, error) {
	if len(msg.Repositories) > relayBatch {
		return nil, fmt.Errorf("more than %d repositories in one message", relayBatch)
	}
	batch := make([]*pendingRepo, 0, len(msg.Repositories))
	for i, rr := range msg.Repositories {
		ref, err := imageref.Parse(rr.Name)
		if err != nil || ref.Name() != rr.Name {
			return nil, fmt.Errorf("repositories[%d].name: %q is not a repository name", i, rr.Name)
		}
		if len(rr.Sources) == 0 || len(rr.Sources) > len(Sources()) {
			return nil, fmt.Errorf("repositories[%d].sources: between 1 and %d sources", i, len(Sources()))
		}
		p := &pendingRepo{ref: ref, sources: map[string]bool{}}
		for _, s := range rr.Sources {
			if !slices.Contains(Sources(), s) {
				return nil, fmt.Errorf("repositories[%d].sources: unknown source %q", i, s)
			}
			p.sources[s] = true
		}
		if len(rr.Tags) > maxTags {
			return nil, fmt.Errorf("repositories[%d].tags: more than %d tags", i, maxTags)
		}
		for _, t := range rr.Tags {
			if !imageref.ValidTag(t) {
				return nil, fmt.Errorf("repositories[%d].tags: %q is not a tag", i, t)
			}
		}
		p.addTags(rr.Tags...)
		if len(rr.Received) > maxReceived {
			return nil, fmt.Errorf("repositories[%d].received: more than %d times", i, maxReceived)
		}
		for _, t := range rr.Received {
			if t.After(now) {
				t = now
			}
			p.received = append(p.received, t)
			if t.After(p.last) {
				p.last = t
			}
		}
		batch = append(batch, p)
	}
	return batch, nil
}

// maxLoggedNames bounds the repository names one log line lists.
const maxLoggedNames = 20

// pendingNames are the names of batch's repositories, for the log: the
// first maxLoggedNames, and how many more.
func pendingNames(batch []*pendingRepo) []string {
	out := make([]string, 0, min(len(batch), maxLoggedNames+1))
	for _, p := range batch[:min(len(batch), maxLoggedNames)] {
		out = append(out, p.ref.Name())
	}
	if more := len(batch) - maxLoggedNames; more > 0 {
		out = append(out, fmt.Sprintf("and %d more", more))
	}
	return out
}
