package repoaccess

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// Against the real API server, counted in its audit log: cycles within
// the TTL list the repository Secrets once; a Secret changed since is seen
// once the list is older than the TTL.
func TestCachedSecretLister(t *testing.T) {
	kube := testenv.StartKube(t, testenv.WithAuditLog())
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "cached-secrets"
	kube.CreateNamespace(t, ns)
	kube.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds", Labels: map[string]string{argoCDSecretTypeLabel: argoCDSecretTypeRepoCreds}},
		StringData: map[string]string{"url": "https://git.example.com/", "password": "first"},
	})
	now := time.Unix(1e9, 0)
	var mu sync.Mutex
	l := NewCachedSecretLister(NewKubeSecretLister(cs), time.Minute).(*cachedSecretLister)
	l.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	lists := func() int {
		n := 0
		for _, r := range kube.AuditLog(t) {
			if r.Verb == "list" && r.Resource == "secrets" && r.Namespace == ns {
				n++
			}
		}
		return n
	}
	password := func() string {
		t.Helper()
		r := NewResolver(l, ns, t.TempDir())
		c, err := r.Resolve(context.Background(), "https://git.example.com/team/deploy.git", types.NamespacedName{}, "") // no git:secret:
		if err != nil {
			t.Fatal(err)
		}
		return c.Password
	}

	for cycle := range 5 { // a cycle every 10 s
		if p := password(); p != "first" {
			t.Fatalf("cycle %d: password %q", cycle, p)
		}
		advance(10 * time.Second)
	}
	if n := lists(); n != 1 {
		t.Errorf("5 cycles within the TTL: %d lists of Secrets, want 1", n)
	}

	s, err := cs.CoreV1().Secrets(ns).Get(context.Background(), "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["password"] = []byte("rotated")
	if _, err := cs.CoreV1().Secrets(ns).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	advance(20 * time.Second) // the list is now a minute old
	if p := password(); p != "rotated" {
		t.Errorf("after the TTL: password %q, want the rotated one", p)
	}
	if n := lists(); n != 2 {
		t.Errorf("%d lists of Secrets, want 2", n)
	}
}

// heldLister holds each list of repository Secrets until released, or
// until the caller's context ends.
type heldLister struct {
	SecretLister
	started chan struct{}
	release chan struct{}
}

func (h heldLister) RepositorySecrets(ctx context.Context, namespace string) ([]corev1.Secret, error) {
	h.started <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.SecretLister.RepositorySecrets(ctx, namespace)
}

// A caller that gives up on a list it started does not fail the callers
// that wait for the same list.
func TestCachedSecretListerFirstCallerGivesUp(t *testing.T) {
	kube := testenv.SharedKube(t)
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "first-caller"
	kube.CreateNamespace(t, ns)
	kube.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds", Labels: map[string]string{argoCDSecretTypeLabel: argoCDSecretTypeRepoCreds}},
		StringData: map[string]string{"url": "https://git.example.com/", "password": "p"},
	})
	held := heldLister{SecretLister: NewKubeSecretLister(cs), started: make(chan struct{}, 1), release: make(chan struct{})}
	l := NewCachedSecretLister(held, time.Minute)
	// The second caller must have joined before the first gives up: a read
	// nobody waits for any more is stopped.
	joined := make(chan struct{}, 1)
	l.(*cachedSecretLister).joined = func(shared bool) {
		if shared {
			joined <- struct{}{}
		}
	}

	firstCtx, giveUp := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := l.RepositorySecrets(firstCtx, ns)
		first <- err
	}()
	<-held.started
	second := make(chan error, 1)
	var got []corev1.Secret
	go func() {
		var err error
		got, err = l.RepositorySecrets(context.Background(), ns)
		second <- err
	}()
	<-joined
	giveUp()
	if err := <-first; err == nil {
		t.Error("the caller that gave up got no error")
	}
	close(held.release)
	if err := <-second; err != nil {
		t.Fatalf("the waiting caller failed with the first one's context: %v", err)
	}
	if len(got) != 1 || got[0].Name != "creds" {
		t.Errorf("got %d Secrets, want creds", len(got))
	}
}
