package signature_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/signature/layout"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/test/testenv/sigstoretest"
)

func newKeypair(t *testing.T) *sign.EphemeralKeypair {
	t.Helper()
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func keypairKey(t *testing.T, kp sign.Keypair) *signature.PublicKey {
	t.Helper()
	pemKey, err := kp.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	k, err := signature.ParsePublicKey([]byte(pemKey))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tamper changes the statement inside a bundle's envelope, keeping its
// signature: the subject's digest becomes other.
func tamper(t *testing.T, bundle []byte, other v1.Hash) []byte {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(bundle, &b); err != nil {
		t.Fatal(err)
	}
	env := b["dsseEnvelope"].(map[string]any)
	payload, err := base64.StdEncoding.DecodeString(env["payload"].(string))
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	st["subject"] = []any{map[string]any{"digest": map[string]any{"sha256": other.Hex}}}
	payload, err = json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	env["payload"] = base64.StdEncoding.EncodeToString(payload)
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVerifyBundles: signatures in the bundle format current cosign
// writes, made with sigstore-go's signer, attached as cosign attaches them
// to the Distribution registry (which keeps the referrers under the tag
// schema), next to the classic layout.
func TestVerifyBundles(t *testing.T) {
	reg := testenv.StartRegistry(t)
	kp, other := newKeypair(t), newKeypair(t)
	key := keypairKey(t, kp)
	oldKey := testenv.NewSigningKey(t)
	const repo = "team/bundled"
	bundle := func(t *testing.T, d v1.Hash, kp sign.Keypair, predicate string) []byte {
		return sigstoretest.SignBundle(t, sigstoretest.Statement(t, d, predicate), kp, sign.BundleOptions{})
	}

	tests := []struct {
		name    string
		key     *signature.PublicKey
		prepare func(t *testing.T) v1.Hash
		// wantReason is "" when the signature verifies.
		wantReason string
		// wantRequests, when set, is how many registry requests the
		// first check makes.
		wantRequests int32
	}{
		{name: "signed with the key", key: key, wantRequests: 4, prepare: func(t *testing.T) v1.Hash {
			// Referrers (through the tag schema), the .sig tag, the
			// bundle's manifest and blob.
			d := reg.PushImage(t, repo, []string{"signed"})
			reg.AttachBundle(t, repo, d, bundle(t, d, kp, layout.SignPredicateType), layout.SignPredicateType)
			return d
		}},
		{name: "another key's bundle, then the key's", key: key, prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"both"})
			reg.AttachBundle(t, repo, d, bundle(t, d, other, layout.SignPredicateType), layout.SignPredicateType)
			reg.AttachBundle(t, repo, d, bundle(t, d, kp, layout.SignPredicateType), layout.SignPredicateType)
			return d
		}},
		{name: "classic signature by the key, bundle by another", key: parseKey(t, oldKey), prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"classic"})
			reg.AttachBundle(t, repo, d, bundle(t, d, other, layout.SignPredicateType), layout.SignPredicateType)
			reg.SignImage(t, repo, d, oldKey)
			return d
		}},
		{name: "bundle by another key", key: key, wantReason: "does not verify", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"other"})
			reg.AttachBundle(t, repo, d, bundle(t, d, other, layout.SignPredicateType), layout.SignPredicateType)
			return d
		}},
		{name: "tampered statement", key: key, wantReason: "does not verify", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"tampered"})
			elsewhere := reg.PushImage(t, repo, []string{"tampered-elsewhere"})
			// Signed for elsewhere, edited to name d.
			reg.AttachBundle(t, repo, d, tamper(t, bundle(t, elsewhere, kp, layout.SignPredicateType), d), layout.SignPredicateType)
			return d
		}},
		{name: "bundle of another image", key: key, wantReason: "does not verify", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"replayed"})
			elsewhere := reg.PushImage(t, repo, []string{"replayed-elsewhere"})
			reg.AttachBundle(t, repo, d, bundle(t, elsewhere, kp, layout.SignPredicateType), layout.SignPredicateType)
			return d
		}},
		{name: "an attestation only", key: key, wantReason: "no signature", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"attested"})
			reg.AttachBundle(t, repo, d, bundle(t, d, kp, "https://slsa.dev/provenance/v1"), "https://slsa.dev/provenance/v1")
			return d
		}},
		{name: "an attestation announced as a signature", key: key, wantReason: "of predicate type", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"disguised"})
			reg.AttachBundle(t, repo, d, bundle(t, d, kp, "https://slsa.dev/provenance/v1"), layout.SignPredicateType)
			return d
		}},
		{name: "not a bundle", key: key, wantReason: "not a sigstore bundle", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"garbage"})
			reg.AttachBundle(t, repo, d, []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`), layout.SignPredicateType)
			return d
		}},
		{name: "oversized bundle", key: key, wantReason: "larger than", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"bigbundle"})
			reg.AttachBundle(t, repo, d, bytes.Repeat([]byte(" "), 1<<20), layout.SignPredicateType)
			return d
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.prepare(t)
			c := newClient(t, reg)
			v := signature.NewVerifier(c)
			img := mustParse(t, reg.Repo(repo))
			err := v.Verify(t.Context(), img, credref.Ref{}, d.String(), tt.key)
			if tt.wantRequests != 0 && c.requests() != tt.wantRequests {
				t.Errorf("%d requests, want %d", c.requests(), tt.wantRequests)
			}
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("want verified, got %v", err)
				}
				before := c.requests()
				if err := v.Verify(t.Context(), img, credref.Ref{}, d.String(), tt.key); err != nil {
					t.Fatal(err)
				}
				if after := c.requests(); after != before {
					t.Errorf("a verified digest was checked again: %d requests", after-before)
				}
				return
			}
			var r *signature.Rejection
			if !errors.Is(err, signature.ErrNotVerified) || !errors.As(err, &r) {
				t.Fatalf("want a rejection, got %v", err)
			}
			if !strings.Contains(r.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", r.Reason, tt.wantReason)
			}
			// Remembered with what was read: the referrers index and the
			// signature tag, nothing more.
			before := c.requests()
			if err := v.Verify(t.Context(), img, credref.Ref{}, d.String(), tt.key); !errors.Is(err, signature.ErrNotVerified) {
				t.Fatalf("second check: %v", err)
			}
			if n := c.requests() - before; n != 2 {
				t.Errorf("the second check made %d requests, want 2", n)
			}
		})
	}
}

// TestVerifyBundleReferrersAPI: from a registry that serves the Referrers
// API (go-containerregistry's), the bundle is found there, with no
// tag-schema request.
func TestVerifyBundleReferrersAPI(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.WithReferrersSupport(true), ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	img := testenv.NewImage(t)
	tag, err := name.NewTag(host+"/app:1.0", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	kp := newKeypair(t)
	testenv.AttachBundle(t, tag.Context(), authn.Anonymous, d,
		sigstoretest.SignBundle(t, sigstoretest.Statement(t, d, layout.SignPredicateType), kp, sign.BundleOptions{}), layout.SignPredicateType)

	var paths []string
	var mu sync.Mutex
	cfg, err := config.Parse("registries.conf", fmt.Appendf(nil, "registries:\n- name: api\n  prefix: %s\n  api_url: http://%s\n", host, host))
	if err != nil {
		t.Fatal(err)
	}
	c := registry.NewClient(registry.WithConfig(func() *config.Config { return cfg }))
	v := signature.NewVerifier(recordingRegistry{Client: c, record: func(s string) { mu.Lock(); paths = append(paths, s); mu.Unlock() }})
	if err := v.Verify(t.Context(), mustParse(t, host+"/app"), credref.Ref{}, d.String(), keypairKey(t, kp)); err != nil {
		t.Fatalf("want verified, got %v", err)
	}
	if want := "referrers manifest manifest blob"; strings.Join(paths, " ") != want {
		t.Errorf("calls %v, want %s", paths, want)
	}
}

type recordingRegistry struct {
	*registry.Client
	record func(string)
}

func (r recordingRegistry) Referrers(ctx context.Context, ref imageref.Reference, creds credref.Ref, digest string) (registry.Manifest, error) {
	r.record("referrers")
	return r.Client.Referrers(ctx, ref, creds, digest)
}

func (r recordingRegistry) Manifest(ctx context.Context, ref imageref.Reference, creds credref.Ref) (registry.Manifest, error) {
	r.record("manifest")
	return r.Client.Manifest(ctx, ref, creds)
}

func (r recordingRegistry) Blob(ctx context.Context, ref imageref.Reference, creds credref.Ref, digest string, maxBytes int64) ([]byte, error) {
	r.record("blob")
	return r.Client.Blob(ctx, ref, creds, digest, maxBytes)
}

// trustedRoot is the trusted root of vs, as an operator would write it.
func trustedRoot(t *testing.T, vs *ca.VirtualSigstore, withLog bool) *signature.TrustedRoot {
	t.Helper()
	r, err := signature.ParseTrustedRoot(sigstoretest.TrustedRootJSON(t, vs, withLog))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestVerifyKeyless: keyless signatures checked against a trusted root
// and an identity, offline, with a virtual Sigstore (certificate and
// timestamp authorities) in the test.
func TestVerifyKeyless(t *testing.T) {
	reg := testenv.StartRegistry(t)
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	strange, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	const (
		repo     = "team/keyless"
		identity = "release@example.com"
		issuer   = "https://issuer.example.com"
	)
	tr := trustedRoot(t, vs, false)
	keyless := func(t *testing.T, r *signature.TrustedRoot, id signature.Identity) *signature.Keyless {
		t.Helper()
		k, err := r.Keyless(id)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	exact := signature.Identity{Subject: identity, Issuer: issuer}
	signed := func(t *testing.T, tag string, ca, stamper *ca.VirtualSigstore, identity string) v1.Hash {
		d := reg.PushImage(t, repo, []string{tag})
		reg.AttachBundle(t, repo, d, sigstoretest.KeylessBundle(t, ca, stamper, identity, issuer, sigstoretest.Statement(t, d, layout.SignPredicateType)), layout.SignPredicateType)
		return d
	}
	tests := []struct {
		name       string
		keyless    *signature.Keyless
		prepare    func(t *testing.T) v1.Hash
		wantReason string
	}{
		{name: "the identity", keyless: keyless(t, tr, exact), prepare: func(t *testing.T) v1.Hash {
			return signed(t, "good", vs, vs, identity)
		}},
		{name: "the identity by regular expressions", keyless: keyless(t, tr, signature.Identity{SubjectRegexp: `^release@example\.com$`, IssuerRegexp: `^https://issuer\.example\.com$`}),
			prepare: func(t *testing.T) v1.Hash { return signed(t, "regexp", vs, vs, identity) }},
		{name: "another identity", keyless: keyless(t, tr, exact), wantReason: "certificate identity", prepare: func(t *testing.T) v1.Hash {
			return signed(t, "someone", vs, vs, "someone@example.com")
		}},
		{name: "another issuer", keyless: keyless(t, tr, signature.Identity{Subject: identity, Issuer: "https://other.example.com"}), wantReason: "certificate identity",
			prepare: func(t *testing.T) v1.Hash { return signed(t, "issuer", vs, vs, identity) }},
		{name: "a certificate authority not trusted", keyless: keyless(t, tr, exact), wantReason: "certificate", prepare: func(t *testing.T) v1.Hash {
			return signed(t, "strange", strange, vs, identity)
		}},
		{name: "no time of signing vouched for", keyless: keyless(t, tr, exact), wantReason: "timestamp", prepare: func(t *testing.T) v1.Hash {
			return signed(t, "unstamped", vs, nil, identity)
		}},
		{name: "a root with a transparency log, and no entry", keyless: keyless(t, trustedRoot(t, vs, true), exact), wantReason: "log",
			prepare: func(t *testing.T) v1.Hash { return signed(t, "unlogged", vs, vs, identity) }},
		{name: "signed with a key", keyless: keyless(t, tr, exact), wantReason: "does not verify", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"keyed"})
			reg.AttachBundle(t, repo, d, sigstoretest.SignBundle(t, sigstoretest.Statement(t, d, layout.SignPredicateType), newKeypair(t), sign.BundleOptions{}), layout.SignPredicateType)
			return d
		}},
		{name: "a classic signature only", keyless: keyless(t, tr, exact), wantReason: "classic layout", prepare: func(t *testing.T) v1.Hash {
			d := reg.PushImage(t, repo, []string{"classic"})
			reg.SignImage(t, repo, d, testenv.NewSigningKey(t))
			return d
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.prepare(t)
			v := signature.NewVerifier(newClient(t, reg))
			err := v.Verify(t.Context(), mustParse(t, reg.Repo(repo)), credref.Ref{}, d.String(), tt.keyless)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("want verified, got %v", err)
				}
				return
			}
			var r *signature.Rejection
			if !errors.As(err, &r) || !strings.Contains(r.Reason, tt.wantReason) {
				t.Fatalf("want a rejection saying %q, got %v", tt.wantReason, err)
			}
		})
	}

	// A keyless bundle does not verify with a key, not even the
	// certificate's own.
	t.Run("with a key", func(t *testing.T) {
		d := reg.PushImage(t, repo, []string{"cert-key"})
		kp := sigstoretest.NewCertKeypair(t, vs, identity, issuer)
		reg.AttachBundle(t, repo, d, sigstoretest.SignBundle(t, sigstoretest.Statement(t, d, layout.SignPredicateType), kp, sign.BundleOptions{CertificateProvider: kp}), layout.SignPredicateType)
		v := signature.NewVerifier(newClient(t, reg))
		err := v.Verify(t.Context(), mustParse(t, reg.Repo(repo)), credref.Ref{}, d.String(), keypairKey(t, kp))
		if !errors.Is(err, signature.ErrNotVerified) {
			t.Fatalf("want a rejection, got %v", err)
		}
	})
}

func TestKeylessSettings(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	tr := trustedRoot(t, vs, false)
	for _, tt := range []struct {
		id      signature.Identity
		wantErr string
	}{
		{id: signature.Identity{Subject: "a", Issuer: "b"}},
		{id: signature.Identity{Issuer: "b"}, wantErr: "certificate identity"},
		{id: signature.Identity{Subject: "a", SubjectRegexp: "a", Issuer: "b"}, wantErr: "certificate identity"},
		{id: signature.Identity{Subject: "a"}, wantErr: "OIDC issuer"},
		{id: signature.Identity{SubjectRegexp: "(", Issuer: "b"}, wantErr: "error parsing regexp"},
	} {
		_, err := tr.Keyless(tt.id)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%+v: error %v, want %q", tt.id, err, tt.wantErr)
		}
	}
	for _, bad := range []string{"", "{}", `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`, strings.Repeat(" ", 2<<20)} {
		if _, err := signature.ParseTrustedRoot([]byte(bad)); err == nil {
			t.Errorf("trusted root %.40q accepted", bad)
		}
	}
}

// TestVerifyReferrersRefused: a registry that refuses the Referrers API
// (with no index under the tag schema) still has its .sig tag read; one
// that fails it fails the check.
func TestVerifyReferrersRefused(t *testing.T) {
	reg := testenv.StartRegistry(t)
	key := testenv.NewSigningKey(t)
	d := reg.PushImage(t, "app", []string{"1.0"})
	reg.SignImage(t, "app", d, key)
	for _, tt := range []struct {
		status  int
		refused bool
	}{
		{status: http.StatusMethodNotAllowed, refused: true},
		{status: http.StatusForbidden, refused: true},
		{status: http.StatusUnauthorized},
		{status: http.StatusInternalServerError},
	} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			target, err := url.Parse("http://" + reg.Host)
			if err != nil {
				t.Fatal(err)
			}
			proxy := httputil.NewSingleHostReverseProxy(target)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(r.URL.Path, "/referrers/") {
					w.WriteHeader(tt.status)
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			host := strings.TrimPrefix(srv.URL, "http://")
			cfg, err := config.Parse("registries.conf", fmt.Appendf(nil,
				"registries:\n- name: test\n  prefix: %s\n  api_url: http://%s\n  credentials: env:REG\n  limit: 1000\n", host, host))
			if err != nil {
				t.Fatal(err)
			}
			env := func(string) (string, bool) { return reg.Username + ":" + reg.Password, true }
			c := registry.NewClient(registry.WithConfig(func() *config.Config { return cfg }),
				registry.WithCredentialResolver(credentials.NewResolver(credentials.WithEnv(env))))
			err = signature.NewVerifier(c).Verify(t.Context(), mustParse(t, host+"/app"), credref.Ref{}, d.String(), parseKey(t, key))
			if tt.refused && err != nil {
				t.Fatalf("want verified from the .sig tag, got %v", err)
			}
			if !tt.refused && (err == nil || errors.Is(err, signature.ErrNotVerified)) {
				t.Fatalf("want a registry error, got %v", err)
			}
		})
	}
}
