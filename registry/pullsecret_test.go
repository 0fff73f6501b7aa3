package registry

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// One image pull Secret holds a robot account per organisation of the same
// registry, and each robot may only pull its own organisation's
// repositories: every repository must be read with its own entry.
func TestPullSecretEntriesByRepository(t *testing.T) {
	kube := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t, testenv.WithTokenAuth("updater", "updater-password"))
	for _, repo := range []string{"org-a/app", "org-b/app", "org-c/app"} {
		reg.PushTags(t, repo, []string{"1.0"})
	}
	reg.Tokens.AddUser("robot-a", "robot-a-password", "org-a")
	reg.Tokens.AddUser("robot-b", "robot-b-password", "org-b")
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "pull-secrets"
	kube.CreateNamespace(t, ns)
	config, err := json.Marshal(map[string]any{"auths": map[string]any{
		"http://" + reg.Host + "/org-a": map[string]string{"username": "robot-a", "password": "robot-a-password"},
		reg.Host + "/org-b/":            map[string]string{"username": "robot-b", "password": "robot-b-password"},
		reg.Host:                        map[string]string{"username": "nobody", "password": "nobody-password"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	kube.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "robots"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: config},
	})
	pullSecret := credref.Ref{Kind: credref.KindPullSecret, Namespace: ns, Name: "robots"}
	resolver := credentials.NewResolver(credentials.WithSecretGetter(credentials.NewKubeSecretGetter(cs)))

	for _, level := range []struct {
		name  string
		conf  []string    // registries.conf fields
		creds credref.Ref // the image's own reference
	}{
		{"image-level", nil, pullSecret},
		{"registry-level", []string{"credentials: " + pullSecret.String()}, credref.Ref{}},
	} {
		t.Run(level.name, func(t *testing.T) {
			c := NewClient(WithConfig(testConfig(t, reg.Host, regFields(reg, level.conf...)...)), WithCredentialResolver(resolver))
			for _, tc := range []struct {
				repo string
				ok   bool // false: the host-only entry is used, which the registry refuses
			}{
				{"org-a/app", true},
				{"org-b/app", true},
				{"org-c/app", false},
			} {
				tags, err := c.Tags(t.Context(), imageRef(t, reg.Host+"/"+tc.repo), level.creds)
				if !tc.ok {
					checkUnauthorized(t, err, reg.Host, tc.repo, "nobody-password")
					continue
				}
				if err != nil || len(tags) != 1 {
					t.Errorf("%s: %v, %v", tc.repo, tags, err)
				}
			}
		})
	}

	// The registry does tell the robots apart.
	c := NewClient(WithConfig(testConfig(t, reg.Host, regFields(reg)...)),
		WithCredentialResolver(envResolver(map[string]string{"ROBOT_A": "robot-a:robot-a-password"})))
	_, err = c.Tags(t.Context(), imageRef(t, reg.Host+"/org-b/app"), envRef("ROBOT_A"))
	checkUnauthorized(t, err, reg.Host, "org-b/app", "robot-a-password")
}
