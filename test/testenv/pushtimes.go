package testenv

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// PushTimes stands in for one of the registry APIs that say when each tag
// was pushed, at the wire level:
//
//   - "ecr": Amazon ECR's DescribeImages (AWS JSON 1.1, POST / with
//     X-Amz-Target), signed with Signature Version 4;
//   - "artifact-registry": Artifact Registry's dockerImages.list, GET
//     /v1/projects/{p}/locations/{l}/repositories/{r}/dockerImages, with
//     an OAuth bearer token;
//   - "acr": Azure Container Registry's GET /acr/v1/{repository}/_tags
//     (and GET /v2/ to try credentials), with basic auth;
//   - "docker-hub": Docker Hub's POST /v2/auth/token and GET
//     /v2/namespaces/{namespace}/repositories/{name}/tags;
//   - "harbor": Harbor's GET
//     /api/v2.0/projects/{project}/repositories/{name}/artifacts, the
//     name escaped twice, with basic auth;
//   - "ghcr": GitHub's GET
//     /{users|orgs}/{owner}/packages/container/{package}/versions, with a
//     token;
//   - "quay": Quay's GET /api/v1/repository/{namespace}/{name}/tag/.
//
// It pages, refuses and fails as the service does, in its formats; the
// requests the service would refuse as malformed, or that it would answer
// with something other than the client means to ask, are also listed by
// Problems. An image is a digest and its times: every Push makes a new
// one.
type PushTimes struct {
	// URL is the API's base URL, http://127.0.0.1:<port>.
	URL string

	t        testing.TB
	api      string
	serveAPI func(*PushTimes, http.ResponseWriter, *http.Request, []byte)
	registry string
	account  string // ecr: the registry's AWS account
	region   string // ecr: the registry's AWS region
	location string // artifact-registry: the registry's location

	mu             sync.Mutex
	repos          map[string]*ptRepo
	username       string
	password       string
	hasCredentials bool
	private        map[string]bool
	orgs           map[string]bool
	hubTokens      map[string]bool
	cursors        map[string]ptCursor
	lastID         int64
	requests       []string
	problems       []string
}

// pushTimesAPIs serve each API; every handler runs with mu held.
var pushTimesAPIs = map[string]func(*PushTimes, http.ResponseWriter, *http.Request, []byte){
	"ecr":               (*PushTimes).serveECR,
	"artifact-registry": (*PushTimes).serveArtifactRegistry,
	"acr":               (*PushTimes).serveACRTags,
	"docker-hub":        (*PushTimes).serveDockerHub,
	"harbor":            (*PushTimes).serveHarbor,
	"ghcr":              (*PushTimes).serveGHCR,
	"quay":              (*PushTimes).serveQuay,
}

// ecrHost is a private ECR registry's host: account, region.
var ecrHost = regexp.MustCompile(`^([0-9]{12})\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$`)

// The store: repository -> tag -> image.
type ptRepo struct {
	id     int64
	tags   map[string]*ptTag
	images map[string]*ptImage // by digest
}

type ptTag struct {
	id      int64
	name    string
	digest  string    // the image it points to now
	created time.Time // first pushed
	pushed  time.Time // last pushed, when it moved to digest
	history []ptPush  // where it pointed, oldest first (Quay lists past tags)
}

type ptPush struct {
	digest string
	at     time.Time
}

type ptImage struct {
	id       int64
	digest   string
	uploaded time.Time // first pushed
	updated  time.Time // a tag last moved to or from it
	tags     []string  // the tags on it now, sorted
	size     int64
}

// ptCursor is what a page token handed out continues: the listing (its
// repository and the parameters that must stay the same) and where.
type ptCursor struct {
	listing string
	offset  int
}

// StartPushTimes starts, on 127.0.0.1 over plain HTTP, a stand-in for
// api (see PushTimes) serving the images named under the registry host
// registry; it is stopped when the test ends.
func StartPushTimes(t testing.TB, api, registry string) *PushTimes {
	t.Helper()
	serve, ok := pushTimesAPIs[api]
	if !ok {
		t.Fatalf("StartPushTimes: unknown API %q, want one of %q", api, slices.Sorted(maps.Keys(pushTimesAPIs)))
	}
	p := &PushTimes{
		t: t, api: api, serveAPI: serve, registry: registry,
		repos: map[string]*ptRepo{}, private: map[string]bool{}, orgs: map[string]bool{},
		hubTokens: map[string]bool{}, cursors: map[string]ptCursor{},
	}
	switch api {
	case "ecr":
		m := ecrHost.FindStringSubmatch(registry)
		if m == nil {
			t.Fatalf("StartPushTimes: %q is not an ECR registry host (<account>.dkr.ecr.<region>.amazonaws.com)", registry)
		}
		p.account, p.region = m[1], m[2]
	case "artifact-registry":
		location, ok := strings.CutSuffix(registry, "-docker.pkg.dev")
		if !ok || location == "" || strings.Contains(location, ".") {
			t.Fatalf("StartPushTimes: %q is not an Artifact Registry host (<location>-docker.pkg.dev)", registry)
		}
		p.location = location
	}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// ptDigest is the digest of the image a Push makes.
func ptDigest(repository, tag string, at time.Time) string {
	sum := sha256.Sum256([]byte(repository + "\x00" + tag + "\x00" + at.UTC().Format(time.RFC3339Nano)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ptRepositorySegments is the least number of path segments a repository
// of each API has (its namespace, project or owner first).
var ptRepositorySegments = map[string]int{
	"ecr": 1, "acr": 1, "artifact-registry": 3, "docker-hub": 2, "harbor": 2, "ghcr": 2, "quay": 2,
}

var ptTagName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// Push makes tag of repository point to a new image pushed at at, with
// a digest of its own; a tag pushed again moves to its new image, which
// leaves the old one untagged if no other tag is on it.
func (p *PushTimes) Push(repository, tag string, at time.Time) {
	p.t.Helper()
	segments := strings.Split(repository, "/")
	if len(segments) < ptRepositorySegments[p.api] || slices.Contains(segments, "") ||
		(p.api == "docker-hub" || p.api == "quay") && len(segments) != 2 {
		p.t.Fatalf("Push: %q is not a repository of %s", repository, p.api)
	}
	if !ptTagName.MatchString(tag) {
		p.t.Fatalf("Push: %q is not a tag", tag)
	}
	digest := ptDigest(repository, tag, at)
	p.mu.Lock()
	defer p.mu.Unlock()
	repo := p.repos[repository]
	if repo == nil {
		p.lastID++
		repo = &ptRepo{id: p.lastID, tags: map[string]*ptTag{}, images: map[string]*ptImage{}}
		p.repos[repository] = repo
	}
	img := repo.images[digest]
	if img == nil {
		p.lastID++
		size, _ := strconv.ParseInt(digest[len("sha256:"):][:5], 16, 64)
		img = &ptImage{id: p.lastID, digest: digest, uploaded: at, updated: at, size: 1<<20 + size}
		repo.images[digest] = img
	}
	tg := repo.tags[tag]
	if tg == nil {
		p.lastID++
		tg = &ptTag{id: p.lastID, name: tag, created: at}
		repo.tags[tag] = tg
	}
	if tg.digest == digest {
		return
	}
	if old := repo.images[tg.digest]; old != nil {
		old.tags = slices.DeleteFunc(old.tags, func(name string) bool { return name == tag })
		old.updated = later(old.updated, at)
	}
	img.tags = append(img.tags, tag)
	slices.Sort(img.tags)
	img.updated = later(img.updated, at)
	tg.digest, tg.pushed = digest, at
	tg.history = append(tg.history, ptPush{digest, at})
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Credentials sets what the API accepts: ECR the access key id username
// (the signature itself is not checked); ACR and Harbor basic auth with
// both; Docker Hub both at /v2/auth/token, then the token it hands out;
// Artifact Registry, GitHub and Quay password as a bearer token. Until it
// is called nothing is accepted.
func (p *PushTimes) Credentials(username, password string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.username, p.password, p.hasCredentials = username, password, true
}

// Private makes repository need credentials on Docker Hub and Quay,
// where the others are public; the other APIs always need them.
func (p *PushTimes) Private(repository string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.private[repository] = true
}

// Organisation makes the GitHub account owner an organisation, whose
// packages are under /orgs/; other owners are users (/users/).
func (p *PushTimes) Organisation(owner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.orgs[owner] = true
}

// Requests returns "METHOD path?query" of every request received, in
// order (the path as sent, escapes kept; no "?" without a query).
func (p *PushTimes) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// Problems lists the malformed requests received, and why; a client that
// follows the service's documentation causes none.
func (p *PushTimes) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.problems)
}

// problemf notes a malformed request; mu is held.
func (p *PushTimes) problemf(r *http.Request, format string, args ...any) {
	p.problems = append(p.problems, r.Method+" "+r.URL.RequestURI()+": "+fmt.Sprintf(format, args...))
}

// serve answers into a recorder under the lock, then copies the answer
// out, so that a slow client holds up no other request.
func (p *PushTimes) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := httptest.NewRecorder()
	p.mu.Lock()
	p.requests = append(p.requests, r.Method+" "+r.URL.RequestURI())
	p.serveAPI(p, rec, r, body)
	p.mu.Unlock()
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// basicOK says whether the request's basic auth is Credentials'.
func (p *PushTimes) basicOK(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	return ok && p.hasCredentials && user == p.username && pass == p.password
}

// authToken is the token after one of schemes (case-insensitive, as
// RFC 9110 has it) in Authorization; sent says whether there was one at all.
func authToken(r *http.Request, schemes ...string) (token string, sent, ok bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false, false
	}
	scheme, token, _ := strings.Cut(h, " ")
	for _, s := range schemes {
		if strings.EqualFold(scheme, s) {
			return strings.TrimSpace(token), true, true
		}
	}
	return "", true, false
}

// cursor hands out a page token continuing listing at offset.
func (p *PushTimes) cursor(listing string, offset int) string {
	token := randomHex() + randomHex()
	p.cursors[token] = ptCursor{listing: listing, offset: offset}
	return token
}

// resume is the offset a page token continues at, if it was handed out
// for listing.
func (p *PushTimes) resume(token, listing string) (int, bool) {
	c, ok := p.cursors[token]
	return c.offset, ok && c.listing == listing
}

// imagesNewestFirst lists repo's images, the last pushed first.
func (repo *ptRepo) imagesNewestFirst() []*ptImage {
	return slices.SortedFunc(maps.Values(repo.images), func(a, b *ptImage) int {
		if c := b.uploaded.Compare(a.uploaded); c != 0 {
			return c
		}
		return int(b.id - a.id)
	})
}

// tagsByName lists repo's tags in name order.
func (repo *ptRepo) tagsByName() []*ptTag {
	return slices.SortedFunc(maps.Values(repo.tags), func(a, b *ptTag) int { return strings.Compare(a.name, b.name) })
}

// tagsNewestFirst lists repo's tags, the last pushed first.
func (repo *ptRepo) tagsNewestFirst() []*ptTag {
	return slices.SortedFunc(maps.Values(repo.tags), func(a, b *ptTag) int {
		if c := b.pushed.Compare(a.pushed); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
}

// writeAPIJSON writes v as JSON, leaving & < > as they are, as the
// services do (Go escapes them by default, in URLs too).
func writeAPIJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	encodeJSON(w, v)
}

func encodeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// ptImageIndex is the media type of every image: a multi-platform index,
// as a build pushes.
const ptImageIndex = "application/vnd.oci.image.index.v1+json"

// ---- Amazon ECR ----

const ecrDescribeImagesTarget = "AmazonEC2ContainerRegistry_V20150921.DescribeImages"

// ecrRepositoryName is ECR's constraint on repository names.
var ecrRepositoryName = regexp.MustCompile(`^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*$`)

var ecrRegistryID = regexp.MustCompile(`^[0-9]{12}$`)

type ecrImageID struct {
	ImageDigest string `json:"imageDigest,omitempty"`
	ImageTag    string `json:"imageTag,omitempty"`
}

type ecrDescribeImages struct {
	RegistryID     *string      `json:"registryId"`
	RepositoryName string       `json:"repositoryName"`
	ImageIDs       []ecrImageID `json:"imageIds"`
	Filter         *struct {
		TagStatus string `json:"tagStatus"`
	} `json:"filter"`
	MaxResults *int    `json:"maxResults"`
	NextToken  *string `json:"nextToken"`
}

type ecrImageDetail struct {
	RegistryID             string      `json:"registryId"`
	RepositoryName         string      `json:"repositoryName"`
	ImageDigest            string      `json:"imageDigest"`
	ImageTags              []string    `json:"imageTags,omitempty"`
	ImageSizeInBytes       int64       `json:"imageSizeInBytes"`
	ImagePushedAt          json.Number `json:"imagePushedAt"`
	ImageManifestMediaType string      `json:"imageManifestMediaType"`
}

// ecrError writes an error the way AWS JSON 1.1 services do, all of
// them (authentication's included) 400 but for unknown paths.
func ecrError(w http.ResponseWriter, status int, kind, message string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", uuidOf(randomHex()))
	w.WriteHeader(status)
	encodeJSON(w, map[string]string{"__type": kind, "message": message})
}

func uuidOf(h string) string {
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// ecrTime is a time as AWS JSON protocols send it: epoch seconds, with
// the milliseconds as the fraction.
func ecrTime(t time.Time) json.Number {
	ms := t.UnixMilli()
	return json.Number(fmt.Sprintf("%d.%03d", ms/1000, ms%1000))
}

func (p *PushTimes) serveECR(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.URL.Path != "/" || r.Method != http.MethodPost {
		p.problemf(r, "ECR's API is POST / alone")
		ecrError(w, http.StatusNotFound, "UnknownOperationException", "")
		return
	}
	if target := r.Header.Get("X-Amz-Target"); target != ecrDescribeImagesTarget {
		p.problemf(r, "X-Amz-Target %q, want %s", target, ecrDescribeImagesTarget)
		ecrError(w, http.StatusBadRequest, "UnknownOperationException", "")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-amz-json-1.1" {
		p.problemf(r, "Content-Type %q, want application/x-amz-json-1.1", r.Header.Get("Content-Type"))
		ecrError(w, http.StatusBadRequest, "SerializationException", "")
		return
	}
	if kind, message := p.checkSigV4(r); kind != "" {
		ecrError(w, http.StatusBadRequest, kind, message)
		return
	}
	var req ecrDescribeImages
	if len(body) > 0 {
		strict := json.NewDecoder(bytes.NewReader(body))
		strict.DisallowUnknownFields()
		if err := strict.Decode(&req); err != nil {
			if err := json.Unmarshal(body, &req); err != nil {
				p.problemf(r, "body: %v", err)
				ecrError(w, http.StatusBadRequest, "SerializationException", err.Error())
				return
			}
			p.problemf(r, "body: %v, which ECR ignores", err)
		}
	}
	invalid := func(message string) {
		p.problemf(r, "%s", message)
		ecrError(w, http.StatusBadRequest, "InvalidParameterException", message)
	}
	tagStatus := "ANY"
	if req.Filter != nil {
		tagStatus = req.Filter.TagStatus
	}
	switch {
	case req.RepositoryName == "":
		invalid("1 validation error detected: Value null at 'repositoryName' failed to satisfy constraint: Member must not be null")
		return
	case len(req.RepositoryName) < 2 || len(req.RepositoryName) > 256 || !ecrRepositoryName.MatchString(req.RepositoryName):
		invalid(fmt.Sprintf("Invalid parameter at 'repositoryName' failed to satisfy constraint: 'must satisfy regular expression '%s''", ecrRepositoryName))
		return
	case req.RegistryID != nil && !ecrRegistryID.MatchString(*req.RegistryID):
		invalid("Invalid parameter at 'registryId' failed to satisfy constraint: 'must satisfy regular expression '[0-9]{12}''")
		return
	case req.MaxResults != nil && (*req.MaxResults < 1 || *req.MaxResults > 1000):
		invalid("Invalid parameter at 'maxResults' failed to satisfy constraint: 'Member must have value between 1 and 1000'")
		return
	case !slices.Contains([]string{"TAGGED", "UNTAGGED", "ANY"}, tagStatus):
		invalid("Invalid parameter at 'filter.tagStatus' failed to satisfy constraint: 'Member must satisfy enum value set: [TAGGED, UNTAGGED, ANY]'")
		return
	case len(req.ImageIDs) > 0 && (req.MaxResults != nil || req.NextToken != nil):
		invalid("Invalid parameter: maxResults and nextToken cannot be used with imageIds")
		return
	case len(req.ImageIDs) > 100:
		invalid("Invalid parameter at 'imageIds' failed to satisfy constraint: 'Member must have length less than or equal to 100'")
		return
	}
	if req.RegistryID != nil && *req.RegistryID != p.account {
		ecrError(w, http.StatusBadRequest, "AccessDeniedException", fmt.Sprintf(
			"User: arn:aws:iam::%s:user/%s is not authorized to perform: ecr:DescribeImages on resource: arn:aws:ecr:%s:%s:repository/%s because no resource-based policy allows the ecr:DescribeImages action",
			p.account, p.username, p.region, *req.RegistryID, req.RepositoryName))
		return
	}
	repo := p.repos[req.RepositoryName]
	if repo == nil {
		ecrError(w, http.StatusBadRequest, "RepositoryNotFoundException", fmt.Sprintf(
			"The repository with name '%s' does not exist in the registry with id '%s'", req.RepositoryName, p.account))
		return
	}
	images := slices.SortedFunc(maps.Values(repo.images), func(a, b *ptImage) int { return int(a.id - b.id) })
	var next string
	if len(req.ImageIDs) > 0 {
		images = nil
		for _, id := range req.ImageIDs {
			img := repo.images[id.ImageDigest]
			if tg := repo.tags[id.ImageTag]; id.ImageDigest == "" && tg != nil {
				img = repo.images[tg.digest]
			}
			if id.ImageDigest == "" && id.ImageTag == "" {
				invalid("Invalid parameter at 'imageIds' failed to satisfy constraint: 'imageDigest or imageTag must be given'")
				return
			}
			if img == nil || id.ImageTag != "" && !slices.Contains(img.tags, id.ImageTag) {
				ecrError(w, http.StatusBadRequest, "ImageNotFoundException", fmt.Sprintf(
					"The image with imageId {imageDigest:'%s', imageTag:'%s'} does not exist within the repository with name '%s' in the registry with id '%s'",
					cmp.Or(id.ImageDigest, "null"), cmp.Or(id.ImageTag, "null"), req.RepositoryName, p.account))
				return
			}
			if !slices.Contains(images, img) {
				images = append(images, img)
			}
		}
	} else {
		images = slices.DeleteFunc(images, func(img *ptImage) bool {
			return tagStatus == "TAGGED" && len(img.tags) == 0 || tagStatus == "UNTAGGED" && len(img.tags) > 0
		})
		listing := "ecr " + req.RepositoryName + " " + tagStatus
		start := 0
		if req.NextToken != nil {
			offset, ok := p.resume(*req.NextToken, listing)
			if !ok {
				invalid("Invalid parameter at 'nextToken' failed to satisfy constraint: 'Invalid NextToken'")
				return
			}
			start = offset
		}
		n := 100
		if req.MaxResults != nil {
			n = *req.MaxResults
		}
		var more bool
		images, more = page(images, start, n)
		if more {
			next = p.cursor(listing, start+n)
		}
	}
	details := []ecrImageDetail{}
	for _, img := range images {
		details = append(details, ecrImageDetail{
			RegistryID: p.account, RepositoryName: req.RepositoryName, ImageDigest: img.digest,
			ImageTags: slices.Clone(img.tags), ImageSizeInBytes: img.size,
			ImagePushedAt: ecrTime(img.uploaded), ImageManifestMediaType: ptImageIndex,
		})
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", uuidOf(randomHex()))
	encodeJSON(w, struct {
		ImageDetails []ecrImageDetail `json:"imageDetails"`
		NextToken    string           `json:"nextToken,omitempty"`
	}{details, next})
}

// checkSigV4 checks the Signature Version 4 Authorization header as far
// as the stand-in can without the secret key: its form, its date, and the
// access key, region and service of its scope. It returns AWS's error
// type and message, or "" if the request is let through.
func (p *PushTimes) checkSigV4(r *http.Request) (kind, message string) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	incomplete := func(why string) (string, string) {
		p.problemf(r, "Authorization: %s", why)
		return "IncompleteSignatureException", why
	}
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return incomplete("Authorization header requires the AWS4-HMAC-SHA256 algorithm.")
	}
	params := map[string]string{}
	for field := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(field), "=")
		params[k] = v
	}
	for _, k := range []string{"Credential", "SignedHeaders", "Signature"} {
		if params[k] == "" {
			return incomplete(fmt.Sprintf("Authorization header requires '%s' parameter.", k))
		}
	}
	scope := strings.Split(params["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || len(scope[1]) != 8 || strings.Trim(scope[1], "0123456789") != "" {
		return incomplete(fmt.Sprintf("Credential should be <access key id>/<yyyymmdd>/<region>/<service>/aws4_request, not %q.", params["Credential"]))
	}
	if sig, err := hex.DecodeString(params["Signature"]); err != nil || len(sig) != sha256.Size {
		return incomplete("Signature should be 64 hex digits.")
	}
	if !slices.Contains(strings.Split(params["SignedHeaders"], ";"), "host") {
		return incomplete("'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
	}
	date := r.Header.Get("X-Amz-Date")
	if date == "" {
		if d, err := http.ParseTime(r.Header.Get("Date")); err == nil {
			date = d.UTC().Format("20060102T150405Z")
		}
	}
	if _, err := time.Parse("20060102T150405Z", date); err != nil {
		return incomplete("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	if date[:8] != scope[1] {
		p.problemf(r, "the date of the credential scope is not the request's")
		return "InvalidSignatureException", fmt.Sprintf(
			"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.", scope[1], date[:8], date)
	}
	if scope[2] != p.region {
		p.problemf(r, "signed for region %q, want %q", scope[2], p.region)
		return "InvalidSignatureException", "Credential should be scoped to a valid region. "
	}
	if scope[3] != "ecr" {
		p.problemf(r, "signed for service %q, want ecr", scope[3])
		return "InvalidSignatureException", "Credential should be scoped to correct service: 'ecr'. "
	}
	if !p.hasCredentials || scope[0] != p.username {
		return "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	return "", ""
}

// ---- Google Artifact Registry ----

type arDockerImage struct {
	Name           string   `json:"name"`
	URI            string   `json:"uri"`
	Tags           []string `json:"tags,omitempty"`
	ImageSizeBytes string   `json:"imageSizeBytes"`
	UploadTime     string   `json:"uploadTime"`
	MediaType      string   `json:"mediaType"`
	UpdateTime     string   `json:"updateTime"`

	uploaded, updated time.Time
}

// googleError writes an error the way Google's JSON APIs do.
func googleError(w http.ResponseWriter, status int, state, message string) {
	writeAPIJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": message, "status": state}})
}

// googleTime is a time in proto3's JSON, with 0, 3, 6 or 9 digits of
// fraction.
func googleTime(t time.Time) string {
	t = t.UTC()
	switch ns := t.Nanosecond(); {
	case ns == 0:
		return t.Format("2006-01-02T15:04:05Z")
	case ns%1e6 == 0:
		return t.Format("2006-01-02T15:04:05.000Z")
	case ns%1e3 == 0:
		return t.Format("2006-01-02T15:04:05.000000Z")
	default:
		return t.Format("2006-01-02T15:04:05.000000000Z")
	}
}

// arQueryParameters are the query parameters dockerImages.list binds, and
// the system parameters every Google API takes.
var arQueryParameters = []string{
	"pageSize", "pageToken", "orderBy",
	"access_token", "alt", "callback", "fields", "key", "oauth_token", "prettyPrint", "quotaUser", "upload_protocol", "uploadType", "$.xgafv",
}

func (p *PushTimes) serveArtifactRegistry(w http.ResponseWriter, r *http.Request, _ []byte) {
	segs := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if len(segs) != 8 || segs[0] != "v1" || segs[1] != "projects" || segs[3] != "locations" || segs[5] != "repositories" || segs[7] != "dockerImages" || r.Method != http.MethodGet {
		p.problemf(r, "not GET /v1/projects/{project}/locations/{location}/repositories/{repository}/dockerImages")
		googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
		return
	}
	project, location, repository := segs[2], segs[4], segs[6]
	q := r.URL.Query()
	token, sent, _ := authToken(r, "Bearer")
	if !sent {
		token = q.Get("access_token")
	}
	if !p.hasCredentials || token != p.password {
		challenge := `Bearer realm="https://accounts.google.com/"`
		if token != "" {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED",
			"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.")
		return
	}
	invalid := func(message string) {
		p.problemf(r, "%s", message)
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", message)
	}
	for name := range q {
		if !slices.Contains(arQueryParameters, name) {
			invalid(fmt.Sprintf("Invalid JSON payload received. Unknown name %q: Cannot bind query parameter. Field '%s' could not be found in request message.", name, name))
			return
		}
	}
	pageSize := 100
	if s := q.Get("pageSize"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			invalid(fmt.Sprintf("Invalid value at 'page_size' (TYPE_INT32), %q", s))
			return
		}
		// Google's APIs take a page size above their bound as the bound.
		if n > 0 {
			pageSize = min(int(n), 1000)
		}
	}
	orderBy := strings.Fields(q.Get("orderBy"))
	if len(orderBy) > 2 || len(orderBy) > 0 && !slices.Contains([]string{"name", "upload_time", "update_time"}, orderBy[0]) ||
		len(orderBy) == 2 && orderBy[1] != "asc" && orderBy[1] != "desc" {
		invalid(fmt.Sprintf("Invalid order_by %q: want name, upload_time or update_time, then asc or desc", q.Get("orderBy")))
		return
	}

	prefix := project + "/" + repository + "/"
	var images []arDockerImage
	// The registry's repositories are all in its own location.
	found := false
	for name, repo := range p.repos {
		path, ok := strings.CutPrefix(name, prefix)
		if !ok || location != p.location {
			continue
		}
		found = true
		for _, img := range repo.images {
			images = append(images, arDockerImage{
				Name:           fmt.Sprintf("projects/%s/locations/%s/repositories/%s/dockerImages/%s@%s", project, location, repository, url.PathEscape(path), img.digest),
				URI:            fmt.Sprintf("%s/%s@%s", p.registry, name, img.digest),
				Tags:           slices.Clone(img.tags),
				ImageSizeBytes: strconv.FormatInt(img.size, 10),
				UploadTime:     googleTime(img.uploaded),
				MediaType:      ptImageIndex,
				UpdateTime:     googleTime(img.updated),
				uploaded:       img.uploaded,
				updated:        img.updated,
			})
		}
	}
	if !found {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.")
		return
	}
	slices.SortFunc(images, func(a, b arDockerImage) int {
		c := 0
		if len(orderBy) > 0 {
			switch orderBy[0] {
			case "upload_time":
				c = a.uploaded.Compare(b.uploaded)
			case "update_time":
				c = a.updated.Compare(b.updated)
			}
		}
		if c == 0 {
			c = strings.Compare(a.Name, b.Name)
		}
		if len(orderBy) == 2 && orderBy[1] == "desc" {
			c = -c
		}
		return c
	})
	listing := "ar " + prefix + " " + strings.Join(orderBy, " ")
	start := 0
	if tok := q.Get("pageToken"); tok != "" {
		offset, ok := p.resume(tok, listing)
		if !ok {
			invalid("The page token is not valid for this request.")
			return
		}
		start = offset
	}
	images, more := page(images, start, pageSize)
	answer := map[string]any{}
	if len(images) > 0 {
		answer["dockerImages"] = images
	}
	if more {
		answer["nextPageToken"] = p.cursor(listing, start+pageSize)
	}
	writeAPIJSON(w, http.StatusOK, answer)
}

// ---- Azure Container Registry ----

type acrErrorEntry struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Detail  any    `json:"detail"`
}

// acrErrors writes an error the way ACR's registry and its /acr/v1 API
// do.
func acrErrors(w http.ResponseWriter, status int, code, message string, detail any) {
	writeAPIJSON(w, status, map[string][]acrErrorEntry{"errors": {{code, message, detail}}})
}

type acrTag struct {
	Name                 string        `json:"name"`
	Digest               string        `json:"digest"`
	CreatedTime          string        `json:"createdTime"`
	LastUpdateTime       string        `json:"lastUpdateTime"`
	Signed               bool          `json:"signed"`
	ChangeableAttributes acrAttributes `json:"changeableAttributes"`
}

type acrAttributes struct {
	DeleteEnabled bool `json:"deleteEnabled"`
	WriteEnabled  bool `json:"writeEnabled"`
	ReadEnabled   bool `json:"readEnabled"`
	ListEnabled   bool `json:"listEnabled"`
}

// acrTime is a time as ACR writes it, with seven digits of fraction.
func acrTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.0000000Z") }

func (p *PushTimes) serveACRTags(w http.ResponseWriter, r *http.Request, _ []byte) {
	w.Header().Set("Docker-Distribution-Api-Version", "registry/2.0")
	repository, isTags := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/acr/v1/"), "/_tags")
	isTags = isTags && strings.HasPrefix(r.URL.Path, "/acr/v1/") && repository != ""
	if r.URL.Path != "/v2/" && !isTags {
		p.problemf(r, "not GET /v2/ or /acr/v1/{repository}/_tags")
		acrErrors(w, http.StatusNotFound, "NOT_FOUND", "not found", nil)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		p.problemf(r, "method %s, want GET", r.Method)
		acrErrors(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "The operation is unsupported.", nil)
		return
	}
	if !p.basicOK(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="Azure Container Registry"`)
		acrErrors(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required", nil)
		return
	}
	if !isTags {
		writeAPIJSON(w, http.StatusOK, struct{}{})
		return
	}
	q := r.URL.Query()
	n := 100
	if s := q.Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			p.problemf(r, "n %q is not a positive number", s)
			acrErrors(w, http.StatusBadRequest, "PAGINATION_NUMBER_INVALID", "invalid number of results requested", map[string]string{"n": s})
			return
		}
		n = min(v, 100)
	}
	orderby := q.Get("orderby")
	if !slices.Contains([]string{"", "timedesc", "timeasc"}, orderby) {
		p.problemf(r, "orderby %q, want timedesc, timeasc or none", orderby)
		acrErrors(w, http.StatusBadRequest, "UNSUPPORTED", "orderby is not supported", map[string]string{"orderby": orderby})
		return
	}
	repo := p.repos[repository]
	if repo == nil {
		acrErrors(w, http.StatusNotFound, "NAME_UNKNOWN", "repository name not known to registry", map[string]string{"name": repository})
		return
	}
	tags := repo.tagsByName()
	if orderby != "" {
		slices.SortStableFunc(tags, func(a, b *ptTag) int {
			if orderby == "timedesc" {
				return b.pushed.Compare(a.pushed)
			}
			return a.pushed.Compare(b.pushed)
		})
	}
	start := 0
	if last := q.Get("last"); last != "" {
		// By name, last need not be a tag; by time it places the page.
		start = len(tags)
		for i, tg := range tags {
			if orderby == "" && tg.name > last {
				start = i
				break
			}
			if orderby != "" && tg.name == last {
				start = i + 1
				break
			}
		}
	}
	tags, more := page(tags, start, n)
	answer := []acrTag{}
	for _, tg := range tags {
		answer = append(answer, acrTag{
			Name: tg.name, Digest: tg.digest, CreatedTime: acrTime(tg.created), LastUpdateTime: acrTime(tg.pushed),
			ChangeableAttributes: acrAttributes{true, true, true, true},
		})
	}
	if more {
		w.Header().Set("Link", fmt.Sprintf(`</acr/v1/%s/_tags?last=%s&n=%d&orderby=%s>; rel="next"`,
			repository, url.QueryEscape(tags[len(tags)-1].name), n, orderby))
	}
	writeAPIJSON(w, http.StatusOK, struct {
		Registry  string   `json:"registry"`
		ImageName string   `json:"imageName"`
		Tags      []acrTag `json:"tags"`
	}{p.registry, repository, answer})
}

// ---- Docker Hub ----

type hubTag struct {
	ID            int64   `json:"id"`
	Name          string  `json:"name"`
	Repository    int64   `json:"repository"`
	FullSize      int64   `json:"full_size"`
	V2            bool    `json:"v2"`
	TagStatus     string  `json:"tag_status"`
	TagLastPulled *string `json:"tag_last_pulled"`
	TagLastPushed string  `json:"tag_last_pushed"`
	LastUpdated   string  `json:"last_updated"`
	MediaType     string  `json:"media_type"`
	ContentType   string  `json:"content_type"`
	Digest        string  `json:"digest"`
}

// hubError writes an error the way Docker Hub's API does.
func hubError(w http.ResponseWriter, status int, message string) {
	writeAPIJSON(w, status, map[string]any{"message": message, "errinfo": map[string]any{}})
}

// hubTime is a time as Docker Hub writes it, in microseconds.
func hubTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

const hubNotFound = "httperror 404: object not found"

func (p *PushTimes) serveDockerHub(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.URL.Path == "/v2/auth/token" {
		p.serveHubToken(w, r, body)
		return
	}
	segs := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if len(segs) != 6 || segs[0] != "v2" || segs[1] != "namespaces" || segs[3] != "repositories" || segs[5] != "tags" || r.Method != http.MethodGet {
		p.problemf(r, "not POST /v2/auth/token or GET /v2/namespaces/{namespace}/repositories/{name}/tags")
		hubError(w, http.StatusNotFound, hubNotFound)
		return
	}
	token, sent, ok := authToken(r, "Bearer")
	if sent && !ok {
		p.problemf(r, "Authorization is not a Bearer token from /v2/auth/token")
	}
	name := segs[2] + "/" + segs[4]
	repo := p.repos[name]
	// Hub hides the private repositories a caller may not see.
	if repo == nil || p.private[name] && !p.hubTokens[token] {
		hubError(w, http.StatusNotFound, hubNotFound)
		return
	}
	q := r.URL.Query()
	// Hub takes a page size it cannot read as its default, and one above
	// its bound as the bound.
	size := 10
	if n, err := strconv.Atoi(q.Get("page_size")); err == nil && n > 0 {
		size = min(n, 100)
	}
	pageNo := 1
	if s := q.Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			p.problemf(r, "page %q, want a number from 1", s)
			hubError(w, http.StatusNotFound, hubNotFound)
			return
		}
		pageNo = n
	}
	tags := repo.tagsNewestFirst()
	if pageNo > 1 && pageNo-1 >= (len(tags)+size-1)/size {
		hubError(w, http.StatusNotFound, hubNotFound)
		return
	}
	results, more := page(tags, (pageNo-1)*size, size)
	link := func(n int) *string {
		q := r.URL.Query()
		if n == 1 {
			q.Del("page")
		} else {
			q.Set("page", strconv.Itoa(n))
		}
		u := p.URL + r.URL.EscapedPath()
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		return &u
	}
	var next, previous *string
	if more {
		next = link(pageNo + 1)
	}
	if pageNo > 1 {
		previous = link(pageNo - 1)
	}
	answer := []hubTag{}
	for _, tg := range results {
		answer = append(answer, hubTag{
			ID: tg.id, Name: tg.name, Repository: repo.id, FullSize: repo.images[tg.digest].size, V2: true,
			TagStatus: "active", TagLastPushed: hubTime(tg.pushed), LastUpdated: hubTime(tg.pushed),
			MediaType: ptImageIndex, ContentType: "image", Digest: tg.digest,
		})
	}
	writeAPIJSON(w, http.StatusOK, struct {
		Count    int      `json:"count"`
		Next     *string  `json:"next"`
		Previous *string  `json:"previous"`
		Results  []hubTag `json:"results"`
	}{len(tags), next, previous, answer})
}

func (p *PushTimes) serveHubToken(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Method != http.MethodPost {
		p.problemf(r, "method %s, want POST", r.Method)
		hubError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		p.problemf(r, "Content-Type %q, want application/json", r.Header.Get("Content-Type"))
		hubError(w, http.StatusUnsupportedMediaType, "unsupported media type")
		return
	}
	var req struct {
		Identifier string `json:"identifier"`
		Secret     string `json:"secret"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Identifier == "" || req.Secret == "" {
		p.problemf(r, "body %q, want {\"identifier\": ..., \"secret\": ...}", body)
		hubError(w, http.StatusBadRequest, "identifier and secret are required")
		return
	}
	if !p.hasCredentials || req.Identifier != p.username || req.Secret != p.password {
		hubError(w, http.StatusUnauthorized, "incorrect username or password")
		return
	}
	token := "dckr_jwt_" + randomHex() + randomHex()
	p.hubTokens[token] = true
	writeAPIJSON(w, http.StatusOK, map[string]string{"access_token": token})
}

// ---- Harbor ----

type harborTag struct {
	ID           int64  `json:"id"`
	RepositoryID int64  `json:"repository_id"`
	ArtifactID   int64  `json:"artifact_id"`
	Name         string `json:"name"`
	PushTime     string `json:"push_time"`
	PullTime     string `json:"pull_time"`
	Immutable    bool   `json:"immutable"`
}

type harborArtifact struct {
	ID                int64       `json:"id"`
	Type              string      `json:"type"`
	MediaType         string      `json:"media_type"`
	ManifestMediaType string      `json:"manifest_media_type"`
	RepositoryID      int64       `json:"repository_id"`
	Digest            string      `json:"digest"`
	Size              int64       `json:"size"`
	PushTime          string      `json:"push_time"`
	PullTime          string      `json:"pull_time"`
	Tags              []harborTag `json:"tags"`
}

// harborError writes an error the way Harbor's API does.
func harborError(w http.ResponseWriter, status int, code, message string) {
	type entry struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	writeAPIJSON(w, status, map[string][]entry{"errors": {{code, message}}})
}

// harborTime is a time as Harbor writes it, in milliseconds.
func harborTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

const harborNeverPulled = "0001-01-01T00:00:00.000Z"

func (p *PushTimes) serveHarbor(w http.ResponseWriter, r *http.Request, _ []byte) {
	// The name arrives escaped twice, so the raw path has one segment for
	// it; Harbor routes on that path.
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v2.0/projects/")
	segs := strings.Split(rest, "/")
	if !ok || len(segs) < 4 || segs[1] != "repositories" || segs[len(segs)-1] != "artifacts" {
		p.problemf(r, "not GET /api/v2.0/projects/{project}/repositories/{name}/artifacts")
		harborError(w, http.StatusNotFound, "NOT_FOUND", "not found")
		return
	}
	if len(segs) > 4 {
		p.problemf(r, "the repository name has an unescaped /, want it escaped twice (%%252F)")
		harborError(w, http.StatusNotFound, "NOT_FOUND", "not found")
		return
	}
	project, err1 := url.PathUnescape(segs[0])
	once, err2 := url.PathUnescape(segs[2])
	name, err3 := url.PathUnescape(once)
	if err1 != nil || err2 != nil || err3 != nil || strings.Contains(once, "/") {
		p.problemf(r, "the repository name is escaped once (%%2F), want it escaped twice (%%252F)")
		harborError(w, http.StatusNotFound, "NOT_FOUND", "not found")
		return
	}
	if r.Method != http.MethodGet {
		p.problemf(r, "method %s, want GET", r.Method)
		harborError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "method not allowed")
		return
	}
	if !p.basicOK(r) {
		harborError(w, http.StatusUnauthorized, "UNAUTHORIZED", "unauthorized")
		return
	}
	q := r.URL.Query()
	unprocessable := func(message string) {
		p.problemf(r, "%s", message)
		harborError(w, http.StatusUnprocessableEntity, "UNPROCESSABLE_ENTITY", "validation failure list:\n"+message)
	}
	number := func(param string, def int64) (int64, bool) {
		s := q.Get(param)
		if s == "" {
			return def, true
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			unprocessable(fmt.Sprintf("%s in query must be of type int64: %q", param, s))
			return 0, false
		}
		if n < 1 {
			unprocessable(fmt.Sprintf("%s in query should be greater than or equal to 1", param))
			return 0, false
		}
		return n, true
	}
	pageNo, ok := number("page", 1)
	if !ok {
		return
	}
	size, ok := number("page_size", 10)
	if !ok {
		return
	}
	if size > 100 {
		unprocessable("page_size in query should be less than or equal to 100")
		return
	}
	withTag := true
	if s := q.Get("with_tag"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			unprocessable(fmt.Sprintf("with_tag in query must be of type boolean: %q", s))
			return
		}
		withTag = b
	}
	repo := p.repos[project+"/"+name]
	if repo == nil {
		harborError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("repository %s/%s not found", project, name))
		return
	}
	images := repo.imagesNewestFirst()
	start := int((pageNo - 1) * size)
	if pageNo > int64(len(images)) { // keeps the product below in range
		start = len(images)
	}
	results, more := page(images, start, int(size))
	answer := []harborArtifact{}
	for _, img := range results {
		a := harborArtifact{
			ID: img.id, Type: "IMAGE", MediaType: "application/vnd.oci.image.config.v1+json", ManifestMediaType: ptImageIndex,
			RepositoryID: repo.id, Digest: img.digest, Size: img.size, PushTime: harborTime(img.uploaded), PullTime: harborNeverPulled,
		}
		if withTag {
			for _, name := range img.tags {
				tg := repo.tags[name]
				a.Tags = append(a.Tags, harborTag{
					ID: tg.id, RepositoryID: repo.id, ArtifactID: img.id, Name: tg.name,
					PushTime: harborTime(tg.pushed), PullTime: harborNeverPulled,
				})
			}
		}
		answer = append(answer, a)
	}
	link := func(n int64, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.FormatInt(n, 10))
		q.Set("page_size", strconv.FormatInt(size, 10))
		return fmt.Sprintf(`<%s?%s>; rel="%s"`, r.URL.EscapedPath(), q.Encode(), rel)
	}
	var links []string
	if pageNo > 1 {
		links = append(links, link(pageNo-1, "prev"))
	}
	if more {
		links = append(links, link(pageNo+1, "next"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, " , "))
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(len(images)))
	writeAPIJSON(w, http.StatusOK, answer)
}

// ---- GitHub Container Registry (GitHub's packages API) ----

type ghcrVersion struct {
	ID             int64  `json:"id"`
	Name           string `json:"name"`
	URL            string `json:"url"`
	PackageHTMLURL string `json:"package_html_url"`
	CreatedAt      string `json:"created_at"`
	UpdatedAt      string `json:"updated_at"`
	HTMLURL        string `json:"html_url"`
	Metadata       struct {
		PackageType string `json:"package_type"`
		Container   struct {
			Tags []string `json:"tags"`
		} `json:"container"`
	} `json:"metadata"`
}

const ghcrDocs = "https://docs.github.com/rest/packages/packages#list-package-versions-for-a-package-owned-by-"

// ghcrError writes an error the way GitHub's REST API does.
func ghcrError(w http.ResponseWriter, status int, message, docs string) {
	writeAPIJSON(w, status, map[string]string{"message": message, "documentation_url": docs, "status": strconv.Itoa(status)})
}

func (p *PushTimes) serveGHCR(w http.ResponseWriter, r *http.Request, _ []byte) {
	// The package name's slashes arrive as %2F; GitHub routes on the
	// raw path.
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	if len(segs) < 6 || segs[0] != "users" && segs[0] != "orgs" || segs[2] != "packages" || segs[len(segs)-1] != "versions" {
		p.problemf(r, "not GET /{users|orgs}/{owner}/packages/container/{package}/versions")
		ghcrError(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest")
		return
	}
	kind := segs[0]
	docs := ghcrDocs + map[string]string{"users": "a-user", "orgs": "an-organization"}[kind]
	switch {
	case len(segs) > 6:
		p.problemf(r, "the package name has an unescaped /, want %%2F")
		ghcrError(w, http.StatusNotFound, "Not Found", docs)
		return
	case segs[3] != "container":
		p.problemf(r, "package type %q, want container", segs[3])
		ghcrError(w, http.StatusNotFound, "Not Found", docs)
		return
	case r.Method != http.MethodGet:
		p.problemf(r, "method %s, want GET", r.Method)
		ghcrError(w, http.StatusNotFound, "Not Found", docs)
		return
	case r.Header.Get("User-Agent") == "":
		p.problemf(r, "no User-Agent, which GitHub requires")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). Check https://developer.github.com for other possible causes.\n")
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), "application/vnd.github+json") {
		p.problemf(r, "Accept %q, want application/vnd.github+json", r.Header.Get("Accept"))
	}
	token, sent, ok := authToken(r, "Bearer", "token")
	if _, pass, basic := r.BasicAuth(); basic {
		// GitHub also takes a token as the password of basic auth.
		token, ok = pass, true
	}
	switch {
	case !sent:
		ghcrError(w, http.StatusUnauthorized, "Requires authentication", "https://docs.github.com/rest")
		return
	case !ok || !p.hasCredentials || token != p.password:
		ghcrError(w, http.StatusUnauthorized, "Bad credentials", "https://docs.github.com/rest")
		return
	}
	owner, err1 := url.PathUnescape(segs[1])
	pkg, err2 := url.PathUnescape(segs[4])
	repo := p.repos[owner+"/"+pkg]
	if err1 != nil || err2 != nil || repo == nil || (kind == "orgs") != p.orgs[owner] {
		ghcrError(w, http.StatusNotFound, "Not Found", docs)
		return
	}
	q := r.URL.Query()
	// GitHub takes a page or page size it cannot read as the default,
	// and one above the bound as the bound.
	perPage := 30
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n > 0 {
		perPage = min(n, 100)
	}
	pageNo := 1
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
		pageNo = n
	}
	versions := repo.imagesNewestFirst()
	switch state := q.Get("state"); state {
	case "", "active":
	case "deleted":
		versions = nil
	default:
		p.problemf(r, "state %q, want active or deleted", state)
		ghcrError(w, http.StatusUnprocessableEntity, "Validation Failed", docs)
		return
	}
	start := len(versions)
	if pageNo <= len(versions) {
		start = (pageNo - 1) * perPage
	}
	results, _ := page(versions, start, perPage)
	api := fmt.Sprintf("%s/%s/%s/packages/container/%s", p.URL, kind, segs[1], url.PathEscape(pkg))
	html := fmt.Sprintf("https://github.com/%s/%s/packages/container", kind, segs[1])
	answer := []ghcrVersion{}
	for _, img := range results {
		v := ghcrVersion{
			ID: img.id, Name: img.digest, URL: fmt.Sprintf("%s/versions/%d", api, img.id),
			PackageHTMLURL: html + "/package/" + url.PathEscape(pkg),
			CreatedAt:      img.uploaded.UTC().Format(time.RFC3339), UpdatedAt: img.updated.UTC().Format(time.RFC3339),
			HTMLURL: fmt.Sprintf("%s/%s/%d", html, url.PathEscape(pkg), img.id),
		}
		v.Metadata.PackageType = "container"
		v.Metadata.Container.Tags = append([]string{}, img.tags...)
		answer = append(answer, v)
	}
	last := max(1, (len(versions)+perPage-1)/perPage)
	link := func(n int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(n))
		return fmt.Sprintf(`<%s%s?%s>; rel="%s"`, p.URL, r.URL.EscapedPath(), q.Encode(), rel)
	}
	var links []string
	if pageNo > 1 {
		links = append(links, link(min(pageNo-1, last), "prev"))
	}
	if pageNo < last {
		links = append(links, link(pageNo+1, "next"), link(last, "last"))
	}
	if pageNo > 1 {
		links = append(links, link(1, "first"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	writeAPIJSON(w, http.StatusOK, answer)
}

// ---- Quay ----

type quayTag struct {
	Name           string `json:"name"`
	Reversion      bool   `json:"reversion"`
	StartTS        int64  `json:"start_ts"`
	EndTS          *int64 `json:"end_ts,omitempty"`
	ManifestDigest string `json:"manifest_digest"`
	IsManifestList bool   `json:"is_manifest_list"`
	Size           int64  `json:"size"`
	LastModified   string `json:"last_modified"`
	Expiration     string `json:"expiration,omitempty"`

	start time.Time
}

// quayError writes an error the way Quay's API does.
func (p *PushTimes) quayError(w http.ResponseWriter, status int, kind, detail string) {
	writeAPIJSON(w, status, map[string]any{
		"detail": detail, "error_message": detail, "error_type": kind, "title": kind, "status": status,
		"type": "https://" + p.registry + "/api/v1/error/" + kind,
	})
}

// quayTime is a time as Quay writes it.
func quayTime(t time.Time) string { return t.UTC().Format("Mon, 02 Jan 2006 15:04:05 -0000") }

func (p *PushTimes) serveQuay(w http.ResponseWriter, r *http.Request, _ []byte) {
	rest, isAPI := strings.CutPrefix(r.URL.Path, "/api/v1/repository/")
	name, isTags := strings.CutSuffix(rest, "/tag/")
	if bare, ok := strings.CutSuffix(rest, "/tag"); isAPI && ok && strings.Count(bare, "/") == 1 {
		// Quay's routes end in a slash; Flask sends the client there.
		u := *r.URL
		u.Path += "/"
		u.RawPath = ""
		http.Redirect(w, r, u.RequestURI(), http.StatusPermanentRedirect)
		return
	}
	if !isAPI || !isTags || strings.Count(name, "/") != 1 || r.Method != http.MethodGet {
		p.problemf(r, "not GET /api/v1/repository/{namespace}/{name}/tag/")
		p.quayError(w, http.StatusNotFound, "not_found", "Not Found")
		return
	}
	token, sent, ok := authToken(r, "Bearer")
	if sent && !ok {
		p.problemf(r, "Authorization is not a Bearer token")
	}
	authed := ok && p.hasCredentials && token == p.password
	if sent && !authed || p.private[name] && !authed {
		p.quayError(w, http.StatusUnauthorized, "invalid_token", "The access token provided is invalid or has expired")
		return
	}
	repo := p.repos[name]
	if repo == nil {
		p.quayError(w, http.StatusNotFound, "not_found", "Not Found")
		return
	}
	q := r.URL.Query()
	number := func(param string, def int) (int, bool) {
		s := q.Get(param)
		if s == "" {
			return def, true
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			p.problemf(r, "%s %q is not a number", param, s)
			p.quayError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("%s: invalid literal for int() with base 10: '%s'", param, s))
			return 0, false
		}
		return n, true
	}
	limit, ok := number("limit", 50)
	if !ok {
		return
	}
	pageNo, ok := number("page", 1)
	if !ok {
		return
	}
	// Quay clamps both rather than refusing them.
	limit, pageNo = min(max(limit, 1), 100), max(pageNo, 1)
	onlyActive := strings.EqualFold(q.Get("onlyActiveTags"), "true")
	specific := q.Get("specificTag")
	var tags []quayTag
	for _, tg := range repo.tags {
		if specific != "" && tg.name != specific {
			continue
		}
		for i, push := range tg.history {
			active := i == len(tg.history)-1
			if !active && onlyActive {
				continue
			}
			t := quayTag{
				Name: tg.name, StartTS: push.at.Unix(), ManifestDigest: push.digest,
				Size: repo.images[push.digest].size, LastModified: quayTime(push.at), start: push.at,
			}
			if !active {
				end := tg.history[i+1].at
				t.EndTS = new(end.Unix())
				t.Expiration = quayTime(end)
			}
			tags = append(tags, t)
		}
	}
	slices.SortFunc(tags, func(a, b quayTag) int {
		if c := b.start.Compare(a.start); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	start := len(tags)
	if pageNo <= len(tags) {
		start = (pageNo - 1) * limit
	}
	results, more := page(tags, start, limit)
	writeAPIJSON(w, http.StatusOK, struct {
		Tags          []quayTag `json:"tags"`
		Page          int       `json:"page"`
		HasAdditional bool      `json:"has_additional"`
	}{results, pageNo, more})
}
