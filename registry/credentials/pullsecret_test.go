package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// countingGetter counts the Secret reads that go to the API server.
type countingGetter struct {
	SecretGetter
	reads atomic.Int32
}

func (g *countingGetter) GetSecret(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	g.reads.Add(1)
	return g.SecretGetter.GetSecret(ctx, namespace, name)
}

// TestPullSecretEntriesByRepository reads one image pull Secret from the
// API server whose entries name registries in the ways Docker and the
// kubelet accept, and checks which entry serves which repository.
func TestPullSecretEntriesByRepository(t *testing.T) {
	kube := testenv.SharedKube(t)
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "pull-secrets"
	kube.CreateNamespace(t, ns)
	auths := map[string]map[string]string{}
	for key, user := range map[string]string{
		"https://ghcr.io/org-a":       "user-a", // the scheme is ignored
		"ghcr.io/org-b":               "user-b",
		"ghcr.io/org-b/team/":         "team-b", // a longer path is more specific
		"ghcr.io":                     "ghcr-any",
		"*.example.com":               "wildcard",
		"registry.example.com:5000":   "port-5000",
		"https://index.docker.io/v1/": "hub",
		"quay.io/org-a":               "quay-a",
		"http://localhost:5000/v2/":   "local",
	} {
		auths[key] = map[string]string{"username": user, "password": "pw-" + user}
	}
	config, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		t.Fatal(err)
	}
	kube.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: config},
	})
	ref := credref.Ref{Kind: credref.KindPullSecret, Namespace: ns, Name: "pull"}

	for _, tc := range []struct {
		name             string
		host, repository string
		user             string // "" when no entry applies
		msg              string // part of the error when none applies
	}{
		{"scheme-prefixed path", "ghcr.io", "org-a/app", "user-a", ""},
		{"path", "ghcr.io", "org-b/app", "user-b", ""},
		{"longer path wins", "ghcr.io", "org-b/team/app", "team-b", ""},
		{"path is the repository", "ghcr.io", "org-b", "user-b", ""},
		{"host-only entry for other repositories", "ghcr.io", "org-c/app", "ghcr-any", ""},
		{"path ends at a segment", "ghcr.io", "org-ab/app", "ghcr-any", ""},
		{"no repository", "ghcr.io", "", "ghcr-any", ""},
		{"wildcard label", "a.example.com", "app", "wildcard", ""},
		{"wildcard needs as many labels", "a.b.example.com", "app", "", "has no entry for registry a.b.example.com"},
		{"wildcard needs a label", "example.com", "app", "", "has no entry for registry example.com"},
		{"port must match", "registry.example.com:5000", "app", "port-5000", ""},
		{"no port is another port", "registry.example.com", "app", "wildcard", ""},
		{"other port", "registry.example.com:5001", "app", "", "has no entry for registry registry.example.com:5001"},
		{"Docker Hub key", "docker.io", "library/nginx", "hub", ""},
		{"Docker Hub alias", "index.docker.io", "team/app", "hub", ""},
		{"API version path", "localhost:5000", "app", "local", ""},
		{"only other paths", "quay.io", "org-ab/app", "", `has no entry for quay.io/org-ab/app (its entries for the registry are for other repositories: "quay.io/org-a")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := Target{Host: tc.host, Repository: tc.repository}
			for _, how := range []struct {
				name    string
				resolve func(*Resolver) (Credential, error)
			}{
				{"Resolve", func(r *Resolver) (Credential, error) { return r.Resolve(t.Context(), ref, target) }},
				{"ResolveCached", func(r *Resolver) (Credential, error) { return r.ResolveCached(t.Context(), ref, target, 0) }},
			} {
				r := NewResolver(WithSecretGetter(NewKubeSecretGetter(cs)))
				c, err := how.resolve(r)
				if tc.user == "" {
					if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tc.msg) {
						t.Errorf("%s: got %v, %v; want ErrNotFound saying %q", how.name, c, err, tc.msg)
					}
					continue
				}
				if err != nil || c != (Credential{Username: tc.user, Password: "pw-" + tc.user}) {
					t.Errorf("%s: got %v, %v; want user %s", how.name, c, err, tc.user)
				}
			}
		})
	}

	t.Run("one read serves every repository of a registry", func(t *testing.T) {
		g := &countingGetter{SecretGetter: NewKubeSecretGetter(cs)}
		r := NewResolver(WithSecretGetter(g))
		for _, tc := range []struct {
			host, repository, user string
			reads                  int32 // in all, after this lookup
		}{
			{"ghcr.io", "org-a/app", "user-a", 1},
			{"ghcr.io", "org-b/app", "user-b", 1},
			{"ghcr.io", "org-b/team/app", "team-b", 1},
			{"ghcr.io", "org-c/app", "ghcr-any", 1},
			{"GHCR.io", "org-a/app", "user-a", 1},
			{"quay.io", "org-a/app", "quay-a", 2}, // another registry, another entry in the cache
		} {
			c, err := r.ResolveCached(t.Context(), ref, Target{Host: tc.host, Repository: tc.repository}, 0)
			if err != nil || c.Username != tc.user {
				t.Errorf("%s/%s: got %v, %v; want user %s", tc.host, tc.repository, c, err, tc.user)
			}
			if got := g.reads.Load(); got != tc.reads {
				t.Errorf("%s/%s: %d Secret reads, want %d", tc.host, tc.repository, got, tc.reads)
			}
		}
		// A repository without an entry is not answered from the cache,
		// as errors are not cached: the Secret is read again, in case it
		// was updated.
		for want := int32(3); want <= 4; want++ {
			if _, err := r.ResolveCached(t.Context(), ref, Target{Host: "quay.io", Repository: "org-ab/app"}, 0); !errors.Is(err, ErrNotFound) {
				t.Errorf("quay.io/org-ab/app: %v, want ErrNotFound", err)
			}
			if got := g.reads.Load(); got != want {
				t.Errorf("%d Secret reads, want %d", got, want)
			}
		}
		r.Invalidate(ref, "ghcr.io")
		if c, err := r.ResolveCached(t.Context(), ref, Target{Host: "ghcr.io", Repository: "org-b/app"}, 0); err != nil || c.Username != "user-b" {
			t.Errorf("after Invalidate: %v, %v", c, err)
		}
		if got := g.reads.Load(); got != 5 {
			t.Errorf("after Invalidate: %d Secret reads, want 5", got)
		}
	})
}
