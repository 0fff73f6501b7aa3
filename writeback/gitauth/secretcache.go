package gitauth

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// DefaultRepositorySecretsTTL is how long NewCachedSecretLister keeps a
// namespace's list of repository Secrets.
const DefaultRepositorySecretsTTL = 3 * time.Minute

// NewCachedSecretLister keeps each namespace's list of Argo CD repository
// Secrets for ttl (DefaultRepositorySecretsTTL when not positive), so that
// git write-back in every cycle does not cost a list of Secrets: the
// controller is not allowed to watch Secrets, which an informer would
// need. A changed or new Secret is seen once the list is older than ttl.
// Secrets named by git:secret: and ConfigMaps are read through next on
// every call.
func NewCachedSecretLister(next SecretLister, ttl time.Duration) SecretLister {
	if ttl <= 0 {
		ttl = DefaultRepositorySecretsTTL
	}
	return &cachedSecretLister{SecretLister: next, ttl: ttl, now: time.Now, lists: map[string]*secretList{}}
}

type cachedSecretLister struct {
	SecretLister
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	lists map[string]*secretList // by namespace
}

// secretList is one namespace's list; callers that find it being read wait
// for that read rather than sending their own.
type secretList struct {
	done    chan struct{}
	at      time.Time
	secrets []corev1.Secret
	err     error
}

func (c *cachedSecretLister) RepositorySecrets(ctx context.Context, namespace string) ([]corev1.Secret, error) {
	c.mu.Lock()
	l, ok := c.lists[namespace]
	if ok {
		select {
		case <-l.done:
			if l.err != nil || c.now().Sub(l.at) >= c.ttl {
				ok = false
			}
		default: // being read
		}
	}
	if !ok {
		l = &secretList{done: make(chan struct{}), at: c.now()}
		c.lists[namespace] = l
		c.mu.Unlock()
		l.secrets, l.err = c.SecretLister.RepositorySecrets(ctx, namespace)
		close(l.done)
	} else {
		c.mu.Unlock()
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if l.err != nil {
		return nil, l.err
	}
	// Each caller gets its own slice: the resolver sorts it.
	return slices.Clone(l.secrets), nil
}
