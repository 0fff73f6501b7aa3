package config

import (
	"fmt"
	"strings"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/cloudhost"
)

// PushTimes names the API that says when a registry's tags were pushed,
// the age of a version that has a minimum release age: a time the registry
// keeps, which the tag's author cannot backdate.
type PushTimes string

// The APIs, as written in the pushtimes field.
const (
	PushTimesNone             PushTimes = "none"
	PushTimesECR              PushTimes = "ecr"               // DescribeImages' imagePushedAt
	PushTimesArtifactRegistry PushTimes = "artifact-registry" // dockerImages' updateTime
	PushTimesACR              PushTimes = "acr"               // /acr/v1/<repository>/_tags, lastUpdateTime
	PushTimesDockerHub        PushTimes = "docker-hub"        // hub.docker.com's tag_last_pushed
	PushTimesHarbor           PushTimes = "harbor"            // /api/v2.0 artifacts, the tag's push_time
	PushTimesGHCR             PushTimes = "ghcr"              // GitHub's package versions, created_at
	PushTimesQuay             PushTimes = "quay"              // /api/v1 tags, start_ts
)

var pushTimesNames = []PushTimes{PushTimesNone, PushTimesECR, PushTimesArtifactRegistry, PushTimesACR, PushTimesDockerHub, PushTimesHarbor, PushTimesGHCR, PushTimesQuay}

// The APIs' own hosts, where they are not the registry's.
const (
	artifactRegistryAPI = "https://artifactregistry.googleapis.com"
	dockerHubHubAPI     = "https://hub.docker.com"
	gitHubAPI           = "https://api.github.com"
)

func parsePushTimes(s string) (PushTimes, error) {
	for _, n := range pushTimesNames {
		if PushTimes(s) == n {
			return n, nil
		}
	}
	names := make([]string, len(pushTimesNames))
	for i, n := range pushTimesNames {
		names[i] = string(n)
	}
	return "", fmt.Errorf("unknown API %q (known: %s)", s, strings.Join(names, ", "))
}

// PushTimesAPI is the endpoint's push-time API and its base URL: the
// entry's pushtimes and pushtimes_url, else what its host is known by
// (ECR, Artifact Registry, ACR, Docker Hub, GHCR, quay.io; Harbor and
// other Quay installs only when the entry says so). The URL is "" for ECR
// without pushtimes_url: the AWS SDK's endpoint for the region.
// PushTimesNone means no API: versions are aged from when the updater
// first listed them.
func (e Endpoint) PushTimesAPI() (PushTimes, string) {
	api, base := e.PushTimes, e.PushTimesURL
	host, _, _ := strings.Cut(e.Prefix, "/")
	host = imageref.CanonicalHost(host)
	if api == "" {
		api = PushTimesNone
		if _, _, ok := cloudhost.ECR(host); ok {
			api = PushTimesECR
		} else if _, ok := cloudhost.ACR(host); ok {
			api = PushTimesACR
		} else if strings.HasSuffix(host, "-docker.pkg.dev") && cloudhost.Google(host) {
			api = PushTimesArtifactRegistry
		} else {
			switch host {
			case imageref.DockerHub:
				api = PushTimesDockerHub
			case "ghcr.io":
				api = PushTimesGHCR
			case "quay.io":
				api = PushTimesQuay
			}
		}
	}
	if base != "" {
		return api, base
	}
	switch api {
	case PushTimesArtifactRegistry:
		base = artifactRegistryAPI
	case PushTimesDockerHub:
		base = dockerHubHubAPI
	case PushTimesGHCR:
		base = gitHubAPI
	case PushTimesACR, PushTimesHarbor, PushTimesQuay:
		base = e.APIURL
	}
	return api, base
}
