package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/credentials"

	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// tagsPageSize is the n of a tag-list request: the most ECR accepts, and a
// size every registry we know pages at or honours.
const tagsPageSize = 1000

// maxTagsPage bounds one tag-list answer; a thousand tags take well under
// a hundred kilobytes.
const maxTagsPage = 32 << 20

// maxTagPages stops a registry whose links never end.
const maxTagPages = 10000

// Tags lists every tag of the repository of ref (its tag or digest are
// ignored), following the registry's pages to the end. creds is the
// image's own credential reference; the zero value means the registry's
// (see Client).
//
// Concurrent calls for the same repository with the same credential
// reference share one listing; calls with different references never do.
// Results are not kept beyond that: each call after the shared one
// finished lists again. The returned slice is the caller's own.
func (c *Client) Tags(ctx context.Context, ref imageref.Reference, creds credentials.Ref) ([]string, error) {
	t, err := c.target(ref.WithoutVersion(), creds)
	if err != nil {
		return nil, t.wrap("list tags", err)
	}
	note := func(shared bool) { c.metrics.cache(cacheTagsInflight, shared) }
	tags, err := c.tagCalls.Do(ctx, t.key(), note, func(ctx context.Context) ([]string, error) {
		var tags []string
		err := c.run(ctx, t, func(ctx context.Context, s *session) error {
			var err error
			tags, err = listTags(ctx, s)
			return err
		})
		return tags, err
	})
	if err != nil {
		return nil, t.wrap("list tags", err)
	}
	return slices.Clone(tags), nil
}

func listTags(ctx context.Context, s *session) ([]string, error) {
	next := s.base + "/v2/" + s.repo.RepositoryStr() + "/tags/list?n=" + strconv.Itoa(tagsPageSize)
	seen := make(map[string]bool)
	var all []string
	for page := 0; next != ""; page++ {
		if page >= maxTagPages || seen[next] {
			return nil, fmt.Errorf("the registry's tag list does not end (page %d repeats or exceeds %d pages)", page+1, maxTagPages)
		}
		seen[next] = true
		tags, link, err := listPage(ctx, s, next)
		if err != nil {
			return nil, err
		}
		all = append(all, tags...)
		next = link
	}
	if all == nil {
		all = []string{}
	}
	return all, nil
}

func listPage(ctx context.Context, s *session, pageURL string) (tags []string, next string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pageURL, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if err := ggcr.CheckError(resp, http.StatusOK); err != nil {
		return nil, "", err
	}
	var body struct {
		Tags []string `json:"tags"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxTagsPage)).Decode(&body); err != nil {
		return nil, "", fmt.Errorf("reading the tag list from %s: %w", req.URL.Redacted(), err)
	}
	next, err = nextPage(resp, s)
	if err != nil {
		return nil, "", err
	}
	return body.Tags, next, nil
}

// nextPage reads the Link header that points to the next page. A link to
// another host or scheme is refused: it would carry our token elsewhere, or
// make us fetch from wherever the registry likes.
func nextPage(resp *http.Response, s *session) (string, error) {
	for _, header := range resp.Header.Values("Link") {
		for _, link := range splitLinks(header) {
			target, params, ok := parseLink(link)
			if !ok || !linkIsNext(params) {
				continue
			}
			u, err := url.Parse(target)
			if err != nil {
				return "", fmt.Errorf("invalid next-page link %q: %w", target, err)
			}
			base := resp.Request.URL
			u = base.ResolveReference(u)
			if u.Host != s.host || !strings.EqualFold(u.Scheme, base.Scheme) {
				return "", fmt.Errorf("refusing the next-page link to %s://%s: not the registry %s", u.Scheme, u.Host, s.host)
			}
			return u.String(), nil
		}
	}
	return "", nil
}

// splitLinks splits a Link header at the commas between links, not those
// inside <...>.
func splitLinks(header string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range header {
		switch r {
		case '<':
			depth++
		case '>':
			depth = max(depth-1, 0)
		case ',':
			if depth == 0 {
				out = append(out, header[start:i])
				start = i + 1
			}
		}
	}
	return append(out, header[start:])
}

func parseLink(link string) (target string, params []string, ok bool) {
	link = strings.TrimSpace(link)
	if !strings.HasPrefix(link, "<") {
		return "", nil, false
	}
	end := strings.IndexByte(link, '>')
	if end < 0 {
		return "", nil, false
	}
	return link[1:end], strings.Split(link[end+1:], ";"), true
}

// linkIsNext accepts rel="next", and a link without rel: registries that
// send a single unlabelled link mean the next page.
func linkIsNext(params []string) bool {
	hasRel := false
	for _, p := range params {
		k, v, found := strings.Cut(strings.TrimSpace(p), "=")
		if !found || !strings.EqualFold(strings.TrimSpace(k), "rel") {
			continue
		}
		hasRel = true
		for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(v), `"`)) {
			if strings.EqualFold(rel, "next") {
				return true
			}
		}
	}
	return !hasRel
}
