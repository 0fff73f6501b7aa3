package webhook

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // Nexus signs its webhooks with HMAC-SHA1
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// Path is where the handler answers.
const Path = "/webhook"

// DefaultMaxBodySize bounds a payload: the largest registry notifications
// (GitHub's package events) are tens of kilobytes.
const DefaultMaxBodySize = 1 << 20

// readTimeout bounds the time to send a request body, so that slow senders
// cannot hold connections.
const readTimeout = 30 * time.Second

// Notification is what an accepted request says: these repositories got a
// push, of the tag each carries when the payload named one.
type Notification struct {
	Source       string
	Repositories []imageref.Reference
	Received     time.Time
}

// Notifier takes accepted notifications; an error means they cannot be
// taken now, and the sender is told to retry (503).
type Notifier interface {
	Notify(Notification) error
}

// Config is what the endpoint accepts.
type Config struct {
	// Secrets are the shared secrets by source name (see Sources). A
	// source without one is refused unless AllowUnauthenticated.
	Secrets map[string]string
	// OIDC verifies the OIDC tokens of Pub/Sub push subscriptions: for
	// ArtifactRegistry only. A source with a verifier requires a valid
	// token, and its secret as well when it has one.
	OIDC map[string]*OIDCVerifier
	// AllowUnauthenticated accepts requests of sources that have no
	// secret without authentication.
	AllowUnauthenticated bool
	// RateLimit is the number of authenticated requests per hour accepted
	// from each source; 0 means no limit. Failed authentications are
	// counted apart (see failureLimit), so that forged requests cannot use
	// up a registry's budget.
	RateLimit int
	// MaxBodySize bounds a payload; 0 means DefaultMaxBodySize.
	MaxBodySize int64
	// Generic maps the fields of the generic source's payloads; the
	// source is known only with one.
	Generic *GenericMapping
}

// Handler serves the webhook endpoint.
type Handler struct {
	notifier    Notifier
	formats     map[string]format // the sources known, with Generic when mapped
	secrets     map[string]string
	oidc        map[string]*OIDCVerifier
	open        bool
	maxBody     int64
	limiters    map[string]*rate.Limiter // authenticated requests, by source
	failures    map[string]*rate.Limiter // failed authentications, by source
	metrics     *Metrics
	logger      *slog.Logger
	now         func() time.Time
	readTimeout time.Duration
	// grace is slowSenderGrace; tests lengthen it.
	grace time.Duration
	// unverified holds a place for each payload read before its sender
	// is authenticated (the signed types, whose signature covers the
	// payload): at most MaxUnverifiedReads at once, so that senders who
	// know no secret cannot make the controller hold more than that many
	// bodies, and each given up to a waiting request after placeHold.
	unverified *places
}

// MaxUnverifiedReads is how many payloads of signed types are read at once
// before their signature is checked. Each holds at most the body size
// limit (1 MiB by default).
const MaxUnverifiedReads = 8

// Bounds of the places of Handler.unverified. The senders of such payloads
// cannot be told apart before their payload is read, by address either
// (behind an Ingress or a load balancer they all have its address): what
// tells a registry's delivery is that it is read at once.
const (
	// placeHold is how long a payload keeps its place while a request
	// waits for one: a registry's delivery, tens of kilobytes, is read
	// well within it.
	placeHold = time.Second
	// placeWait is how long a request waits for a place, in turn, before
	// it is answered 503.
	placeWait = 3 * time.Second
)

// Option configures a Handler.
type Option func(*Handler)

// WithMetrics records metrics; nil records nothing.
func WithMetrics(m *Metrics) Option { return func(h *Handler) { h.metrics = m } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.logger = l } }

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// NewHandler returns the endpoint's handler; n receives what it accepts.
func NewHandler(n Notifier, cfg Config, opts ...Option) (*Handler, error) {
	if cfg.RateLimit < 0 {
		return nil, fmt.Errorf("rate limit %d: must not be negative", cfg.RateLimit)
	}
	if cfg.MaxBodySize < 0 {
		return nil, fmt.Errorf("body size limit %d: must not be negative", cfg.MaxBodySize)
	}
	h := &Handler{
		notifier:    n,
		formats:     maps.Clone(formats),
		secrets:     map[string]string{},
		oidc:        map[string]*OIDCVerifier{},
		open:        cfg.AllowUnauthenticated,
		maxBody:     cfg.MaxBodySize,
		unverified:  newPlaces(MaxUnverifiedReads, placeHold),
		limiters:    map[string]*rate.Limiter{},
		failures:    map[string]*rate.Limiter{},
		logger:      slog.New(slog.DiscardHandler),
		now:         time.Now,
		readTimeout: readTimeout,
		grace:       slowSenderGrace,
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBodySize
	}
	if cfg.Generic != nil {
		f, err := genericFormat(*cfg.Generic)
		if err != nil {
			return nil, err
		}
		h.formats[Generic] = f
	}
	for source, secret := range cfg.Secrets {
		if _, ok := h.formats[source]; !ok {
			if source == Generic && secret != "" {
				return nil, fmt.Errorf("a secret for the generic source, but no mapping of its payload's repository field")
			}
			if source != Generic {
				return nil, fmt.Errorf("secret for unknown source %q (known: %s)", source, strings.Join(Sources(), ", "))
			}
		}
		if secret != "" {
			h.secrets[source] = secret
		}
	}
	for source, v := range cfg.OIDC {
		if source != ArtifactRegistry {
			return nil, fmt.Errorf("OIDC tokens are checked for %s only, not %q", ArtifactRegistry, source)
		}
		if v != nil {
			h.oidc[source] = v
		}
	}
	for _, source := range Sources() {
		limit := rate.Inf
		if cfg.RateLimit > 0 {
			limit = rate.Limit(float64(cfg.RateLimit) / 3600)
		}
		h.limiters[source] = rate.NewLimiter(limit, max(cfg.RateLimit, 1))
		h.failures[source] = failureLimit(cfg.RateLimit)
	}
	for _, opt := range opts {
		opt(h)
	}
	return h, nil
}

// Enabled are the sources whose requests can be accepted: those with a
// secret, and all of them when unauthenticated sources are allowed.
func (h *Handler) Enabled() []string {
	var out []string
	for _, s := range h.sources() {
		if h.authenticated(s) || h.open {
			out = append(out, s)
		}
	}
	return out
}

// sources are the sources this handler knows, in the order of Sources.
func (h *Handler) sources() []string {
	var out []string
	for _, s := range Sources() {
		if _, ok := h.formats[s]; ok {
			out = append(out, s)
		}
	}
	return out
}

// authenticated tells whether requests of source must prove something.
func (h *Handler) authenticated(source string) bool {
	return h.secrets[source] != "" || h.oidc[source] != nil
}

// Unauthenticated are the sources accepted without authentication.
func (h *Handler) Unauthenticated() []string {
	var out []string
	if !h.open {
		return nil
	}
	for _, s := range h.sources() {
		if !h.authenticated(s) {
			out = append(out, s)
		}
	}
	return out
}

// response is the JSON body of a 2xx answer: what will be checked.
type response struct {
	Source       string   `json:"source"`
	Repositories []string `json:"repositories"`
}

// ServeHTTP answers one notification through its steps: which registry
// sent it, its authentication (what the headers carry, then the payload's
// signature), the payload, and the checks it asks for. Each step that
// refuses the request has answered it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q, ok := h.admit(w, r)
	if !ok {
		return
	}
	release, ok := q.authenticateHeaders()
	if !ok {
		return
	}
	defer release()
	body, ok := q.readBody()
	if !ok || !q.authenticateSignature(body) {
		return
	}
	q.dispatch(body)
}

// webhookRequest is one request ServeHTTP is answering.
type webhookRequest struct {
	h        *Handler
	w        http.ResponseWriter
	r        *http.Request
	received time.Time
	rc       *http.ResponseController
	// place: the payload is read before the sender is proven, in one of
	// the places of Handler.unverified.
	place  *place
	source string // as the request names it; known
	format format
	// authenticate tells that the source has a secret or an OIDC issuer.
	authenticate bool
	log          *slog.Logger
}

// admit reads which registry sent the request and refuses what no
// registry sends.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request) (*webhookRequest, bool) {
	received := h.now()
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return nil, false
	}
	source := r.URL.Query().Get("type")
	if source == "" {
		source = r.Header.Get("X-Registry-Type")
	}
	f, known := h.formats[source]
	label := source
	if !known {
		label = unknownSource
	}
	h.metrics.request(label)
	// The query may hold a secret: log the path alone.
	q := &webhookRequest{h: h, w: w, r: r, received: received, rc: http.NewResponseController(w), source: label, format: f,
		log: h.logger.With("source", label, "remote", r.RemoteAddr)}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		q.reject(http.StatusMethodNotAllowed, RejectMethod, "only POST is accepted")
		return nil, false
	}
	if !known {
		q.reject(http.StatusBadRequest, RejectUnknownSource,
			fmt.Sprintf("unknown registry type %q: give ?type= or the X-Registry-Type header, one of %s", source, strings.Join(h.sources(), ", ")))
		return nil, false
	}
	q.authenticate = h.authenticated(source)
	if !q.authenticate && !h.open {
		q.reject(http.StatusForbidden, RejectNoSecret,
			fmt.Sprintf("webhooks of type %s are not enabled: the controller has no secret for them", source))
		return nil, false
	}
	return q, true
}

func (q *webhookRequest) reject(status int, reason, msg string) {
	q.h.metrics.reject(q.source, reason)
	level := slog.LevelWarn
	if reason == RejectRateLimited || reason == RejectMethod {
		level = slog.LevelDebug
	}
	q.log.Log(q.r.Context(), level, "webhook request rejected", "status", status, "reason", reason, "message", msg)
	http.Error(q.w, msg, status)
}

// limited spends one request of lim's budget, refusing the request when
// it is spent. Each budget is spent only by the requests it is for: a
// forged request spends the failure budget, never the registry's.
func (q *webhookRequest) limited(lim *rate.Limiter, what string) bool {
	if lim.AllowN(q.received, 1) {
		return false
	}
	q.w.Header().Set("Retry-After", strconv.Itoa(retryAfter(lim, q.received)))
	q.reject(http.StatusTooManyRequests, RejectRateLimited, fmt.Sprintf("too many %s from %s: the limit is %g per hour", what, q.source, perHour(lim)))
	return true
}

func (q *webhookRequest) unauthorized(msg string) {
	if !q.limited(q.h.failures[q.source], "failed authentications") {
		q.reject(http.StatusUnauthorized, RejectUnauthorized, msg)
	}
}

// authenticateHeaders checks the secret or OIDC token the headers or query
// carry, and the registry's request budget; a payload whose signature is
// the proof is read only within the bound of payloads being checked, which
// release frees.
func (q *webhookRequest) authenticateHeaders() (release func(), ok bool) {
	h, source := q.h, q.source
	secret, verifier := h.secrets[source], h.oidc[source]
	if q.authenticate && !q.format.auth.signed() {
		if secret != "" && !h.authentic(q.format.auth, q.r, nil, secret) {
			q.unauthorized(fmt.Sprintf("%s does not carry the secret for %s", q.format.auth, source))
			return nil, false
		}
		if verifier != nil {
			if err := verifier.Verify(q.r.Context(), q.r.Header.Get("Authorization")); err != nil {
				q.unauthorized(fmt.Sprintf("the Authorization header does not carry a valid OIDC token for %s: %v", source, err))
				return nil, false
			}
		}
	}
	if !q.format.auth.signed() || !q.authenticate {
		return func() {}, !q.limited(h.limiters[source], "requests")
	}
	// Every sender, whatever its address, waits in turn; a place held
	// past placeHold goes to the first that waits.
	q.place = h.unverified.take(q.r.Context(), q.rc, placeWait)
	if q.place == nil {
		q.w.Header().Set("Retry-After", "1")
		q.reject(http.StatusServiceUnavailable, RejectUnavailable,
			fmt.Sprintf("too many %s payloads are being read before their signature is checked; retry", source))
		return nil, false
	}
	return func() { h.unverified.release(q.place) }, true
}

// readBody reads the payload within the size and time bounds.
func (q *webhookRequest) readBody() ([]byte, bool) {
	if q.h.readTimeout > 0 {
		_ = q.rc.SetReadDeadline(q.received.Add(q.h.readTimeout))
	}
	var body io.Reader = http.MaxBytesReader(q.w, q.r.Body, q.h.maxBody)
	if q.place != nil {
		// A payload read before its sender is proven holds a place that
		// genuine deliveries need: it must keep up minSenderRate after
		// the grace, counted from when it got its place, or the read is
		// cut.
		body = &paceReader{r: body, place: q.place, start: q.place.heldSince(), grace: q.h.grace, limit: q.received.Add(q.h.readTimeout)}
	}
	data, err := io.ReadAll(body)
	if q.place != nil && q.place.done() && err != nil {
		q.w.Header().Set("Retry-After", "1")
		q.reject(http.StatusServiceUnavailable, RejectUnavailable,
			fmt.Sprintf("the %s payload was not read within %s while other requests waited for its place; retry", q.source, placeHold))
		return nil, false
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			q.reject(http.StatusRequestEntityTooLarge, RejectTooLarge, fmt.Sprintf("the payload exceeds %d bytes", q.h.maxBody))
			return nil, false
		}
		q.reject(http.StatusBadRequest, RejectMalformed, fmt.Sprintf("reading the payload: %v", err))
		return nil, false
	}
	return data, true
}

// A payload read before its sender is proven must arrive at
// minSenderRate once slowSenderGrace has passed: even while no request
// waits for its place, a sender trickling bytes holds it for about
// slowSenderGrace, not readTimeout.
const (
	slowSenderGrace = 2 * time.Second
	minSenderRate   = 32 << 10 // bytes per second
)

// paceReader moves the connection's read deadline as bytes arrive, so
// that each read must bring the body up to minSenderRate since start,
// after grace.
type paceReader struct {
	r     io.Reader
	place *place
	start time.Time
	grace time.Duration
	limit time.Time
	n     int64
}

func (p *paceReader) Read(b []byte) (int, error) {
	deadline := p.start.Add(p.grace + time.Duration((p.n+int64(len(b)))*int64(time.Second)/minSenderRate))
	if deadline.After(p.limit) {
		deadline = p.limit
	}
	if err := p.place.setReadDeadline(deadline); errors.Is(err, errGivenUp) {
		return 0, err
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	return n, err
}

// authenticateSignature checks a payload's signature, for the sources
// that sign theirs, then spends the registry's request budget.
func (q *webhookRequest) authenticateSignature(body []byte) bool {
	if !q.authenticate || !q.format.auth.signed() {
		return true
	}
	if !q.h.authentic(q.format.auth, q.r, body, q.h.secrets[q.source]) {
		q.unauthorized(fmt.Sprintf("%s is missing or is not the signature of the payload with the secret for %s", q.format.auth, q.source))
		return false
	}
	return !q.limited(q.h.limiters[q.source], "requests")
}

// dispatch parses the payload and hands the repositories it names to the
// notifier: 202 when checks will run, 200 when it names none.
func (q *webhookRequest) dispatch(body []byte) {
	repos, err := q.format.parse(q.r, body)
	if err != nil {
		q.reject(http.StatusBadRequest, RejectMalformed, fmt.Sprintf("malformed %s payload: %v", q.source, err))
		return
	}
	names := make([]string, len(repos))
	for i, ref := range repos {
		names[i] = ref.Name()
	}
	status := http.StatusOK
	if len(repos) > 0 {
		if err := q.h.notifier.Notify(Notification{Source: q.source, Repositories: repos, Received: q.received}); err != nil {
			q.reject(http.StatusServiceUnavailable, RejectUnavailable, err.Error())
			return
		}
		status = http.StatusAccepted
		q.log.Info("push notification accepted", "repositories", names)
	} else {
		q.log.Debug("notification names no push to check")
	}
	q.w.Header().Set("Content-Type", "application/json")
	q.w.WriteHeader(status)
	_ = json.NewEncoder(q.w).Encode(response{Source: q.source, Repositories: names})
}

// authentic checks the request's proof of the secret in constant time.
func (h *Handler) authentic(m authMethod, r *http.Request, body []byte, secret string) bool {
	switch m {
	case authQuery:
		return equal(r.URL.Query().Get("secret"), secret)
	case authSignature:
		sig, ok := strings.CutPrefix(r.Header.Get("X-Hub-Signature-256"), "sha256=")
		if !ok {
			return false
		}
		got, err := hex.DecodeString(sig)
		if err != nil {
			return false
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		return hmac.Equal(got, mac.Sum(nil))
	case authNexus:
		got, err := hex.DecodeString(r.Header.Get("X-Nexus-Webhook-Signature"))
		if err != nil || len(got) == 0 {
			return false
		}
		mac := hmac.New(sha1.New, []byte(secret))
		mac.Write(body)
		return hmac.Equal(got, mac.Sum(nil))
	case authJFrog:
		token := equal(r.Header.Get("X-JFrog-Event-Auth"), secret)
		header := h.authentic(authHeader, r, body, secret)
		return token || header
	case authHeaderOrQuery:
		// Every proof is compared, so that the time taken does not
		// tell which one was tried.
		header := h.authentic(authHeader, r, body, secret)
		custom := equal(r.Header.Get("X-Webhook-Secret"), secret)
		query := h.authentic(authQuery, r, body, secret)
		return header || custom || query
	default:
		v := r.Header.Get("Authorization")
		plain, bearer := equal(v, secret), equal(v, "Bearer "+secret)
		return plain || bearer
	}
}

// equal compares in time independent of the contents and of the lengths,
// by comparing digests.
func equal(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// defaultFailureLimit and defaultFailureBurst bound failed authentications
// per source when requests are not limited: one a second, 60 at once. A
// guessing sender is slowed down and the log is not flooded, while
// registries that know the secret are not affected.
const (
	defaultFailureLimit = rate.Limit(1)
	defaultFailureBurst = 60
)

// failureLimit is the budget of failed authentications of one source:
// the same as that of the accepted requests, or the default without one.
func failureLimit(perHour int) *rate.Limiter {
	if perHour <= 0 {
		return rate.NewLimiter(defaultFailureLimit, defaultFailureBurst)
	}
	return rate.NewLimiter(rate.Limit(float64(perHour)/3600), perHour)
}

// perHour is lim's rate in requests per hour.
func perHour(lim *rate.Limiter) float64 {
	return math.Round(float64(lim.Limit()) * 3600)
}

// retryAfter is the whole seconds until lim grants a request again.
func retryAfter(lim *rate.Limiter, now time.Time) int {
	tokens := lim.TokensAt(now)
	if lim.Limit() <= 0 {
		return 3600
	}
	wait := (1 - tokens) / float64(lim.Limit())
	return max(1, int(math.Ceil(wait)))
}

// sortedNames are the names of repos, sorted.
func sortedNames(repos []imageref.Reference) []string {
	out := make([]string, len(repos))
	for i, r := range repos {
		out[i] = r.Name()
	}
	sort.Strings(out)
	return out
}
