package repoaccess

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/gobwas/glob"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/image-updater/argocd-image-updater/internal/tenant"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
)

// Whoever can edit an Application's annotations chooses the repositories
// it reads and writes, and the credentials Secret of its git write-back, but is
// trusted less than the operator who owns the controller and Argo CD's
// repository credentials. The rules here keep such an Application to the
// repositories its AppProject allows and to the credentials meant for
// them.

// ErrNotPermitted is wrapped by errors of the reads and writes the rules refuse: a
// repository outside the AppProject's sourceRepos, an Application outside
// its AppProject's sourceNamespaces, a git:secret Secret of another
// namespace or for another repository. Trying again does not help until
// the Application or the AppProject changes.
var ErrNotPermitted = errors.New("not permitted")

type notPermitted struct{ err error }

func notPermittedf(format string, args ...any) error {
	return notPermitted{fmt.Errorf(format, args...)}
}

func (e notPermitted) Error() string   { return e.err.Error() }
func (e notPermitted) Unwrap() []error { return []error{ErrNotPermitted, e.err} }

// DefaultAppProject is the AppProject of an Application that names none,
// as in Argo CD.
const DefaultAppProject = "default"

// AppProject is what the controller reads of an Argo CD AppProject.
type AppProject struct {
	// SourceRepos are spec.sourceRepos: globs of the repositories the
	// project's Applications may use; "!" before one denies.
	SourceRepos []string
	// SourceNamespaces are spec.sourceNamespaces: the namespaces besides
	// Argo CD's whose Applications may belong to the project, as globs or
	// as regular expressions between slashes.
	SourceNamespaces []string
}

// AppProjectGetter reads Argo CD AppProjects. Not-found errors satisfy
// apierrors.IsNotFound.
type AppProjectGetter interface {
	AppProject(ctx context.Context, namespace, name string) (*AppProject, error)
}

// AppProjectsResource is Argo CD's AppProject resource.
func AppProjectsResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}
}

// NewKubeAppProjectGetter reads AppProjects through the Kubernetes API,
// which takes get on appprojects.argoproj.io in Argo CD's namespace.
func NewKubeAppProjectGetter(client dynamic.Interface) AppProjectGetter {
	return kubeAppProjects{client: client}
}

type kubeAppProjects struct{ client dynamic.Interface }

func (k kubeAppProjects) AppProject(ctx context.Context, namespace, name string) (*AppProject, error) {
	obj, err := k.client.Resource(AppProjectsResource()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	p := &AppProject{}
	p.SourceRepos, _, _ = unstructured.NestedStringSlice(obj.Object, "spec", "sourceRepos")
	p.SourceNamespaces, _, _ = unstructured.NestedStringSlice(obj.Object, "spec", "sourceNamespaces")
	return p, nil
}

// Policy checks the updates of one Write before anything is read or
// sent for them. AppProjects are read once per Write, that is once per
// update cycle, however many Applications share them: a cycle costs one
// GET per AppProject in use, and a changed AppProject applies from the
// next cycle. An informer would save those few GETs but would need list
// and watch, and keep every AppProject in memory.
type Policy struct {
	projects  AppProjectGetter
	namespace string // Argo CD's, where AppProjects live
	// read holds the AppProjects read so far, errors included. Write
	// checks its updates one after another, so no lock is needed.
	read map[string]projectRead
}

type projectRead struct {
	project *AppProject
	err     error
}

// NewPolicy returns the policy of one Write; AppProjects are read from
// argoCDNamespace.
func NewPolicy(projects AppProjectGetter, argoCDNamespace string) *Policy {
	return &Policy{projects: projects, namespace: argoCDNamespace, read: map[string]projectRead{}}
}

// Request is what an Application asks to write to: its repository, with
// the credentials it names.
type Request struct {
	// Namespace and Project are the Application's; Project "" means
	// DefaultAppProject.
	Namespace, Project string
	RepoURL            string
	// CredentialsSecret is the Secret of git:secret:<namespace>/<name>;
	// the zero value means Argo CD's repository credentials.
	CredentialsSecret types.NamespacedName
}

// Check tells whether the Application of u may write to its repository
// with the credentials it names.
func (p *Policy) Check(ctx context.Context, u Request) error {
	repo, err := repourl.ParseURL(u.RepoURL)
	if err != nil {
		return notPermitted{err}
	}
	if !repo.Remote() {
		return notPermittedf("the repository URL %s is not an https://, http://, ssh:// or user@host:path URL", repo)
	}
	if repo.HasDotSegment() {
		return notPermittedf("the repository URL %s has a '.' or '..' path segment, which could lead to another repository than the one it names", repo)
	}
	if s := u.CredentialsSecret; s != (types.NamespacedName{}) {
		if err := tenant.MayNameSecret("git:secret:"+s.Namespace+"/"+s.Name, s.Namespace, u.Namespace); err != nil {
			return notPermitted{err}
		}
	}
	name := u.Project
	if name == "" {
		name = DefaultAppProject
	}
	r, ok := p.read[name]
	if !ok {
		r.project, r.err = p.projects.AppProject(ctx, p.namespace, name)
		p.read[name] = r
	}
	switch {
	case apierrors.IsNotFound(r.err):
		return notPermittedf("AppProject %s/%s does not exist", p.namespace, name)
	case apierrors.IsForbidden(r.err):
		return fmt.Errorf("read AppProject %s/%s: %w (the controller needs get on appprojects.argoproj.io in %s)", p.namespace, name, r.err, p.namespace)
	case r.err != nil:
		return fmt.Errorf("read AppProject %s/%s: %w", p.namespace, name, r.err)
	}
	// Argo CD itself ignores an Application outside Argo CD's namespace
	// whose project does not list its namespace; it must not borrow that
	// project's repositories here either.
	if u.Namespace != p.namespace && !namespacePermitted(r.project.SourceNamespaces, u.Namespace) {
		return notPermittedf("AppProject %s does not permit Applications in namespace %s (spec.sourceNamespaces)", name, u.Namespace)
	}
	if !repo.PermittedBy(r.project.SourceRepos) {
		return notPermittedf("repository %s is not permitted by AppProject %s (spec.sourceRepos)", repo, name)
	}
	return nil
}

func globMatch(pattern, s string, separators ...rune) (matched, valid bool) {
	if pattern == "*" {
		return true, true
	}
	g, err := glob.Compile(pattern, separators...)
	if err != nil {
		return false, false
	}
	return g.Match(s), true
}

// namespacePermitted applies an AppProject's sourceNamespaces as Argo CD
// does: a pattern between slashes is a regular expression that may match
// any part of the namespace, any other a glob.
func namespacePermitted(patterns []string, namespace string) bool {
	for _, p := range patterns {
		if len(p) >= 2 && strings.HasPrefix(p, "/") && strings.HasSuffix(p, "/") {
			if re, err := regexp.Compile(p[1 : len(p)-1]); err == nil && re.MatchString(namespace) {
				return true
			}
			continue
		}
		if ok, _ := globMatch(p, namespace); ok {
			return true
		}
	}
	return false
}
