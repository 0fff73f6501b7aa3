package gitauth

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/testenv"
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
		r := NewResolver(l, ns, t.TempDir(), nil)
		c, err := r.Resolve(context.Background(), "https://git.example.com/team/deploy.git", types.NamespacedName{}) // no git:secret:
		if err != nil {
			t.Fatal(err)
		}
		return c.password
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
