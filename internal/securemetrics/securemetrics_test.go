package securemetrics

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// reviewServer answers TokenReviews and SubjectAccessReviews as the API
// server does: the token "scraper" is the user prometheus, allowed; every
// other token is not authenticated.
func reviewServer(t *testing.T) kubernetes.Interface {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			_ = json.NewDecoder(r.Body).Decode(&tr)
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
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000})
}

func TestKnownScraperNotStarvedByUnknownTokens(t *testing.T) {
	g := NewGuard(reviewServer(t))
	now := time.Now()
	g.now = func() time.Time { return now }
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	scrape := func(token string) int {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
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
