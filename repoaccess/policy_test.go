package repoaccess

import (
	"context"
	"net/http"
	"testing"

	"github.com/image-updater/argocd-image-updater/test/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

func TestNamespacePermitted(t *testing.T) {
	tests := []struct {
		patterns  []string
		namespace string
		want      bool
	}{
		{nil, "team-a", false},
		{[]string{"team-a"}, "team-a", true},
		{[]string{"team-a"}, "team-ab", false},
		{[]string{"team-*"}, "team-a", true},
		{[]string{"*"}, "anything", true},
		{[]string{"/^team-[0-9]+$/"}, "team-12", true},
		{[]string{"/^team-[0-9]+$/"}, "team-x", false},
		{[]string{"/team/"}, "my-team-x", true},
		{[]string{"/(/"}, "team-a", false},
		{[]string{"/"}, "team-a", false},
	}
	for _, tt := range tests {
		if got := namespacePermitted(tt.patterns, tt.namespace); got != tt.want {
			t.Errorf("namespacePermitted(%q, %q) = %v, want %v", tt.patterns, tt.namespace, got, tt.want)
		}
	}
}

func TestCheckRedirect(t *testing.T) {
	tests := []struct {
		from, to string
		hops     int
		want     bool
	}{
		{"https://git.example.com/org/repo.git/info/refs", "https://git.example.com/org/renamed.git/info/refs", 1, true},
		{"https://git.example.com/r.git/info/refs", "https://GIT.example.com:443/r.git/info/refs", 1, true},
		{"http://git.example.com/r.git/info/refs", "https://git.example.com/r.git/info/refs", 1, true},
		{"http://git.example.com:8080/r.git/info/refs", "https://git.example.com:8443/r.git/info/refs", 1, true},
		{"https://git.example.com/r.git/info/refs", "http://git.example.com/r.git/info/refs", 1, false},
		{"https://git.example.com/r.git/info/refs", "https://git.example.com:8443/r.git/info/refs", 1, false},
		{"https://git.example.com/r.git/info/refs", "https://evil.example.com/r.git/info/refs", 1, false},
		{"https://git.example.com/r.git/info/refs", "https://git.example.com.evil.io/r.git/info/refs", 1, false},
		{"https://git.example.com/r.git/info/refs", "https://git.example.com/r.git/info/refs", 10, false},
	}
	for _, tt := range tests {
		var via []*http.Request
		for range tt.hops {
			r, _ := http.NewRequest(http.MethodGet, tt.from, nil)
			via = append(via, r)
		}
		req, _ := http.NewRequest(http.MethodGet, tt.to, nil)
		if err := CheckRedirect(req, via); (err == nil) != tt.want {
			t.Errorf("redirect %s -> %s after %d: %v, want followed %v", tt.from, tt.to, tt.hops, err, tt.want)
		}
	}
}

// TestRepoCredsBoundaries: a repo-creds Secret applies to the repositories
// under its URL on whole host, port and path-segment boundaries, never to
// a host or path that merely starts with the same characters.
func TestRepoCredsBoundaries(t *testing.T) {
	kube := testenv.SharedKube(t)
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "creds-boundaries"
	kube.CreateNamespace(t, ns)
	secret := func(name, secretType string, data map[string]string) {
		kube.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{argoCDSecretTypeLabel: secretType}}, StringData: data})
	}
	for name, prefix := range map[string]string{
		"host": "https://git.example.com/",
		"org":  "https://git.example.com/org",
		"port": "http://127.0.0.1:4123",
		"scp":  "git@git.example.com:team",
		"ssh":  "ssh://git@git.example.com:2222/team/",
	} {
		secret(name, argoCDSecretTypeRepoCreds, map[string]string{"url": prefix, "username": "user-" + name, "password": "p"})
	}
	// A URL that does not parse matches nothing, not even itself.
	secret("unparsable", argoCDSecretTypeRepository, map[string]string{"url": "https://git.example.com:port/x", "username": "user", "password": "p"})
	tests := []struct {
		url  string
		want string // the Secret chosen; "" for none
	}{
		{url: "https://git.example.com/x/repo.git", want: "host"},
		{url: "https://git.example.com", want: "host"},
		{url: "https://git.example.com.evil.io/x/repo.git"},
		{url: "https://git.example.co/x/repo.git"},
		{url: "https://git.example.com:8443/x/repo.git"},
		{url: "https://git.example.com@evil.io/x/repo.git"},
		{url: "http://git.example.com/x/repo.git"},
		{url: "https://git.example.com/org/repo.git", want: "org"},
		{url: "https://git.example.com/org", want: "org"},
		{url: "HTTPS://Git.Example.COM/Org/Repo.git/", want: "org"},
		// The org Secret does not reach another org that shares its first
		// letters; the host's Secret applies there.
		{url: "https://git.example.com/organic/repo.git", want: "host"},
		{url: "http://127.0.0.1:4123/repo.git", want: "port"},
		{url: "http://127.0.0.1:41234/repo.git"},
		{url: "http://127.0.0.1:4123.evil.io/repo.git"},
		{url: "git@git.example.com:team/repo.git", want: "scp"},
		{url: "git@git.example.com:teams/repo.git"},
		{url: "ssh://git@git.example.com:2222/team/repo.git", want: "ssh"},
		{url: "ssh://git@git.example.com:22220/team/repo.git"},
		{url: "https://git.example.com:port/x"},
	}
	r := NewResolver(NewKubeSecretLister(cs), ns, t.TempDir())
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := r.Resolve(context.Background(), tt.url, types.NamespacedName{}, "")
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tt.want != "" {
				want = "Secret " + ns + "/" + tt.want
			}
			if c.Source != want {
				t.Errorf("credentials from %q, want %q", c.Source, want)
			}
		})
	}
}

// TestProjectScopedCredentials: a repository or repo-creds Secret with a
// project field serves that AppProject's Applications only, as Argo CD
// gives project-scoped repositories; a project's own Secret wins over an
// unscoped one.
func TestProjectScopedCredentials(t *testing.T) {
	kube := testenv.SharedKube(t)
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "creds-projects"
	kube.CreateNamespace(t, ns)
	secret := func(name, secretType, url, project string) {
		data := map[string]string{"url": url, "username": "user-" + name, "password": "p"}
		if project != "" {
			data["project"] = project
		}
		kube.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{argoCDSecretTypeLabel: secretType}}, StringData: data})
	}
	// team-a's repository: its Secret is team-a's alone.
	secret("a-repo", argoCDSecretTypeRepository, "https://git.example.com/team-a/deploy.git", "team-a")
	// A shared repository: an unscoped Secret, and team-b's own.
	secret("shared", argoCDSecretTypeRepository, "https://git.example.com/shared/deploy.git", "")
	secret("shared-b", argoCDSecretTypeRepository, "https://git.example.com/shared/deploy.git", "team-b")
	// Credential templates: team-a's for its org, one for everyone.
	secret("creds-a", argoCDSecretTypeRepoCreds, "https://git.example.com/team-a", "team-a")
	secret("creds-all", argoCDSecretTypeRepoCreds, "https://git.example.com", "")
	tests := []struct {
		url, project string
		want         string // the Secret chosen
	}{
		{url: "https://git.example.com/team-a/deploy.git", project: "team-a", want: "a-repo"},
		// team-b's Application that team-b's project lets reach team-a's
		// repository gets neither team-a's Secret nor team-a's template.
		{url: "https://git.example.com/team-a/deploy.git", project: "team-b", want: "creds-all"},
		{url: "https://git.example.com/team-a/deploy.git", project: "", want: "creds-all"},
		{url: "https://git.example.com/shared/deploy.git", project: "team-b", want: "shared-b"},
		{url: "https://git.example.com/shared/deploy.git", project: "team-a", want: "shared"},
		{url: "https://git.example.com/team-a/other.git", project: "team-a", want: "creds-a"},
		{url: "https://git.example.com/team-a/other.git", project: "team-c", want: "creds-all"},
	}
	r := NewResolver(NewKubeSecretLister(cs), ns, t.TempDir())
	for _, tt := range tests {
		t.Run(tt.project+" "+tt.url, func(t *testing.T) {
			c, err := r.Resolve(context.Background(), tt.url, types.NamespacedName{}, tt.project)
			if err != nil {
				t.Fatal(err)
			}
			if want := "Secret " + ns + "/" + tt.want; c.Source != want {
				t.Errorf("credentials from %q, want %q", c.Source, want)
			}
		})
	}
}
