package firstseen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// clock is a clock the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestTimes(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	s := New(nil, WithClock(c.now))
	first := s.Times("ghcr.io/a/web", []string{"1.0", "1.1"})
	c.t = c.t.Add(time.Hour)
	again := s.Times("ghcr.io/a/web", []string{"1.1", "1.2"})
	if !first["1.0"].Equal(time.Unix(1_700_000_000, 0)) || !again["1.1"].Equal(first["1.1"]) || !again["1.2"].Equal(c.t) {
		t.Errorf("times %v then %v: a version keeps the time it was first seen", first, again)
	}
	if other := s.Times("ghcr.io/b/web", []string{"1.0"}); !other["1.0"].Equal(c.t) {
		t.Errorf("another repository's 1.0 at %v, want now", other["1.0"])
	}
}

// TestTimesWithinLimit: the repositories least recently asked make room;
// theirs look new when asked again, never older than they are.
func TestTimesWithinLimit(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	versions := make([]string, 50)
	for i := range versions {
		versions[i] = fmt.Sprintf("1.%d.0", i)
	}
	s := New(nil, WithClock(c.now), WithLimit(3*(&repository{times: timesOf(versions)}).Bytes()))
	for i := range 4 {
		s.Times(fmt.Sprintf("r%d", i), versions)
	}
	if used, limit := s.repos.Used(), 3*(&repository{times: timesOf(versions)}).Bytes(); used > limit || s.repos.Len() != 3 {
		t.Errorf("%d bytes in %d repositories, want at most %d in 3", used, s.repos.Len(), limit)
	}
	c.t = c.t.Add(time.Hour)
	if got := s.Times("r0", versions[:1]); !got["1.0.0"].Equal(c.t) {
		t.Errorf("the repository dropped first gave %v, want now", got["1.0.0"])
	}
}

func timesOf(versions []string) map[string]int64 {
	m := map[string]int64{}
	for _, v := range versions {
		m[v] = 1
	}
	return m
}

// TestConfigMap: the times survive a restart, through the real API
// server; a store that could not read them merges them in when it saves,
// and two processes' saves keep the earlier time of each version.
func TestConfigMap(t *testing.T) {
	k := testenv.SharedKube(t)
	cs := kubernetes.NewForConfigOrDie(k.Config)
	ctx := t.Context()
	backend := ConfigMap{ConfigMaps: cs.CoreV1().ConfigMaps(testenv.ArgoCDNamespace), Name: DefaultConfigMap}
	c := &clock{t: time.Unix(1_700_000_000, 0)}

	a := New(backend, WithClock(c.now))
	if err := a.Load(ctx); err != nil {
		t.Fatalf("load with no ConfigMap: %v", err)
	}
	a.Times("ghcr.io/a/web", []string{"1.0", "1.1"})
	if err := a.Save(ctx); err != nil {
		t.Fatal(err)
	}

	// A restart, an hour later: the times are those first seen.
	c.t = c.t.Add(time.Hour)
	b := New(backend, WithClock(c.now))
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	got := b.Times("ghcr.io/a/web", []string{"1.0", "1.2"})
	if !got["1.0"].Equal(time.Unix(1_700_000_000, 0)) || !got["1.2"].Equal(c.t) {
		t.Errorf("after a restart %v, want 1.0 at the first time, 1.2 now", got)
	}

	// A process that read nothing (the API server was down) sees 1.1 as
	// new; its save keeps the stored, earlier time.
	c.t = c.t.Add(time.Hour)
	down := New(failing{backend}, WithClock(c.now))
	if err := down.Load(ctx); err == nil {
		t.Fatal("a failing load gave no error")
	}
	down.Times("ghcr.io/a/web", []string{"1.1"})
	down.backend = backend
	if err := down.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(ctx); err != nil {
		t.Fatal(err)
	}
	after := New(backend, WithClock(c.now))
	if err := after.Load(ctx); err != nil {
		t.Fatal(err)
	}
	got = after.Times("ghcr.io/a/web", []string{"1.0", "1.1", "1.2"})
	want := map[string]time.Time{"1.0": time.Unix(1_700_000_000, 0), "1.1": time.Unix(1_700_000_000, 0), "1.2": time.Unix(1_700_000_000, 0).Add(time.Hour)}
	for v, w := range want {
		if !got[v].Equal(w) {
			t.Errorf("%s first seen at %v, want %v", v, got[v], w)
		}
	}

	// What is stored is the one ConfigMap, labelled, in JSON.
	cm, err := cs.CoreV1().ConfigMaps(testenv.ArgoCDNamespace).Get(ctx, DefaultConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data[dataKey], `"ghcr.io/a/web":{`) || cm.Labels["app.kubernetes.io/part-of"] != "argocd-image-updater" {
		t.Errorf("ConfigMap %v %v", cm.Labels, cm.Data)
	}

	// A ConfigMap that does not hold times is an error naming them, and
	// the store goes on with what it has.
	cm.Data[dataKey] = "not json"
	if _, err := cs.CoreV1().ConfigMaps(testenv.ArgoCDNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := New(backend).Load(ctx); err == nil || !strings.Contains(err.Error(), "first-seen times") {
		t.Errorf("load of a bad ConfigMap: %v", err)
	}
}

// failing is a backend whose Load fails.
type failing struct{ Backend }

func (failing) Load(context.Context) ([]byte, error) { return nil, errors.New("connection refused") }

// TestTimesConcurrent: images of one repository asking at once keep one
// entry, and every version each saw.
func TestTimesConcurrent(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	s := New(nil, WithClock(c.now))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { s.Times("repo", []string{fmt.Sprintf("1.%d.0", i)}) })
	}
	wg.Wait()
	c.t = c.t.Add(time.Hour)
	for v, at := range s.Times("repo", []string{"1.0.0", "1.7.0"}) {
		if !at.Equal(time.Unix(1_700_000_000, 0)) {
			t.Errorf("%s first seen at %v: a concurrent caller's entry was lost", v, at)
		}
	}
}
