package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	imageupdaterv1alpha1 "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageupdater"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// serviceAccountUser is the install's ServiceAccount as the API server
// names it.
const serviceAccountUser = "system:serviceaccount:" + testenv.ArgoCDNamespace + ":argocd-image-updater"

// grants maps a resource, named as in kubectl ("secrets",
// "applications.argoproj.io", "leases.coordination.k8s.io", with
// "/subresource" when there is one), to verbs.
type grants map[string]map[string]bool

func resourceName(group, resource, subresource string) string {
	name := resource
	if group != "" {
		name += "." + group
	}
	if subresource != "" {
		name += "/" + subresource
	}
	return name
}

func (g grants) add(resource, verb string) {
	if g[resource] == nil {
		g[resource] = map[string]bool{}
	}
	g[resource][verb] = true
}

func (g grants) has(resource, verb string) bool { return g[resource][verb] }

// minus lists the "verb resource" of g that other lacks.
func (g grants) minus(other grants) []string {
	var out []string
	for res, verbs := range g {
		for verb := range verbs {
			if !other.has(res, verb) {
				out = append(out, verb+" "+res)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (g grants) union(other grants) grants {
	out := grants{}
	for _, src := range []grants{g, other} {
		for res, verbs := range src {
			for verb := range verbs {
				out.add(res, verb)
			}
		}
	}
	return out
}

// rulesGrants flattens RBAC rules; the install's rules name no resource
// names and no wildcards.
func rulesGrants(t *testing.T, rules []rbacv1.PolicyRule) grants {
	t.Helper()
	g := grants{}
	for _, r := range rules {
		// A rule limited to some names grants its verbs on them; the API
		// server refuses the others, which the audit log would show.
		if len(r.NonResourceURLs) > 0 {
			t.Fatalf("rule %+v: the install's rules are expected to name resources only", r)
		}
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					if group == "*" || res == "*" || verb == "*" {
						t.Fatalf("rule %+v grants a wildcard", r)
					}
					res, sub, _ := strings.Cut(res, "/")
					g.add(resourceName(group, res, sub), verb)
				}
			}
		}
	}
	return g
}

// manifestRules reads the rules of the one object of a kind in a manifest.
func manifestRules(t *testing.T, path, kind string) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", path))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range testenv.DecodeYAML(t, data) {
		if o.GetKind() != kind {
			continue
		}
		var role rbacv1.ClusterRole // a Role has the same rules field
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			t.Fatal(err)
		}
		return role.Rules
	}
	t.Fatalf("%s has no %s", path, kind)
	return nil
}

// TestRBACIsWhatTheControllerUses runs the controller as the install's
// ServiceAccount against an API server that audits every request, along
// every path that needs a grant, and compares what it did with what the
// install grants: a grant never used fails, and so does a use not granted.
//
// The paths: Applications listed and watched, patched (argocd write-back)
// and read again after a 409 Conflict (changed while the cycle was held);
// pull Secrets and git:secret: Secrets read; Argo CD's repository Secrets
// listed, its argocd-ssh-known-hosts-cm (SSH) and argocd-tls-certs-cm
// (HTTPS) and the Applications' AppProject read for git write-back; events
// created, and patched when the recorder aggregates eleven warnings on one
// Application; the leader Lease read, created, renewed and released; the
// ConfigMap of first-seen times read, created and updated. In
// the cluster-wide install all of it except the Argo CD namespace's own
// objects happens in a second namespace too, and the ClusterRole is held
// to that.
func TestRBACIsWhatTheControllerUses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		clusterWide bool
	}{
		{name: "namespaced install"},
		{name: "cluster-wide install", clusterWide: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := testenv.StartKube(t, testenv.WithAuditLog(), testenv.WithImageUpdaterCRD(imageupdaterv1alpha1.AddToScheme))
			installRBAC(t, k)
			namespaces := []string{testenv.ArgoCDNamespace}
			args := []string{"--interval", "1h"}
			if tt.clusterWide {
				for _, o := range kustomize(t, "cluster-wide") {
					if o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding" {
						k.Create(t, o)
					}
				}
				namespaces = append(namespaces, "team-a")
				args = append(args, "--application-namespaces", "*")
			}
			s := newRBACScenario(t, k, namespaces)

			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			var out testenv.SyncBuffer
			done := make(chan int, 1)
			hold := s.regProxy.Hold(isTagListing)
			go func() {
				done <- execute(ctx, append([]string{"run", "--kubeconfig", s.kubeconfig, "--registries-conf-path", s.conf,
					"--health-port", "0", "--metrics-port", "0"}, args...),
					&bytes.Buffer{}, &out, func(string) (string, bool) { return "", false })
			}()
			select {
			case <-hold.Arrived():
			case <-time.After(60 * time.Second):
				t.Fatalf("the cycle did not reach the registry:\n%s", out.String())
			}
			// Changed while the cycle holds the copy it read: its patch
			// meets a 409 and is computed again from a fresh read.
			for _, ns := range namespaces {
				s.touch(t, ns, "patched")
			}
			hold.Release()
			poll.True(t, 90*time.Second, "the cycle to finish with an aggregated and an updated event in every namespace", func() bool { return s.done(t, out.String()) })
			stop()
			if code := <-done; code != 0 {
				t.Fatalf("exit code %d:\n%s", code, out.String())
			}
			s.checkOutcome(t, &out)

			inArgoCD, elsewhere := grants{}, grants{}
			conflicts := 0
			for _, r := range k.AuditLog(t) {
				if r.User != serviceAccountUser {
					continue
				}
				if r.Resource == "" {
					// Non-resource URLs (discovery, /version) are open to
					// every authenticated user, not granted by the Role.
					continue
				}
				if r.Resource == "applications" && r.Verb == "patch" && r.Code == 409 {
					conflicts++
				}
				if r.Code == 403 {
					t.Errorf("refused: %s %s %s/%s", r.Verb, r.Resource, r.Namespace, r.Name)
				}
				res := resourceName(r.APIGroup, r.Resource, r.Subresource)
				verbs := []string{r.Verb}
				if isStreamedList(r) {
					// An informer's first list, streamed as the opening
					// events of its watch; against a server without
					// streamed lists it is a plain list.
					verbs = append(verbs, "list")
				}
				for _, verb := range verbs {
					if r.Namespace == testenv.ArgoCDNamespace {
						inArgoCD.add(res, verb)
					} else {
						elsewhere.add(res, verb)
					}
				}
			}
			if conflicts < len(namespaces) {
				t.Errorf("%d patches met a conflict, want one per namespace (%d): the path that reads the Application again was not taken", conflicts, len(namespaces))
			}

			role := rulesGrants(t, manifestRules(t, "base/rbac.yaml", "Role"))
			if !tt.clusterWide {
				if used := elsewhere.minus(grants{}); len(used) > 0 {
					t.Errorf("used outside Argo CD's namespace, where the Role grants nothing: %v", used)
				}
				if missing := inArgoCD.minus(role); len(missing) > 0 {
					t.Errorf("used but not granted by the Role: %v", missing)
				}
				if unused := role.minus(inArgoCD); len(unused) > 0 {
					t.Errorf("granted by the Role but never used: %v", unused)
				}
				return
			}
			cluster := rulesGrants(t, manifestRules(t, "cluster-wide/clusterrole.yaml", "ClusterRole"))
			if missing := elsewhere.minus(cluster); len(missing) > 0 {
				t.Errorf("used outside Argo CD's namespace but not granted by the ClusterRole: %v", missing)
			}
			if unused := cluster.minus(elsewhere); len(unused) > 0 {
				t.Errorf("granted by the ClusterRole but never used outside Argo CD's namespace: %v", unused)
			}
			if missing := inArgoCD.minus(role.union(cluster)); len(missing) > 0 {
				t.Errorf("used in Argo CD's namespace but granted by neither the Role nor the ClusterRole: %v", missing)
			}
		})
	}
}

// isStreamedList reports whether r is a watch that opens with the
// current objects (sendInitialEvents), which client-go's informers make in
// place of a list where the API server supports it.
func isStreamedList(r testenv.AuditRecord) bool {
	if r.Verb != "watch" {
		return false
	}
	u, err := url.Parse(r.URI)
	return err == nil && u.Query().Get("sendInitialEvents") == "true"
}

// rbacScenario is a cluster, a registry and a git server set up so that one
// cycle takes every path that needs a grant.
type rbacScenario struct {
	k          *testenv.Kube
	reg        *testenv.Registry
	regProxy   *testenv.HoldProxy
	git        *testenv.GitServer
	dyn        dynamic.Interface
	kubeconfig string
	conf       string
	namespaces []string
	httpsURL   string
	// repos are the repositories written to, one commit each at first.
	repos []string
}

// noisyImages is how many broken images the Application "noisy" lists:
// from the tenth warning with one reason on one object, the event
// recorder aggregates them into one event that it then patches.
const noisyImages = 11

func newRBACScenario(t *testing.T, k *testenv.Kube, namespaces []string) *rbacScenario {
	t.Helper()
	s := &rbacScenario{k: k, reg: testenv.StartRegistry(t), git: testenv.StartGitServer(t), dyn: dynamic.NewForConfigOrDie(k.Config), namespaces: namespaces}
	s.regProxy = testenv.StartHoldProxy(t, "http://"+s.reg.Host)
	s.reg.PushImage(t, "eks-app", []string{"v0.0.1"})
	s.reg.PushImage(t, "eks-app", []string{"v0.1.0"})
	s.kubeconfig = testenv.WriteKubeconfig(t, k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater"), testenv.ArgoCDNamespace)
	// No credentials here: they come from pull Secrets.
	s.conf = filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(s.conf, []byte(fmt.Sprintf("registries:\n- name: test\n  prefix: %s\n  api_url: %s\n", s.reg.Host, s.regProxy.URL)), 0o600); err != nil {
		t.Fatal(err)
	}

	s.repos = []string{"over-ssh", "over-https", "with-secret"}
	for _, repo := range s.repos {
		s.git.CreateRepo(t, repo, "", map[string]string{"app/kustomization.yaml": "resources: []\n"})
	}
	sshServer := s.git.StartSSH(t)
	ca := testenv.NewCA(t, "git")
	s.httpsURL = testenv.StartTLSProxy(t, s.git.HTTPURL, ca.ServerCert(t), nil)
	argocd := testenv.ArgoCDNamespace
	k.CreateAppProject(t, argocd, "default", []string{"*"}, namespaces[1:])
	repoSecret := func(name string, data map[string]string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: argocd, Labels: map[string]string{"argocd.argoproj.io/secret-type": "repository"}},
			StringData: data,
		}
	}
	k.Create(t,
		repoSecret("repo-ssh", map[string]string{"url": s.git.SSHRepoURL("over-ssh"), "sshPrivateKey": string(sshServer.ClientKey)}),
		repoSecret("repo-https", map[string]string{"url": s.httpsURL + "/over-https.git", "username": s.git.Username, "password": s.git.Password}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-ssh-known-hosts-cm", Namespace: argocd},
			Data: map[string]string{"ssh_known_hosts": sshServer.KnownHosts() + "\n"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-tls-certs-cm", Namespace: argocd},
			Data: map[string]string{"127.0.0.1": string(ca.PEM)}},
	)

	auth := base64.StdEncoding.EncodeToString([]byte(s.reg.Username + ":" + s.reg.Password))
	for _, ns := range namespaces {
		k.CreateNamespace(t, ns)
		k.Create(t,
			&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regcred"},
				Type:       corev1.SecretTypeDockerConfigJson,
				Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, s.reg.Host, auth))},
			},
			&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gitcreds"},
				StringData: map[string]string{"username": s.git.Username, "password": s.git.Password},
			},
		)
		pull := map[string]string{"app.pull-secret": "pullsecret:" + ns + "/regcred"}
		s.createApp(t, ns, "patched", "", "argocd", pull)
		s.createApp(t, ns, "with-secret", s.git.HTTPRepoURL("with-secret"), "git:secret:"+ns+"/gitcreds", pull)
		noisy := map[string]string{}
		var list []string
		for i := range noisyImages {
			alias := fmt.Sprintf("broken%d", i)
			list = append(list, alias+"="+s.reg.Repo("eks-app"))
			noisy[alias+".update-strategy"] = "no-such-strategy"
		}
		noisy["image-list"] = strings.Join(list, ",")
		s.createApp(t, ns, "noisy", "", "argocd", noisy)
		// Selects "patched" by its annotations: the resource is watched
		// and its status written.
		k.Create(t, &imageupdaterv1alpha1.ImageUpdater{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-resource"},
			Spec: imageupdaterv1alpha1.ImageUpdaterSpec{ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{
				{NamePattern: "patched", UseAnnotations: ptr.To(true)},
			}},
		})
		// Left by the v1.x line with its finalizer, and deleted since: the
		// controller releases it (patch).
		left := &imageupdaterv1alpha1.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "left-by-v1",
			Finalizers: []string{imageupdater.V1Finalizer}},
			Spec: imageupdaterv1alpha1.ImageUpdaterSpec{ApplicationRefs: []imageupdaterv1alpha1.ApplicationRef{{NamePattern: "gone-*", UseAnnotations: ptr.To(true)}}}}
		k.Create(t, left)
		if err := k.Client.Delete(t.Context(), left); err != nil {
			t.Fatal(err)
		}
	}
	// Repository Secrets and Argo CD's ConfigMaps are read in its own
	// namespace only.
	pull := map[string]string{"app.pull-secret": "pullsecret:" + argocd + "/regcred"}
	s.createApp(t, argocd, "over-ssh", s.git.SSHRepoURL("over-ssh"), "git", pull)
	s.createApp(t, argocd, "over-https", s.httpsURL+"/over-https.git", "git", pull)
	// Its versions too young: their first-seen times are saved
	// (the ConfigMap created at start, then updated).
	s.createApp(t, argocd, "too-young", "", "argocd", map[string]string{"app.pull-secret": pull["app.pull-secret"], "minimum-release-age": "7d"})
	return s
}

// createApp creates an Application running eks-app:v0.0.1 from the folder
// app of repoURL; annotations may replace image-list.
func (s *rbacScenario) createApp(t *testing.T, namespace, name, repoURL, method string, annotations map[string]string) {
	t.Helper()
	if repoURL == "" {
		repoURL = s.git.HTTPRepoURL("unused")
	}
	createKustomizeApp(t, s.dyn, namespace, name, s.reg.Repo("eks-app"), repoURL, method, annotations)
}

// touch changes an Application, as another client would.
func (s *rbacScenario) touch(t *testing.T, namespace, name string) {
	t.Helper()
	apps := s.dyn.Resource(application.Resource()).Namespace(namespace)
	obj, err := apps.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.SetLabels(map[string]string{"touched": "yes"})
	if _, err := apps.Update(t.Context(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// done: the cycle finished and its events reached the API server.
func (s *rbacScenario) done(t *testing.T, log string) bool {
	if !strings.Contains(log, "update cycle finished") {
		return false
	}
	cs := kubernetes.NewForConfigOrDie(s.k.Config)
	for _, ns := range s.namespaces {
		events, err := cs.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		aggregated, updated := false, false
		for _, e := range events.Items {
			aggregated = aggregated || e.InvolvedObject.Name == "noisy" && e.Count > 1
			updated = updated || e.InvolvedObject.Name == "patched" && e.Reason == "ImagesUpdated"
		}
		if !aggregated || !updated {
			return false
		}
		if _, err := s.dyn.Resource(imageupdaterv1alpha1.Resource()).Namespace(ns).Get(t.Context(), "left-by-v1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false
		}
	}
	return true
}

// checkOutcome makes sure the cycle did take the paths: each write landed.
func (s *rbacScenario) checkOutcome(t *testing.T, out *testenv.SyncBuffer) {
	t.Helper()
	want := s.reg.Repo("eks-app") + ":v0.1.0"
	for _, ns := range s.namespaces {
		obj, err := s.dyn.Resource(application.Resource()).Namespace(ns).Get(t.Context(), "patched", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		images, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "source", "kustomize", "images")
		if !slices.Equal(images, []string{want}) {
			t.Errorf("Application %s/patched has images %v, want %s", ns, images, want)
		}
	}
	commits := map[string]int{}
	for _, repo := range s.repos {
		commits[repo] = len(s.git.Log(t, repo, "main")) - 1
	}
	wantCommits := map[string]int{"over-ssh": 1, "over-https": 1, "with-secret": len(s.namespaces)}
	if !maps.Equal(commits, wantCommits) {
		t.Errorf("new commits %v, want %v", commits, wantCommits)
	}
	for _, ns := range s.namespaces {
		iu := &imageupdaterv1alpha1.ImageUpdater{}
		if err := s.k.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "by-resource"}, iu); err != nil {
			t.Fatal(err)
		}
		if iu.Status.ApplicationsMatched != 1 || len(iu.Status.RecentUpdates) != 1 {
			t.Errorf("ImageUpdater %s/by-resource: status %+v, want the update of one Application", ns, iu.Status)
		}
	}
	if strings.Contains(out.String(), "forbidden") {
		t.Errorf("a request was forbidden:\n%s", out.String())
	}
	if t.Failed() {
		t.Logf("controller log:\n%s", out.String())
	}
}
