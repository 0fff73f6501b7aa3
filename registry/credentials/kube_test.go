package credentials

import (
	"errors"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

func TestKubeSecretGetter(t *testing.T) {
	kube := testenv.SharedKube(t)
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "registry-creds"
	kube.CreateNamespace(t, ns)
	data := map[string][]byte{"creds": []byte("robot:pass\n")}
	kube.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}, Data: data})
	getter := NewKubeSecretGetter(cs)

	t.Run("found", func(t *testing.T) {
		got, err := getter.GetSecret(t.Context(), ns, "plain")
		if err != nil || !maps.EqualFunc(got, data, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("got %q, %v", got, err)
		}
	})

	t.Run("missing secret", func(t *testing.T) {
		_, err := NewResolver(WithSecretGetter(getter)).Resolve(t.Context(), mustRef(t, "pullsecret:"+ns+"/missing"), Target{Host: "ghcr.io"})
		if !errors.Is(err, ErrSecretNotFound) || !apierrors.IsNotFound(err) {
			t.Errorf("want ErrSecretNotFound and the API's not-found, got %v", err)
		}
		if err == nil || !strings.Contains(err.Error(), ns+"/missing") {
			t.Errorf("error does not name the secret: %v", err)
		}
	})

	t.Run("forbidden is not not-found", func(t *testing.T) {
		saCS, err := kubernetes.NewForConfig(kube.ServiceAccountConfig(t, ns, "no-rights"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewKubeSecretGetter(saCS).GetSecret(t.Context(), ns, "plain")
		if err == nil || errors.Is(err, ErrSecretNotFound) || !apierrors.IsForbidden(err) {
			t.Errorf("want a forbidden error, got %v", err)
		}
		if err == nil || !strings.Contains(err.Error(), ns+"/plain") {
			t.Errorf("error does not name the secret: %v", err)
		}
	})
}
