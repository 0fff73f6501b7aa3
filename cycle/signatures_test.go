package cycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/signature/layout"
	"github.com/image-updater/argocd-image-updater/strategy"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/test/testenv/sigstoretest"
)

func TestSignedImagesOnly(t *testing.T) {
	k := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	key, other := testenv.NewSigningKey(t), testenv.NewSigningKey(t)
	repo := reg.Repo("signed")

	reg.PushImage(t, "signed", []string{"1.0.0"})
	good := reg.PushImage(t, "signed", []string{"1.1.0"})
	reg.SignImage(t, "signed", good, key)
	reg.PushImage(t, "signed", []string{"1.2.0"}) // unsigned
	byOther := reg.PushImage(t, "signed", []string{"1.3.0"})
	reg.SignImage(t, "signed", byOther, other)
	replayed := reg.PushImage(t, "signed", []string{"1.4.0"})
	p := reg.SignaturePayload(t, "signed", good) // a valid signature, for another digest
	sig, err := key.Signer.SignMessage(strings.NewReader(string(p)))
	if err != nil {
		t.Fatal(err)
	}
	reg.PushSignature(t, "signed", replayed, p, sig)
	reg.PushImage(t, "lonely", []string{"1.0.0"})
	reg.PushImage(t, "lonely", []string{"2.0.0"}) // unsigned, and no signature in the repository at all
	// Signed as current cosign signs: a bundle among the referrers.
	bundleKey, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		t.Fatal(err)
	}
	bundlePEM, err := bundleKey.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	reg.PushImage(t, "bundled", []string{"1.0.0"})
	bundled := reg.PushImage(t, "bundled", []string{"2.0.0"})
	reg.AttachBundle(t, "bundled", bundled, sigstoretest.SignBundle(t, sigstoretest.Statement(t, bundled, layout.SignPredicateType), bundleKey, sign.BundleOptions{}), layout.SignPredicateType)
	reg.PushImage(t, "bundled", []string{"3.0.0"}) // unsigned

	// Signed keyless, as `cosign sign` signs without a key: a certificate
	// for an identity, from a (virtual) Sigstore whose trusted root the
	// operator gives the controller.
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	root, err := signature.ParseTrustedRoot(sigstoretest.TrustedRootJSON(t, vs, false))
	if err != nil {
		t.Fatal(err)
	}
	const identity, issuer = "https://ci.example.com/release.yml@refs/heads/main", "https://token.ci.example.com"
	reg.PushImage(t, "keyless", []string{"1.0.0"})
	for tag, signer := range map[string]string{"2.0.0": identity, "3.0.0": "https://ci.example.com/fork.yml@refs/heads/main"} {
		d := reg.PushImage(t, "keyless", []string{tag})
		reg.AttachBundle(t, "keyless", d, sigstoretest.KeylessBundle(t, vs, vs, signer, issuer, sigstoretest.Statement(t, d, layout.SignPredicateType)), layout.SignPredicateType)
	}
	reg.PushImage(t, "keyless", []string{"4.0.0"}) // unsigned
	keylessAnn := map[string]string{"app.certificate-identity": identity, "app.certificate-oidc-issuer": issuer}

	k.CreateNamespace(t, "team-keys")
	for _, ns := range []string{testenv.ArgoCDNamespace, "team-keys"} {
		k.Create(t, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "cosign", Namespace: ns},
			Data:       map[string][]byte{"cosign.pub": key.PublicPEM, "bundle.pub": []byte(bundlePEM)},
		})
	}

	tests := []struct {
		name        string
		image       string
		verify      string
		more        map[string]string // more annotations
		noRoot      bool              // the controller has no trusted root
		running     string
		wantImage   string // "" when nothing is written
		wantErrors  int
		wantSkipped []string // tags in SignatureNotVerified events
		wantProblem string   // in an InvalidConfiguration event
	}{
		{
			name: "the newest signed version wins", image: repo, verify: "secret:cosign#cosign.pub", running: "1.0.0",
			wantImage: repo + ":1.1.0", wantSkipped: []string{"1.2.0", "1.3.0", "1.4.0"},
		},
		{
			name: "no newer version signed: stays", image: reg.Repo("lonely"), verify: "secret:cosign#cosign.pub", running: "1.0.0",
			wantSkipped: []string{"2.0.0"},
		},
		{
			name: "signed in the bundle format", image: reg.Repo("bundled"), verify: "secret:cosign#bundle.pub", running: "1.0.0",
			wantImage: reg.Repo("bundled") + ":2.0.0", wantSkipped: []string{"3.0.0"},
		},
		{
			name: "without verification the newest is taken", image: repo, running: "1.0.0", wantImage: repo + ":1.4.0",
		},
		{
			name: "key Secret in another namespace refused", image: repo, verify: "secret:team-keys/cosign#cosign.pub", running: "1.0.0",
			wantErrors: 1, wantProblem: "may name only Secrets in the Application's own namespace",
		},
		{
			name: "missing key Secret", image: repo, verify: "secret:nope#cosign.pub", running: "1.0.0",
			wantErrors: 1, wantProblem: "nope",
		},
		{
			name: "missing field", image: repo, verify: "secret:cosign#other.pub", running: "1.0.0",
			wantErrors: 1, wantProblem: `no field "other.pub"`,
		},
		{
			name: "keyless: the newest version the identity signed wins", image: reg.Repo("keyless"), verify: "keyless", more: keylessAnn, running: "1.0.0",
			wantImage: reg.Repo("keyless") + ":2.0.0", wantSkipped: []string{"3.0.0", "4.0.0"},
		},
		{
			name: "keyless: the identity as regular expressions", image: reg.Repo("keyless"), verify: "keyless", running: "1.0.0",
			more:      map[string]string{"app.certificate-identity-regexp": `^https://ci\.example\.com/release\.yml@`, "certificate-oidc-issuer-regexp": `^https://token\.ci\.example\.com$`},
			wantImage: reg.Repo("keyless") + ":2.0.0", wantSkipped: []string{"3.0.0", "4.0.0"},
		},
		{
			name: "keyless without a trusted root", image: reg.Repo("keyless"), verify: "keyless", more: keylessAnn, noRoot: true, running: "1.0.0",
			wantErrors: 1, wantProblem: "no Sigstore trusted root",
		},
		{
			name: "keyless without an identity", image: reg.Repo("keyless"), verify: "keyless", running: "1.0.0",
			more:       map[string]string{"app.certificate-oidc-issuer": issuer},
			wantErrors: 1, wantProblem: "needs the signer's certificate identity",
		},
		{
			name: "an identity without keyless", image: reg.Repo("keyless"), more: keylessAnn, running: "1.0.0",
			wantErrors: 1, wantProblem: "names a keyless signer",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("sig%d", i)
			o := worldOptions{names: name, signatures: true, trustedRoot: root}
			if tt.noRoot {
				o.trustedRoot = nil
			}
			w := newWorld(t, k, reg, o)
			ann := map[string]string{"image-list": "app=" + tt.image}
			if tt.verify != "" {
				ann["app.verify-signature"] = tt.verify
			}
			maps.Copy(ann, tt.more)
			w.create(t, appObject(name, ann, nil, tt.image+":"+tt.running))
			sum := w.updater.RunOnce(t.Context())
			if sum.Errors != tt.wantErrors {
				t.Errorf("errors %d, want %d; logs:\n%s", sum.Errors, tt.wantErrors, w.logs.String())
			}
			got := testenv.KustomizeImages(t, w.get(t, name))
			if tt.wantImage == "" && len(got) != 0 || tt.wantImage != "" && !slices.Equal(got, []string{tt.wantImage}) {
				t.Errorf("kustomize images %v, want %q", got, tt.wantImage)
			}
			var skipped []string
			poll.True(t, 15*time.Second, "the events of the skipped versions and of the problem on the Application "+name, func() bool {
				skipped = nil
				problem := tt.wantProblem == ""
				for _, ev := range w.events(t, name) {
					switch ev.Reason {
					case ReasonSignatureNotVerified:
						_, rest, _ := strings.Cut(ev.Message, "version ")
						tag, _, _ := strings.Cut(rest, " ")
						skipped = append(skipped, tag)
					case ReasonInvalidConfig, ReasonUpdateFailed:
						problem = problem || strings.Contains(ev.Message, tt.wantProblem)
					}
				}
				return len(skipped) >= len(tt.wantSkipped) && problem
			})
			slices.Sort(skipped)
			if !slices.Equal(skipped, tt.wantSkipped) {
				t.Errorf("skipped %v, want %v", skipped, tt.wantSkipped)
			}
			for _, tag := range tt.wantSkipped {
				if !strings.Contains(w.logs.String(), "tag="+tag) {
					t.Errorf("the log does not name skipped tag %s", tag)
				}
			}
		})
	}
}

// TestChooseVerified covers the order of the search with stand-in
// checks; the real registry is in TestSignedImagesOnly.
func TestChooseVerified(t *testing.T) {
	digestOf := func(tag string) string { return "sha256:" + fmt.Sprintf("%064x", len(tag)*7919+int(tag[len(tag)-1])) }
	sigTag := func(tag string) string { return "sha256-" + strings.TrimPrefix(digestOf(tag), "sha256:") + ".sig" }
	errDown := errors.New("registry down")
	tests := []struct {
		name       string
		settings   strategy.Settings
		tags       []string
		current    imageref.Version
		verified   []string // tags whose digest verifies
		failOn     string   // tag whose check fails with errDown
		wantTag    string
		wantUpdate bool
		wantSkip   []string
		wantErr    error
		wantChecks int
		// pin pins the choice, at digestOf(tag+"!"): where the tag points
		// now, not where the listing's metadata said.
		pin        settings.DigestPin
		wantDigest string
	}{
		{name: "newest signed wins", tags: []string{"1.0", "1.1", "1.2", "1.3"}, current: imageref.Version{Tag: "1.0"},
			verified: []string{"1.1"}, wantTag: "1.1", wantUpdate: true, wantSkip: []string{"1.3", "1.2"}, wantChecks: 3},
		{name: "none newer signed", tags: []string{"1.0", "1.1"}, current: imageref.Version{Tag: "1.0"},
			wantTag: "1.0", wantSkip: []string{"1.1"}, wantChecks: 1},
		{name: "registry failure fails the choice", tags: []string{"1.0", "1.1", "1.2"}, current: imageref.Version{Tag: "1.0"},
			verified: []string{"1.1"}, failOn: "1.2", wantErr: errDown, wantChecks: 1},
		{name: "digest strategy: the moved tag is unsigned", settings: strategy.Settings{Strategy: "digest", Constraint: "stable"},
			tags: []string{"stable"}, current: imageref.Version{Tag: "stable", Digest: "sha256:" + strings.Repeat("0", 64)},
			wantTag: "stable", wantSkip: []string{"stable"}, wantChecks: 1},
		{name: "pinned: checked at the digest pinned", tags: []string{"1.0", "1.1"}, current: imageref.Version{Tag: "1.0"}, pin: settings.PinAlways,
			verified: []string{"1.1!"}, wantTag: "1.1", wantUpdate: true, wantChecks: 1, wantDigest: digestOf("1.1!")},
		{name: "pinned: the listing's digest is not what is checked", tags: []string{"1.0", "1.1"}, current: imageref.Version{Tag: "1.0", Digest: digestOf("1.0!")}, pin: settings.PinAlways,
			verified: []string{"1.1"}, wantTag: "1.0", wantSkip: []string{"1.1"}, wantChecks: 1},
		{name: "pinned: the running tag pushed again unsigned is kept", tags: []string{"1.0"}, current: imageref.Version{Tag: "1.0", Digest: digestOf("1.0")}, pin: settings.PinAlways,
			wantTag: "1.0", wantSkip: []string{"1.0"}, wantChecks: 1},
		{name: "pinned once: the running pin is kept unchecked", tags: []string{"1.0"}, current: imageref.Version{Tag: "1.0", Digest: digestOf("1.0")}, pin: settings.PinIfNotPresent,
			wantTag: "1.0", wantDigest: digestOf("1.0")},
		// A signature among the referrers is in no tag.
		{name: "unlisted signature: checked", tags: []string{"1.0", "2.0"}, current: imageref.Version{Tag: "1.0"},
			verified: []string{"2.0"}, wantTag: "2.0", wantUpdate: true, wantChecks: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy, err := strategy.New(tt.settings)
			if err != nil {
				t.Fatal(err)
			}
			tags := slices.Clone(tt.tags)
			for _, tag := range tt.tags {
				if tt.name != "unlisted signature: checked" {
					tags = append(tags, sigTag(tag))
				}
			}
			checks := 0
			meta := func(_ context.Context, tag string) (strategy.TagInfo, error) {
				return strategy.TagInfo{Tag: tag, Digest: digestOf(tag)}, nil
			}
			check := SignatureCheck{
				Digest: func(_ context.Context, tag string) (string, error) { return digestOf(tag), nil },
				Verify: func(_ context.Context, d string) error {
					checks++
					for _, tag := range tt.verified {
						if digestOf(tag) == d {
							return nil
						}
					}
					if tt.failOn != "" && digestOf(tt.failOn) == d {
						return errDown
					}
					return &signature.Rejection{Reason: "not signed by the key"}
				},
			}
			pin := Pin{Mode: tt.pin, Digest: func(_ context.Context, tag string) (string, error) { return digestOf(tag + "!"), nil }}
			res, skipped, _, err := ChooseVerified(t.Context(), policy, tags, tt.current, meta, check, Choice{Pin: pin})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if checks != tt.wantChecks {
				t.Errorf("%d checks, want %d", checks, tt.wantChecks)
			}
			if err != nil {
				return
			}
			if res.Tag != tt.wantTag || res.Update != tt.wantUpdate {
				t.Errorf("result %q update=%v, want %q update=%v (%s)", res.Tag, res.Update, tt.wantTag, tt.wantUpdate, res.Reason)
			}
			if tt.wantDigest != "" && res.Digest != tt.wantDigest {
				t.Errorf("digest %s, want %s", res.Digest, tt.wantDigest)
			}
			var got []string
			for _, s := range skipped {
				got = append(got, s.Tag)
			}
			if !slices.Equal(got, tt.wantSkip) {
				t.Errorf("skipped %v, want %v", got, tt.wantSkip)
			}
			if len(tt.wantSkip) > 0 && !res.Update && !strings.Contains(res.Reason, "skipped for their signatures") {
				t.Errorf("reason %q does not tell of the skipped versions", res.Reason)
			}
		})
	}
}

// countingSecrets serves one Secret and counts the reads.
type countingSecrets struct {
	data  map[string][]byte
	reads int
}

func (c *countingSecrets) GetSecret(context.Context, string, string) (map[string][]byte, error) {
	c.reads++
	return c.data, nil
}

// A key is read once per cycle however many images name it, under
// whatever annotation; without signature checks, each image's error names
// its own annotation.
func TestLoadKeysOncePerSecret(t *testing.T) {
	key := testenv.NewSigningKey(t)
	newJob := func(origin string) *job {
		return &job{spec: &settings.ImageSpec{}, sigKey: settings.SignatureKey{Namespace: "argocd", Name: "cosign", Field: "cosign.pub", Origin: settings.Origin(origin)}}
	}
	jobs := []*job{newJob("annotation a"), newJob("annotation b"), newJob("annotation a")}

	secrets := &countingSecrets{data: map[string][]byte{"cosign.pub": key.PublicPEM}}
	u := mustNew(t, nil, nil, nil, WithSignatures(signature.NewVerifier(nil), secrets, nil))
	keys := u.loadKeys(t.Context(), jobs)
	if k := keys[keyOf(jobs[1].sigKey)]; secrets.reads != 1 || k.err != nil || k.key == nil {
		t.Errorf("%d reads, key %+v; want one read and the key", secrets.reads, k)
	}

	u = mustNew(t, nil, nil, nil)
	memo := newPassMemo()
	for _, j := range jobs[:2] {
		j.policy, _ = strategy.New(strategy.Settings{})
		o := u.chooseOne(t.Context(), j, tagResult{tags: []string{"1.0.0"}}, memo, u.loadKeys(t.Context(), jobs))
		if o.err == nil || !strings.HasPrefix(o.err.Error(), string(j.sigKey.Origin)+" names a signature key") {
			t.Errorf("error %v, want one naming %s", o.err, j.sigKey.Origin)
		}
	}
}
