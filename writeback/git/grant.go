package git

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// grant is the folder of a repository an Application may write, root (a
// clean path from the repository root, "." for all of it). Every path the
// Application names (its source path, its write-back target, the folder
// of its definition) and every symbolic link met while resolving one is
// resolved by confine against it, and refused outside it.
//
// An Application is granted the repository it writes to, which its
// AppProject permits: a kustomization:../<dir> or helmvalues:/<file>
// reaches a base or an overlay beside its source path, as it always could
// in Argo CD Image Updater. An Application written through its parent
// (app-of-apps) is granted what the parent deploys, the parent's source
// path: the other folders of that repository deploy other Applications,
// often other teams'.
type grant struct {
	root string
	// what names root in errors.
	what string
}

// repositoryGrant is the whole repository.
var repositoryGrant = grant{root: ".", what: "the repository"}

// errOutsideGrant is wrapped by the errors for paths outside a grant,
// whether by ".." or through a symbolic link.
var errOutsideGrant = errors.New("outside the folder the Application may write")

// outsideError is a path, or a link, that resolves outside a grant.
type outsideError struct{ msg string }

func (e *outsideError) Error() string { return e.msg }
func (e *outsideError) Unwrap() error { return errOutsideGrant }

func leaves(g grant, p, base string) error {
	return &outsideError{fmt.Sprintf("path %q (from %q) leaves %s", p, base, g.what)}
}

// confine resolves p, relative to base or, starting with "/", to the
// repository root, to a clean path from the repository root inside g. A
// backslash or a control character is refused rather than read as part
// of a name: a checkout elsewhere could read it as a separator. Symbolic
// links are repoTree.stat's, which confines each one met.
func (g grant) confine(base, p string) (string, error) {
	if i := strings.IndexFunc(p, func(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f }); i >= 0 {
		return "", fmt.Errorf("path %q holds %q: a path in a repository is written with \"/\" and no control characters", p, p[i])
	}
	var joined string
	if strings.HasPrefix(p, "/") {
		joined = path.Clean(strings.TrimLeft(p, "/"))
	} else {
		joined = path.Clean(path.Join(base, p))
	}
	if joined == ".." || strings.HasPrefix(joined, "../") || !g.holds(joined) {
		return "", leaves(g, p, base)
	}
	return joined, nil
}

// holds tells whether the clean repository path p is g's root or under it.
func (g grant) holds(p string) bool {
	return g.root == "." || p == g.root || strings.HasPrefix(p, g.root+"/")
}

// parentGrant is what an app-of-apps update may write: the folder its
// parent deploys, dir, its links resolved in t (a parent whose path is a
// link deploys the folder linked to).
func parentGrant(t *repoTree, u update, dir string) (grant, error) {
	d, err := t.stat(repositoryGrant, dir)
	if err != nil {
		return grant{}, fmt.Errorf("the parent's source path: %w", err)
	}
	if d.path == "." {
		return repositoryGrant, nil
	}
	parent := "its parent"
	if u.Parent != nil {
		parent += " " + u.Parent.key()
	}
	return grant{root: d.path, what: d.path + ", the folder " + parent + " deploys"}, nil
}
