package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// Source names: the values of ?type= and X-Registry-Type. The first four
// are those Argo CD Image Updater accepted.
const (
	DockerHub    = "docker.io"
	GHCR         = "ghcr.io"
	Quay         = "quay.io"
	Harbor       = "harbor"
	Distribution = "distribution"
	ACR          = "acr"         // Azure Container Registry
	CloudEvents  = "cloudevents" // Amazon ECR events from EventBridge, as CloudEvents
	// Google Artifact Registry (and Container Registry) notifications,
	// delivered by a Pub/Sub push subscription.
	ArtifactRegistry = "artifact-registry"
	AliyunACR        = "aliyun-acr"  // Alibaba Cloud Container Registry
	Artifactory      = "artifactory" // JFrog Artifactory
	Nexus            = "nexus"       // Sonatype Nexus Repository
	// Generic is any other sender, whose payload's fields the operator
	// maps to the repository and tag (Config.Generic).
	Generic = "generic"
)

// Sources are the source names the handler knows, in a stable order.
func Sources() []string {
	return []string{DockerHub, GHCR, Quay, Harbor, Distribution, ACR, CloudEvents, ArtifactRegistry, AliyunACR, Artifactory, Nexus, Generic}
}

// authMethod is how a registry proves it knows the shared secret.
type authMethod int

const (
	// authQuery: the secret is the ?secret= query parameter of the URL the
	// registry was given (Docker Hub, Quay, Aliyun ACR and Pub/Sub push
	// subscriptions sign nothing with a shared secret).
	authQuery authMethod = iota
	// authSignature: X-Hub-Signature-256 is "sha256=" and the hex
	// HMAC-SHA256 of the body keyed with the secret (GitHub).
	authSignature
	// authHeader: the Authorization header is the secret, or "Bearer "
	// and the secret (Harbor's auth header, the Distribution registry's
	// configured endpoint headers, ACR's custom headers, an EventBridge
	// API destination's API key).
	authHeader
	// authHeaderOrQuery: as authHeader, or the X-Webhook-Secret header,
	// or the secret query parameter, which Argo CD Image Updater 1.x
	// checks for these types; webhooks set up for it keep working.
	authHeaderOrQuery
	// authJFrog: X-JFrog-Event-Auth, where Artifactory sends a webhook's
	// secret token, or the Authorization header, as authHeader.
	authJFrog
	// authNexus: X-Nexus-Webhook-Signature is the hex HMAC-SHA1 of the
	// body keyed with the secret (Nexus Repository's secret key).
	authNexus
)

// signed tells whether the proof covers the payload, which must then be
// read before the sender is proven.
func (m authMethod) signed() bool { return m == authSignature || m == authNexus }

func (m authMethod) String() string {
	switch m {
	case authQuery:
		return "the secret query parameter"
	case authSignature:
		return "the X-Hub-Signature-256 header"
	case authHeaderOrQuery:
		return "the Authorization header, X-Webhook-Secret header or secret query parameter"
	case authJFrog:
		return "the X-JFrog-Event-Auth or Authorization header"
	case authNexus:
		return "the X-Nexus-Webhook-Signature header"
	default:
		return "the Authorization header"
	}
}

// format is how one source authenticates and what its payload says. parse
// returns the repositories that got a push, each with the tag pushed when
// the payload names one, never a digest; none when the payload announces
// something else (a ping, a deletion, a blob).
// It reads r's headers and query, never its body, which is given.
type format struct {
	auth  authMethod
	parse func(r *http.Request, body []byte) ([]imageref.Reference, error)
}

var formats = map[string]format{
	DockerHub:        {auth: authQuery, parse: parseDockerHub},
	GHCR:             {auth: authSignature, parse: parseGitHub},
	Quay:             {auth: authQuery, parse: parseQuay},
	Harbor:           {auth: authHeader, parse: parseHarbor},
	Distribution:     {auth: authHeader, parse: parseDistribution},
	ACR:              {auth: authHeaderOrQuery, parse: parseACR},
	CloudEvents:      {auth: authHeaderOrQuery, parse: parseCloudEvents},
	ArtifactRegistry: {auth: authQuery, parse: parsePubSub},
	AliyunACR:        {auth: authQuery, parse: parseAliyun},
	Artifactory:      {auth: authJFrog, parse: parseArtifactory},
	Nexus:            {auth: authNexus, parse: parseNexus},
}

// payloadError is a payload that cannot be read: answered with 400.
type payloadError struct{ err error }

func (e *payloadError) Error() string { return e.err.Error() }
func (e *payloadError) Unwrap() error { return e.err }

func malformed(format string, args ...any) error {
	return &payloadError{fmt.Errorf(format, args...)}
}

// decode reads a JSON payload, naming the offset of a syntax error so
// that whoever configures the sender can find it.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return malformed("invalid JSON at byte %d: %v", syntax.Offset, err)
		}
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return malformed("invalid JSON: field %s holds a JSON %s where %s was expected", typ.Field, typ.Value, typ.Type)
		}
		return malformed("invalid JSON: %v", err)
	}
	return nil
}

// repository reads host/path as a repository name, carrying tag, the tag
// the push named (or, when tag is "", one in path). The check looks for it
// in the listing, to know whether the registry showed the tag yet (see
// Dispatcher); a tag that is not valid is dropped, since the repository
// alone is still worth checking. A digest is dropped.
func repository(host, path, tag, field string) (imageref.Reference, error) {
	if path == "" {
		return imageref.Reference{}, malformed("%s is missing", field)
	}
	name := path
	if host != "" {
		name = host + "/" + path
	}
	ref, err := imageref.Parse(name)
	if err != nil {
		return imageref.Reference{}, malformed("%s: %v", field, err)
	}
	if tag == "" {
		tag = ref.Tag()
	}
	bare := ref.WithoutVersion()
	if tagged, err := bare.WithTag(tag); err == nil {
		return tagged, nil
	}
	return bare, nil
}

// maxRepositories bounds the repositories one notification may name: a
// push names one, a batch of a registry's events a few. Past it the
// payload is refused rather than turned into that many checks.
const maxRepositories = 100

// repositories collects references without repeating a repository, in
// their order, each with the last tag named for it: of pushes reported
// together the last is the one a registry is likeliest not to show yet. A
// map keyed by the canonical name keeps a payload of many events linear.
type repositories struct {
	list []imageref.Reference
	seen map[string]int // index in list
}

func (rs *repositories) add(r imageref.Reference) error {
	if rs.seen == nil {
		rs.seen = map[string]int{}
	}
	if i, ok := rs.seen[r.Name()]; ok {
		if r.Tag() != "" {
			rs.list[i] = r
		}
		return nil
	}
	if len(rs.list) == maxRepositories {
		return malformed("more than %d repositories in one notification", maxRepositories)
	}
	rs.seen[r.Name()] = len(rs.list)
	rs.list = append(rs.list, r)
	return nil
}

// Docker Hub: {"push_data": {"tag": ...}, "repository": {"repo_name":
// "namespace/name", ...}}; official images have no namespace.
func parseDockerHub(_ *http.Request, body []byte) ([]imageref.Reference, error) {
	var p struct {
		PushData struct {
			Tag string `json:"tag"`
		} `json:"push_data"`
		Repository struct {
			RepoName string `json:"repo_name"`
		} `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	ref, err := repository(imageref.DockerHub, p.Repository.RepoName, p.PushData.Tag, "repository.repo_name")
	if err != nil {
		return nil, err
	}
	return []imageref.Reference{ref}, nil
}

// Quay: {"docker_url": "quay.io/namespace/name", "updated_tags": [...],
// ...}; docker_url carries the host of a self-hosted Quay too.
func parseQuay(_ *http.Request, body []byte) ([]imageref.Reference, error) {
	var p struct {
		DockerURL   string   `json:"docker_url"`
		UpdatedTags []string `json:"updated_tags"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	var tag string
	if len(p.UpdatedTags) > 0 {
		tag = p.UpdatedTags[0]
	}
	ref, err := repository("", p.DockerURL, tag, "docker_url")
	if err != nil {
		return nil, err
	}
	return []imageref.Reference{ref}, nil
}

// githubPackage is the package object of GitHub's package and
// registry_package events.
type githubPackage struct {
	Name        string `json:"name"`
	Namespace   string `json:"namespace"`
	PackageType string `json:"package_type"`
	Owner       struct {
		Login string `json:"login"`
	} `json:"owner"`
	PackageVersion struct {
		PackageURL        string `json:"package_url"`
		ContainerMetadata struct {
			Tag struct {
				Name string `json:"name"`
			} `json:"tag"`
		} `json:"container_metadata"`
	} `json:"package_version"`
}

// GitHub: the package event (X-GitHub-Event: package; registry_package is
// its newer name) when a container image is published. Other packages, a
// version without a tag (a platform manifest of a multi-platform image)
// and other events, such as the ping sent when the webhook is created,
// name nothing to check.
func parseGitHub(r *http.Request, body []byte) ([]imageref.Reference, error) {
	event := r.Header.Get("X-GitHub-Event")
	if event != "package" && event != "registry_package" {
		if !json.Valid(body) {
			return nil, malformed("invalid JSON")
		}
		return nil, nil
	}
	var p struct {
		Package         *githubPackage `json:"package"`
		RegistryPackage *githubPackage `json:"registry_package"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	pkg := p.Package
	if pkg == nil {
		pkg = p.RegistryPackage
	}
	if pkg == nil {
		return nil, malformed("a %s event without a package object", event)
	}
	if !strings.EqualFold(pkg.PackageType, "container") || pkg.PackageVersion.ContainerMetadata.Tag.Name == "" {
		return nil, nil
	}
	// package_url names the registry, which differs on GitHub Enterprise
	// Server; GHCR names are lower case whatever the owner's spelling.
	if u := pkg.PackageVersion.PackageURL; u != "" {
		ref, err := repository("", strings.ToLower(u), pkg.PackageVersion.ContainerMetadata.Tag.Name, "package.package_version.package_url")
		if err != nil {
			return nil, err
		}
		return []imageref.Reference{ref}, nil
	}
	owner := pkg.Namespace
	if owner == "" {
		owner = pkg.Owner.Login
	}
	if owner == "" || pkg.Name == "" {
		return nil, malformed("package.name and package.namespace (or package.owner.login) are required")
	}
	ref, err := repository(GHCR, strings.ToLower(owner+"/"+pkg.Name), pkg.PackageVersion.ContainerMetadata.Tag.Name, "package.name")
	if err != nil {
		return nil, err
	}
	return []imageref.Reference{ref}, nil
}

// Harbor: {"type": "PUSH_ARTIFACT", "event_data": {"repository":
// {"repo_full_name": "project/name"}, "resources": [{"tag": ...,
// "resource_url": "harbor.example.com/project/name:tag"}]}}. The host is
// only in resource_url. Harbor 1.x called the type pushImage.
func parseHarbor(_ *http.Request, body []byte) ([]imageref.Reference, error) {
	var p struct {
		Type      string `json:"type"`
		EventData struct {
			Repository struct {
				RepoFullName string `json:"repo_full_name"`
			} `json:"repository"`
			Resources []struct {
				Tag         string `json:"tag"`
				ResourceURL string `json:"resource_url"`
			} `json:"resources"`
		} `json:"event_data"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	if p.Type != "PUSH_ARTIFACT" && p.Type != "pushImage" {
		return nil, nil
	}
	var out repositories
	for i, r := range p.EventData.Resources {
		if r.Tag == "" {
			continue
		}
		host, _, ok := strings.Cut(r.ResourceURL, "/")
		if !ok || host == "" {
			return nil, malformed("event_data.resources[%d].resource_url %q does not start with the registry host", i, r.ResourceURL)
		}
		ref, err := repository(host, p.EventData.Repository.RepoFullName, r.Tag, "event_data.repository.repo_full_name")
		if err != nil {
			return nil, err
		}
		if err := out.add(ref); err != nil {
			return nil, err
		}
	}
	return out.list, nil
}

// The Distribution registry's notifications: an envelope {"events": [...]}
// of events with action, target.repository, target.tag (set when a
// manifest was pushed by tag) and request.host (the registry as the
// pushing client addressed it). Pulls, deletions and blob uploads name
// nothing to check.
func parseDistribution(_ *http.Request, body []byte) ([]imageref.Reference, error) {
	var p struct {
		Events *[]distributionEvent `json:"events"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	if p.Events == nil {
		return nil, malformed("no events array: not a notification envelope")
	}
	var out repositories
	for i, e := range *p.Events {
		ref, ok, err := e.pushed(fmt.Sprintf("events[%d]", i))
		if err != nil {
			return nil, err
		}
		if ok {
			if err := out.add(ref); err != nil {
				return nil, err
			}
		}
	}
	return out.list, nil
}

// distributionEvent is one event of the Distribution registry's
// notifications; Azure Container Registry sends events of the same shape,
// one per request.
type distributionEvent struct {
	Action string `json:"action"`
	Target struct {
		Repository string `json:"repository"`
		Tag        string `json:"tag"`
		URL        string `json:"url"`
	} `json:"target"`
	Request struct {
		Host string `json:"host"`
	} `json:"request"`
}

// pushed is the repository of a push by tag; ok is false for other
// events.
func (e distributionEvent) pushed(field string) (ref imageref.Reference, ok bool, err error) {
	if e.Action != "push" || e.Target.Tag == "" {
		return imageref.Reference{}, false, nil
	}
	host := e.Request.Host
	if host == "" {
		if u, err := url.Parse(e.Target.URL); err == nil {
			host = u.Host
		}
	}
	if host == "" {
		return imageref.Reference{}, false, malformed("%s names no registry host (request.host or target.url)", field)
	}
	ref, err = repository(host, e.Target.Repository, e.Target.Tag, field+".target.repository")
	return ref, err == nil, err
}

// Azure Container Registry: one event per request, {"action": "push",
// "target": {"repository", "tag", ...}, "request": {"host":
// "<name>.azurecr.io", ...}}; the ping of a new webhook has action ping.
func parseACR(_ *http.Request, body []byte) ([]imageref.Reference, error) {
	var e distributionEvent
	if err := decode(body, &e); err != nil {
		return nil, err
	}
	ref, ok, err := e.pushed("the event")
	if err != nil || !ok {
		return nil, err
	}
	return []imageref.Reference{ref}, nil
}

// ecrEvent is EventBridge's event of an ECR push ("detail-type": "ECR
// Image Action"). The registry host is made of the account and region.
type ecrEvent struct {
	DetailType string `json:"detail-type"`
	Source     string `json:"source"`
	Account    string `json:"account"`
	Region     string `json:"region"`
	Detail     struct {
		ActionType     string `json:"action-type"`
		Result         string `json:"result"`
		RepositoryName string `json:"repository-name"`
		ImageTag       string `json:"image-tag"`
	} `json:"detail"`
}

// ecrPushType is the CloudEvent type of the ECR push events that Argo CD
// Image Updater 1.x documents: an EventBridge input transformer makes them
// with source urn:aws:ecr:<region>:<account>:repository/<name> and data
// {repositoryName, imageTag, imageDigest, registryId}.
const ecrPushType = "com.amazon.ecr.image.push"

// CloudEvents carrying EventBridge's ECR events, or the transformed
// events of ecrPushType: structured mode (a JSON envelope with specversion
// and data) or binary mode (ce-* headers, the body is the data). Events
// other than successful pushes by tag name nothing to check.
func parseCloudEvents(r *http.Request, body []byte) ([]imageref.Reference, error) {
	data := json.RawMessage(body)
	ceType, ceSource := r.Header.Get("Ce-Type"), r.Header.Get("Ce-Source")
	if r.Header.Get("Ce-Specversion") == "" {
		var envelope struct {
			SpecVersion string          `json:"specversion"`
			Type        string          `json:"type"`
			Source      string          `json:"source"`
			Data        json.RawMessage `json:"data"`
		}
		if err := decode(body, &envelope); err != nil {
			return nil, err
		}
		if envelope.SpecVersion == "" {
			return nil, malformed("neither a ce-specversion header nor a specversion field: not a CloudEvent")
		}
		data, ceType, ceSource = envelope.Data, envelope.Type, envelope.Source
	}
	if ceType == ecrPushType {
		return parseECRPushEvent(ceSource, data)
	}
	var e ecrEvent
	if err := decode(data, &e); err != nil {
		return nil, err
	}
	if e.Source != "aws.ecr" || e.DetailType != "ECR Image Action" {
		return nil, nil
	}
	if e.Detail.ActionType != "PUSH" || e.Detail.Result != "SUCCESS" || e.Detail.ImageTag == "" {
		return nil, nil
	}
	return ecrRepository(e.Account, e.Region, e.Detail.RepositoryName, e.Detail.ImageTag, "detail.repository-name")
}

// parseECRPushEvent reads an event of ecrPushType; the region is only in
// its source.
func parseECRPushEvent(source string, data json.RawMessage) ([]imageref.Reference, error) {
	var d struct {
		RepositoryName string `json:"repositoryName"`
		ImageTag       string `json:"imageTag"`
		RegistryID     string `json:"registryId"`
	}
	if err := decode(data, &d); err != nil {
		return nil, err
	}
	if d.ImageTag == "" {
		return nil, nil
	}
	// urn:aws:ecr:<region>:<account>:repository/<name>
	parts := strings.SplitN(source, ":", 6)
	if len(parts) != 6 || parts[0] != "urn" || parts[1] != "aws" || parts[2] != "ecr" {
		return nil, malformed("source %q is not urn:aws:ecr:<region>:<account>:repository/<name>", source)
	}
	account := d.RegistryID
	if account == "" {
		account = parts[4]
	}
	return ecrRepository(account, parts[3], d.RepositoryName, d.ImageTag, "data.repositoryName")
}

// ecrRepository is the repository name of account's registry in region.
func ecrRepository(account, region, name, tag, field string) ([]imageref.Reference, error) {
	if account == "" || region == "" {
		return nil, malformed("account and region are required to name the ECR registry")
	}
	host := account + ".dkr.ecr." + region + ".amazonaws.com"
	if strings.HasPrefix(region, "cn-") {
		host += ".cn"
	}
	ref, err := repository(host, name, tag, field)
	if err != nil {
		return nil, err
	}
	return []imageref.Reference{ref}, nil
}
