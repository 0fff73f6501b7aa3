package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// What each format reads from payloads beyond the recorded ones: only the
// repositories that got a push by tag.
func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		source  string
		event   string // X-GitHub-Event, or "binary" for a CloudEvent in binary mode
		query   string // more query parameters of the webhook's URL
		body    string
		want    []string
		wantErr string
	}{
		{name: "docker hub official image", source: DockerHub, body: `{"push_data":{"tag":"1.27"},"repository":{"repo_name":"nginx"}}`, want: []string{"docker.io/library/nginx"}},
		{name: "docker hub without repo_name", source: DockerHub, body: `{"push_data":{"tag":"1.27"},"repository":{}}`, wantErr: "repository.repo_name is missing"},
		{name: "docker hub bad name", source: DockerHub, body: `{"repository":{"repo_name":"Acme/Shop"}}`, wantErr: "repository.repo_name"},
		{name: "docker hub wrong type", source: DockerHub, body: `{"repository":{"repo_name":7}}`, wantErr: "field repository.repo_name holds a JSON number"},
		{name: "quay self-hosted", source: Quay, body: `{"docker_url":"quay.internal.example.com/team/api","updated_tags":["v2"]}`, want: []string{"quay.internal.example.com/team/api"}},
		{name: "quay without docker_url", source: Quay, body: `{"repository":"team/api"}`, wantErr: "docker_url is missing"},
		{name: "github ping", source: GHCR, event: "ping", body: `{"zen":"Keep it logically awesome.","hook_id":1}`},
		{name: "github ping not JSON", source: GHCR, event: "ping", body: `zen`, wantErr: "invalid JSON"},
		{
			name: "github registry_package event", source: GHCR, event: "registry_package",
			body: `{"action":"published","registry_package":{"name":"api","namespace":"team","package_type":"container","package_version":{"container_metadata":{"tag":{"name":"v2"}},"package_url":"ghcr.io/team/api:v2"}}}`,
			want: []string{"ghcr.io/team/api"},
		},
		{
			name: "github package without package_url", source: GHCR, event: "package",
			body: `{"action":"published","package":{"name":"Api","owner":{"login":"Team"},"package_type":"CONTAINER","package_version":{"container_metadata":{"tag":{"name":"v2"}}}}}`,
			want: []string{"ghcr.io/team/api"},
		},
		{
			name: "github untagged version", source: GHCR, event: "package",
			body: `{"action":"published","package":{"name":"api","namespace":"team","package_type":"CONTAINER","package_version":{"container_metadata":{"tag":{"name":""}},"package_url":"ghcr.io/team/api"}}}`,
		},
		{
			name: "github npm package", source: GHCR, event: "package",
			body: `{"action":"published","package":{"name":"api","namespace":"team","package_type":"npm","package_version":{}}}`,
		},
		{name: "github package event without package", source: GHCR, event: "package", body: `{"action":"published"}`, wantErr: "without a package object"},
		{
			name: "harbor 1.x", source: Harbor,
			body: `{"type":"pushImage","event_data":{"resources":[{"tag":"v2","resource_url":"harbor.example.com/team/api:v2"}],"repository":{"repo_full_name":"team/api"}}}`,
			want: []string{"harbor.example.com/team/api"},
		},
		{
			name: "harbor several tags", source: Harbor,
			body: `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"v2","resource_url":"harbor.example.com:8443/team/api:v2"},{"tag":"latest","resource_url":"harbor.example.com:8443/team/api:latest"}],"repository":{"repo_full_name":"team/api"}}}`,
			want: []string{"harbor.example.com:8443/team/api"},
		},
		{name: "harbor deletion", source: Harbor, body: `{"type":"DELETE_ARTIFACT","event_data":{"resources":[{"tag":"v2","resource_url":"harbor.example.com/team/api:v2"}],"repository":{"repo_full_name":"team/api"}}}`},
		{name: "harbor scan", source: Harbor, body: `{"type":"SCANNING_COMPLETED","event_data":{}}`},
		{
			name: "harbor without resource_url", source: Harbor,
			body:    `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"v2"}],"repository":{"repo_full_name":"team/api"}}}`,
			wantErr: "does not start with the registry host",
		},
		{
			name: "distribution pull and delete", source: Distribution,
			body: `{"events":[{"action":"pull","target":{"repository":"team/api","tag":"v2"},"request":{"host":"r.example.com"}},{"action":"delete","target":{"repository":"team/api","tag":"v2"},"request":{"host":"r.example.com"}}]}`,
		},
		{
			name: "distribution two repositories", source: Distribution,
			body: `{"events":[{"action":"push","target":{"repository":"team/api","tag":"v2"},"request":{"host":"r.example.com"}},{"action":"push","target":{"repository":"team/web","tag":"v2","url":"https://r.example.com/v2/team/web/manifests/sha256:00"}},{"action":"push","target":{"repository":"team/api","tag":"latest"},"request":{"host":"r.example.com"}}]}`,
			want: []string{"r.example.com/team/api", "r.example.com/team/web"},
		},
		{name: "distribution no host", source: Distribution, body: `{"events":[{"action":"push","target":{"repository":"team/api","tag":"v2"}}]}`, wantErr: "events[0] names no registry host"},
		{name: "distribution not an envelope", source: Distribution, body: `{"action":"push"}`, wantErr: "no events array"},
		{name: "distribution empty envelope", source: Distribution, body: `{"events":[]}`},
		{name: "acr ping", source: ACR, body: `{"id":"1","action":"ping","target":{},"request":{"host":"acme.azurecr.io"}}`},
		{name: "acr delete", source: ACR, body: `{"action":"delete","target":{"repository":"team/api","tag":"v2"},"request":{"host":"acme.azurecr.io"}}`},
		{name: "acr bad repository", source: ACR, body: `{"action":"push","target":{"repository":"Team/API","tag":"v2"},"request":{"host":"acme.azurecr.io"}}`, wantErr: "target.repository"},
		{
			name: "cloudevents binary mode", source: CloudEvents, event: "binary",
			body: `{"detail-type":"ECR Image Action","source":"aws.ecr","account":"123456789012","region":"cn-north-1","detail":{"action-type":"PUSH","result":"SUCCESS","repository-name":"api","image-tag":"v2"}}`,
			want: []string{"123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/api"},
		},
		{
			name: "cloudevents failed push", source: CloudEvents,
			body: `{"specversion":"1.0","data":{"detail-type":"ECR Image Action","source":"aws.ecr","account":"123456789012","region":"us-east-1","detail":{"action-type":"PUSH","result":"FAILURE","repository-name":"api","image-tag":"v2"}}}`,
		},
		{
			name: "cloudevents deletion", source: CloudEvents,
			body: `{"specversion":"1.0","data":{"detail-type":"ECR Image Action","source":"aws.ecr","account":"123456789012","region":"us-east-1","detail":{"action-type":"DELETE","result":"SUCCESS","repository-name":"api","image-tag":"v2"}}}`,
		},
		{
			name: "cloudevents untagged push", source: CloudEvents,
			body: `{"specversion":"1.0","data":{"detail-type":"ECR Image Action","source":"aws.ecr","account":"123456789012","region":"us-east-1","detail":{"action-type":"PUSH","result":"SUCCESS","repository-name":"api"}}}`,
		},
		{
			name: "cloudevents of another service", source: CloudEvents,
			body: `{"specversion":"1.0","data":{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","account":"123456789012","region":"us-east-1","detail":{}}}`,
		},
		{
			name: "cloudevents transformed push", source: CloudEvents,
			body: `{"specversion":"1.0","id":"1","type":"com.amazon.ecr.image.push","source":"urn:aws:ecr:eu-west-1:123456789012:repository/team/api","subject":"team/api:v2","data":{"repositoryName":"team/api","imageDigest":"sha256:00","imageTag":"v2","registryId":"123456789012"}}`,
			want: []string{"123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/api"},
		},
		{
			name: "cloudevents transformed push, binary mode", source: CloudEvents, event: "binary-ecr-push",
			body: `{"repositoryName":"api","imageTag":"v2"}`,
			want: []string{"123456789012.dkr.ecr.us-east-1.amazonaws.com/api"},
		},
		{
			name: "cloudevents transformed push without tag", source: CloudEvents,
			body: `{"specversion":"1.0","type":"com.amazon.ecr.image.push","source":"urn:aws:ecr:eu-west-1:123456789012:repository/api","data":{"repositoryName":"api","imageDigest":"sha256:00"}}`,
		},
		{
			name: "cloudevents transformed push, bad source", source: CloudEvents,
			body:    `{"specversion":"1.0","type":"com.amazon.ecr.image.push","source":"aws.ecr","data":{"repositoryName":"api","imageTag":"v2"}}`,
			wantErr: "is not urn:aws:ecr",
		},
		{name: "cloudevents not a CloudEvent", source: CloudEvents, body: `{"detail-type":"ECR Image Action"}`, wantErr: "not a CloudEvent"},
		{
			name: "cloudevents without account", source: CloudEvents,
			body:    `{"specversion":"1.0","data":{"detail-type":"ECR Image Action","source":"aws.ecr","region":"us-east-1","detail":{"action-type":"PUSH","result":"SUCCESS","repository-name":"api","image-tag":"v2"}}}`,
			wantErr: "account and region are required",
		},
		{name: "artifact registry deletion", source: ArtifactRegistry, body: pubSub(`{"action":"DELETE","digest":"us-east1-docker.pkg.dev/p/r/api@sha256:00","tag":"us-east1-docker.pkg.dev/p/r/api:v2"}`)},
		{name: "artifact registry untagged push", source: ArtifactRegistry, body: pubSub(`{"action":"INSERT","digest":"us-east1-docker.pkg.dev/p/r/api@sha256:00"}`)},
		{
			name: "artifact registry unwrapped", source: ArtifactRegistry,
			body: `{"action":"INSERT","digest":"gcr.io/p/api@sha256:00","tag":"gcr.io/p/api:v2"}`, want: []string{"gcr.io/p/api"},
		},
		{name: "artifact registry data not base64", source: ArtifactRegistry, body: `{"message":{"data":"not base64!"}}`, wantErr: "message.data is not base64"},
		{name: "artifact registry data not JSON", source: ArtifactRegistry, body: pubSub(`INSERT gcr.io/p/api:v2`), wantErr: "message.data: invalid JSON at byte"},
		{name: "artifact registry no data", source: ArtifactRegistry, body: `{"message":{"messageId":"1"},"subscription":"projects/p/subscriptions/s"}`, wantErr: "message.data is empty"},
		{name: "artifact registry no action", source: ArtifactRegistry, body: pubSub(`{"tag":"gcr.io/p/api:v2"}`), wantErr: "message.data has no action"},
		{name: "artifact registry bad tag", source: ArtifactRegistry, body: pubSub(`{"action":"INSERT","tag":"gcr.io/P/API:v2"}`), wantErr: "message.data tag"},
		{name: "artifact registry neither envelope nor message", source: ArtifactRegistry, body: `{"subscription":"x"}`, wantErr: "neither a message object"},
		{
			name: "aliyun enterprise instance", source: AliyunACR, query: "registry_url=acme-registry.cn-shanghai.cr.aliyuncs.com",
			body: `{"push_data":{"tag":"v2"},"repository":{"name":"api","namespace":"team","region":"cn-shanghai","repo_full_name":"team/api"}}`,
			want: []string{"acme-registry.cn-shanghai.cr.aliyuncs.com/team/api"},
		},
		{
			name: "aliyun without repo_full_name, upper case", source: AliyunACR,
			body: `{"push_data":{"tag":"v2"},"repository":{"name":"repoTest","namespace":"team","region":"ap-southeast-1"}}`,
			want: []string{"registry.ap-southeast-1.aliyuncs.com/team/repotest"},
		},
		{name: "aliyun without region", source: AliyunACR, body: `{"push_data":{"tag":"v2"},"repository":{"repo_full_name":"team/api"}}`, wantErr: "repository.region is missing"},
		{name: "aliyun bad region", source: AliyunACR, body: `{"push_data":{"tag":"v2"},"repository":{"repo_full_name":"team/api","region":"evil.example.com/x"}}`, wantErr: "not a region ID"},
		{
			name: "aliyun bad registry_url", source: AliyunACR, query: "registry_url=evil.example.com/x",
			body: `{"push_data":{"tag":"v2"},"repository":{"repo_full_name":"team/api","region":"cn-hangzhou"}}`, wantErr: "must be a host name",
		},
		{name: "aliyun without repository", source: AliyunACR, body: `{"push_data":{"tag":"v2"}}`, wantErr: "repository.repo_full_name"},
		{name: "aliyun without tag", source: AliyunACR, body: `{"push_data":{},"repository":{"repo_full_name":"team/api","region":"cn-hangzhou"}}`},
		{
			name: "artifactory subdomain method", source: Artifactory, query: "registry_url=docker-local.acme.jfrog.io",
			body: `{"domain":"docker","event_type":"pushed","data":{"repo_key":"docker-local","image_name":"team/api","tag":"v2"},"jpd_origin":"https://acme.jfrog.io"}`,
			want: []string{"docker-local.acme.jfrog.io/team/api"},
		},
		{
			name: "artifactory self-hosted on a port", source: Artifactory,
			body: `{"domain":"docker","event_type":"pushed","data":{"repo_key":"docker","image_name":"Team/API","tag":"v2"},"jpd_origin":"http://artifactory.internal:8082"}`,
			want: []string{"artifactory.internal:8082/docker/team/api"},
		},
		{name: "artifactory deletion", source: Artifactory, body: `{"domain":"docker","event_type":"deleted","data":{"repo_key":"docker","image_name":"team/api","tag":"v2"},"jpd_origin":"https://acme.jfrog.io"}`},
		{name: "artifactory artifact domain", source: Artifactory, body: `{"domain":"artifact","event_type":"deployed","data":{"repo_key":"libs","path":"a/b.jar"},"jpd_origin":"https://acme.jfrog.io"}`},
		{name: "artifactory without origin", source: Artifactory, body: `{"domain":"docker","event_type":"pushed","data":{"repo_key":"docker","image_name":"team/api","tag":"v2"}}`, wantErr: "jpd_origin is missing"},
		{name: "artifactory bad origin", source: Artifactory, body: `{"domain":"docker","event_type":"pushed","data":{"repo_key":"docker","image_name":"team/api","tag":"v2"},"jpd_origin":"acme.jfrog.io"}`, wantErr: "is not the platform's URL"},
		{
			name: "artifactory bad registry_url", source: Artifactory, query: "registry_url=evil.example.com%3Fx",
			body: `{"domain":"docker","event_type":"pushed","data":{"repo_key":"docker","image_name":"team/api","tag":"v2"},"jpd_origin":"https://acme.jfrog.io"}`, wantErr: "must be a host name",
		},
		{
			name: "nexus path-based routing", source: Nexus, query: "registry_url=nexus.example.com/docker-hosted",
			body: `{"repositoryName":"docker-hosted","action":"UPDATED","component":{"format":"docker","name":"team/api","version":"v2"}}`,
			want: []string{"nexus.example.com/docker-hosted/team/api"},
		},
		{
			name: "nexus manifest asset", source: Nexus, query: "registry_url=nexus.example.com:8443",
			body: `{"repositoryName":"docker-hosted","action":"CREATED","asset":{"format":"docker","name":"v2/team/api/manifests/v2"}}`,
			want: []string{"nexus.example.com:8443/team/api"},
		},
		{name: "nexus blob asset", source: Nexus, query: "registry_url=nexus.example.com", body: `{"action":"CREATED","asset":{"format":"docker","name":"v2/-/blobs/sha256:00"}}`},
		{name: "nexus deletion", source: Nexus, query: "registry_url=nexus.example.com", body: `{"action":"DELETED","component":{"format":"docker","name":"team/api","version":"v2"}}`},
		{name: "nexus maven component", source: Nexus, query: "registry_url=nexus.example.com", body: `{"action":"CREATED","component":{"format":"maven2","name":"api","version":"1.0"}}`},
		{name: "nexus without registry_url", source: Nexus, body: `{"action":"CREATED","component":{"format":"docker","name":"team/api","version":"v2"}}`, wantErr: "give the docker connector's host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := Path + "?type=" + tt.source
			if tt.query != "" {
				target += "&" + tt.query
			}
			r := httptest.NewRequest(http.MethodPost, target, nil)
			switch {
			case tt.event == "binary":
				r.Header.Set("Ce-Specversion", "1.0")
			case tt.event == "binary-ecr-push":
				r.Header.Set("Ce-Specversion", "1.0")
				r.Header.Set("Ce-Type", "com.amazon.ecr.image.push")
				r.Header.Set("Ce-Source", "urn:aws:ecr:us-east-1:123456789012:repository/api")
			case tt.event != "":
				r.Header.Set("X-GitHub-Event", tt.event)
			}
			refs, err := formats[tt.source].parse(r, []byte(tt.body))
			if tt.wantErr != "" {
				var pe *payloadError
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want a payload error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sortedNames(refs); !slices.Equal(got, tt.want) && len(got)+len(tt.want) > 0 {
				t.Errorf("repositories %v, want %v", got, tt.want)
			}
			for _, r := range refs {
				if r.Digest() != "" {
					t.Errorf("%s keeps a digest", r)
				}
			}
		})
	}
}

// Each repository carries the tag its push named, the last one when a
// payload names several for it, so that a check can tell whether the
// registry lists it yet; a tag that is not valid is dropped.
func TestParseKeepsTheTag(t *testing.T) {
	tests := []struct {
		name, source, event, body string
		want                      string
	}{
		{name: "docker hub", source: DockerHub, body: `{"push_data":{"tag":"1.27"},"repository":{"repo_name":"nginx"}}`, want: "docker.io/library/nginx:1.27"},
		{name: "quay", source: Quay, body: `{"docker_url":"quay.io/team/api","updated_tags":["v2","latest"]}`, want: "quay.io/team/api:v2"},
		{
			name: "github", source: GHCR, event: "package",
			body: `{"action":"published","package":{"name":"api","namespace":"team","package_type":"container","package_version":{"container_metadata":{"tag":{"name":"v2"}}}}}`,
			want: "ghcr.io/team/api:v2",
		},
		{
			name: "harbor, the last tag", source: Harbor,
			body: `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"v2","resource_url":"h.example.com/team/api:v2"},{"tag":"latest","resource_url":"h.example.com/team/api:latest"}],"repository":{"repo_full_name":"team/api"}}}`,
			want: "h.example.com/team/api:latest",
		},
		{
			name: "distribution, the last tag", source: Distribution,
			body: `{"events":[{"action":"push","target":{"repository":"team/api","tag":"v2"},"request":{"host":"r.example.com"}},{"action":"push","target":{"repository":"team/api","tag":"v3"},"request":{"host":"r.example.com"}}]}`,
			want: "r.example.com/team/api:v3",
		},
		{name: "acr", source: ACR, body: `{"action":"push","target":{"repository":"team/api","tag":"v2"},"request":{"host":"acme.azurecr.io"}}`, want: "acme.azurecr.io/team/api:v2"},
		{
			name: "ecr", source: CloudEvents,
			body: `{"specversion":"1.0","type":"com.amazon.ecr.image.push","source":"urn:aws:ecr:eu-west-1:123456789012:repository/api","data":{"repositoryName":"api","imageTag":"v2"}}`,
			want: "123456789012.dkr.ecr.eu-west-1.amazonaws.com/api:v2",
		},
		{name: "artifact registry", source: ArtifactRegistry, body: `{"action":"INSERT","digest":"gcr.io/p/api@sha256:00","tag":"gcr.io/p/api:v2"}`, want: "gcr.io/p/api:v2"},
		{
			name: "aliyun", source: AliyunACR,
			body: `{"push_data":{"tag":"v2"},"repository":{"repo_full_name":"team/api","region":"cn-hangzhou"}}`,
			want: "registry.cn-hangzhou.aliyuncs.com/team/api:v2",
		},
		{
			name: "a tag that is not valid", source: Distribution,
			body: `{"events":[{"action":"push","target":{"repository":"team/api","tag":"-bad"},"request":{"host":"r.example.com"}}]}`,
			want: "r.example.com/team/api",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, Path+"?type="+tt.source, nil)
			if tt.event != "" {
				r.Header.Set("X-GitHub-Event", tt.event)
			}
			refs, err := formats[tt.source].parse(r, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if len(refs) != 1 || refs[0].String() != tt.want {
				t.Errorf("parsed %v, want [%s]", refs, tt.want)
			}
		})
	}
}

// pubSub wraps data in a Pub/Sub push envelope.
func pubSub(data string) string {
	return `{"message":{"data":"` + base64.StdEncoding.EncodeToString([]byte(data)) + `","messageId":"1"},"subscription":"projects/p/subscriptions/s"}`
}

// manyEvents is a Distribution notification of n pushes, to n
// repositories or, when same, all to one.
func manyEvents(n int, same bool) []byte {
	var b strings.Builder
	b.WriteString(`{"events":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		repo := fmt.Sprintf("team/app-%d", i)
		if same {
			repo = "team/app"
		}
		fmt.Fprintf(&b, `{"action":"push","target":{"repository":%q,"tag":"1.0"},"request":{"host":"registry.example.com"}}`, repo)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestManyRepositories: a payload naming more repositories than a
// notification does is refused; one naming a repository many times
// names it once.
func TestManyRepositories(t *testing.T) {
	if _, err := parseDistribution(nil, manyEvents(maxRepositories+1, false)); err == nil || !strings.Contains(err.Error(), "more than 100 repositories") {
		t.Errorf("got %v, want the payload refused", err)
	}
	refs, err := parseDistribution(nil, manyEvents(10_000, true))
	if err != nil || len(refs) != 1 {
		t.Errorf("got %v, %v; want one repository", refs, err)
	}
}

// BenchmarkManyEvents parses a 1 MiB notification of one repository
// pushed ten thousand times: linear in the events.
func BenchmarkManyEvents(b *testing.B) {
	body := manyEvents(10_000, true)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := parseDistribution(nil, body); err != nil {
			b.Fatal(err)
		}
	}
}

// The generic source reads the fields its mapping names, and nothing else.
func TestParseGeneric(t *testing.T) {
	tests := []struct {
		name    string
		mapping GenericMapping
		query   string
		body    string
		want    []string
		wantTag string
		wantErr string
	}{
		{name: "repository and tag", mapping: GenericMapping{Repository: "target.repository", Tag: "target.tag"}, body: `{"target":{"repository":"registry.example.com/team/api","tag":"v2"}}`, want: []string{"registry.example.com/team/api"}, wantTag: "v2"},
		{name: "the tag in the repository", mapping: GenericMapping{Repository: "image"}, body: `{"image":"registry.example.com/team/api:v2"}`, want: []string{"registry.example.com/team/api"}, wantTag: "v2"},
		{name: "an array index", mapping: GenericMapping{Repository: "events.1.repo"}, body: `{"events":[{"repo":"a/b"},{"repo":"ghcr.io/team/api"}]}`, want: []string{"ghcr.io/team/api"}},
		{name: "registry_url before a path", mapping: GenericMapping{Repository: "repo"}, query: "registry_url=r.example.com:5000", body: `{"repo":"team/api"}`, want: []string{"r.example.com:5000/team/api"}},
		{name: "no host: Docker Hub", mapping: GenericMapping{Repository: "repo"}, body: `{"repo":"nginx"}`, want: []string{"docker.io/library/nginx"}},
		{name: "a tag field missing", mapping: GenericMapping{Repository: "repo", Tag: "tag"}, body: `{"repo":"ghcr.io/team/api"}`, want: []string{"ghcr.io/team/api"}},
		{name: "repository missing", mapping: GenericMapping{Repository: "target.repository"}, body: `{"target":{}}`, wantErr: "target.repository, the repository field of the mapping, is missing"},
		{name: "an index past the end", mapping: GenericMapping{Repository: "events.2.repo"}, body: `{"events":[{"repo":"a/b"}]}`, wantErr: "is missing"},
		{name: "repository not a string", mapping: GenericMapping{Repository: "repo"}, body: `{"repo":{"name":"x"}}`, wantErr: "repo holds a JSON object where a string was expected"},
		{name: "tag a number", mapping: GenericMapping{Repository: "repo", Tag: "build"}, body: `{"repo":"ghcr.io/team/api","build":17}`, wantErr: "build holds a JSON number"},
		{name: "not a repository name", mapping: GenericMapping{Repository: "repo"}, body: `{"repo":"Team/API with spaces"}`, wantErr: "repo"},
		{name: "not JSON", mapping: GenericMapping{Repository: "repo"}, body: `repo=x`, wantErr: "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := genericFormat(tt.mapping)
			if err != nil {
				t.Fatal(err)
			}
			target := Path + "?type=" + Generic
			if tt.query != "" {
				target += "&" + tt.query
			}
			refs, err := f.parse(httptest.NewRequest(http.MethodPost, target, nil), []byte(tt.body))
			if tt.wantErr != "" {
				var pe *payloadError
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want a payload error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sortedNames(refs); !slices.Equal(got, tt.want) {
				t.Errorf("repositories %v, want %v", got, tt.want)
			}
			if tt.wantTag != "" && refs[0].Tag() != tt.wantTag {
				t.Errorf("tag %q, want %q", refs[0].Tag(), tt.wantTag)
			}
		})
	}
}
