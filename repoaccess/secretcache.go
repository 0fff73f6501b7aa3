package repoaccess

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/image-updater/argocd-image-updater/internal/coalesce"
)

// DefaultRepositorySecretsTTL is how long NewCachedSecretLister keeps a
// namespace's list of repository Secrets.
const DefaultRepositorySecretsTTL = 3 * time.Minute

// NewCachedSecretLister keeps each namespace's list of Argo CD repository
// Secrets for ttl (DefaultRepositorySecretsTTL when not positive), so that
// the git write-back and chart reads of every cycle do not cost a list of
// Secrets: the controller is not allowed to watch Secrets, which an
// informer would need. A changed or new Secret is seen once the list is older than ttl.
// Secrets named by git:secret: and ConfigMaps are read through next on
// every call.
func NewCachedSecretLister(next SecretLister, ttl time.Duration) SecretLister {
	if ttl <= 0 {
		ttl = DefaultRepositorySecretsTTL
	}
	return &cachedSecretLister{SecretLister: next, ttl: ttl, now: time.Now, lists: map[string]secretList{}}
}

type cachedSecretLister struct {
	SecretLister
	ttl time.Duration
	now func() time.Time

	// calls shares a namespace's read among the callers that want it
	// while it runs, none of whose deadline ends it for the others.
	calls coalesce.Group[[]corev1.Secret]
	// joined, when set, is told of each caller joining a read (tests).
	joined func(shared bool)

	mu    sync.Mutex
	lists map[string]secretList // by namespace: the last list read
}

type secretList struct {
	at      time.Time
	secrets []corev1.Secret
}

func (c *cachedSecretLister) RepositorySecrets(ctx context.Context, namespace string) ([]corev1.Secret, error) {
	c.mu.Lock()
	l, ok := c.lists[namespace]
	c.mu.Unlock()
	if !ok || c.now().Sub(l.at) >= c.ttl {
		var err error
		l.secrets, err = c.calls.Do(ctx, namespace, c.joined, func(ctx context.Context) ([]corev1.Secret, error) {
			at := c.now()
			secrets, err := c.SecretLister.RepositorySecrets(ctx, namespace)
			if err == nil {
				c.mu.Lock()
				c.lists[namespace] = secretList{at: at, secrets: secrets}
				c.mu.Unlock()
			}
			return secrets, err
		})
		if err != nil {
			return nil, err
		}
	}
	// Each caller gets its own slice: the resolver sorts it.
	return slices.Clone(l.secrets), nil
}
