package transport

import "net/http"

// NewSchemePin sends requests for host with scheme. This matters because
// ggcr probes https before http for hosts it guesses are local, and falls
// back to http for them: with the scheme pinned, an http:// endpoint costs
// no failing TLS attempt and an https:// one is never downgraded. Requests
// for other hosts (a token server) pass unchanged.
func NewSchemePin(next http.RoundTripper, scheme, host string) http.RoundTripper {
	return &schemePin{next: next, scheme: scheme, host: host}
}

type schemePin struct {
	next         http.RoundTripper
	scheme, host string
}

func (t *schemePin) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host || req.URL.Scheme == t.scheme {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.URL.Scheme = t.scheme
	return t.next.RoundTrip(r)
}

// NewUserAgent sets the User-Agent of every request to ua; an empty ua
// leaves requests as they are.
func NewUserAgent(next http.RoundTripper, ua string) http.RoundTripper {
	return &userAgent{next: next, ua: ua}
}

type userAgent struct {
	next http.RoundTripper
	ua   string
}

func (t *userAgent) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.ua == "" || req.Header.Get("User-Agent") == t.ua {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("User-Agent", t.ua)
	return t.next.RoundTrip(r)
}
