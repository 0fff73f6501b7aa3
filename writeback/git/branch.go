package git

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/image-updater/argocd-image-updater/settings"
)

// maxBranchNameLength cuts rendered branch names, as the git-branch
// annotation documents.
const maxBranchNameLength = 255

// branchTemplateImage is one image a git-branch template sees in .Images.
// Name, OldTag and NewTag are as ReportedChange gives them: the repository
// without the registry host, and the digest when a version has one.
type branchTemplateImage struct {
	Name, Alias, OldTag, NewTag string
}

// branchTemplateData is what a git-branch template sees.
type branchTemplateData struct {
	// AppName and AppNamespace are the Application's (v1.3.0).
	AppName, AppNamespace string
	// TargetKey tells write-back targets apart (v1.3.0): eight hex digits
	// of a SHA-256 of the repository, the base branch and the target file.
	TargetKey string
	Images    []branchTemplateImage
	// SHA256 is a hex SHA-256 of the images and versions written, so one
	// set of changes always gets one branch.
	SHA256 string
}

// newBranchTemplateData computes what Argo CD Image Updater gives its
// templates, byte for byte, so that a template like
// "main:image-updater-{{.SHA256}}" keeps naming the branch it named
// before: SHA256 hashes "<name>-<old>-<new>," for each image, in the order
// of the updates.
func newBranchTemplateData(u update) branchTemplateData {
	d := branchTemplateData{AppName: u.Name, AppNamespace: u.Namespace, TargetKey: targetKey(u)}
	h := sha256.New()
	for _, img := range u.Images {
		r := img.Reported()
		d.Images = append(d.Images, branchTemplateImage{Name: r.Name, Alias: img.Alias, OldTag: r.OldTag, NewTag: r.NewTag})
		fmt.Fprintf(h, "%s-%s-%s,", r.Name, r.OldTag, r.NewTag)
	}
	d.SHA256 = hex.EncodeToString(h.Sum(nil))
	return d
}

// branchPlan is where one Application's commit goes.
type branchPlan struct {
	// base is the branch a new target branch starts from.
	base string
	// target is the branch pushed to.
	target string
}

// planBranches reads the git-branch annotation: "branch" checks out and
// pushes that branch; "base:target" starts target from base when target
// does not exist yet, and else adds to target; an empty base (":target")
// or no annotation at all means the Application's targetRevision, where
// "" and "HEAD" mean the remote's default branch.
func planBranches(u update, defaultBranch string) (branchPlan, error) {
	revision := strings.TrimPrefix(u.TargetRevision, "refs/heads/")
	if revision == "" || revision == "HEAD" {
		revision = defaultBranch
	}
	spec := strings.TrimSpace(u.Branch)
	base, target, split := strings.Cut(spec, ":")
	base = strings.TrimPrefix(base, "refs/heads/")
	var p branchPlan
	switch {
	case !split && spec != "":
		p = branchPlan{base: base, target: base}
	case revision == "" && base == "":
		return branchPlan{}, errors.New("the repository names no default branch (HEAD): set the Application's targetRevision or the git-branch annotation")
	case !split:
		p = branchPlan{base: revision, target: revision}
	default:
		if base == "" {
			base = revision
		}
		rendered, err := renderBranchTemplate(target, newBranchTemplateData(u))
		if err != nil {
			return branchPlan{}, err
		}
		p = branchPlan{base: base, target: rendered}
	}
	for _, b := range []string{p.base, p.target} {
		if err := checkBranchName(b); err != nil {
			return branchPlan{}, fmt.Errorf("git-branch %q: %w", u.Branch, err)
		}
	}
	return p, nil
}

// targetKey is v1.3.0's .TargetKey: the first eight hex digits of the
// SHA-256 of "<repository>|<base branch>|<target>", each spelled as v1.3.0
// spells it, so that a template using it names the same branch in both.
func targetKey(u update) string {
	base, _, _ := strings.Cut(strings.TrimSpace(u.Branch), ":")
	h := sha256.Sum256([]byte(u.RepoURL + "|" + base + "|" + upstreamTargetPath(u)))
	return hex.EncodeToString(h[:])[:8]
}

// upstreamTargetPath is the target file as v1.3.0 names it in .TargetKey:
// a Helm values file's path, an override file's path as written, and for
// the other targets (kustomizations included) the .argocd-source file of
// the source path.
func upstreamTargetPath(u update) string {
	switch p := u.Target.Path; u.Target.Kind {
	case settings.TargetHelmValues:
		switch {
		case p == "":
			return filepath.Join(u.SourcePath, "values.yaml")
		case strings.HasPrefix(p, "/"):
			return p[1:]
		}
		return filepath.Join(u.SourcePath, p)
	case settings.TargetOverrideFile:
		return p
	}
	return filepath.Join(u.SourcePath, sourceOverrideFileName(u))
}

func renderBranchTemplate(text string, data branchTemplateData) (string, error) {
	t, err := parseLimitedTemplate("git-branch", text)
	if err != nil {
		return "", fmt.Errorf("git-branch template %q: %w", text, err)
	}
	out, err := renderLimited(t, data)
	if err != nil {
		return "", fmt.Errorf("git-branch template %q: %w", text, err)
	}
	name := strings.TrimSpace(out)
	if len(name) > maxBranchNameLength {
		name = name[:maxBranchNameLength]
		for !utf8.ValidString(name) {
			name = name[:len(name)-1]
		}
	}
	return name, nil
}

// checkBranchName applies git check-ref-format's rules (through go-git),
// so a bad name is reported before anything is pushed.
func checkBranchName(name string) error {
	switch name {
	case "":
		return errors.New("empty branch name")
	case "HEAD":
		// go-git accepts refs/heads/HEAD; git refuses to make that branch.
		return fmt.Errorf("%q is not a branch name", name)
	}
	err := plumbing.NewBranchReferenceName(name).Validate()
	if err == nil {
		return nil
	}
	// go-git does not say what is wrong; a character from a rendered image
	// name or tag (':' of a registry port, a space) is the usual culprit,
	// so name it when there is one.
	if i := strings.IndexFunc(name, isBadRefRune); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return fmt.Errorf("branch name %q cannot contain %q: %w", name, r, err)
	}
	return fmt.Errorf("branch name %q is refused by git check-ref-format: it cannot contain .., // or @{, start with - or /, end with / or ., or have a part that starts with . or ends with .lock: %w", name, err)
}

// isBadRefRune reports characters git allows nowhere in a ref name.
func isBadRefRune(r rune) bool {
	return r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r)
}
