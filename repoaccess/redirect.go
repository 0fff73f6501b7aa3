package repoaccess

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
)

// CheckRedirect lets the HTTP requests of a repository (git's, a Helm
// index's) follow a redirect only on the repository's own host: go-git
// sends every later request of a session, with the credentials, to
// wherever /info/refs was redirected, and a tenant could aim at an
// internal host. Another path on the same host and port is followed (a
// renamed repository), and so is a move from http to https on the same
// host name, whose certificate must then be valid for that name; https
// to http is not.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	from, to := via[0].URL, req.URL
	sameHost := repourl.SameHost(from.Hostname(), to.Hostname())
	samePort := from.Scheme == to.Scheme && portOf(from) == portOf(to)
	upgrade := from.Scheme == "http" && to.Scheme == "https"
	if sameHost && (samePort || upgrade) {
		return nil
	}
	return fmt.Errorf("refusing to follow a redirect from %s to %s://%s: requests and their credentials go only to the repository's own host", from.Host, to.Scheme, to.Host)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
