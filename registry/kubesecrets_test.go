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

	"github.com/image-updater/argocd-image-updater/testenv"
)

func TestKubeSecrets(t *testing.T) {
	kube := testenv.StartKube(t)
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
	resolver := NewCredentialResolver(WithSecretGetter(NewKubeSecretGetter(cs)))
	ref := imageRef(t, reg.Host+"/app")

	for _, creds := range []string{"pullsecret:" + ns + "/pull", "secret:" + ns + "/plain#creds"} {
		t.Run("image-level "+creds, func(t *testing.T) {
			c := NewClient(WithConfig(testConfig(t, reg.Host)), WithCredentialResolver(resolver))
			if _, err := c.Tags(t.Context(), ref, mustRef(t, creds)); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("registry-level "+creds, func(t *testing.T) {
			c := NewClient(WithConfig(testConfig(t, reg.Host, "credentials: "+creds)), WithCredentialResolver(resolver))
			if _, err := c.Tags(t.Context(), ref, CredentialRef{}); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("missing secret", func(t *testing.T) {
		c := NewClient(WithConfig(testConfig(t, reg.Host)), WithCredentialResolver(resolver))
		_, err := c.Tags(t.Context(), ref, mustRef(t, "pullsecret:"+ns+"/missing"))
		if !errors.Is(err, ErrSecretNotFound) || !apierrors.IsNotFound(err) {
			t.Errorf("want ErrSecretNotFound and the API's not-found, got %v", err)
		}
		if !strings.Contains(err.Error(), ns+"/missing") {
			t.Errorf("error does not name the secret: %v", err)
		}
	})

	t.Run("forbidden is not not-found", func(t *testing.T) {
		saCS, err := kubernetes.NewForConfig(kube.ServiceAccountConfig(t, ns, "no-rights"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewKubeSecretGetter(saCS).GetSecret(t.Context(), ns, "pull")
		if err == nil || errors.Is(err, ErrSecretNotFound) || !apierrors.IsForbidden(err) {
			t.Errorf("want a forbidden error, got %v", err)
		}
		if !strings.Contains(err.Error(), ns+"/pull") {
			t.Errorf("error does not name the secret: %v", err)
		}
	})
}
