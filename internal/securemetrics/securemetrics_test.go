package securemetrics

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// reviewServer answers TokenReviews and SubjectAccessReviews as the API
// server does: the token "scraper" is the user prometheus, allowed; every
// other token is not authenticated. It counts the reviews of each token.
func reviewServer(t *testing.T) (kubernetes.Interface, *tokenReviews) {
	reviews := &tokenReviews{n: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			_ = json.NewDecoder(r.Body).Decode(&tr)
			reviews.add(tr.Spec.Token)
			tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: tr.Spec.Token == "scraper", User: authenticationv1.UserInfo{Username: "prometheus"}}
			_ = json.NewEncoder(w).Encode(tr)
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			_ = json.NewDecoder(r.Body).Decode(&sar)
			sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
			sar.Status.Allowed = sar.Spec.User == "prometheus"
			_ = json.NewEncoder(w).Encode(sar)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	// The server speaks JSON only; client-go's clientset asks for protobuf
	// unless told.
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000,
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}}), reviews
}

// tokenReviews counts the TokenReviews of each token.
type tokenReviews struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *tokenReviews) add(token string) { r.mu.Lock(); r.n[token]++; r.mu.Unlock() }

func (r *tokenReviews) of(token string) int { r.mu.Lock(); defer r.mu.Unlock(); return r.n[token] }

// scrape sends a request with token through h and says its status.
func scrape(h http.Handler, token string) int {
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

func TestKnownScraperNotStarvedByUnknownTokens(t *testing.T) {
	cs, _ := reviewServer(t)
	g := NewGuard(cs)
	now := time.Now()
	g.now = func() time.Time { return now }
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	scrape := func(token string) int { return scrape(h, token) }
	if code := scrape("scraper"); code != http.StatusOK {
		t.Fatalf("first scrape: %d", code)
	}
	// Forged tokens use up the budget of unknown tokens.
	refused := 0
	for i := range 200 {
		if scrape(fmt.Sprintf("forged-%d", i)) == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("forged tokens were never refused for the rate")
	}
	// The scraper's review expired meanwhile.
	now = now.Add(2 * reviewTTL)
	for i := range 3 {
		if code := scrape("scraper"); code != http.StatusOK {
			t.Fatalf("scrape %d after the flood: %d, want 200", i, code)
		}
	}
}

// The reviews remembered are bounded by their count, however many tokens
// are sent; refusals are forgotten first, so that the scraper's review
// stays remembered and is not asked for again.
func TestRememberedReviewsAreBounded(t *testing.T) {
	cs, reviews := reviewServer(t)
	g := NewGuard(cs)
	// Every token reviewed: the bound on what is remembered, not the
	// review rate, is what this test checks.
	g.limit = rate.NewLimiter(rate.Inf, 0)
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	if code := scrape(h, "scraper"); code != http.StatusOK {
		t.Fatalf("first scrape: %d", code)
	}
	for i := range 2*maxReviews + 10 {
		if code := scrape(h, fmt.Sprintf("forged-%d", i)); code != http.StatusForbidden {
			t.Fatalf("forged token %d: status %d, want 403", i, code)
		}
		g.mu.Lock()
		n := len(g.reviews)
		g.mu.Unlock()
		if n > maxReviews {
			t.Fatalf("%d reviews remembered after %d tokens, want at most %d", n, i+2, maxReviews)
		}
	}
	if code := scrape(h, "scraper"); code != http.StatusOK || reviews.of("scraper") != 1 {
		t.Errorf("the scraper after the forged tokens: status %d, reviewed %d times; want 200 from its remembered review", code, reviews.of("scraper"))
	}
}
