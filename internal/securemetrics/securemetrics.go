// Package securemetrics serves the metrics endpoint as Argo CD Image
// Updater v1.x does with --metrics-secure: over HTTPS (a self-signed
// certificate), to callers whose bearer token the API server authenticates
// (TokenReview) and authorizes for GET on the path (SubjectAccessReview),
// as controller-runtime's authentication and authorization filter does.
package securemetrics

import (
	"context"
	"crypto/sha256"
	"errors"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Reviews are remembered this long, so that a scrape every few seconds
// costs the API server two requests a minute, not two a scrape; a revoked
// grant takes effect within it.
const reviewTTL = time.Minute

// maxReviews bounds the remembered reviews: forged tokens cannot fill
// memory.
const maxReviews = 256

// Tokens not remembered are reviewed at this rate at most, past a burst:
// anyone who reaches the port can send tokens, and each costs the API
// server two requests; a scraper's token is remembered, so it is rarely
// asked again.
const (
	reviewRate  = rate.Limit(1)
	reviewBurst = 10
)

// A token the API server allowed before is reviewed again, once its review
// expires, within a budget of its own: unknown tokens, which anyone who
// reaches the port can send, must not use up the reviews of the scraper
// that is known to be good.
const (
	knownRate  = rate.Limit(1)
	knownBurst = 10
)

// errTooManyReviews answers a token past the review rate.
var errTooManyReviews = errors.New("too many tokens to review")

// Guard lets through requests the API server authenticates and
// authorizes.
type Guard struct {
	cs  kubernetes.Interface
	now func() time.Time

	limit *rate.Limiter // unknown tokens
	known *rate.Limiter // tokens allowed before

	mu      sync.Mutex
	reviews map[[sha256.Size]byte]review
}

type review struct {
	allowed bool
	at      time.Time
}

// NewGuard reviews tokens through cs, which needs create on tokenreviews
// and subjectaccessreviews.
func NewGuard(cs kubernetes.Interface) *Guard {
	return &Guard{cs: cs, now: time.Now, limit: rate.NewLimiter(reviewRate, reviewBurst),
		known: rate.NewLimiter(knownRate, knownBurst), reviews: map[[sha256.Size]byte]review{}}
}

// Wrap answers 401 without a bearer token, 403 for one not allowed GET on
// the request's path, 429 past the review rate, 500 when the API server
// could not be asked.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		allowed, err := g.allowed(r.Context(), token, r.URL.Path)
		switch {
		case errors.Is(err, errTooManyReviews):
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many tokens to review: retry later", http.StatusTooManyRequests)
		case err != nil:
			http.Error(w, "the token could not be reviewed", http.StatusInternalServerError)
		case !allowed:
			http.Error(w, "forbidden", http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func (g *Guard) allowed(ctx context.Context, token, path string) (bool, error) {
	// Tokens are remembered by their hash alone.
	key := sha256.Sum256([]byte(path + "\x00" + token))
	g.mu.Lock()
	rv, ok := g.reviews[key]
	g.mu.Unlock()
	if ok && g.now().Sub(rv.at) < reviewTTL {
		return rv.allowed, nil
	}
	budget := g.limit
	if ok && rv.allowed {
		budget = g.known
	}
	if !budget.Allow() {
		return false, errTooManyReviews
	}
	allowed, err := g.review(ctx, token, path)
	if err != nil {
		return false, err
	}
	g.mu.Lock()
	if len(g.reviews) >= maxReviews {
		// Refusals go first, so that forged tokens do not push out a
		// scraper's.
		maps.DeleteFunc(g.reviews, func(_ [sha256.Size]byte, r review) bool { return !r.allowed })
		if len(g.reviews) >= maxReviews {
			clear(g.reviews)
		}
	}
	g.reviews[key] = review{allowed: allowed, at: g.now()}
	g.mu.Unlock()
	return allowed, nil
}

func (g *Guard) review(ctx context.Context, token, path string) (bool, error) {
	tr, err := g.cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	if !tr.Status.Authenticated {
		return false, nil
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := g.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}
