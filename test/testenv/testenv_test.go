package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	gittransport "github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	xssh "golang.org/x/crypto/ssh"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestKubeApplicationRoundTrip(t *testing.T) {
	k := StartKube(t)
	ctx := t.Context()
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{
			"name": "main", "namespace": ArgoCDNamespace,
			"annotations": map[string]any{"argocd-image-updater.argoproj.io/image-list": "app=example.com/app"},
		},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "https://example.com/repo.git", "path": "main/overlays/production", "targetRevision": "main"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "main"},
		},
	}}
	k.Create(t, app)
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(app.GroupVersionKind())
	if err := k.Client.Get(ctx, client.ObjectKeyFromObject(app), got); err != nil {
		t.Fatal(err)
	}
	if path, _, _ := unstructured.NestedString(got.Object, "spec", "source", "path"); path != "main/overlays/production" || got.GetAnnotations()["argocd-image-updater.argoproj.io/image-list"] != "app=example.com/app" {
		t.Errorf("read back %+v", got)
	}
}

func TestKubeServiceAccountHasOnlyItsRole(t *testing.T) {
	k := StartKube(t)
	ctx := t.Context()
	saCfg := k.ServiceAccountConfig(t, ArgoCDNamespace, "argocd-image-updater")
	sa, err := client.New(saCfg, client.Options{Scheme: k.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	apps := &unstructured.UnstructuredList{}
	apps.SetGroupVersionKind(schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationList"})
	err = sa.List(ctx, apps, client.InNamespace(ArgoCDNamespace))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list without a role: got %v, want forbidden", err)
	}
	k.Create(t,
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ArgoCDNamespace},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"}, Verbs: []string{"list"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ArgoCDNamespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "argocd-image-updater", Namespace: ArgoCDNamespace}},
		},
	)
	// RBAC changes reach the authorizer's cache shortly after they are written.
	WaitFor(t, 10*time.Second, "the Role to be authorised", func() (bool, string) {
		err := sa.List(ctx, apps, client.InNamespace(ArgoCDNamespace))
		return err == nil, fmt.Sprint(err)
	})
	if err := sa.List(ctx, apps, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Errorf("list in another namespace: got %v, want forbidden", err)
	}
}

func TestArgoCD3CRD(t *testing.T) {
	path := ArgoCDCRD(t, "github.com/argoproj/argo-cd/v3", "v3.3.19")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

func TestRegistryAuth(t *testing.T) {
	tests := []struct {
		name string
		opt  RegistryOption
	}{
		{"htpasswd", WithHtpasswd("updater", "s3cret-htpasswd")},
		{"token", WithTokenAuth("updater", "s3cret-token")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := StartRegistry(t, tt.opt)
			want := []string{"v0.0.1", "v0.0.2", "v0.1.0"}
			d1 := r.PushImage(t, "eks-app", want[:1])
			d2 := r.PushTags(t, "eks-app", want[1:])
			if d1 == d2 {
				t.Errorf("two pushes gave the same digest %s", d1)
			}
			repo, err := name.NewRepository(r.Repo("eks-app"))
			if err != nil {
				t.Fatal(err)
			}
			tags, err := remote.List(repo, remote.WithAuth(r.Auth()))
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(tags)
			if !slices.Equal(tags, want) {
				t.Errorf("tags %v, want %v", tags, want)
			}

			_, err = remote.List(repo, remote.WithAuth(&authn.Basic{Username: "updater", Password: "wrong"}))
			var terr *transport.Error
			if !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
				t.Errorf("wrong password: got %v, want 401", err)
			}
			if r.Tokens != nil && (r.Tokens.Issued.Load() == 0 || r.Tokens.Refused.Load() == 0) {
				t.Errorf("token server issued %d and refused %d tokens; want both non-zero", r.Tokens.Issued.Load(), r.Tokens.Refused.Load())
			}
		})
	}
}

// A user added to the token server may pull the repositories under its
// prefix and no others.
func TestTokenServerLimitedUser(t *testing.T) {
	r := StartRegistry(t, WithTokenAuth("updater", "s3cret-token"))
	for _, repo := range []string{"org-a/app", "org-ab/app", "org-b/app"} {
		r.PushTags(t, repo, []string{"1.0"})
	}
	r.Tokens.AddUser("robot-a", "robot-a-password", "org-a")
	for _, tc := range []struct {
		repo, password string
		ok             bool
	}{
		{"org-a/app", "robot-a-password", true},
		{"org-b/app", "robot-a-password", false},
		{"org-ab/app", "robot-a-password", false},
		{"org-a/app", "wrong", false},
	} {
		repo, err := name.NewRepository(r.Repo(tc.repo))
		if err != nil {
			t.Fatal(err)
		}
		_, err = remote.List(repo, remote.WithAuth(&authn.Basic{Username: "robot-a", Password: tc.password}))
		var terr *transport.Error
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s with %s: %v", tc.repo, tc.password, err)
		case !tc.ok && (!errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized):
			t.Errorf("%s with %s: got %v, want 401", tc.repo, tc.password, err)
		}
	}
}

func TestRegistryIndexAndCreationTime(t *testing.T) {
	r := StartRegistry(t, WithoutAuth())
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	platforms := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}}
	digest := r.PushIndex(t, "multi", "1.0.0", platforms, Created(created))
	ref, err := name.ParseReference(r.Repo("multi") + ":1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest != digest || !desc.MediaType.IsIndex() {
		t.Fatalf("got %s %s, want index %s", desc.MediaType, desc.Digest, digest)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 2 || manifest.Manifests[1].Platform.Variant != "v8" {
		t.Fatalf("index manifests %+v", manifest.Manifests)
	}
	img, err := idx.Image(manifest.Manifests[1].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Created.Time.Equal(created) || cfg.Architecture != "arm64" {
		t.Errorf("config created %s arch %s", cfg.Created, cfg.Architecture)
	}
}

func TestGitCloneAndPush(t *testing.T) {
	g := StartGitServer(t)
	ssh := g.StartSSH(t)
	g.CreateRepo(t, "deploy", "", map[string]string{
		"main/overlays/production/kustomization.yaml": "resources:\n- ../../base\n",
	})

	sshAuth, err := gitssh.NewPublicKeys(ssh.User, ssh.ClientKey, "")
	if err != nil {
		t.Fatal(err)
	}
	sshAuth.HostKeyCallback = xssh.FixedHostKey(ssh.HostKey)

	tests := []struct {
		name string
		url  string
		auth gittransport.AuthMethod
	}{
		{"http", g.HTTPRepoURL("deploy"), &githttp.BasicAuth{Username: g.Username, Password: g.Password}},
		{"ssh", g.SSHRepoURL("deploy"), sshAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			repo, err := git.PlainCloneContext(t.Context(), dir, false, &git.CloneOptions{URL: tt.url, Auth: tt.auth})
			if err != nil {
				t.Fatalf("clone %s: %v", tt.url, err)
			}
			path := "main/overlays/production/.argocd-source-main.yaml"
			writeFile(t, filepath.Join(dir, path), "kustomize:\n  images:\n  - example.com/app:"+tt.name+"\n")
			wt, err := repo.Worktree()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wt.Add(path); err != nil {
				t.Fatal(err)
			}
			sig := &object.Signature{Name: "argocd-image-updater", Email: "noreply@argoproj.io", When: time.Now()}
			if _, err := wt.Commit("update over "+tt.name, &git.CommitOptions{Author: sig}); err != nil {
				t.Fatal(err)
			}
			if err := repo.PushContext(t.Context(), &git.PushOptions{Auth: tt.auth}); err != nil {
				t.Fatalf("push %s: %v", tt.url, err)
			}
			if got := g.ReadFile(t, "deploy", "main", path); got != "kustomize:\n  images:\n  - example.com/app:"+tt.name+"\n" {
				t.Errorf("pushed file reads %q", got)
			}
			if log := g.Log(t, "deploy", "main"); log[0].Subject != "update over "+tt.name || log[0].Author != "argocd-image-updater" {
				t.Errorf("head commit %+v", log[0])
			}
		})
	}
	if g.Fetches.Load() != 1 || g.Pushes.Load() != 1 {
		t.Errorf("HTTP fetches %d pushes %d, want 1 and 1", g.Fetches.Load(), g.Pushes.Load())
	}
	// The clone's pack, at least its 12-byte header, came over HTTP.
	if n := g.FetchedBytes.Load(); n < 12 {
		t.Errorf("%d bytes fetched over HTTP", n)
	}

	_, err = git.PlainClone(t.TempDir(), false, &git.CloneOptions{URL: g.HTTPRepoURL("deploy"), Auth: &githttp.BasicAuth{Username: g.Username, Password: "wrong"}})
	if err == nil {
		t.Error("clone with a wrong password succeeded")
	}
}

// TestAllComponentsStart starts what an integration test of the whole
// controller needs, at once, and logs how long that took.
func TestAllComponentsStart(t *testing.T) {
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); StartKube(t) }()
	go func() { defer wg.Done(); StartRegistry(t, WithTokenAuth("u", "p")) }()
	go func() { defer wg.Done(); g := StartGitServer(t); g.StartSSH(t) }()
	wg.Wait()
	t.Logf("API server, registry and git server ready in %s", time.Since(start).Round(time.Millisecond))
}

func TestAuditLog(t *testing.T) {
	k := StartKube(t, WithAuditLog())
	sa := k.ServiceAccountConfig(t, ArgoCDNamespace, "auditee")
	cs := kubernetes.NewForConfigOrDie(sa)
	_, listErr := cs.CoreV1().ConfigMaps(ArgoCDNamespace).List(t.Context(), metav1.ListOptions{})
	_, getErr := cs.CoreV1().Secrets("default").Get(t.Context(), "x", metav1.GetOptions{})
	if !apierrors.IsForbidden(listErr) || !apierrors.IsForbidden(getErr) {
		t.Fatalf("want both forbidden: %v, %v", listErr, getErr)
	}
	var got []AuditRecord
	for _, r := range k.AuditLog(t) {
		if r.User == "system:serviceaccount:"+ArgoCDNamespace+":auditee" {
			r.Received, r.Done, r.URI = time.Time{}, time.Time{}, ""
			got = append(got, r)
		}
	}
	want := []AuditRecord{
		{User: "system:serviceaccount:argocd:auditee", Verb: "list", Resource: "configmaps", Namespace: ArgoCDNamespace, Code: 403, Stage: "ResponseComplete"},
		{User: "system:serviceaccount:argocd:auditee", Verb: "get", Resource: "secrets", Namespace: "default", Name: "x", Code: 403, Stage: "ResponseComplete"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("records\n got %+v\nwant %+v", got, want)
	}
}

func TestHoldProxy(t *testing.T) {
	var served atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = w.Write([]byte("served " + r.URL.Path))
	}))
	t.Cleanup(backend.Close)
	tests := []struct {
		name       string
		path       string
		release    bool // let the held request go
		wantHeld   bool
		wantServed bool
	}{
		{name: "not matched passes", path: "/free", wantServed: true},
		{name: "matched waits for the release", path: "/held", release: true, wantHeld: true, wantServed: true},
		{name: "matched and given up never reaches the server", path: "/held", wantHeld: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := StartHoldProxy(t, backend.URL)
			h := p.Hold(func(r *http.Request) bool { return r.URL.Path == "/held" })
			before := served.Load()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			type answer struct {
				body string
				err  error
			}
			answered := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+tt.path, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					answered <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				answered <- answer{string(body), err}
			}()
			if tt.wantHeld {
				select {
				case <-h.Arrived():
				case <-time.After(10 * time.Second):
					t.Fatal("the request was not held")
				}
				select {
				case a := <-answered:
					t.Fatalf("answered while held: %+v", a)
				case <-time.After(200 * time.Millisecond):
				}
				if tt.release {
					h.Release()
				} else {
					cancel()
				}
			}
			a := <-answered
			if tt.wantServed && (a.err != nil || a.body != "served "+tt.path) {
				t.Errorf("answer %+v", a)
			}
			if got := served.Load() - before; got != map[bool]int64{true: 1}[tt.wantServed] {
				t.Errorf("the server served %d requests", got)
			}
			if tt.wantHeld && tt.wantServed && h.AnsweredAt().IsZero() {
				t.Error("AnsweredAt is not set")
			}
		})
	}
}
