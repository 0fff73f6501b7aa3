package credentials

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings/credref"
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
// Secrets, whose entries are keyed by registry and, optionally, by
// repository path.
type pullSecrets struct {
	secrets SecretGetter
}

func (s pullSecrets) Credential(ctx context.Context, ref credref.Ref, t Target) (Credential, time.Time, error) {
	a, err := s.forRegistry(ctx, ref, t.Host)
	if err != nil {
		return Credential{}, time.Time{}, err
	}
	c, err := a.forRepository(t.Repository)
	return c, time.Time{}, err
}

// forRegistry reads the Secret once and keeps every entry for host, so
// that the resolver's cache serves all repositories of the registry from
// one read.
func (s pullSecrets) forRegistry(ctx context.Context, ref credref.Ref, host string) (answer, error) {
	data, err := getSecret(ctx, s.secrets, ref)
	if err != nil {
		return nil, err
	}
	secret := ref.Namespace + "/" + ref.Name
	var auths map[string]dockerAuthEntry
	switch {
	case data[dockerConfigJSONKey] != nil:
		var cfg struct {
			Auths map[string]dockerAuthEntry `json:"auths"`
		}
		if err := json.Unmarshal(data[dockerConfigJSONKey], &cfg); err != nil {
			return nil, fmt.Errorf("%w: %s of secret %s is not a docker config (%s)", ErrMalformed, dockerConfigJSONKey, secret, jsonErrorPlace(err))
		}
		auths = cfg.Auths
	case data[dockerCfgKey] != nil:
		if err := json.Unmarshal(data[dockerCfgKey], &auths); err != nil {
			return nil, fmt.Errorf("%w: %s of secret %s is not a docker config (%s)", ErrMalformed, dockerCfgKey, secret, jsonErrorPlace(err))
		}
	default:
		return nil, fmt.Errorf("%w: secret %s has no %s field (is it of type kubernetes.io/dockerconfigjson?)", ErrNotFound, secret, dockerConfigJSONKey)
	}

	a := pullSecretEntries{secret: secret, host: host}
	for raw, e := range auths {
		k, ok := parseAuthKey(raw)
		if !ok || !k.matchesHost(host) {
			continue
		}
		c, err := authEntryCredential(e)
		if err != nil {
			err = fmt.Errorf("entry %q of secret %s: %w", raw, secret, err)
		}
		a.entries = append(a.entries, pullSecretEntry{key: k, cred: c, err: err})
	}
	if len(a.entries) == 0 {
		return nil, fmt.Errorf("%w: secret %s has no entry for registry %s", ErrNotFound, secret, host)
	}
	slices.SortFunc(a.entries, func(x, y pullSecretEntry) int { return x.key.compare(y.key, host) })
	return a, nil
}

// pullSecretEntries are a pull secret's entries for one registry, most
// specific first.
type pullSecretEntries struct {
	secret, host string // for messages
	entries      []pullSecretEntry
}

type pullSecretEntry struct {
	key  authKey
	cred Credential
	err  error // the entry holds no credential
}

// forRepository picks the most specific entry whose path covers the
// repository, as the kubelet does.
func (a pullSecretEntries) forRepository(repository string) (Credential, error) {
	for _, e := range a.entries {
		if e.key.matchesRepository(repository) {
			return e.cred, e.err
		}
	}
	keys := make([]string, len(a.entries))
	for i, e := range a.entries {
		keys[i] = strconv.Quote(e.key.raw)
	}
	what := a.host + "/" + repository
	if repository == "" {
		what = "the whole registry " + a.host
	}
	return Credential{}, fmt.Errorf("%w: secret %s has no entry for %s (its entries for the registry are for other repositories: %s)",
		ErrNotFound, a.secret, what, strings.Join(keys, ", "))
}

// authKey is a key of a docker config's auths, read as the kubelet reads
// it: an optional scheme (ignored), a host with an optional port, and an
// optional repository path. Each label of the host may be a glob
// ("*.example.com"); "/v1/" or "/v2/" right after the host are API
// versions, not a path (Docker Hub's key is https://index.docker.io/v1/).
type authKey struct {
	raw  string // as written
	host string // lower-case, without port; Docker Hub's aliases folded
	port string
	path string // without surrounding '/'; "" means every repository
}

func parseAuthKey(raw string) (authKey, bool) {
	k := strings.ToLower(strings.TrimSpace(raw))
	k = strings.TrimPrefix(k, "https://")
	k = strings.TrimPrefix(k, "http://")
	hostPort, p, _ := strings.Cut(k, "/")
	p = "/" + p
	if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
		p = p[len("/v1"):]
	}
	host, port := splitHostPort(hostPort)
	if host == "" {
		return authKey{}, false
	}
	return authKey{raw: raw, host: imageref.CanonicalHost(host), port: port, path: strings.Trim(p, "/")}, true
}

// splitHostPort splits off a port if there is one.
func splitHostPort(hostPort string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostPort); err == nil {
		return h, p
	}
	return hostPort, ""
}

// matchesHost reports whether the key names the registry host: the same
// port, and as many labels, each matching the key's label as a glob.
func (k authKey) matchesHost(registryHost string) bool {
	host, port := splitHostPort(imageref.CanonicalHost(registryHost))
	if port != k.port {
		return false
	}
	want, got := strings.Split(k.host, "."), strings.Split(host, ".")
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if ok, err := path.Match(want[i], got[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// matchesRepository reports whether the key's path is the repository or
// one of its parents: "org" covers "org/app" but not "organic/app".
func (k authKey) matchesRepository(repository string) bool {
	return k.path == "" || repository == k.path || strings.HasPrefix(repository, k.path+"/")
}

// compare orders keys for one registry host, most specific first: the
// longer path, then a literal host before a glob, then the key spelled
// exactly as the image names the registry, then the key's text, so that
// the choice among equivalent keys is stable.
func (k authKey) compare(o authKey, registryHost string) int {
	exact := func(a authKey) bool {
		want := registryHost
		if a.path != "" {
			want += "/" + a.path
		}
		return a.raw == want
	}
	globs := func(a authKey) int {
		return strings.Count(a.host, "*") + strings.Count(a.host, "?") + strings.Count(a.host, "[")
	}
	if c := cmp.Compare(len(o.path), len(k.path)); c != 0 {
		return c
	}
	if c := cmp.Compare(globs(k), globs(o)); c != 0 {
		return c
	}
	if ek, eo := exact(k), exact(o); ek != eo {
		if ek {
			return -1
		}
		return 1
	}
	return strings.Compare(k.raw, o.raw)
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
