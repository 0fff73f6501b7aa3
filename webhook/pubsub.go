package webhook

import (
	"encoding/base64"
	"encoding/json"
	"net/http"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// pubSubPush is the body of a Pub/Sub push delivery: the message, its
// data base64-encoded, and the subscription it came through.
type pubSubPush struct {
	Message *struct {
		Data       string            `json:"data"`
		Attributes map[string]string `json:"attributes"`
		MessageID  string            `json:"messageId"`
	} `json:"message"`
	Subscription string `json:"subscription"`
}

// artifactRegistryMessage is what Artifact Registry publishes on the gcr
// topic: the action (INSERT or DELETE), the image by digest and, for a
// tagged image, by tag; both are full references with the registry host.
type artifactRegistryMessage struct {
	Action string  `json:"action"`
	Digest string  `json:"digest"`
	Tag    *string `json:"tag"`
}

// Google Artifact Registry (and Container Registry) notifications through a
// Pub/Sub push subscription. The body is the push envelope, or with payload
// unwrapping the message data itself. Only an INSERT with a tag names a
// repository to check: deletions and the untagged manifests of a
// multi-platform image name nothing.
func parsePubSub(_ *http.Request, body []byte) ([]imageref.Reference, error) {
	var probe map[string]json.RawMessage
	if err := decode(body, &probe); err != nil {
		return nil, err
	}
	data, field := body, "the body"
	if _, wrapped := probe["message"]; wrapped {
		var push pubSubPush
		if err := decode(body, &push); err != nil {
			return nil, err
		}
		if push.Message == nil {
			return nil, malformed("message is null: not a Pub/Sub push envelope")
		}
		if push.Message.Data == "" {
			return nil, malformed("message.data is empty: Artifact Registry messages carry the notification there")
		}
		var err error
		if data, err = base64.StdEncoding.DecodeString(push.Message.Data); err != nil {
			return nil, malformed("message.data is not base64: %v", err)
		}
		field = "message.data"
	} else if _, unwrapped := probe["action"]; !unwrapped {
		return nil, malformed("neither a message object (a Pub/Sub push envelope) nor an action field (an unwrapped Artifact Registry notification)")
	}
	var m artifactRegistryMessage
	if err := decode(data, &m); err != nil {
		return nil, malformed("%s: %v", field, err)
	}
	switch m.Action {
	case "INSERT":
	case "":
		return nil, malformed("%s has no action: not an Artifact Registry notification", field)
	default:
		// DELETE, and whatever later versions add, announce no push.
		return nil, nil
	}
	if m.Tag == nil || *m.Tag == "" {
		if m.Digest == "" {
			return nil, malformed("%s: an INSERT names neither digest nor tag", field)
		}
		return nil, nil
	}
	ref, err := repository("", *m.Tag, "", field+" tag")
	if err != nil {
		return nil, err
	}
	return []imageref.Reference{ref}, nil
}
