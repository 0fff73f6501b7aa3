package imageref

import "strings"

// Version is what follows an image name: a tag, a digest ("sha256:..."), or
// both. The zero Version is empty.
type Version struct {
	Tag    string
	Digest string
}

// tagRule is the OCI tag grammar in words, for error messages.
const tagRule = "a tag is 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'"

// ValidTag reports whether s is a tag by the OCI distribution grammar
// [A-Za-z0-9_][A-Za-z0-9._-]{0,127}. Anything else cannot name an image, so
// it is never a candidate and never written.
func ValidTag(s string) bool {
	if len(s) == 0 || len(s) > 128 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// ParseVersion reads a version as Applications hold it: "tag",
// "tag@digest", "@digest", or a bare digest ("sha256:..."): a value with a
// ':' and no '@' is a digest, since tags never contain ':'. Nothing is
// validated: versions read from Applications and repositories are compared,
// never trusted.
func ParseVersion(s string) Version {
	tag, digest, ok := strings.Cut(s, "@")
	if !ok && strings.Contains(tag, ":") {
		return Version{Digest: tag}
	}
	return Version{Tag: tag, Digest: digest}
}

// String is the version as Kustomize images, Helm tag parameters and
// .argocd-source files hold it: "tag@digest", "tag", or the digest alone.
// It is the one place this form is built.
func (v Version) String() string {
	switch {
	case v.Digest == "":
		return v.Tag
	case v.Tag == "":
		return v.Digest
	default:
		return v.Tag + "@" + v.Digest
	}
}

// suffix is what follows a name in a reference: ":tag", "@digest" or
// ":tag@digest".
func (v Version) suffix() string {
	s := ""
	if v.Tag != "" {
		s = ":" + v.Tag
	}
	if v.Digest != "" {
		s += "@" + v.Digest
	}
	return s
}

// IsZero reports whether v has neither tag nor digest.
func (v Version) IsZero() bool { return v == Version{} }

// Split splits a reference as written, "<name>[:<tag>][@<digest>]", into
// the name and its version, without validating either (see ParseVersion).
// A ':' before the last '/' belongs to a registry port
// ("localhost:5000/app"), not to a tag.
func Split(s string) (name string, v Version) {
	name, v.Digest, _ = strings.Cut(s, "@")
	slash := strings.LastIndexByte(name, '/')
	if colon := strings.LastIndexByte(name, ':'); colon > slash {
		name, v.Tag = name[:colon], name[colon+1:]
	}
	return name, v
}
