package registry

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

func TestKubeSecrets(t *testing.T) {
	kube := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	reg.PushTags(t, "app", []string{"1.0"})
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "registry-creds"
	kube.CreateNamespace(t, ns)
	userPass := reg.Username + ":" + reg.Password
	dockerConfig := fmt.Sprintf(`{"auths":{"http://%s":{"auth":%q}}}`, reg.Host, base64.StdEncoding.EncodeToString([]byte(userPass)))
	kube.Create(t,
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(dockerConfig)},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
			Data:       map[string][]byte{"creds": []byte(userPass + "\n")},
		},
	)
	resolver := credentials.NewResolver(credentials.WithSecretGetter(credentials.NewKubeSecretGetter(cs)))
	ref := imageRef(t, reg.Host+"/app")

	for _, creds := range []credref.Ref{
		{Kind: credref.KindPullSecret, Namespace: ns, Name: "pull"},
		{Kind: credref.KindSecret, Namespace: ns, Name: "plain", Field: "creds"},
	} {
		t.Run("image-level "+creds.String(), func(t *testing.T) {
			c := NewClient(WithConfig(testConfig(t, reg.Host)), WithCredentialResolver(resolver))
			if _, err := c.Tags(t.Context(), ref, creds); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("registry-level "+creds.String(), func(t *testing.T) {
			c := NewClient(WithConfig(testConfig(t, reg.Host, "credentials: "+creds.String())), WithCredentialResolver(resolver))
			if _, err := c.Tags(t.Context(), ref, credref.Ref{}); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("missing secret", func(t *testing.T) {
		c := NewClient(WithConfig(testConfig(t, reg.Host)), WithCredentialResolver(resolver))
		_, err := c.Tags(t.Context(), ref, credref.Ref{Kind: credref.KindPullSecret, Namespace: ns, Name: "missing"})
		if !errors.Is(err, credentials.ErrSecretNotFound) || !apierrors.IsNotFound(err) {
			t.Errorf("want credentials.ErrSecretNotFound and the API's not-found, got %v", err)
		}
		if err == nil || !strings.Contains(err.Error(), ns+"/missing") {
			t.Errorf("error does not name the secret: %v", err)
		}
	})
}
