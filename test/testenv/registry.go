package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/bcrypt"
)

// Registry is a running CNCF Distribution registry on a loopback port.
type Registry struct {
	// Host is "127.0.0.1:<port>", the registry part of image references.
	Host string
	// Username and Password are accepted by the registry (htpasswd) or by
	// its token server. Empty when the registry has no auth.
	Username, Password string
	// Tokens is the token server when the registry uses bearer-token auth.
	Tokens  *TokenServer
	dataDir string
}

type registryOptions struct {
	auth               string // "htpasswd", "token", "external" or "none"
	username, password string
	authConfig         string // "external": the auth section, naming another token service
	notify             []notifyEndpoint
}

type notifyEndpoint struct {
	url     string
	headers map[string]string
}

// RegistryOption changes how StartRegistry sets up the registry.
type RegistryOption func(*registryOptions)

// WithHtpasswd protects the registry with basic auth (the default, with a
// generated password).
func WithHtpasswd(username, password string) RegistryOption {
	return func(o *registryOptions) { o.auth, o.username, o.password = "htpasswd", username, password }
}

// WithTokenAuth protects the registry with bearer tokens from a token
// server of the tests' own that accepts these credentials.
func WithTokenAuth(username, password string) RegistryOption {
	return func(o *registryOptions) { o.auth, o.username, o.password = "token", username, password }
}

// WithoutAuth lets anyone pull and push.
func WithoutAuth() RegistryOption {
	return func(o *registryOptions) { o.auth = "none" }
}

// WithNotifications makes the registry send its event notifications (an
// envelope of push, pull and delete events) to url, with these headers on
// every request, as its notifications.endpoints configuration does.
func WithNotifications(url string, headers map[string]string) RegistryOption {
	return func(o *registryOptions) { o.notify = append(o.notify, notifyEndpoint{url: url, headers: headers}) }
}

// notificationsConfig is the notifications section of the registry's
// configuration. Retries are quick so that tests do not wait long for an
// endpoint that starts after the registry.
func notificationsConfig(endpoints []notifyEndpoint) string {
	if len(endpoints) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("notifications:\n  endpoints:\n")
	for i, e := range endpoints {
		fmt.Fprintf(&b, "  - name: endpoint-%d\n    url: %q\n    timeout: 5s\n    threshold: 3\n    backoff: 200ms\n", i, e.url)
		if len(e.headers) > 0 {
			b.WriteString("    headers:\n")
			names := make([]string, 0, len(e.headers))
			for name := range e.headers {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				fmt.Fprintf(&b, "      %s: [%q]\n", name, e.headers[name])
			}
		}
	}
	return b.String()
}

// StartRegistry starts the registry and waits until it answers.
func StartRegistry(t testing.TB, opts ...RegistryOption) *Registry {
	t.Helper()
	o := registryOptions{auth: "htpasswd", username: "updater", password: randomString(t, 16)}
	for _, opt := range opts {
		opt(&o)
	}
	dir := t.TempDir()
	r := &Registry{dataDir: filepath.Join(dir, "data")}
	var authConfig string
	switch o.auth {
	case "htpasswd":
		r.Username, r.Password = o.username, o.password
		hash, err := bcrypt.GenerateFromPassword([]byte(o.password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		writeFile(t, htpasswd, fmt.Sprintf("%s:%s\n", o.username, hash))
		authConfig = fmt.Sprintf("auth:\n  htpasswd:\n    realm: test-registry\n    path: %s\n", htpasswd)
	case "token":
		r.Username, r.Password = o.username, o.password
		r.Tokens = StartTokenServer(t, o.username, o.password)
		authConfig = fmt.Sprintf("auth:\n  token:\n    realm: %s\n    service: %s\n    issuer: %s\n    rootcertbundle: %s\n",
			r.Tokens.Realm(), r.Tokens.Service, r.Tokens.Issuer, r.Tokens.CertFile)
	case "external":
		r.Username, r.Password = o.username, o.password
		authConfig = o.authConfig
	}

	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port := FreePort(t)
		config := filepath.Join(dir, "config.yml")
		writeFile(t, config, fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
%s%s`, r.dataDir, loopback(port), authConfig, notificationsConfig(o.notify)))
		cmd := exec.Command(binary(t, "registry"), "serve", config)
		cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
		p := startProcess(t, "registry", cmd)
		r.Host = loopback(port)
		lastErr = p.waitFor(30*time.Second, func() error {
			resp, err := http.Get("http://" + r.Host + "/v2/")
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
		if lastErr == nil {
			return r
		}
		p.stop()
	}
	t.Fatalf("start registry: %v", lastErr)
	return nil
}

// DataDir is the registry's storage root folder (filesystem driver), for
// tests that lay out many tags faster than the HTTP API can push them.
func (r *Registry) DataDir() string { return r.dataDir }

// Auth is the authenticator for pushing test images.
func (r *Registry) Auth() authn.Authenticator {
	if r.Username == "" {
		return authn.Anonymous
	}
	return &authn.Basic{Username: r.Username, Password: r.Password}
}

// Repo returns the full name of a repository on this registry.
func (r *Registry) Repo(repo string) string { return r.Host + "/" + repo }

// ImageOption shapes an image pushed with PushImage.
type ImageOption func(*v1.ConfigFile)

// Created sets the image's creation time.
func Created(t time.Time) ImageOption {
	return func(c *v1.ConfigFile) { c.Created = v1.Time{Time: t} }
}

// OnPlatform sets the image's platform.
func OnPlatform(p v1.Platform) ImageOption {
	return func(c *v1.ConfigFile) { c.OS, c.Architecture, c.Variant = p.OS, p.Architecture, p.Variant }
}

// Labels sets the image's labels.
func Labels(labels map[string]string) ImageOption {
	return func(c *v1.ConfigFile) { c.Config.Labels = labels }
}

// NewImage builds a small image with a random layer, so that every image
// has its own digest.
func NewImage(t testing.TB, opts ...ImageOption) v1.Image {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	for _, opt := range opts {
		opt(cfg)
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// PushImage pushes a new image under the given tags and returns its digest.
func (r *Registry) PushImage(t testing.TB, repo string, tags []string, opts ...ImageOption) v1.Hash {
	t.Helper()
	img := NewImage(t, opts...)
	for _, tag := range tags {
		ref := r.tagRef(t, repo, tag)
		if err := remote.Write(ref, img, remote.WithAuth(r.Auth()), remote.WithContext(context.Background())); err != nil {
			t.Fatalf("push %s: %v", ref, err)
		}
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

// PushIndex pushes a multi-platform image index with one new image per
// platform under the given tag and returns the index digest.
func (r *Registry) PushIndex(t testing.TB, repo, tag string, platforms []v1.Platform, opts ...ImageOption) v1.Hash {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, "application/vnd.oci.image.index.v1+json")
	for _, p := range platforms {
		p := p
		img := NewImage(t, append(append([]ImageOption{}, opts...), OnPlatform(p))...)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	ref := r.tagRef(t, repo, tag)
	if err := remote.WriteIndex(ref, idx, remote.WithAuth(r.Auth())); err != nil {
		t.Fatalf("push index %s: %v", ref, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

// PushTags pushes one image under many tags quickly: the blobs go up once,
// then each tag is one manifest PUT.
func (r *Registry) PushTags(t testing.TB, repo string, tags []string, opts ...ImageOption) v1.Hash {
	t.Helper()
	if len(tags) == 0 {
		t.Fatal("PushTags needs at least one tag")
	}
	img := NewImage(t, opts...)
	first := r.tagRef(t, repo, tags[0])
	if err := remote.Write(first, img, remote.WithAuth(r.Auth())); err != nil {
		t.Fatalf("push %s: %v", first, err)
	}
	for _, tag := range tags[1:] {
		if err := remote.Tag(r.tagRef(t, repo, tag), img, remote.WithAuth(r.Auth())); err != nil {
			t.Fatalf("tag %s:%s: %v", repo, tag, err)
		}
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

func (r *Registry) tagRef(t testing.TB, repo, tag string) name.Tag {
	t.Helper()
	ref, err := name.NewTag(r.Repo(repo) + ":" + tag)
	if err != nil {
		t.Fatalf("tag reference %s:%s: %v", repo, tag, err)
	}
	return ref
}
