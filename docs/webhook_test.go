package docs

import (
	"bytes"
	"crypto/hmac"
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
// the proof of the secret its webhook settings make it send.
func webhookRequest(source string, body []byte) (*http.Request, error) {
	q := url.Values{"type": {source}}
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
	case webhook.ACR:
		req.Header.Set("Authorization", docsWebhookSecret)
	default:
		return nil, fmt.Errorf("unknown webhook type %q (known: %s)", source, strings.Join(webhook.Sources(), ", "))
	}
	return req, nil
}

func checkWebhookPayload(source string, b, exp block, hasExp bool) error {
	secrets := map[string]string{}
	for _, s := range webhook.Sources() {
		secrets[s] = docsWebhookSecret
	}
	var n notified
	h, err := webhook.NewHandler(&n, webhook.Config{Secrets: secrets})
	if err != nil {
		return err
	}
	req, err := webhookRequest(source, []byte(b.body))
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
