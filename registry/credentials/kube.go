package credentials

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrSecretNotFound is wrapped by a SecretGetter's error when the Secret
// does not exist.
var ErrSecretNotFound = errors.New("secret not found")

// NewKubeSecretGetter reads Secrets through the Kubernetes API, one GET
// per call, so that a rotated pull secret is used at once. It needs the
// get verb on secrets in the namespaces that credential references name.
func NewKubeSecretGetter(cs kubernetes.Interface) SecretGetter {
	return kubeSecretGetter{cs: cs}
}

type kubeSecretGetter struct {
	cs kubernetes.Interface
}

func (g kubeSecretGetter) GetSecret(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	s, err := g.cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, &secretNotFoundError{namespace: namespace, name: name, err: err}
	case err != nil:
		return nil, fmt.Errorf("reading secret %s/%s: %w", namespace, name, err)
	}
	return s.Data, nil
}

// secretNotFoundError matches both ErrSecretNotFound and the API's own
// not-found error (apierrors.IsNotFound).
type secretNotFoundError struct {
	namespace, name string
	err             error
}

func (e *secretNotFoundError) Error() string {
	return fmt.Sprintf("secret %s/%s not found", e.namespace, e.name)
}

func (e *secretNotFoundError) Unwrap() []error { return []error{ErrSecretNotFound, e.err} }
