package appwatch

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/image-updater/argocd-image-updater/forge"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/platform"
)

// AnnotationPrefix starts every annotation the updater reads.
const AnnotationPrefix = "argocd-image-updater.argoproj.io/"

// Annotation keys, without the prefix.
const (
	KeyImageList       = "image-list"
	KeyWriteBackMethod = "write-back-method"
	KeyWriteBackTarget = "write-back-target"
	KeyGitBranch       = "git-branch"
	KeyGitRepository   = "git-repository"
	KeyGitPullRequest  = "git-pull-request"
	// KeyGitPullRequestLabels is "label,label...": the labels of the
	// request git-pull-request opens (pullRequest.labels of the resource).
	KeyGitPullRequestLabels = "git-pull-request-labels"

	// Per-image keys: "<alias>.<key>", falling back to "<key>".
	KeyUpdateStrategy  = "update-strategy"
	KeyAllowTags       = "allow-tags"
	KeyIgnoreTags      = "ignore-tags"
	KeyForceUpdate     = "force-update"
	KeyPullSecret      = "pull-secret"
	KeyPlatforms       = "platforms"
	KeyVerifySignature = "verify-signature"

	// Per-image only: "<alias>.<key>".
	KeyHelmImageName      = "helm.image-name"
	KeyHelmImageTag       = "helm.image-tag"
	KeyHelmImageSpec      = "helm.image-spec"
	KeyKustomizeImageName = "kustomize.image-name"
	// The environment variables of a config management plugin receiving
	// the image (manifestTargets.plugin of an ImageUpdater).
	KeyPluginImageName = "plugin.image-name"
	KeyPluginImageTag  = "plugin.image-tag"
	KeyPluginImageSpec = "plugin.image-spec"

	// KeyTagMatch is the deprecated name of allow-tags, per image only;
	// existing Applications still carry it.
	KeyTagMatch = "tag-match"
)

var (
	imageKeys     = []string{KeyUpdateStrategy, KeyAllowTags, KeyIgnoreTags, KeyForceUpdate, KeyPullSecret, KeyPlatforms, KeyVerifySignature}
	imageOnlyKeys = []string{KeyHelmImageName, KeyHelmImageTag, KeyHelmImageSpec, KeyKustomizeImageName, KeyPluginImageName, KeyPluginImageTag, KeyPluginImageSpec, KeyTagMatch}
	appKeys       = []string{KeyImageList, KeyWriteBackMethod, KeyWriteBackTarget, KeyGitBranch, KeyGitRepository, KeyGitPullRequest, KeyGitPullRequestLabels}
)

// Default Helm parameter names, as Helm charts commonly name them.
const (
	DefaultHelmImageName = "image.name"
	DefaultHelmImageTag  = "image.tag"
)

// ImageSpec is one entry of the image-list annotation with its settings.
// The image names are parsed here, once; the other values are as the user
// wrote them, and the update cycle validates those that need a strategy to
// make sense of.
type ImageSpec struct {
	// Alias names the image in per-image annotation keys; may be empty.
	Alias string
	// Image is the image without the constraint ("nginx",
	// "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app"); its
	// OriginalName is the spelling written back.
	Image imageref.Reference
	// Constraint is what followed the image's last ':' (a semver range, or
	// the tag the digest strategy follows).
	Constraint string

	Strategy    string
	AllowTags   string
	IgnoreTags  []string
	ForceUpdate bool
	PullSecret  string
	// PullSecretAnnotation is the full key PullSecret was read from
	// ("<prefix><alias>.pull-secret" or the Application-wide one), for
	// messages; "" when PullSecret is, or came from an ImageUpdater.
	PullSecretAnnotation string
	// PullSecretField is the ImageUpdater field PullSecret was read from,
	// for messages; "" when it came from an annotation.
	PullSecretField string
	// Platforms are those the image must be built for; empty means the
	// controller's default.
	Platforms []v1.Platform
	// SignatureKey, when set, restricts the candidates to versions with a
	// cosign signature made with this key.
	SignatureKey SignatureKey

	HelmImageName string // Helm parameter receiving the image name (see HelmParameters)
	HelmImageTag  string // Helm parameter receiving the tag (see HelmParameters)
	HelmImageSpec string // one Helm parameter receiving name:tag; overrides the two above
	// KustomizeImageName is the image name a Kustomize override replaces,
	// when it is not Image (see KustomizeName).
	KustomizeImageName imageref.Reference
	// The plugin environment variables receiving the image name, its
	// version, or both as name:version (which overrides the other two).
	// Set, they make the image's target a config management plugin's
	// spec.source.plugin.env (see PluginTarget).
	PluginEnvName, PluginEnvTag, PluginEnvSpec string
}

// PluginTarget tells whether the image is written into a config
// management plugin's environment.
func (s ImageSpec) PluginTarget() bool {
	return s.PluginEnvName != "" || s.PluginEnvTag != "" || s.PluginEnvSpec != ""
}

// Key is how messages name the image: its alias, or the image as written.
func (s ImageSpec) Key() string {
	if s.Alias != "" {
		return s.Alias
	}
	return s.Image.OriginalName()
}

// HelmParameters names the Helm parameters receiving the image name and
// its version: helm.image-name and helm.image-tag, each defaulting on its
// own to the names most charts use. Unused when HelmImageSpec is set.
func (s ImageSpec) HelmParameters() (name, tag string) {
	name, tag = s.HelmImageName, s.HelmImageTag
	if name == "" {
		name = DefaultHelmImageName
	}
	if tag == "" {
		tag = DefaultHelmImageTag
	}
	return name, tag
}

// KustomizeName is the image name whose Kustomize override the image's
// version goes into: kustomize.image-name, else the image itself.
func (s ImageSpec) KustomizeName() imageref.Reference {
	if !s.KustomizeImageName.IsZero() {
		return s.KustomizeImageName
	}
	return s.Image
}

// renamesInKustomize tells whether the image's Kustomize override gives
// another image name a new one (kustomize.image-name differs).
func (s ImageSpec) renamesInKustomize() bool {
	return !s.KustomizeImageName.IsZero() && !s.KustomizeImageName.SameName(s.Image)
}

// KustomizeEntry finds the image's entry among an Application's kustomize
// images ("[<orig>=]<name>[:<tag>]"), as Argo CD Image Updater matches
// them: the entry whose original name is the image's Kustomize name in
// any spelling; else a plain entry naming the image's repository path on
// another registry (the image has moved there, and the entry is replaced).
// byName tells which of the two was found.
func (s ImageSpec) KustomizeEntry(entries []string) (i int, byName, ok bool) {
	k := s.KustomizeName()
	for i, e := range entries {
		if orig, _, _ := SplitKustomizeImage(e); k.MatchesName(orig) {
			return i, true, true
		}
	}
	for i, e := range entries {
		orig, name, _ := SplitKustomizeImage(e)
		if orig != name || strings.Contains(e, "=") {
			continue
		}
		if ref, err := imageref.Parse(name); err == nil && ref.Repository() == s.Image.Repository() {
			return i, false, true
		}
	}
	return -1, false, false
}

// KustomizeEntryStale tells whether an entry found by KustomizeEntry must
// be rewritten whatever its version: it does not yet name the image under
// the name it overrides (a new registry through kustomize.image-name, or
// the image moved to another registry), which Argo CD Image Updater
// writes at once rather than at the next new tag.
func (s ImageSpec) KustomizeEntryStale(entry string) bool {
	orig, name, _ := SplitKustomizeImage(entry)
	if !s.Image.MatchesName(name) {
		return true
	}
	return s.renamesInKustomize() && orig == name
}

// SignatureKey names the public key versions of an image must be signed
// with: a field of a Secret holding it in PEM, as cosign.pub.
type SignatureKey struct {
	// Namespace is the Secret's; "" means the Application's own.
	Namespace string
	Name      string
	Field     string
	// Annotation is the annotation the key was named in, for messages; ""
	// when it came from elsewhere (an ImageUpdater resource).
	Annotation string
	// Setting is the resource field the key was named in, for messages;
	// "" when it came from an annotation.
	Setting string
}

// Where names the annotation or field that asked for the key.
func (k SignatureKey) Where() string {
	if k.Annotation != "" {
		return k.Annotation
	}
	return k.Setting
}

// IsZero reports whether no key is set: versions need no signature.
func (k SignatureKey) IsZero() bool { return k.Name == "" }

// String is the key as written in the annotation.
func (k SignatureKey) String() string {
	if k.Namespace == "" {
		return "secret:" + k.Name + "#" + k.Field
	}
	return "secret:" + k.Namespace + "/" + k.Name + "#" + k.Field
}

// ParseSignatureKey reads a verify-signature value:
// secret:[<namespace>/]<name>#<field>. "false" or "none" set no key, so
// that one image can opt out of an Application-wide setting.
func ParseSignatureKey(s string) (SignatureKey, error) {
	switch s {
	case "false", "none":
		return SignatureKey{}, nil
	}
	rest, ok := strings.CutPrefix(s, "secret:")
	secret, field, hasField := strings.Cut(rest, "#")
	ns, name, hasNS := strings.Cut(secret, "/")
	if !hasNS {
		ns, name = "", secret
	}
	if !ok || !hasField || field == "" || name == "" || (hasNS && ns == "") || strings.Contains(name, "/") {
		return SignatureKey{}, fmt.Errorf("%q must name the public key as secret:[<namespace>/]<name>#<field>, or be none", s)
	}
	return SignatureKey{Namespace: ns, Name: name, Field: field}, nil
}

// WriteBackMethod says where a chosen version is written.
type WriteBackMethod string

const (
	WriteBackArgoCD WriteBackMethod = "argocd"
	WriteBackGit    WriteBackMethod = "git"
)

// WriteBackSpec is the Application-level write-back configuration.
type WriteBackSpec struct {
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
	PullRequest forge.Kind
	// PullRequestLabels are put on the request when it is opened.
	PullRequestLabels []string
	// MethodField is the ImageUpdater field the method was read from, for
	// messages; "" when it came from the write-back-method annotation.
	MethodField string
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
)

// WriteBackTarget is the write-back-target annotation, parsed.
type WriteBackTarget struct {
	Kind TargetKind
	// Path is, for a kustomization or Helm values target, what followed
	// "<kind>:", relative to the source path or, starting with '/', to the
	// repository root; "" means the default (the source folder, or its
	// values.yaml). For an override file it is the whole annotation value,
	// a file path from the repository root.
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
// helmvalues[:<file>], or else the path of an override file, as Argo CD
// Image Updater has always read other values.
func ParseWriteBackTarget(s string) (WriteBackTarget, error) {
	if s == "" {
		return WriteBackTarget{}, nil
	}
	kind, path, _ := strings.Cut(s, ":")
	switch t := TargetKind(kind); t {
	case TargetKustomization, TargetHelmValues:
		return WriteBackTarget{Kind: t, Path: path}, nil
	}
	// "kustomization.yaml" or "helmvalues-prod.yaml" is a misspelt kind
	// far more often than a file meant to hold parameter overrides.
	if strings.HasPrefix(s, string(TargetKustomization)) || strings.HasPrefix(s, string(TargetHelmValues)) {
		return WriteBackTarget{}, fmt.Errorf("unknown target %q: use kustomization[:<dir>], helmvalues[:<file>], or the path of an override file", s)
	}
	return WriteBackTarget{Kind: TargetOverrideFile, Path: s}, nil
}

// Problem is something wrong with an Application's annotations, or with
// the ImageUpdater field that configures it. Image is empty for
// Application-level problems. A problem with Image set disables only that
// image; an Application-level error disables the Application.
type Problem struct {
	Image      string // alias or image of the affected image, "" for the Application
	Annotation string // full annotation key
	// Field names the ImageUpdater and field the problem is in
	// ("ImageUpdater argocd/web spec.applicationRefs[0].images[1].imageName");
	// when set, it is named instead of Annotation.
	Field   string
	Message string
	Warning bool // reported, but nothing is disabled
}

func (p Problem) Error() string {
	var b strings.Builder
	if p.Field != "" {
		b.WriteString(p.Field)
	} else {
		b.WriteString("annotation ")
		b.WriteString(p.Annotation)
	}
	if p.Image != "" {
		fmt.Fprintf(&b, " (image %s)", p.Image)
	}
	b.WriteString(": ")
	b.WriteString(p.Message)
	return b.String()
}

// Annotations is what the updater understands of an Application's
// annotations.
type Annotations struct {
	Images    []ImageSpec
	WriteBack WriteBackSpec
	// Problems lists what could not be understood. Images with a
	// non-warning problem are not in Images.
	Problems []Problem
	// FromAnnotations is true when an ImageUpdater selected the
	// Application and reads its annotations (useAnnotations).
	FromAnnotations bool
}

// Managed reports whether an Application carries the image-list annotation.
func Managed(annotations map[string]string) bool {
	_, ok := annotations[AnnotationPrefix+KeyImageList]
	return ok
}

// ParseAnnotations reads the updater's annotations; image names are read
// with opts (registries.conf's default registry and namespace). It never
// fails as a whole: a bad entry is a Problem that disables only what it
// concerns.
func ParseAnnotations(annotations map[string]string, opts ...imageref.Option) Annotations {
	var a Annotations
	get := func(key string) (string, bool) {
		v, ok := annotations[AnnotationPrefix+key]
		return strings.TrimSpace(v), ok
	}

	a.WriteBack = parseWriteBack(get, &a.Problems)

	list, _ := get(KeyImageList)
	seenAlias := map[string]bool{}
	for i, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			if strings.TrimSpace(list) != "" {
				a.Problems = append(a.Problems, Problem{
					Annotation: AnnotationPrefix + KeyImageList,
					Message:    fmt.Sprintf("entry %d is empty", i+1), Warning: true,
				})
			}
			continue
		}
		spec, err := parseImageEntry(entry, opts)
		if err != nil {
			a.Problems = append(a.Problems, Problem{Image: entry, Annotation: AnnotationPrefix + KeyImageList, Message: err.Error()})
			continue
		}
		if spec.Alias != "" {
			if seenAlias[spec.Alias] {
				a.Problems = append(a.Problems, Problem{
					Image: spec.Alias, Annotation: AnnotationPrefix + KeyImageList,
					Message: fmt.Sprintf("alias %q is used twice; aliases must be unique within an Application", spec.Alias),
				})
				continue
			}
			seenAlias[spec.Alias] = true
		}
		if ok := readImageSettings(&spec, get, opts, &a.Problems); ok {
			a.Images = append(a.Images, spec)
		}
	}
	a.Problems = append(a.Problems, unknownKeys(annotations, seenAlias)...)
	return a
}

// parseImageEntry splits "[<alias>=]<image>[:<constraint>]" (see
// ParseImage).
func parseImageEntry(entry string, opts []imageref.Option) (ImageSpec, error) {
	var spec ImageSpec
	if alias, rest, ok := strings.Cut(entry, "="); ok {
		// An empty alias ("=nginx:1.21") is no alias, as v1.3.0 reads it.
		spec.Alias = strings.TrimSpace(alias)
		entry = strings.TrimSpace(rest)
		if strings.ContainsAny(spec.Alias, " .:@") {
			return spec, fmt.Errorf("alias %q must not contain spaces, '.', ':' or '@'", spec.Alias)
		}
	}
	if entry == "" {
		return spec, fmt.Errorf("alias %q names no image", spec.Alias)
	}
	img, err := ParseImage(entry, opts...)
	img.Alias = spec.Alias
	return img, err
}

// ParseImage reads "<image>[:<constraint>]", an image-list entry without
// its alias, as an ImageUpdater's imageName is written too. The constraint
// is what follows the first ':' of the last path element, so a registry
// port ("localhost:5000/app") is not mistaken for one.
func ParseImage(entry string, opts ...imageref.Option) (ImageSpec, error) {
	var spec ImageSpec
	name := entry
	if at := strings.LastIndex(name, "@"); at >= 0 {
		// A digest pins the image; what runs is looked up by name anyway.
		name = name[:at]
	}
	lastSlash := strings.LastIndex(name, "/")
	if colon := strings.Index(name[lastSlash+1:], ":"); colon >= 0 {
		colon += lastSlash + 1
		spec.Constraint = strings.TrimSpace(name[colon+1:])
		name = name[:colon]
	}
	if name == "" || strings.ContainsAny(name, " \t") {
		return spec, fmt.Errorf("%q is not an image name", entry)
	}
	ref, err := imageref.Parse(name, opts...)
	if err != nil {
		return spec, err
	}
	spec.Image = ref
	return spec, nil
}

// aliasKey is how an alias appears in annotation keys: '/' is written '_'.
func aliasKey(alias string) string { return strings.ReplaceAll(alias, "/", "_") }

func readImageSettings(spec *ImageSpec, get func(string) (string, bool), opts []imageref.Option, problems *[]Problem) bool {
	// value reads "<alias>.<key>", falling back to the Application-wide "<key>".
	value := func(key string) (string, string) {
		if spec.Alias != "" {
			k := aliasKey(spec.Alias) + "." + key
			if v, ok := get(k); ok {
				return v, AnnotationPrefix + k
			}
		}
		v, _ := get(key)
		return v, AnnotationPrefix + key
	}
	ok := true
	fail := func(annotation, format string, args ...any) {
		*problems = append(*problems, Problem{Image: spec.Key(), Annotation: annotation, Message: fmt.Sprintf(format, args...)})
		ok = false
	}

	spec.Strategy, _ = value(KeyUpdateStrategy)
	var allowKey string
	spec.AllowTags, allowKey = value(KeyAllowTags)
	if spec.Alias != "" {
		readTagMatch(spec, allowKey, get, problems)
	}
	if v, _ := value(KeyIgnoreTags); v != "" {
		for _, g := range strings.Split(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				spec.IgnoreTags = append(spec.IgnoreTags, g)
			}
		}
	}
	if v, key := value(KeyForceUpdate); v != "" {
		switch strings.ToLower(v) {
		case "true":
			spec.ForceUpdate = true
		case "false":
		default:
			fail(key, "value %q is not true or false", v)
		}
	}
	if v, key := value(KeyPullSecret); v != "" {
		spec.PullSecret, spec.PullSecretAnnotation = v, key
	}
	if v, key := value(KeyPlatforms); v != "" {
		ps, err := platform.Parse(v)
		if err != nil {
			fail(key, "%v", err)
		}
		spec.Platforms = ps
	}

	if v, key := value(KeyVerifySignature); v != "" {
		k, err := ParseSignatureKey(v)
		if err != nil {
			fail(key, "%v", err)
		}
		k.Annotation = key
		spec.SignatureKey = k
	}

	if spec.Alias != "" {
		prefix := aliasKey(spec.Alias) + "."
		spec.HelmImageName, _ = get(prefix + KeyHelmImageName)
		spec.HelmImageTag, _ = get(prefix + KeyHelmImageTag)
		spec.HelmImageSpec, _ = get(prefix + KeyHelmImageSpec)
		spec.PluginEnvName, _ = get(prefix + KeyPluginImageName)
		spec.PluginEnvTag, _ = get(prefix + KeyPluginImageTag)
		spec.PluginEnvSpec, _ = get(prefix + KeyPluginImageSpec)
		if name, _ := get(prefix + KeyKustomizeImageName); name != "" {
			ref, err := imageref.Parse(name, opts...)
			if err != nil {
				fail(AnnotationPrefix+prefix+KeyKustomizeImageName, "%v", err)
			}
			spec.KustomizeImageName = ref
		}
	}
	return ok
}

// readTagMatch applies "<alias>.tag-match", the old name of allow-tags with
// the same values: without it a filter users still rely on would silently
// stop filtering. allow-tags, per image or Application-wide, wins.
func readTagMatch(spec *ImageSpec, allowKey string, get func(string) (string, bool), problems *[]Problem) {
	key := aliasKey(spec.Alias) + "." + KeyTagMatch
	v, ok := get(key)
	if !ok {
		return
	}
	p := Problem{Image: spec.Key(), Annotation: AnnotationPrefix + key, Warning: true}
	if spec.AllowTags != "" {
		p.Message = fmt.Sprintf("ignored: %s is set and takes precedence; remove %s", allowKey, key)
	} else {
		spec.AllowTags = v
		p.Message = fmt.Sprintf("deprecated: read as allow-tags; rename it to %s.%s", aliasKey(spec.Alias), KeyAllowTags)
	}
	*problems = append(*problems, p)
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
		}
		labels = append(labels, l)
	}
	if len(labels) > 100 {
		return nil, fmt.Errorf("%d labels, more than 100", len(labels))
	}
	return labels, nil
}

func parseWriteBack(get func(string) (string, bool), problems *[]Problem) WriteBackSpec {
	var wb WriteBackSpec
	method, _ := get(KeyWriteBackMethod)
	var err error
	if wb.Method, wb.GitSecret, err = ParseWriteBackMethod(method); err != nil {
		*problems = append(*problems, Problem{Annotation: AnnotationPrefix + KeyWriteBackMethod, Message: err.Error()})
	}
	target, _ := get(KeyWriteBackTarget)
	wb.GitBranch, _ = get(KeyGitBranch)
	wb.GitRepository, _ = get(KeyGitRepository)
	if v, _ := get(KeyGitPullRequest); v != "" && wb.Method == WriteBackGit {
		kind, err := forge.ParseKind(v)
		switch {
		case err != nil:
			*problems = append(*problems, Problem{Annotation: AnnotationPrefix + KeyGitPullRequest, Message: err.Error()})
		case !strings.Contains(wb.GitBranch, ":"):
			*problems = append(*problems, Problem{
				Annotation: AnnotationPrefix + KeyGitPullRequest,
				Message:    fmt.Sprintf("a pull request needs a branch of its own: set %s%s to <base>:<branch> or :<branch>", AnnotationPrefix, KeyGitBranch),
			})
		default:
			wb.PullRequest = kind
		}
	}
	if v, _ := get(KeyGitPullRequestLabels); v != "" {
		labels, err := ParsePullRequestLabels(v)
		switch {
		case err != nil:
			*problems = append(*problems, Problem{Annotation: AnnotationPrefix + KeyGitPullRequestLabels, Message: err.Error()})
		case wb.PullRequest != "":
			wb.PullRequestLabels = labels
		case wb.Method == WriteBackGit:
			*problems = append(*problems, Problem{Annotation: AnnotationPrefix + KeyGitPullRequestLabels, Warning: true,
				Message: "has no effect without " + AnnotationPrefix + KeyGitPullRequest})
		}
	}
	if wb.Method == WriteBackArgoCD {
		for _, k := range []string{KeyWriteBackTarget, KeyGitBranch, KeyGitRepository, KeyGitPullRequest, KeyGitPullRequestLabels} {
			if v, ok := get(k); ok && v != "" {
				*problems = append(*problems, Problem{
					Annotation: AnnotationPrefix + k,
					Message:    "has no effect with write-back-method argocd (it applies to git write-back only)",
					Warning:    true,
				})
			}
		}
	}
	if wb.Target, err = ParseWriteBackTarget(target); err != nil {
		*problems = append(*problems, Problem{Annotation: AnnotationPrefix + KeyWriteBackTarget, Message: err.Error()})
	}
	return wb
}

// unknownKeys warns about annotations with our prefix that nothing reads,
// which are usually typos ("app.update-stratgey") or aliases missing from
// image-list.
func unknownKeys(annotations map[string]string, aliases map[string]bool) []Problem {
	known := map[string]bool{}
	for _, k := range append(append([]string{}, appKeys...), imageKeys...) {
		known[k] = true
	}
	var problems []Problem
	for full := range annotations {
		key, ok := strings.CutPrefix(full, AnnotationPrefix)
		if !ok || known[key] {
			continue
		}
		if alias, rest, ok := strings.Cut(key, "."); ok && (slices.Contains(imageKeys, rest) || slices.Contains(imageOnlyKeys, rest)) {
			if !aliasKnown(aliases, alias) {
				problems = append(problems, Problem{
					Annotation: full, Warning: true,
					Message: fmt.Sprintf("no image in image-list has the alias %q", alias),
				})
			}
			continue
		}
		msg := "unknown annotation"
		if key == KeyTagMatch {
			msg += ": tag-match exists only per image (<alias>.tag-match) and is deprecated; use allow-tags"
		}
		problems = append(problems, Problem{Annotation: full, Warning: true, Message: msg})
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Annotation < problems[j].Annotation })
	return problems
}

func aliasKnown(aliases map[string]bool, key string) bool {
	for a := range aliases {
		if aliasKey(a) == key {
			return true
		}
	}
	return false
}
