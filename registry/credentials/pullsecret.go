package credentials

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// Keys of image pull Secrets: the current kubernetes.io/dockerconfigjson
// type and the legacy kubernetes.io/dockercfg type, which lacks the "auths"
// level.
const (
	dockerConfigJSONKey = ".dockerconfigjson"
	dockerCfgKey        = ".dockercfg"
)

type dockerAuthEntry struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// pullSecrets serves pullsecret:<ns>/<name> references: image pull
// Secrets, which hold one entry per registry.
type pullSecrets struct {
	secrets SecretGetter
}

func (s pullSecrets) Credential(ctx context.Context, ref Ref, t Target) (Credential, time.Time, error) {
	c, err := s.credential(ctx, ref, t.Host)
	return c, time.Time{}, err
}

func (s pullSecrets) credential(ctx context.Context, ref Ref, host string) (Credential, error) {
	data, err := getSecret(ctx, s.secrets, ref)
	if err != nil {
		return Credential{}, err
	}
	secret := ref.Namespace + "/" + ref.Name
	var auths map[string]dockerAuthEntry
	switch {
	case data[dockerConfigJSONKey] != nil:
		var cfg struct {
			Auths map[string]dockerAuthEntry `json:"auths"`
		}
		if err := json.Unmarshal(data[dockerConfigJSONKey], &cfg); err != nil {
			return Credential{}, fmt.Errorf("%w: %s of secret %s is not a docker config (%s)", ErrMalformed, dockerConfigJSONKey, secret, jsonErrorPlace(err))
		}
		auths = cfg.Auths
	case data[dockerCfgKey] != nil:
		if err := json.Unmarshal(data[dockerCfgKey], &auths); err != nil {
			return Credential{}, fmt.Errorf("%w: %s of secret %s is not a docker config (%s)", ErrMalformed, dockerCfgKey, secret, jsonErrorPlace(err))
		}
	default:
		return Credential{}, fmt.Errorf("%w: secret %s has no %s field (is it of type kubernetes.io/dockerconfigjson?)", ErrNotFound, secret, dockerConfigJSONKey)
	}

	key, ok := matchAuthKey(auths, host)
	if !ok {
		return Credential{}, fmt.Errorf("%w: secret %s has no entry for registry %s", ErrNotFound, secret, host)
	}
	c, err := authEntryCredential(auths[key])
	if err != nil {
		return Credential{}, fmt.Errorf("entry %q of secret %s: %w", key, secret, err)
	}
	return c, nil
}

// jsonErrorPlace describes a JSON error by position only: the decoder's own
// message may quote a piece of the document, which could be a password.
func jsonErrorPlace(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" {
			return "wrong type of the document"
		}
		return fmt.Sprintf("wrong type at %q", typ.Field)
	}
	return "invalid JSON"
}

// matchAuthKey finds the auths entry for host. Keys are written many ways
// ("ghcr.io", "https://ghcr.io", "https://index.docker.io/v1/"); all are
// reduced to a bare host. Sorting makes the choice among equivalent keys
// stable, with an exact spelling preferred.
func matchAuthKey(auths map[string]dockerAuthEntry, host string) (string, bool) {
	want := imageref.CanonicalHost(host)
	keys := make([]string, 0, len(auths))
	for k := range auths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	found, ok := "", false
	for _, k := range keys {
		if authKeyHost(k) != want {
			continue
		}
		if k == host {
			return k, true
		}
		if !ok {
			found, ok = k, true
		}
	}
	return found, ok
}

func authKeyHost(key string) string {
	k := strings.ToLower(strings.TrimSpace(key))
	k = strings.TrimPrefix(k, "https://")
	k = strings.TrimPrefix(k, "http://")
	k, _, _ = strings.Cut(k, "/")
	return imageref.CanonicalHost(k)
}

func authEntryCredential(e dockerAuthEntry) (Credential, error) {
	if e.Username != "" || e.Password != "" {
		return Credential{Username: e.Username, Password: e.Password}, nil
	}
	if e.Auth == "" {
		return Credential{}, fmt.Errorf("%w: the entry has neither username/password nor auth", ErrMalformed)
	}
	raw := strings.TrimSpace(e.Auth)
	dec, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		dec, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(raw, "="))
	}
	if err != nil {
		return Credential{}, fmt.Errorf("%w: auth is not base64", ErrMalformed)
	}
	c, err := parseUserPass(string(dec))
	if err != nil {
		return Credential{}, fmt.Errorf("auth: %w", err)
	}
	return c, nil
}
