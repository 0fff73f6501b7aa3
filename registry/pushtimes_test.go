package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials/ecr"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// TestPushTimes reads the push times of two tags from each API's
// stand-in, behind more than a page of other tags, with the credentials
// each API takes, and a tag it does not have.
func TestPushTimes(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	cases := []struct {
		api                  string
		registry, repository string
		user, password       string
		private, org         bool
		field                string // the entry's pushtimes; "" for the host's own
	}{
		{api: "ecr", registry: "123456789012.dkr.ecr.eu-west-1.amazonaws.com", repository: "team/app", user: "AKIAEXAMPLE"},
		{api: "artifact-registry", registry: "europe-west1-docker.pkg.dev", repository: "proj/images/team/app", user: "oauth2accesstoken", password: "ya29.token"},
		{api: "acr", registry: "team.azurecr.io", repository: "team/app", user: "reader", password: "acr-secret"},
		{api: "docker-hub", registry: "docker.io", repository: "team/app", user: "hubuser", password: "dckr_pat_x", private: true},
		{api: "harbor", registry: "harbor.example.com", repository: "project/team/app", user: "robot$reader", password: "harbor-secret", field: "harbor"},
		{api: "ghcr", registry: "ghcr.io", repository: "example/team/app", user: "example", password: "ghp_token", org: true},
		{api: "quay", registry: "quay.io", repository: "team/app", user: "$oauthtoken", password: "quay-token", private: true},
	}
	for _, tc := range cases {
		t.Run(tc.api, func(t *testing.T) {
			api := testenv.StartPushTimes(t, tc.api, tc.registry)
			if tc.api == "ecr" {
				t.Setenv("AWS_ACCESS_KEY_ID", tc.user)
				t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
				t.Setenv("AWS_CONFIG_FILE", "/dev/null")
				t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
				t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			}
			api.Credentials(tc.user, tc.password)
			if tc.private {
				api.Private(tc.repository)
			}
			if tc.org {
				owner, _, _ := strings.Cut(tc.repository, "/")
				api.Organisation(owner)
			}
			// 150 older tags, more than a page of every API, newer than
			// 1.0.0, which the newest-first APIs list last.
			api.Push(tc.repository, "1.0.0", now.Add(-30*24*time.Hour))
			for i := range 150 {
				api.Push(tc.repository, fmt.Sprintf("0.%d.0", i), now.Add(-20*24*time.Hour+time.Duration(i)*time.Minute))
			}
			api.Push(tc.repository, "1.1.0", now.Add(-3*time.Hour))
			api.Push(tc.repository, "1.1.0", now.Add(-2*time.Hour)) // pushed again: its time is the later one

			entry := fmt.Sprintf("registries:\n- name: %s\n  prefix: %s\n  pushtimes_url: %s\n", tc.api, tc.registry, api.URL)
			if tc.field != "" {
				entry += "  pushtimes: " + tc.field + "\n"
			}
			if tc.api != "ecr" {
				entry += "  credentials: env:CREDS\n"
			}
			cfg, err := config.Parse("registries.conf", []byte(entry))
			if err != nil {
				t.Fatal(err)
			}
			c := NewClient(WithConfig(func() *config.Config { return cfg }),
				WithCredentialResolver(envResolver(map[string]string{"CREDS": tc.user + ":" + tc.password})),
				WithECRPushTimes(ecr.NewProvider().PushTimes))
			ref := imageRef(t, tc.registry+"/"+tc.repository+":1.0.0")
			got, err := c.PushTimes(context.Background(), ref, credref.Ref{}, []string{"1.0.0", "1.1.0", "9.9.9"})
			if err != nil {
				t.Fatalf("PushTimes: %v\nrequests: %q", err, api.Requests())
			}
			want := map[string]time.Time{"1.0.0": now.Add(-30 * 24 * time.Hour), "1.1.0": now.Add(-2 * time.Hour)}
			if len(got) != len(want) {
				t.Errorf("got %d times %v, want %v", len(got), got, want)
			}
			for tag, w := range want {
				if g, ok := got[tag]; !ok || g.Sub(w).Abs() > time.Second {
					t.Errorf("%s pushed at %v, want %v", tag, g, w)
				}
			}
			if p := api.Problems(); len(p) > 0 {
				t.Errorf("requests the API would refuse: %q", p)
			}
		})
	}
}

// TestPushTimesRefused: wrong credentials are an error naming the image
// and never the secret; a registry whose API is not known has none.
func TestPushTimesRefused(t *testing.T) {
	api := testenv.StartPushTimes(t, "harbor", "harbor.example.com")
	api.Credentials("reader", "right")
	api.Push("project/app", "1.0.0", time.Now())
	cfg, err := config.Parse("registries.conf", []byte("registries:\n- name: harbor\n  prefix: harbor.example.com\n  pushtimes: harbor\n  pushtimes_url: "+api.URL+"\n  credentials: env:CREDS\n- name: plain\n  prefix: registry.example.com\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(WithConfig(func() *config.Config { return cfg }), WithCredentialResolver(envResolver(map[string]string{"CREDS": "reader:wrong-secret"})))
	_, err = c.PushTimes(context.Background(), imageRef(t, "harbor.example.com/project/app"), credref.Ref{}, []string{"1.0.0"})
	if err == nil || !strings.Contains(err.Error(), "project/app") || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("error %v: want a 401 naming project/app, without the password", err)
	}
	_, err = c.PushTimes(context.Background(), imageRef(t, "registry.example.com/app"), credref.Ref{}, []string{"1.0.0"})
	if !errors.Is(err, ErrNoPushTimes) {
		t.Errorf("error %v: want ErrNoPushTimes", err)
	}
}
