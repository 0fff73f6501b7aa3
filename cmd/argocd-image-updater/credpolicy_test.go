package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// connCounter is a host that counts the connections made to it: the
// registry of whoever would collect the credentials an Application names.
type connCounter struct {
	host string
	n    atomic.Int64
}

func startConnCounter(t *testing.T) *connCounter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	c := &connCounter{host: l.Addr().String()}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			_ = conn.Close()
		}
	}()
	return c
}

// TestAnnotationsReachOnlyWhatTheyMay runs the controller with the
// cluster-wide install, which may read Secrets in every namespace, so
// that what stops an Application from reaching the controller's
// credentials is the controller's own rule and not RBAC. The Applications
// of team-a point their image at a host of their choosing and name
// credentials they were not given; none of them is resolved, and nothing
// is sent to that host. Applications naming what they may still work.
func TestAnnotationsReachOnlyWhatTheyMay(t *testing.T) {
	t.Parallel()
	w := newClusterWideWorld(t)
	thief := startConnCounter(t)
	if err := os.WriteFile(w.conf, []byte(fmt.Sprintf("registries:\n- name: test\n  prefix: %s\n  api_url: http://%s\n", w.reg.Host, w.reg.Host)), 0o600); err != nil {
		t.Fatal(err)
	}
	const (
		clusterConfig = "bearer-token-of-the-production-cluster"
		envCreds      = "robot:password-from-the-environment"
		typedPassword = "hunter2"
	)
	w.env["REGISTRY_CREDS"] = envCreds
	ran := filepath.Join(t.TempDir(), "ran")
	script := filepath.Join(t.TempDir(), "login.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+ran+"\necho robot:from-the-script\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.k.CreateNamespace(t, "team-a")
	w.createPullSecret(t, testenv.ArgoCDNamespace, "regcred")
	w.createPullSecret(t, "team-a", "regcred")
	w.k.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ArgoCDNamespace, Name: "cluster-production"},
		Data:       map[string][]byte{"config": []byte(`{"bearerToken":"` + clusterConfig + `"}`)},
	})

	stolen := thief.host + "/stolen"
	tests := []struct {
		namespace, name string
		pullSecret      string
		image           string // "": the test registry's eks-app
		wantUpdate      bool
		wantEvent       string // part of an InvalidConfiguration event
	}{
		{namespace: testenv.ArgoCDNamespace, name: "seed", pullSecret: "pullsecret:argocd/regcred", wantUpdate: true},
		{namespace: "team-a", name: "own", pullSecret: "pullsecret:team-a/regcred", wantUpdate: true},
		{namespace: "team-a", name: "other-pullsecret", pullSecret: "pullsecret:argocd/regcred", image: stolen,
			wantEvent: "pullsecret:argocd/regcred names a Secret in namespace argocd; an Application's annotations may name only Secrets in the Application's own namespace, team-a"},
		{namespace: "team-a", name: "other-secret", pullSecret: "secret:argocd/cluster-production#config", image: stolen,
			wantEvent: "secret:argocd/cluster-production#config names a Secret in namespace argocd"},
		{namespace: "team-a", name: "env", pullSecret: "env:REGISTRY_CREDS", image: stolen,
			wantEvent: "env: credentials may only be named by Applications in the controller's namespace (argocd); this Application is in team-a"},
		{namespace: "team-a", name: "ext", pullSecret: "ext:" + script, image: stolen,
			wantEvent: "ext: credentials may only be named by Applications in the controller's namespace (argocd)"},
		{namespace: "team-a", name: "typed", pullSecret: "admin:" + typedPassword, image: stolen,
			wantEvent: `annotation argocd-image-updater.argoproj.io/app.pull-secret (image app): invalid credential reference "<redacted>"`},
	}
	for _, tt := range tests {
		ann := map[string]string{settings.AnnotationPrefix + "app.pull-secret": tt.pullSecret}
		if tt.image != "" {
			ann[settings.AnnotationPrefix+"image-list"] = "app=" + tt.image
			ann[settings.AnnotationPrefix+"app.force-update"] = "true"
		}
		w.createAppIn(t, tt.namespace, tt.name, ann)
	}

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var stderr testenv.SyncBuffer
	go func() { done <- w.run(ctx, &stderr, "--interval", "1h") }()
	cs := kubernetes.NewForConfigOrDie(w.k.Config)
	events := func(namespace, name string) []corev1.Event {
		list, err := cs.CoreV1().Events(namespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	want := []string{w.reg.Repo("eks-app") + ":v0.1.0"}
	poll.True(t, 60*time.Second, "the allowed Applications to be updated and the refused ones to get their events", func() bool {
		for _, tt := range tests {
			if tt.wantUpdate && !slices.Equal(w.imagesIn(t, tt.namespace, tt.name), want) {
				return false
			}
			if tt.wantEvent != "" && len(events(tt.namespace, tt.name)) == 0 {
				return false
			}
		}
		return true
	})
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d:\n%s", code, stderr.String())
	}

	var all strings.Builder
	for _, tt := range tests {
		t.Run(tt.namespace+"/"+tt.name, func(t *testing.T) {
			evs := events(tt.namespace, tt.name)
			for _, e := range evs {
				all.WriteString(e.Message + "\n")
			}
			if tt.wantEvent == "" {
				return
			}
			if imgs := w.imagesIn(t, tt.namespace, tt.name); len(imgs) != 0 {
				t.Errorf("written: %v", imgs)
			}
			found := false
			for _, e := range evs {
				found = found || e.Reason == "InvalidConfiguration" && strings.Contains(e.Message, tt.wantEvent)
			}
			if !found {
				t.Errorf("no InvalidConfiguration event saying %q; events: %v", tt.wantEvent, evs)
			}
		})
	}
	if n := thief.n.Load(); n != 0 {
		t.Errorf("%d connections to the host the Applications chose", n)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the ext: script named by an Application of team-a ran")
	}
	for _, secret := range []string{clusterConfig, envCreds, "password-from-the-environment", typedPassword, w.reg.Password} {
		if strings.Contains(stderr.String(), secret) || strings.Contains(all.String(), secret) {
			t.Errorf("%q is in the log or the events", secret)
		}
	}
}
