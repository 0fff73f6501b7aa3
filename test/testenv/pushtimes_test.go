package testenv

import (
	"cmp"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// ptCall is one request to a PushTimes stand-in and what it must answer.
type ptCall struct {
	name       string
	method     string // GET unless set
	path       string // under the stand-in's URL, or an absolute URL
	header     map[string]string
	body       string
	status     int
	want       []string          // in the body
	wantHeader map[string]string // exactly
	problem    string            // in the one Problem it adds; "" for none
}

// ptClient does not follow redirects, so that they can be checked.
var ptClient = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func ptDo(t *testing.T, p *PushTimes, c ptCall) (http.Header, []byte) {
	t.Helper()
	u := c.path
	if !strings.HasPrefix(u, "http") {
		u = p.URL + u
	}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(cmp.Or(c.method, http.MethodGet), u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	before := len(p.Problems())
	resp, err := ptClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if c.status != 0 && resp.StatusCode != c.status {
		t.Errorf("%s %s: status %d, want %d; body %s", req.Method, c.path, resp.StatusCode, c.status, got)
	}
	for _, w := range c.want {
		if !strings.Contains(string(got), w) {
			t.Errorf("%s %s: body %s, want it to contain %s", req.Method, c.path, got, w)
		}
	}
	for k, v := range c.wantHeader {
		if resp.Header.Get(k) != v {
			t.Errorf("%s %s: %s %q, want %q", req.Method, c.path, k, resp.Header.Get(k), v)
		}
	}
	problems := p.Problems()[before:]
	switch {
	case c.problem == "" && len(problems) != 0:
		t.Errorf("%s %s: problems %q, want none", req.Method, c.path, problems)
	case c.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0], c.problem)):
		t.Errorf("%s %s: problems %q, want one about %q", req.Method, c.path, problems, c.problem)
	}
	return resp.Header, got
}

func ptRun(t *testing.T, p *PushTimes, calls []ptCall) {
	t.Helper()
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) { ptDo(t, p, c) })
	}
}

func ptJSON[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v
}

// with returns h and the pairs kv added.
func with(h map[string]string, kv ...string) map[string]string {
	out := maps.Clone(h)
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestPushTimes(t *testing.T) {
	t0 := time.Date(2023, 11, 14, 22, 13, 20, 123456789, time.UTC)
	hour := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	// Each repository gets 1.0.0, 1.1.0 and 2.0.0 an hour apart, then
	// 1.0.0 again, which leaves the first image (a) untagged.
	type images struct{ a, b, c, d string }
	push := func(p *PushTimes, repo string) images {
		p.Push(repo, "1.0.0", hour(0))
		p.Push(repo, "1.1.0", hour(1))
		p.Push(repo, "2.0.0", hour(2))
		p.Push(repo, "1.0.0", hour(3))
		return images{ptDigest(repo, "1.0.0", hour(0)), ptDigest(repo, "1.1.0", hour(1)), ptDigest(repo, "2.0.0", hour(2)), ptDigest(repo, "1.0.0", hour(3))}
	}

	t.Run("ecr", func(t *testing.T) {
		t.Parallel()
		p := StartPushTimes(t, "ecr", "123456789012.dkr.ecr.eu-west-1.amazonaws.com")
		p.Credentials("AKIAEXAMPLE", "secret")
		img := push(p, "team/app")
		signed := func(key, region string) map[string]string {
			return map[string]string{
				"X-Amz-Target": ecrDescribeImagesTarget, "Content-Type": "application/x-amz-json-1.1", "X-Amz-Date": "20231114T221320Z",
				"Authorization": "AWS4-HMAC-SHA256 Credential=" + key + "/20231114/" + region + "/ecr/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + strings.Repeat("ab", 32),
			}
		}
		ok := signed("AKIAEXAMPLE", "eu-west-1")
		ptRun(t, p, []ptCall{
			{name: "unsigned", method: "POST", path: "/", body: `{"repositoryName":"team/app"}`,
				header: map[string]string{"X-Amz-Target": ecrDescribeImagesTarget, "Content-Type": "application/x-amz-json-1.1"},
				status: 400, want: []string{`"__type":"MissingAuthenticationTokenException"`}},
			{name: "unknown key", method: "POST", path: "/", body: `{"repositoryName":"team/app"}`, header: signed("AKIAOTHER", "eu-west-1"),
				status: 400, want: []string{`{"__type":"UnrecognizedClientException","message":"The security token included in the request is invalid."}`}},
			{name: "other region", method: "POST", path: "/", body: `{"repositoryName":"team/app"}`, header: signed("AKIAEXAMPLE", "us-east-1"),
				status: 400, want: []string{"InvalidSignatureException"}, problem: "region"},
			{name: "no signature", method: "POST", path: "/", body: `{"repositoryName":"team/app"}`,
				header: with(ok, "Authorization", "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20231114/eu-west-1/ecr/aws4_request, SignedHeaders=host;x-amz-date"),
				status: 400, want: []string{"IncompleteSignatureException"}, problem: "'Signature'"},
			{name: "other operation", method: "POST", path: "/", body: `{"repositoryName":"team/app"}`,
				header: with(ok, "X-Amz-Target", "AmazonEC2ContainerRegistry_V20150921.ListImages"),
				status: 400, want: []string{"UnknownOperationException"}, problem: "X-Amz-Target"},
			{name: "JSON content type", method: "POST", path: "/", body: `{"repositoryName":"team/app"}`,
				header: with(ok, "Content-Type", "application/json"), status: 400, problem: "Content-Type"},
			{name: "GET", path: "/", header: ok, status: 404, problem: "POST /"},
			{name: "unknown repository", method: "POST", path: "/", body: `{"repositoryName":"team/gone"}`, header: ok, status: 400,
				want: []string{`{"__type":"RepositoryNotFoundException","message":"The repository with name 'team/gone' does not exist in the registry with id '123456789012'"}`}},
			{name: "other registry", method: "POST", path: "/", body: `{"registryId":"210987654321","repositoryName":"team/app"}`, header: ok,
				status: 400, want: []string{"AccessDeniedException"}},
			{name: "maxResults 0", method: "POST", path: "/", body: `{"repositoryName":"team/app","maxResults":0}`, header: ok,
				status: 400, want: []string{"InvalidParameterException"}, problem: "maxResults"},
			{name: "forged nextToken", method: "POST", path: "/", body: `{"repositoryName":"team/app","nextToken":"forged"}`, header: ok,
				status: 400, want: []string{"InvalidParameterException"}, problem: "nextToken"},
			{name: "misspelt field", method: "POST", path: "/", body: `{"repositoryName":"team/app","maxResult":1}`, header: ok,
				status: 200, problem: "maxResult"},
			{name: "by tag", method: "POST", path: "/", body: `{"repositoryName":"team/app","imageIds":[{"imageTag":"1.0.0"}]}`, header: ok,
				status: 200, want: []string{`"imageDigest":"` + img.d + `","imageTags":["1.0.0"]`}},
			{name: "unknown tag", method: "POST", path: "/", body: `{"repositoryName":"team/app","imageIds":[{"imageTag":"9"}]}`, header: ok,
				status: 400, want: []string{"ImageNotFoundException"}},
		})

		type answer struct {
			ImageDetails []struct {
				RegistryID     string      `json:"registryId"`
				RepositoryName string      `json:"repositoryName"`
				ImageDigest    string      `json:"imageDigest"`
				ImageTags      []string    `json:"imageTags"`
				ImagePushedAt  json.Number `json:"imagePushedAt"`
			} `json:"imageDetails"`
			NextToken string `json:"nextToken"`
		}
		var got []string
		body := `{"registryId":"123456789012","repositoryName":"team/app","filter":{"tagStatus":"TAGGED"},"maxResults":2}`
		for pages := 1; ; pages++ {
			h, raw := ptDo(t, p, ptCall{method: "POST", path: "/", body: body, header: ok, status: 200})
			if ct := h.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
				t.Errorf("Content-Type %q", ct)
			}
			a := ptJSON[answer](t, raw)
			for _, d := range a.ImageDetails {
				if d.RegistryID != "123456789012" || d.RepositoryName != "team/app" {
					t.Errorf("detail %+v", d)
				}
				got = append(got, d.ImageDigest+" "+strings.Join(d.ImageTags, ",")+" "+d.ImagePushedAt.String())
			}
			if a.NextToken == "" {
				if pages != 2 {
					t.Errorf("%d pages, want 2", pages)
				}
				break
			}
			if pages == 1 && len(a.ImageDetails) != 2 {
				t.Errorf("first page of %d, want 2", len(a.ImageDetails))
			}
			body = `{"repositoryName":"team/app","filter":{"tagStatus":"TAGGED"},"maxResults":2,"nextToken":"` + a.NextToken + `"}`
		}
		want := []string{img.b + " 1.1.0 1700003600.123", img.c + " 2.0.0 1700007200.123", img.d + " 1.0.0 1700010800.123"}
		if !slices.Equal(got, want) {
			t.Errorf("tagged images\n%q, want\n%q", got, want)
		}
		_, raw := ptDo(t, p, ptCall{method: "POST", path: "/", body: `{"repositoryName":"team/app"}`, header: ok, status: 200})
		if a := ptJSON[answer](t, raw); len(a.ImageDetails) != 4 || a.ImageDetails[0].ImageDigest != img.a || a.ImageDetails[0].ImageTags != nil ||
			a.ImageDetails[0].ImagePushedAt.String() != "1700000000.123" || a.NextToken != "" {
			t.Errorf("all images: %s", raw)
		}
	})

	t.Run("artifact-registry", func(t *testing.T) {
		t.Parallel()
		p := StartPushTimes(t, "artifact-registry", "europe-west1-docker.pkg.dev")
		p.Credentials("oauth2accesstoken", "ya29.token")
		img := push(p, "proj/repo/team/app")
		p.Push("proj/repo/other", "v1", hour(4))
		p.Push("proj/elsewhere/app", "v1", hour(5))
		const base = "/v1/projects/proj/locations/europe-west1/repositories/repo/dockerImages"
		auth := map[string]string{"Authorization": "Bearer ya29.token"}
		ptRun(t, p, []ptCall{
			{name: "no token", path: base, status: 401, want: []string{`"code":401`, `"status":"UNAUTHENTICATED"`, "Request had invalid authentication credentials"},
				wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="https://accounts.google.com/"`}},
			{name: "wrong token", path: base, header: map[string]string{"Authorization": "Bearer ya29.other"}, status: 401, want: []string{"UNAUTHENTICATED"}},
			{name: "unknown repository", path: "/v1/projects/proj/locations/europe-west1/repositories/gone/dockerImages", header: auth,
				status: 404, want: []string{`"code":404`, `"status":"NOT_FOUND"`}},
			{name: "other location", path: "/v1/projects/proj/locations/us/repositories/repo/dockerImages", header: auth, status: 404},
			{name: "unknown parameter", path: base + "?page_size=2", header: auth, status: 400, want: []string{"INVALID_ARGUMENT"}, problem: "page_size"},
			{name: "negative page size", path: base + "?pageSize=-1", header: auth, status: 400, problem: "page_size"},
			{name: "forged page token", path: base + "?pageToken=forged", header: auth, status: 400, problem: "page token"},
			{name: "unknown path", path: "/v1/projects/proj/locations/europe-west1/repositories/repo/packages", header: auth, status: 404, problem: "dockerImages"},
		})

		type image struct {
			Name       string   `json:"name"`
			URI        string   `json:"uri"`
			Tags       []string `json:"tags"`
			UploadTime string   `json:"uploadTime"`
			UpdateTime string   `json:"updateTime"`
			MediaType  string   `json:"mediaType"`
		}
		type answer struct {
			DockerImages  []image `json:"dockerImages"`
			NextPageToken string  `json:"nextPageToken"`
		}
		var all []image
		path := base + "?pageSize=2"
		for pages := 1; ; pages++ {
			_, raw := ptDo(t, p, ptCall{path: path, header: auth, status: 200})
			a := ptJSON[answer](t, raw)
			all = append(all, a.DockerImages...)
			if a.NextPageToken == "" {
				if pages != 3 {
					t.Errorf("%d pages, want 3", pages)
				}
				break
			}
			path = base + "?pageSize=2&pageToken=" + a.NextPageToken
		}
		byName := map[string]image{}
		for _, i := range all {
			byName[i.Name] = i
		}
		const prefix = "projects/proj/locations/europe-west1/repositories/repo/dockerImages/"
		if len(all) != 5 || len(byName) != 5 {
			t.Fatalf("listed %d images, want 5: %+v", len(all), all)
		}
		d := byName[prefix+"team%2Fapp@"+img.d]
		if d.URI != "europe-west1-docker.pkg.dev/proj/repo/team/app@"+img.d || !slices.Equal(d.Tags, []string{"1.0.0"}) ||
			d.UploadTime != "2023-11-15T01:13:20.123456789Z" || d.UpdateTime != d.UploadTime || d.MediaType != "application/vnd.oci.image.index.v1+json" {
			t.Errorf("1.0.0: %+v", d)
		}
		a := byName[prefix+"team%2Fapp@"+img.a]
		if a.Tags != nil || a.UploadTime != "2023-11-14T22:13:20.123456789Z" || a.UpdateTime != "2023-11-15T01:13:20.123456789Z" {
			t.Errorf("the image 1.0.0 left: %+v", a)
		}
		if _, ok := byName[prefix+"other@"+ptDigest("proj/repo/other", "v1", hour(4))]; !ok {
			t.Errorf("no image of proj/repo/other in %q", slices.Sorted(maps.Keys(byName)))
		}
		_, raw := ptDo(t, p, ptCall{path: base + "?orderBy=update_time%20desc&pageSize=1", header: auth, status: 200})
		if got := ptJSON[answer](t, raw); len(got.DockerImages) != 1 || !strings.HasSuffix(got.DockerImages[0].Name, "/other@"+ptDigest("proj/repo/other", "v1", hour(4))) {
			t.Errorf("last updated: %s", raw)
		}
	})

	t.Run("acr", func(t *testing.T) {
		t.Parallel()
		p := StartPushTimes(t, "acr", "team.azurecr.io")
		p.Credentials("team", "acr-password")
		img := push(p, "team/app")
		basic := map[string]string{"Authorization": "Basic dGVhbTphY3ItcGFzc3dvcmQ="} // team:acr-password
		challenge := map[string]string{"WWW-Authenticate": `Basic realm="Azure Container Registry"`}
		ptRun(t, p, []ptCall{
			{name: "v2 anonymous", path: "/v2/", status: 401, wantHeader: challenge},
			{name: "v2", path: "/v2/", header: basic, status: 200, want: []string{"{}"}},
			{name: "tags anonymous", path: "/acr/v1/team/app/_tags", status: 401, wantHeader: challenge,
				want: []string{`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":null}]}`}},
			{name: "wrong password", path: "/acr/v1/team/app/_tags", header: map[string]string{"Authorization": "Basic dGVhbTp3cm9uZw=="}, status: 401},
			{name: "unknown repository", path: "/acr/v1/team/gone/_tags", header: basic, status: 404,
				want: []string{`{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry","detail":{"name":"team/gone"}}]}`}},
			{name: "bad n", path: "/acr/v1/team/app/_tags?n=many", header: basic, status: 400, want: []string{"PAGINATION_NUMBER_INVALID"}, problem: "n "},
			{name: "bad orderby", path: "/acr/v1/team/app/_tags?orderby=name", header: basic, status: 400, problem: "orderby"},
			{name: "unknown path", path: "/acr/v1/_catalog", header: basic, status: 404, problem: "_tags"},
			{name: "newest first", path: "/acr/v1/team/app/_tags?orderby=timedesc&n=1", header: basic, status: 200, want: []string{`"name":"1.0.0"`}},
		})

		type answer struct {
			Registry  string `json:"registry"`
			ImageName string `json:"imageName"`
			Tags      []struct {
				Name           string `json:"name"`
				Digest         string `json:"digest"`
				CreatedTime    string `json:"createdTime"`
				LastUpdateTime string `json:"lastUpdateTime"`
			} `json:"tags"`
		}
		h, raw := ptDo(t, p, ptCall{path: "/acr/v1/team/app/_tags?n=2", header: basic, status: 200})
		first := ptJSON[answer](t, raw)
		if link := h.Get("Link"); link != `</acr/v1/team/app/_tags?last=1.1.0&n=2&orderby=>; rel="next"` {
			t.Errorf("Link %q", link)
		}
		if first.Registry != "team.azurecr.io" || first.ImageName != "team/app" || len(first.Tags) != 2 ||
			first.Tags[0].Name != "1.0.0" || first.Tags[0].Digest != img.d ||
			first.Tags[0].CreatedTime != "2023-11-14T22:13:20.1234567Z" || first.Tags[0].LastUpdateTime != "2023-11-15T01:13:20.1234567Z" ||
			first.Tags[1].Name != "1.1.0" || first.Tags[1].Digest != img.b {
			t.Errorf("first page: %s", raw)
		}
		h, raw = ptDo(t, p, ptCall{path: "/acr/v1/team/app/_tags?last=1.1.0&n=2&orderby=", header: basic, status: 200})
		if second := ptJSON[answer](t, raw); len(second.Tags) != 1 || second.Tags[0].Name != "2.0.0" || second.Tags[0].Digest != img.c || h.Get("Link") != "" {
			t.Errorf("second page (Link %q): %s", h.Get("Link"), raw)
		}
	})

	t.Run("docker-hub", func(t *testing.T) {
		t.Parallel()
		p := StartPushTimes(t, "docker-hub", "docker.io")
		p.Credentials("hubuser", "dckr_pat_secret")
		img := push(p, "library/app")
		p.Push("hubuser/secret", "1", hour(0))
		p.Private("hubuser/secret")
		jsonType := map[string]string{"Content-Type": "application/json"}
		notFound := []string{`{"errinfo":{},"message":"httperror 404: object not found"}`}
		ptRun(t, p, []ptCall{
			{name: "wrong secret", method: "POST", path: "/v2/auth/token", header: jsonType, body: `{"identifier":"hubuser","secret":"wrong"}`,
				status: 401, want: []string{`{"errinfo":{},"message":"incorrect username or password"}`}},
			{name: "form login", method: "POST", path: "/v2/auth/token", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
				body: "identifier=hubuser&secret=dckr_pat_secret", status: 415, problem: "Content-Type"},
			{name: "unknown repository", path: "/v2/namespaces/library/repositories/gone/tags", status: 404, want: notFound},
			{name: "private anonymous", path: "/v2/namespaces/hubuser/repositories/secret/tags", status: 404, want: notFound},
			{name: "private, forged token", path: "/v2/namespaces/hubuser/repositories/secret/tags", header: map[string]string{"Authorization": "Bearer forged"}, status: 404},
			{name: "basic auth", path: "/v2/namespaces/library/repositories/app/tags", header: map[string]string{"Authorization": "Basic aHVidXNlcjpkY2tyX3BhdF9zZWNyZXQ="},
				status: 200, problem: "Bearer"},
			{name: "old path", path: "/v2/repositories/library/app/tags", status: 404, problem: "namespaces"},
			{name: "past the end", path: "/v2/namespaces/library/repositories/app/tags?page=3&page_size=2", status: 404, want: notFound},
		})

		_, raw := ptDo(t, p, ptCall{method: "POST", path: "/v2/auth/token", header: jsonType, body: `{"identifier":"hubuser","secret":"dckr_pat_secret"}`, status: 200})
		token := ptJSON[struct {
			AccessToken string `json:"access_token"`
		}](t, raw).AccessToken
		if token == "" {
			t.Fatalf("no access_token in %s", raw)
		}
		ptDo(t, p, ptCall{path: "/v2/namespaces/hubuser/repositories/secret/tags", header: map[string]string{"Authorization": "Bearer " + token},
			status: 200, want: []string{`"count":1`, `"name":"1"`}})

		type answer struct {
			Count    int     `json:"count"`
			Next     *string `json:"next"`
			Previous *string `json:"previous"`
			Results  []struct {
				Name          string  `json:"name"`
				Digest        string  `json:"digest"`
				LastUpdated   string  `json:"last_updated"`
				TagLastPushed string  `json:"tag_last_pushed"`
				TagLastPulled *string `json:"tag_last_pulled"`
				TagStatus     string  `json:"tag_status"`
			} `json:"results"`
		}
		_, raw = ptDo(t, p, ptCall{path: "/v2/namespaces/library/repositories/app/tags?page_size=2", status: 200})
		first := ptJSON[answer](t, raw)
		next := p.URL + "/v2/namespaces/library/repositories/app/tags?page=2&page_size=2"
		if first.Count != 3 || first.Next == nil || *first.Next != next || first.Previous != nil || len(first.Results) != 2 ||
			first.Results[0].Name != "1.0.0" || first.Results[0].Digest != img.d || first.Results[0].TagLastPushed != "2023-11-15T01:13:20.123456Z" ||
			first.Results[0].LastUpdated != first.Results[0].TagLastPushed || first.Results[0].TagStatus != "active" || first.Results[0].TagLastPulled != nil ||
			first.Results[1].Name != "2.0.0" || first.Results[1].Digest != img.c {
			t.Errorf("first page: %s", raw)
		}
		if !strings.Contains(string(raw), `"tag_last_pulled":null`) || !strings.Contains(string(raw), `"previous":null`) {
			t.Errorf("first page has no nulls: %s", raw)
		}
		_, raw = ptDo(t, p, ptCall{path: next, status: 200})
		second := ptJSON[answer](t, raw)
		if second.Next != nil || second.Previous == nil || *second.Previous != p.URL+"/v2/namespaces/library/repositories/app/tags?page_size=2" ||
			len(second.Results) != 1 || second.Results[0].Name != "1.1.0" || second.Results[0].Digest != img.b {
			t.Errorf("second page: %s", raw)
		}

		// Requests may come while images are pushed.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				if i%2 == 0 {
					p.Push("library/app", "busy", hour(10+i))
					return
				}
				resp, err := http.Get(p.URL + "/v2/namespaces/library/repositories/app/tags?page_size=100")
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("while pushing: status %d", resp.StatusCode)
				}
			})
		}
		wg.Wait()
	})

	t.Run("harbor", func(t *testing.T) {
		t.Parallel()
		p := StartPushTimes(t, "harbor", "harbor.example.com")
		p.Credentials("robot$ci", "harbor-secret")
		img := push(p, "proj/team/app")
		p.Push("proj/solo", "1", hour(0))
		basic := map[string]string{"Authorization": "Basic cm9ib3QkY2k6aGFyYm9yLXNlY3JldA=="} // robot$ci:harbor-secret
		const base = "/api/v2.0/projects/proj/repositories/team%252Fapp/artifacts"
		ptRun(t, p, []ptCall{
			{name: "anonymous", path: base, status: 401, want: []string{`{"errors":[{"code":"UNAUTHORIZED","message":"unauthorized"}]}`}},
			{name: "wrong password", path: base, header: map[string]string{"Authorization": "Basic cm9ib3QkY2k6d3Jvbmc="}, status: 401},
			{name: "escaped once", path: "/api/v2.0/projects/proj/repositories/team%2Fapp/artifacts", header: basic, status: 404, problem: "escaped once"},
			{name: "not escaped", path: "/api/v2.0/projects/proj/repositories/team/app/artifacts", header: basic, status: 404, problem: "unescaped"},
			{name: "unknown repository", path: "/api/v2.0/projects/proj/repositories/team%252Fgone/artifacts", header: basic, status: 404,
				want: []string{`"code":"NOT_FOUND"`, "repository proj/team/gone not found"}},
			{name: "page size above 100", path: base + "?page_size=101", header: basic, status: 422, problem: "page_size"},
			{name: "no slash in the name", path: "/api/v2.0/projects/proj/repositories/solo/artifacts", header: basic, status: 200,
				want: []string{`"name":"1"`}, wantHeader: map[string]string{"X-Total-Count": "1", "Link": ""}},
		})

		type answer []struct {
			ID       int64  `json:"id"`
			Digest   string `json:"digest"`
			PushTime string `json:"push_time"`
			Tags     []struct {
				Name      string `json:"name"`
				PushTime  string `json:"push_time"`
				Immutable bool   `json:"immutable"`
			} `json:"tags"`
		}
		h, raw := ptDo(t, p, ptCall{path: base + "?with_tag=true&page=1&page_size=2", header: basic, status: 200})
		first := ptJSON[answer](t, raw)
		if link := h.Get("Link"); link != `<`+base+`?page=2&page_size=2&with_tag=true>; rel="next"` {
			t.Errorf("Link %q", link)
		}
		if h.Get("X-Total-Count") != "4" || len(first) != 2 || first[0].Digest != img.d || first[0].PushTime != "2023-11-15T01:13:20.123Z" ||
			len(first[0].Tags) != 1 || first[0].Tags[0].Name != "1.0.0" || first[0].Tags[0].PushTime != "2023-11-15T01:13:20.123Z" ||
			first[1].Digest != img.c {
			t.Errorf("first page (X-Total-Count %q): %s", h.Get("X-Total-Count"), raw)
		}
		h, raw = ptDo(t, p, ptCall{path: base + "?page=2&page_size=2&with_tag=true", header: basic, status: 200})
		second := ptJSON[answer](t, raw)
		if link := h.Get("Link"); link != `<`+base+`?page=1&page_size=2&with_tag=true>; rel="prev"` {
			t.Errorf("Link %q", link)
		}
		if len(second) != 2 || second[0].Digest != img.b || second[1].Digest != img.a || second[1].Tags != nil ||
			second[1].PushTime != "2023-11-14T22:13:20.123Z" || !strings.Contains(string(raw), `"tags":null`) {
			t.Errorf("second page: %s", raw)
		}
		if !slices.Contains(p.Requests(), "GET "+base+"?page=2&page_size=2&with_tag=true") {
			t.Errorf("requests %q", p.Requests())
		}
	})

	t.Run("ghcr", func(t *testing.T) {
		t.Parallel()
		p := StartPushTimes(t, "ghcr", "ghcr.io")
		p.Credentials("", "ghp_secret")
		img := push(p, "octo/team/app")
		p.Push("acme/tool", "1", hour(0))
		p.Organisation("acme")
		gh := map[string]string{"Accept": "application/vnd.github+json", "Authorization": "Bearer ghp_secret"}
		const base = "/users/octo/packages/container/team%2Fapp/versions"
		ptRun(t, p, []ptCall{
			{name: "anonymous", path: base, header: map[string]string{"Accept": "application/vnd.github+json"}, status: 401,
				want: []string{`"message":"Requires authentication"`, `"documentation_url":"https://docs.github.com/rest"`}},
			{name: "wrong token", path: base, header: with(gh, "Authorization", "Bearer ghp_wrong"), status: 401, want: []string{"Bad credentials"}},
			{name: "token scheme", path: base, header: with(gh, "Authorization", "token ghp_secret"), status: 200},
			{name: "no Accept", path: base, header: map[string]string{"Authorization": "Bearer ghp_secret"}, status: 200, problem: "Accept"},
			{name: "user as organisation", path: "/orgs/octo/packages/container/team%2Fapp/versions", header: gh, status: 404, want: []string{`"message":"Not Found"`}},
			{name: "organisation as user", path: "/users/acme/packages/container/tool/versions", header: gh, status: 404},
			{name: "organisation", path: "/orgs/acme/packages/container/tool/versions", header: gh, status: 200, want: []string{`"tags":["1"]`}},
			{name: "unescaped", path: "/users/octo/packages/container/team/app/versions", header: gh, status: 404, problem: "unescaped"},
			{name: "unknown package", path: "/users/octo/packages/container/gone/versions", header: gh, status: 404},
		})

		type answer []struct {
			ID        int64  `json:"id"`
			Name      string `json:"name"`
			CreatedAt string `json:"created_at"`
			UpdatedAt string `json:"updated_at"`
			Metadata  struct {
				PackageType string `json:"package_type"`
				Container   struct {
					Tags []string `json:"tags"`
				} `json:"container"`
			} `json:"metadata"`
		}
		h, raw := ptDo(t, p, ptCall{path: base + "?per_page=3", header: gh, status: 200})
		first := ptJSON[answer](t, raw)
		next, last := p.URL+base+"?page=2&per_page=3", p.URL+base+"?page=2&per_page=3"
		if link := h.Get("Link"); link != `<`+next+`>; rel="next", <`+last+`>; rel="last"` {
			t.Errorf("Link %q", link)
		}
		if len(first) != 3 || first[0].Name != img.d || first[0].CreatedAt != "2023-11-15T01:13:20Z" || first[0].Metadata.PackageType != "container" ||
			!slices.Equal(first[0].Metadata.Container.Tags, []string{"1.0.0"}) || first[1].Name != img.c || first[2].Name != img.b {
			t.Errorf("first page: %s", raw)
		}
		h, raw = ptDo(t, p, ptCall{path: next, header: gh, status: 200})
		second := ptJSON[answer](t, raw)
		first1 := p.URL + base + "?page=1&per_page=3"
		if link := h.Get("Link"); link != `<`+first1+`>; rel="prev", <`+first1+`>; rel="first"` {
			t.Errorf("Link %q", link)
		}
		if len(second) != 1 || second[0].Name != img.a || second[0].CreatedAt != "2023-11-14T22:13:20Z" || second[0].UpdatedAt != "2023-11-15T01:13:20Z" ||
			!strings.Contains(string(raw), `"tags":[]`) {
			t.Errorf("second page: %s", raw)
		}
	})

	t.Run("quay", func(t *testing.T) {
		t.Parallel()
		p := StartPushTimes(t, "quay", "quay.io")
		p.Credentials("", "quay-token")
		img := push(p, "ns/app")
		p.Push("ns/secret", "1", hour(0))
		p.Private("ns/secret")
		bearer := map[string]string{"Authorization": "Bearer quay-token"}
		ptRun(t, p, []ptCall{
			{name: "public", path: "/api/v1/repository/ns/app/tag/?onlyActiveTags=true", status: 200, want: []string{`"name":"1.0.0"`}},
			{name: "private anonymous", path: "/api/v1/repository/ns/secret/tag/?onlyActiveTags=true", status: 401,
				want: []string{`"error_type":"invalid_token"`, `"title":"invalid_token"`, `"status":401`}},
			{name: "private", path: "/api/v1/repository/ns/secret/tag/?onlyActiveTags=true", header: bearer, status: 200, want: []string{`"name":"1"`}},
			{name: "wrong token", path: "/api/v1/repository/ns/app/tag/", header: map[string]string{"Authorization": "Bearer wrong"}, status: 401},
			{name: "unknown repository", path: "/api/v1/repository/ns/gone/tag/", status: 404,
				want: []string{`"detail":"Not Found"`, `"error_message":"Not Found"`, `"error_type":"not_found"`, `"title":"not_found"`, `"status":404`}},
			{name: "bad limit", path: "/api/v1/repository/ns/app/tag/?limit=ten", status: 400, problem: "limit"},
			{name: "no slash", path: "/api/v1/repository/ns/app/tag?limit=1", status: 308,
				wantHeader: map[string]string{"Location": "/api/v1/repository/ns/app/tag/?limit=1"}},
			{name: "unknown path", path: "/api/v1/repository/ns/app", status: 404, problem: "tag/"},
		})

		type answer struct {
			Tags []struct {
				Name           string `json:"name"`
				StartTS        int64  `json:"start_ts"`
				EndTS          *int64 `json:"end_ts"`
				ManifestDigest string `json:"manifest_digest"`
				LastModified   string `json:"last_modified"`
			} `json:"tags"`
			Page          int  `json:"page"`
			HasAdditional bool `json:"has_additional"`
		}
		_, raw := ptDo(t, p, ptCall{path: "/api/v1/repository/ns/app/tag/?onlyActiveTags=true&limit=2&page=1", status: 200})
		first := ptJSON[answer](t, raw)
		if !first.HasAdditional || first.Page != 1 || len(first.Tags) != 2 || first.Tags[0].Name != "1.0.0" || first.Tags[0].ManifestDigest != img.d ||
			first.Tags[0].StartTS != 1700010800 || first.Tags[0].LastModified != "Wed, 15 Nov 2023 01:13:20 -0000" || first.Tags[1].Name != "2.0.0" {
			t.Errorf("first page: %s", raw)
		}
		_, raw = ptDo(t, p, ptCall{path: "/api/v1/repository/ns/app/tag/?onlyActiveTags=true&limit=2&page=2", status: 200})
		if second := ptJSON[answer](t, raw); second.HasAdditional || second.Page != 2 || len(second.Tags) != 1 || second.Tags[0].Name != "1.1.0" ||
			second.Tags[0].ManifestDigest != img.b || second.Tags[0].LastModified != "Tue, 14 Nov 2023 23:13:20 -0000" {
			t.Errorf("second page: %s", raw)
		}
		_, raw = ptDo(t, p, ptCall{path: "/api/v1/repository/ns/app/tag/", status: 200})
		all := ptJSON[answer](t, raw)
		if len(all.Tags) != 4 || all.Tags[3].ManifestDigest != img.a || all.Tags[3].EndTS == nil || *all.Tags[3].EndTS != 1700010800 {
			t.Errorf("with the past tags: %s", raw)
		}
	})
}
