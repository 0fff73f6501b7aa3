// Package pushtime reads when a registry says each tag of a repository was
// pushed, from the registry's own API where it has one: Artifact Registry,
// Azure Container Registry, Docker Hub, Harbor, GitHub's packages (GHCR)
// and Quay. (ECR's DescribeImages goes through the AWS SDK, in
// registry/credentials/ecr.) A push time is kept by the registry, so the
// tag's author cannot backdate it as they can an image's "created".
//
// The listing reads the API's pages newest first where it can, and stops
// once every tag asked was found, within MaxPages of at most MaxAnswer
// bytes each. A page's link to another host or scheme than the API's is
// refused.
package pushtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/registry/config"
)

// MaxPages bounds the pages read for one query.
const MaxPages = 20

// MaxAnswer bounds the bytes read of one page.
const MaxAnswer = 4 << 20

// Query asks the push times of some tags of one repository.
type Query struct {
	API  config.PushTimes
	Base string // the API's base URL, without a trailing '/'
	// Registry is the registry host, as in the image reference, and
	// Repository the path under it.
	Registry, Repository string
	// Username and Password are the registry's credentials; both empty
	// for anonymous access.
	Username, Password string
	Tags               []string
}

// ErrUnsupported is matched (errors.Is) by the error of an API this package
// does not read (ECR, none).
var ErrUnsupported = errors.New("push times not read by this package")

// List gives when each tag of q.Tags was pushed, as the API says, through
// hc (whose transport authenticates ACR's requests; the other APIs'
// credentials are sent here). A tag the API does not list is missing from
// the map.
func List(ctx context.Context, hc *http.Client, q Query) (map[string]time.Time, error) {
	var l lister
	switch q.API {
	case config.PushTimesArtifactRegistry:
		l = artifactRegistry
	case config.PushTimesACR:
		l = acr
	case config.PushTimesDockerHub:
		l = dockerHub
	case config.PushTimesHarbor:
		l = harbor
	case config.PushTimesGHCR:
		l = ghcr
	case config.PushTimesQuay:
		l = quay
	default:
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, q.API)
	}
	base, err := url.Parse(q.Base)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%s push times: base URL %q is not an absolute http(s) URL", q.API, q.Base)
	}
	s := &search{hc: hc, q: q, base: base, want: map[string]bool{}, found: map[string]time.Time{}}
	for _, t := range q.Tags {
		s.want[t] = true
	}
	if len(s.want) == 0 {
		return s.found, nil
	}
	if err := l(ctx, s); err != nil {
		return nil, fmt.Errorf("%s push times of %s/%s: %w", q.API, q.Registry, q.Repository, err)
	}
	return s.found, nil
}

// lister reads an API's pages into s until s.done.
type lister func(ctx context.Context, s *search) error

// search is one query's state: what is still wanted, what was found.
type search struct {
	hc    *http.Client
	q     Query
	base  *url.URL
	want  map[string]bool
	found map[string]time.Time
	pages int
}

// see records a tag's push time, the latest when a tag is listed twice.
func (s *search) see(tag string, at time.Time) {
	if !s.want[tag] || at.IsZero() {
		return
	}
	if prev, ok := s.found[tag]; !ok || at.After(prev) {
		s.found[tag] = at
	}
}

// done tells whether every tag asked was found.
func (s *search) done() bool { return len(s.found) == len(s.want) }

// page counts a page read; false once MaxPages are.
func (s *search) page() bool {
	s.pages++
	return s.pages <= MaxPages
}

// url is the API's base with rawPath (escaped as the API wants it) and
// query.
func (s *search) url(rawPath string, query url.Values) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s.q.Base, "/") + rawPath)
	if err != nil {
		return nil, err
	}
	u.RawQuery = query.Encode()
	return u, nil
}

// next resolves a next-page link against the page's URL; nil for another
// host or scheme than the API's.
func (s *search) next(page *url.URL, link string) *url.URL {
	ref, err := url.Parse(link)
	if err != nil {
		return nil
	}
	u := page.ResolveReference(ref)
	if u.Scheme != s.base.Scheme || !strings.EqualFold(u.Host, s.base.Host) {
		return nil
	}
	return u
}

// get reads u into v as JSON, with header set; a status other than 200 is
// an error quoting a bounded excerpt of the answer.
func (s *search) get(ctx context.Context, method string, u *url.URL, header http.Header, body io.Reader, v any) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := bounded.ReadAll(resp.Body, MaxAnswer, string(s.q.API)+" answer")
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Status: resp.StatusCode, Message: bounded.Excerpt(string(data), 200)}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("the answer to %s is not the JSON expected: %v", u.Path, err)
	}
	return resp.Header, nil
}

// StatusError is an answer other than 200.
type StatusError struct {
	Status  int
	Message string // an excerpt of the answer
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// linkNext is the target of a Link header's rel="next", "" for none.
func linkNext(h http.Header) string {
	for _, v := range h.Values("Link") {
		for part := range strings.SplitSeq(v, ",") {
			target, params, ok := strings.Cut(part, ";")
			if !ok {
				continue
			}
			target = strings.TrimSpace(target)
			if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for p := range strings.SplitSeq(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "rel") && strings.Trim(val, `"`) == "next" {
					return target[1 : len(target)-1]
				}
			}
		}
	}
	return ""
}

// follow reads pages from first, each through read, following the Link
// header's next page until s is done, there is none, or MaxPages are read.
func (s *search) follow(ctx context.Context, first *url.URL, header http.Header, read func(data []byte) error) error {
	for u := first; u != nil && !s.done(); {
		if !s.page() {
			return nil
		}
		var raw json.RawMessage
		h, err := s.get(ctx, http.MethodGet, u, header, nil, &raw)
		if err != nil {
			return err
		}
		if err := read(raw); err != nil {
			return err
		}
		link := linkNext(h)
		if link == "" {
			return nil
		}
		next := s.next(u, link)
		if next == nil {
			return fmt.Errorf("the next page's link leads off %s", s.base.Host)
		}
		u = next
	}
	return nil
}

func bearer(token string) http.Header {
	if token == "" {
		return http.Header{}
	}
	return http.Header{"Authorization": {"Bearer " + token}}
}
