package docs

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/image-updater/argocd-image-updater/webhook"
)

// docsWebhookSecret is the secret every source is set up with when the
// examples are sent.
const docsWebhookSecret = "docs-example-secret"

// notified keeps the repositories the handler accepts.
type notified struct{ repos []string }

func (n *notified) Notify(note webhook.Notification) error {
	for _, r := range note.Repositories {
		n.repos = append(n.repos, r.Name())
	}
	return nil
}

// webhookRequest builds the request the registry of that type sends, with
// the proof of the secret its webhook settings make it send, and the
// query parameters of the URL it was given.
func webhookRequest(source string, query url.Values, body []byte) (*http.Request, error) {
	q := url.Values{"type": {source}}
	for k, v := range query {
		q[k] = v
	}
	switch source {
	case webhook.DockerHub, webhook.Quay, webhook.ArtifactRegistry, webhook.AliyunACR:
		q.Set("secret", docsWebhookSecret)
	}
	req := httptest.NewRequest(http.MethodPost, webhook.Path+"?"+q.Encode(), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	switch source {
	case webhook.DockerHub, webhook.Quay, webhook.ArtifactRegistry, webhook.AliyunACR:
	case webhook.GHCR:
		mac := hmac.New(sha256.New, []byte(docsWebhookSecret))
		mac.Write(body)
		req.Header.Set("X-GitHub-Event", "package")
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	case webhook.Harbor:
		req.Header.Set("Authorization", docsWebhookSecret)
	case webhook.Distribution, webhook.CloudEvents:
		req.Header.Set("Authorization", "Bearer "+docsWebhookSecret)
	case webhook.ACR, webhook.Generic:
		req.Header.Set("Authorization", docsWebhookSecret)
	case webhook.Artifactory:
		req.Header.Set("X-JFrog-Event-Auth", docsWebhookSecret)
	case webhook.Nexus:
		mac := hmac.New(sha1.New, []byte(docsWebhookSecret))
		mac.Write(body)
		req.Header.Set("X-Nexus-Webhook-Signature", hex.EncodeToString(mac.Sum(nil)))
	default:
		return nil, fmt.Errorf("unknown webhook type %q (known: %s)", source, strings.Join(webhook.Sources(), ", "))
	}
	return req, nil
}

// checkWebhookPayload sends a payload as its registry does. The tags
// after the type are the query parameters of the URL the registry was
// given (registry_url=...), or, for the generic type, the mapping of its
// fields (repository-field=..., tag-field=...).
func checkWebhookPayload(tags string, b, exp block, hasExp bool) error {
	fields := strings.Fields(tags)
	source, query := fields[0], url.Values{}
	generic := &webhook.GenericMapping{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		switch {
		case !ok:
			return fmt.Errorf("%q: a tag after the webhook type is key=value", f)
		case k == "repository-field":
			generic.Repository = v
		case k == "tag-field":
			generic.Tag = v
		default:
			query.Add(k, v)
		}
	}
	secrets := map[string]string{}
	for _, s := range webhook.Sources() {
		secrets[s] = docsWebhookSecret
	}
	if generic.Repository == "" {
		generic = nil
		delete(secrets, webhook.Generic)
	}
	var n notified
	h, err := webhook.NewHandler(&n, webhook.Config{Secrets: secrets, Generic: generic})
	if err != nil {
		return err
	}
	req, err := webhookRequest(source, query, []byte(b.body))
	if err != nil {
		return err
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		return fmt.Errorf("the handler answered %d: %s", rec.Code, rec.Body)
	}
	if !hasExp {
		return nil
	}
	want := expectedLines(exp)
	if len(want) == 0 {
		return errors.New("the text repositories block is empty")
	}
	slices.Sort(want)
	slices.Sort(n.repos)
	if !slices.Equal(n.repos, want) {
		return fmt.Errorf("the payload names %v; the text repositories block shows %v", n.repos, want)
	}
	return nil
}

func checkDistributionConfig(b block) error {
	var doc struct {
		Notifications struct {
			Endpoints []struct {
				Name    string              `json:"name"`
				URL     string              `json:"url"`
				Headers map[string][]string `json:"headers"`
			} `json:"endpoints"`
		} `json:"notifications"`
	}
	// Other settings of the registry may stand beside notifications.
	if err := yaml.Unmarshal([]byte(b.body), &doc); err != nil {
		return fmt.Errorf("invalid YAML: %w", err)
	}
	if len(doc.Notifications.Endpoints) == 0 {
		return errors.New("no notifications.endpoints")
	}
	for _, e := range doc.Notifications.Endpoints {
		u, err := url.Parse(e.URL)
		if err != nil {
			return err
		}
		if e.Name == "" || u.Path != webhook.Path || u.Query().Get("type") != webhook.Distribution {
			return fmt.Errorf("endpoint %q: needs a name and a url ending in %s?type=%s", e.Name, webhook.Path, webhook.Distribution)
		}
	}
	return nil
}
