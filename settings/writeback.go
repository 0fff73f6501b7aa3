package settings

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// WriteBackMethod says where a chosen version is written.
type WriteBackMethod string

const (
	WriteBackArgoCD WriteBackMethod = "argocd"
	WriteBackGit    WriteBackMethod = "git"
)

// WriteBack is the Application-level write-back configuration.
type WriteBack struct {
	Method WriteBackMethod
	// GitSecret names the Secret of git:secret:<namespace>/<name>, with
	// an empty namespace for git:secret:<name> (Application.GitSecret
	// fills it); the zero value means Argo CD's repository credentials.
	GitSecret     types.NamespacedName
	Target        WriteBackTarget
	GitBranch     string
	GitRepository string
	// PullRequest, when set, has the git write-back push to a branch of
	// its own and open (or update) a pull request on GitHub or a merge
	// request on GitLab from it into the base branch; GitBranch must then
	// name both ("base:branch" or ":branch").
	PullRequest Forge
	// PullRequestLabels are put on the request when it is opened.
	PullRequestLabels []string
	// MethodOrigin is where the method is written, or would be.
	MethodOrigin Origin
}

// TargetKind is the kind of file the git write-back edits.
type TargetKind string

const (
	// TargetSourceOverrides is Argo CD's .argocd-source-<app>.yaml, the
	// default.
	TargetSourceOverrides TargetKind = ""
	// TargetKustomization is the images list of a kustomization.
	TargetKustomization TargetKind = "kustomization"
	// TargetHelmValues is a Helm values file.
	TargetHelmValues TargetKind = "helmvalues"
	// TargetOverrideFile is an override file in the format of
	// .argocd-source-<app>.yaml at a path of the user's choosing: any
	// write-back-target that names neither kind above.
	TargetOverrideFile TargetKind = "file"
	// TargetAppOfApps is the document that defines the Application in its
	// parent's manifests (app of apps): the parent's sync would otherwise
	// put the Application's own overrides back.
	TargetAppOfApps TargetKind = "app-of-apps"
	// TargetApplicationSet is where the ApplicationSet that generates the
	// Application takes the version from: its list generator's element,
	// the file its git files generator reads, or its template. Its
	// controller would otherwise put the Application's spec back.
	TargetApplicationSet TargetKind = "applicationset"
)

// WriteBackTarget is a write-back target (the write-back-target annotation,
// or gitConfig.writeBackTarget of an ImageUpdater), parsed.
type WriteBackTarget struct {
	Kind TargetKind
	// Path is, for a kustomization, Helm values or app-of-apps target,
	// what followed "<kind>:", relative to the source path (the parent's,
	// for app-of-apps) or, starting with '/', to the repository root; ""
	// means the default (the source folder, or its values.yaml). For an override file it is the whole annotation value,
	// a file path from the repository root. It is read as written here;
	// the git write-back resolves it against the folder the Application
	// may write (its repository, or for app-of-apps the parent's source
	// path) and refuses it outside.
	Path string
}

// String is the annotation value the target was read from.
func (t WriteBackTarget) String() string {
	switch {
	case t.Kind == TargetOverrideFile:
		return t.Path
	case t.Path == "":
		return string(t.Kind)
	}
	return string(t.Kind) + ":" + t.Path
}

// ParseWriteBackTarget reads a write-back-target value: kustomization[:<dir>],
// helmvalues[:<file>], app-of-apps[:<dir>], applicationset, or else the path of an override file, as Argo CD
// Image Updater has always read other values.
func ParseWriteBackTarget(s string) (WriteBackTarget, error) {
	if s == "" {
		return WriteBackTarget{}, nil
	}
	kind, path, _ := strings.Cut(s, ":")
	switch t := TargetKind(kind); t {
	case TargetKustomization, TargetHelmValues, TargetAppOfApps:
		return WriteBackTarget{Kind: t, Path: path}, nil
	case TargetApplicationSet:
		// Where is found from the ApplicationSet, never named.
		if path != "" {
			return WriteBackTarget{}, fmt.Errorf("target %q takes no path: the ApplicationSet's generators say where the version is written", s)
		}
		return WriteBackTarget{Kind: t}, nil
	}
	// "kustomization.yaml" or "helmvalues-prod.yaml" is a misspelt kind
	// far more often than a file meant to hold parameter overrides.
	if strings.HasPrefix(s, string(TargetKustomization)) || strings.HasPrefix(s, string(TargetHelmValues)) || strings.HasPrefix(s, string(TargetAppOfApps)) || strings.HasPrefix(s, string(TargetApplicationSet)) {
		return WriteBackTarget{}, fmt.Errorf("unknown target %q: use kustomization[:<dir>], helmvalues[:<file>], app-of-apps[:<dir>], applicationset, or the path of an override file", s)
	}
	return WriteBackTarget{Kind: TargetOverrideFile, Path: s}, nil
}

// ParseWriteBackMethod reads a write-back method: argocd (also ""), git,
// git:repocreds, git:secret:<namespace>/<name> or git:secret:<name> (a
// Secret in the Application's namespace, as the resource-based updater
// writes it; the namespace is then empty, see Application.GitSecret). On
// error the method is still git for a malformed git:secret:, so that
// nothing is written with other credentials, and argocd otherwise.
func ParseWriteBackMethod(method string) (WriteBackMethod, types.NamespacedName, error) {
	switch {
	case method == "" || method == string(WriteBackArgoCD):
		return WriteBackArgoCD, types.NamespacedName{}, nil
	case method == "git" || method == "git:repocreds":
		return WriteBackGit, types.NamespacedName{}, nil
	case strings.HasPrefix(method, "git:secret:"):
		ref := strings.TrimPrefix(method, "git:secret:")
		ns, name, ok := strings.Cut(ref, "/")
		if !ok {
			ns, name = "", ref
		}
		secret := types.NamespacedName{Namespace: ns, Name: name}
		if (ok && ns == "") || name == "" || strings.Contains(name, "/") {
			return WriteBackGit, secret, fmt.Errorf("%q must name a Secret as git:secret:<namespace>/<name> or git:secret:<name>", method)
		}
		return WriteBackGit, secret, nil
	}
	return WriteBackArgoCD, types.NamespacedName{}, fmt.Errorf("unknown method %q: use argocd, git, git:repocreds, git:secret:<namespace>/<name> or git:secret:<name>", method)
}

// ParsePullRequestLabels reads "label,label...": names trimmed, each once,
// within the bounds GitHub and GitLab and the ImageUpdater CRD keep.
func ParsePullRequestLabels(s string) ([]string, error) {
	var labels []string
	for l := range strings.SplitSeq(s, ",") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || slices.Contains(labels, l):
			continue
		case len(l) > 255:
			return nil, fmt.Errorf("label %.40q... is longer than 255 characters", l)
		case len(labels) == maxPullRequestLabels:
			// Refused as the 101st distinct label is met: the duplicate
			// check stays over at most 100 labels, whatever the length.
			return nil, fmt.Errorf("more than %d labels", maxPullRequestLabels)
		}
		labels = append(labels, l)
	}
	return labels, nil
}

// maxPullRequestLabels bounds the labels of a pull request.
const maxPullRequestLabels = 100
