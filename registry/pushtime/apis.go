package pushtime

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// artifactRegistry lists the Docker images of the image's Artifact
// Registry repository (<location>-docker.pkg.dev/<project>/<repository>/
// <image>), which the API gives for the whole repository: only those whose
// uri is the image's own count. An image's updateTime is when a tag last
// moved to or from it, so a tag's time is never earlier than its push.
// The registry's access token (user oauth2accesstoken) is the API's.
func artifactRegistry(ctx context.Context, s *search) error {
	location, ok := strings.CutSuffix(strings.ToLower(s.q.Registry), "-docker.pkg.dev")
	parts := strings.SplitN(s.q.Repository, "/", 3)
	if !ok || len(parts) < 3 {
		return fmt.Errorf("%s/%s is not an Artifact Registry image (<location>-docker.pkg.dev/<project>/<repository>/<image>)", s.q.Registry, s.q.Repository)
	}
	token := ""
	if s.q.Username == "oauth2accesstoken" {
		token = s.q.Password
	}
	prefix := strings.ToLower(s.q.Registry) + "/" + s.q.Repository + "@"
	query := url.Values{"pageSize": {"500"}}
	for s.page() {
		u, err := s.url("/v1/projects/"+url.PathEscape(parts[0])+"/locations/"+url.PathEscape(location)+"/repositories/"+url.PathEscape(parts[1])+"/dockerImages", query)
		if err != nil {
			return err
		}
		var page struct {
			DockerImages []struct {
				URI        string    `json:"uri"`
				Tags       []string  `json:"tags"`
				UploadTime time.Time `json:"uploadTime"`
				UpdateTime time.Time `json:"updateTime"`
			} `json:"dockerImages"`
			NextPageToken string `json:"nextPageToken"`
		}
		if _, err := s.get(ctx, http.MethodGet, u, bearer(token), nil, &page); err != nil {
			return err
		}
		for _, img := range page.DockerImages {
			if !strings.HasPrefix(img.URI, prefix) {
				continue
			}
			at := img.UploadTime
			if img.UpdateTime.After(at) {
				at = img.UpdateTime
			}
			for _, t := range img.Tags {
				s.see(t, at)
			}
		}
		if page.NextPageToken == "" || s.done() {
			return nil
		}
		query.Set("pageToken", page.NextPageToken)
	}
	return nil
}

// acr lists /acr/v1/<repository>/_tags on the registry's own host, whose
// authentication (the registry's challenge, a token with metadata_read)
// hc's transport answers. lastUpdateTime is when the tag last moved.
func acr(ctx context.Context, s *search) error {
	first, err := s.url("/acr/v1/"+escapePath(s.q.Repository)+"/_tags", url.Values{"n": {"100"}, "orderby": {"timedesc"}})
	if err != nil {
		return err
	}
	return s.follow(ctx, first, http.Header{}, func(data []byte) error {
		var page struct {
			Tags []struct {
				Name           string    `json:"name"`
				CreatedTime    time.Time `json:"createdTime"`
				LastUpdateTime time.Time `json:"lastUpdateTime"`
			} `json:"tags"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return fmt.Errorf("the tag list is not the JSON expected: %v", err)
		}
		for _, t := range page.Tags {
			at := t.CreatedTime
			if t.LastUpdateTime.After(at) {
				at = t.LastUpdateTime
			}
			s.see(t.Name, at)
		}
		return nil
	})
}

// dockerHub lists hub.docker.com's tags of namespace/name, newest pushed
// first; with credentials, after trading them for an access token
// (POST /v2/auth/token), which private repositories need.
func dockerHub(ctx context.Context, s *search) error {
	ns, name, ok := strings.Cut(s.q.Repository, "/")
	if !ok || strings.Contains(name, "/") {
		return fmt.Errorf("%s is not a Docker Hub repository (<namespace>/<name>)", s.q.Repository)
	}
	header := http.Header{}
	if s.q.Username != "" && s.q.Password != "" {
		u, err := s.url("/v2/auth/token", nil)
		if err != nil {
			return err
		}
		body, _ := json.Marshal(map[string]string{"identifier": s.q.Username, "secret": s.q.Password})
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		if _, err := s.get(ctx, http.MethodPost, u, http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(body), &tok); err != nil {
			return fmt.Errorf("signing in: %w", err)
		}
		if tok.AccessToken == "" {
			return fmt.Errorf("signing in: the answer holds no access_token")
		}
		header = bearer(tok.AccessToken)
	}
	u, err := s.url("/v2/namespaces/"+url.PathEscape(ns)+"/repositories/"+url.PathEscape(name)+"/tags", url.Values{"page_size": {"100"}, "ordering": {"last_updated"}})
	if err != nil {
		return err
	}
	for u != nil && !s.done() && s.page() {
		var page struct {
			Next    *string `json:"next"`
			Results []struct {
				Name          string    `json:"name"`
				TagLastPushed time.Time `json:"tag_last_pushed"`
				LastUpdated   time.Time `json:"last_updated"`
			} `json:"results"`
		}
		if _, err := s.get(ctx, http.MethodGet, u, header, nil, &page); err != nil {
			return err
		}
		for _, t := range page.Results {
			at := t.TagLastPushed
			if t.LastUpdated.After(at) {
				at = t.LastUpdated
			}
			s.see(t.Name, at)
		}
		if page.Next == nil || *page.Next == "" {
			return nil
		}
		if u = s.next(u, *page.Next); u == nil {
			return fmt.Errorf("the next page's link leads off %s", s.base.Host)
		}
	}
	return nil
}

// harbor lists the artifacts of <project>/<repository> with their tags,
// whose push_time is the tag's own. The repository's name is escaped
// twice in the path, as Harbor's API wants.
func harbor(ctx context.Context, s *search) error {
	project, name, ok := strings.Cut(s.q.Repository, "/")
	if !ok {
		return fmt.Errorf("%s is not a Harbor repository (<project>/<repository>)", s.q.Repository)
	}
	header := http.Header{}
	if s.q.Username != "" || s.q.Password != "" {
		header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(s.q.Username+":"+s.q.Password)))
	}
	first, err := s.url("/api/v2.0/projects/"+url.PathEscape(project)+"/repositories/"+url.PathEscape(url.PathEscape(name))+"/artifacts",
		url.Values{"with_tag": {"true"}, "page": {"1"}, "page_size": {"100"}, "sort": {"-push_time"}})
	if err != nil {
		return err
	}
	return s.follow(ctx, first, header, func(data []byte) error {
		var page []struct {
			PushTime time.Time `json:"push_time"`
			Tags     []struct {
				Name     string    `json:"name"`
				PushTime time.Time `json:"push_time"`
			} `json:"tags"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return fmt.Errorf("the artifact list is not the JSON expected: %v", err)
		}
		for _, a := range page {
			for _, t := range a.Tags {
				s.see(t.Name, t.PushTime)
			}
		}
		return nil
	})
}

// ghcr lists the versions of GitHub's container package <owner>/<package>,
// newest first, as the user's and, when GitHub knows no such user's
// package, as the organisation's. A version is one image: its created_at
// is when it was pushed, and a tag pushed again is on the new version. The
// registry's password (a token with read:packages) is the API's.
func ghcr(ctx context.Context, s *search) error {
	owner, pkg, ok := strings.Cut(s.q.Repository, "/")
	if !ok {
		return fmt.Errorf("%s is not a GitHub package (<owner>/<package>)", s.q.Repository)
	}
	header := bearer(s.q.Password)
	header.Set("Accept", "application/vnd.github+json")
	header.Set("X-GitHub-Api-Version", "2022-11-28")
	read := func(data []byte) error {
		var page []struct {
			CreatedAt time.Time `json:"created_at"`
			Metadata  struct {
				Container struct {
					Tags []string `json:"tags"`
				} `json:"container"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return fmt.Errorf("the version list is not the JSON expected: %v", err)
		}
		for _, v := range page {
			for _, t := range v.Metadata.Container.Tags {
				s.see(t, v.CreatedAt)
			}
		}
		return nil
	}
	var err error
	for _, kind := range []string{"users", "orgs"} {
		var first *url.URL
		first, err = s.url("/"+kind+"/"+url.PathEscape(owner)+"/packages/container/"+url.PathEscape(pkg)+"/versions", url.Values{"per_page": {"100"}})
		if err != nil {
			return err
		}
		err = s.follow(ctx, first, header, read)
		var se *StatusError
		if !errors.As(err, &se) || se.Status != http.StatusNotFound {
			return err
		}
	}
	return err
}

// quay lists the active tags of <namespace>/<repository>, newest first;
// start_ts is when the tag got its current image. Quay's API takes OAuth
// tokens, which log in to the registry as the user $oauthtoken: those are
// sent, robot accounts' are not (their repositories must be public).
func quay(ctx context.Context, s *search) error {
	if !strings.Contains(s.q.Repository, "/") {
		return fmt.Errorf("%s is not a Quay repository (<namespace>/<repository>)", s.q.Repository)
	}
	header := http.Header{}
	if s.q.Username == "$oauthtoken" {
		header = bearer(s.q.Password)
	}
	query := url.Values{"onlyActiveTags": {"true"}, "limit": {"100"}}
	for p := 1; s.page(); p++ {
		query.Set("page", strconv.Itoa(p))
		u, err := s.url("/api/v1/repository/"+escapePath(s.q.Repository)+"/tag/", query)
		if err != nil {
			return err
		}
		var page struct {
			Tags []struct {
				Name    string `json:"name"`
				StartTS int64  `json:"start_ts"`
			} `json:"tags"`
			HasAdditional bool `json:"has_additional"`
		}
		if _, err := s.get(ctx, http.MethodGet, u, header, nil, &page); err != nil {
			return err
		}
		for _, t := range page.Tags {
			if t.StartTS > 0 {
				s.see(t.Name, time.Unix(t.StartTS, 0))
			}
		}
		if !page.HasAdditional || s.done() {
			return nil
		}
	}
	return nil
}

// escapePath escapes each segment of a repository path, keeping its '/'.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return strings.Join(segs, "/")
}
