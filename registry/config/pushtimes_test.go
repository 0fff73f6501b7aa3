package config

import (
	"strings"
	"testing"
)

// Each registry host gets the push-time API it is known by; an entry
// names others, turns it off or moves it; an unknown API is refused at its
// line.
func TestPushTimesAPI(t *testing.T) {
	cfg, err := Parse("registries.conf", []byte(`registries:
- name: harbor
  prefix: harbor.example.com
  pushtimes: harbor
- name: off
  prefix: quay.io
  pushtimes: none
- name: ghe
  prefix: ghcr.io/team
  pushtimes: ghcr
  pushtimes_url: https://github.example.com/api/v3/
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host      string
		api       PushTimes
		base      string
		inEntries bool
	}{
		{"123456789012.dkr.ecr.eu-west-1.amazonaws.com", PushTimesECR, "", false},
		{"europe-west1-docker.pkg.dev", PushTimesArtifactRegistry, artifactRegistryAPI, false},
		{"gcr.io", PushTimesNone, "", false},
		{"team.azurecr.io", PushTimesACR, "https://team.azurecr.io", false},
		{"docker.io", PushTimesDockerHub, dockerHubHubAPI, false},
		{"ghcr.io", PushTimesGHCR, gitHubAPI, false},
		{"registry.example.com", PushTimesNone, "", false},
		{"harbor.example.com", PushTimesHarbor, "https://harbor.example.com", true},
		{"quay.io", PushTimesNone, "", true},
	}
	for _, tt := range tests {
		ep := cfg.endpoint(tt.host)
		if api, base := ep.PushTimesAPI(); api != tt.api || base != tt.base {
			t.Errorf("%s: %s at %q, want %s at %q", tt.host, api, base, tt.api, tt.base)
		}
	}
	if ep, ok := cfg.match("ghcr.io/team"); !ok {
		t.Error("no ghcr.io/team entry")
	} else if api, base := ep.PushTimesAPI(); api != PushTimesGHCR || base != "https://github.example.com/api/v3" {
		t.Errorf("ghcr.io/team: %s at %q", api, base)
	}

	_, err = Parse("registries.conf", []byte("registries:\n- name: x\n  prefix: x.example.com\n  pushtimes: nexus\n"))
	if err == nil || !strings.Contains(err.Error(), `registries.conf:4: registries[0].pushtimes: unknown API "nexus"`) {
		t.Errorf("error %v", err)
	}
}
