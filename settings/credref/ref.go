package credref

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Kind says where a credential reference takes its credentials from.
type Kind int

// The zero Kind is no kind, so the zero Ref means "no credentials".
const (
	KindPullSecret Kind = iota + 1 // pullsecret:<ns>/<name>
	KindSecret                     // secret:<ns>/<name>#<field>
	KindEnv                        // env:<VAR>
	KindExt                        // ext:<absolute path>
	KindECR                        // ecr or ecr:<role ARN>
	KindGCP                        // gcp
	KindAzure                      // azure
)

var kindNames = [...]string{
	KindPullSecret: "pullsecret",
	KindSecret:     "secret",
	KindEnv:        "env",
	KindExt:        "ext",
	KindECR:        "ecr",
	KindGCP:        "gcp",
	KindAzure:      "azure",
}

// String is the kind's prefix in a reference ("pullsecret", "ecr").
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Native reports whether credentials of this kind come from a cloud
// provider's SDK rather than from Kubernetes, the environment or a script.
func (k Kind) Native() bool { return k == KindECR || k == KindGCP || k == KindAzure }

// Ref is a parsed credential reference. Only the fields of its Kind are
// set. A reference names where a secret lives and never holds one, so it
// is safe to print.
type Ref struct {
	Kind      Kind
	Namespace string // pullsecret, secret
	Name      string // pullsecret, secret
	Field     string // secret
	Var       string // env
	Path      string // ext
	RoleARN   string // ecr; "" = the default credential chain's own identity
}

// IsZero reports whether r is the zero reference (no credentials).
func (r Ref) IsZero() bool { return r == Ref{} }

// String gives the reference back in the form ParseRef reads.
func (r Ref) String() string {
	switch r.Kind {
	case KindPullSecret:
		return "pullsecret:" + r.Namespace + "/" + r.Name
	case KindSecret:
		return "secret:" + r.Namespace + "/" + r.Name + "#" + r.Field
	case KindEnv:
		return "env:" + r.Var
	case KindExt:
		return "ext:" + r.Path
	case KindECR:
		if r.RoleARN != "" {
			return "ecr:" + r.RoleARN
		}
		return "ecr"
	case KindGCP:
		return "gcp"
	case KindAzure:
		return "azure"
	}
	if r.IsZero() {
		return ""
	}
	return r.Kind.String()
}

// ErrInvalidRef is matched (errors.Is) by every error of ParseRef.
var ErrInvalidRef = errors.New("invalid credential reference")

// RefError describes a credential reference that could not be parsed. It
// names the reference by its kind alone: a rejected reference is often a
// secret written where a reference belongs (a pull-secret annotation of
// "user:password"), so neither the whole nor any part of its argument is
// kept or shown.
type RefError struct {
	Kind string // the kind as written, if it is a known one; "" otherwise
	Err  error  // why it was rejected; never quotes the reference
}

func (e *RefError) Error() string {
	shown := Redacted
	switch {
	case e.Kind != "":
		shown = e.Kind + ":" + Redacted
	case errors.Is(e.Err, errEmptyRef):
		shown = ""
	}
	return fmt.Sprintf("invalid credential reference %q: %v", shown, e.Err)
}

func (e *RefError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalidRef) true.
func (e *RefError) Is(target error) bool { return target == ErrInvalidRef }

var errEmptyRef = errors.New("empty reference")

// Redacted is what is shown in place of a secret: of a credential, and of
// the part of a reference that may hold one.
const Redacted = "<redacted>"

// Kubernetes name rules, checked here so that a typo fails at parse time
// instead of as a confusing API error on every update cycle.
var (
	dnsLabelRE     = regexp.MustCompile(`^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomainRE = regexp.MustCompile(`^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$`)
	secretKeyRE    = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	// The names Kubernetes has long accepted for container variables: a
	// colon is not among them, so "env:user:password" is refused (and
	// hidden) rather than read as a variable named after a password.
	envVarRE  = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)
	roleARNRE = regexp.MustCompile(`^arn:aws(?:-[a-z]+)*:iam::[0-9]{12}:role/(?:[A-Za-z0-9+=,.@_/-]*/)?[A-Za-z0-9+=,.@_-]{1,64}$`)
)

const (
	credentialForms = "pullsecret:<namespace>/<name>, secret:<namespace>/<name>#<field>, env:<VAR>, ext:<absolute path>, ecr, ecr:<role ARN>, gcp or azure"
	roleARNForm     = "arn:aws:iam::<12-digit account>:role/<name>"
)

// ParseRef parses a credential reference as written in registries.conf or
// in a pull-secret annotation. Surrounding white space is ignored. Its
// errors (a *RefError) never repeat the reference beyond its kind.
func ParseRef(s string) (Ref, error) {
	in := strings.TrimSpace(s)
	// "<registry>=<reference>", as upstream accepts it: the registry
	// prefix says nothing the image or the registries.conf entry does not,
	// and is ignored.
	if eq := strings.IndexByte(in, '='); eq > 0 && !strings.Contains(in[:eq], ":") {
		in = strings.TrimSpace(in[eq+1:])
	}
	kind, arg, hasArg := strings.Cut(in, ":")
	// Kinds are matched in any case ("PullSecret:"), as upstream does.
	kind = strings.ToLower(kind)
	known := slices.Contains(kindNames[1:], kind)
	fail := func(format string, args ...any) (Ref, error) {
		e := &RefError{Err: fmt.Errorf(format, args...)}
		if known {
			e.Kind = kind
		}
		return Ref{}, e
	}
	if in == "" {
		return Ref{}, &RefError{Err: fmt.Errorf("%w; want one of %s", errEmptyRef, credentialForms)}
	}
	switch kind {
	case "pullsecret":
		if !hasArg {
			return fail("want pullsecret:<namespace>/<name>")
		}
		ns, n, err := parseNamespacedName(arg)
		if err != nil {
			return fail("%v", err)
		}
		return Ref{Kind: KindPullSecret, Namespace: ns, Name: n}, nil
	case "secret":
		if !hasArg {
			return fail("want secret:<namespace>/<name>#<field>")
		}
		nsName, field, ok := strings.Cut(arg, "#")
		if !ok || field == "" {
			return fail("missing field: want secret:<namespace>/<name>#<field>")
		}
		ns, n, err := parseNamespacedName(nsName)
		if err != nil {
			return fail("%v", err)
		}
		if len(field) > 253 || !secretKeyRE.MatchString(field) {
			return fail("the field is not a valid Secret key (letters, digits, '-', '_', '.')")
		}
		return Ref{Kind: KindSecret, Namespace: ns, Name: n, Field: field}, nil
	case "env":
		if !hasArg || arg == "" {
			return fail("missing variable name: want env:<VAR>")
		}
		if !envVarRE.MatchString(arg) {
			return fail("not a valid environment variable name (letters, digits, '-', '_', '.'; not starting with a digit)")
		}
		return Ref{Kind: KindEnv, Var: arg}, nil
	case "ext":
		if !hasArg || arg == "" {
			return fail("missing script path: want ext:<absolute path>")
		}
		if !filepath.IsAbs(arg) || strings.ContainsRune(arg, 0) {
			return fail("the script path is not absolute")
		}
		return Ref{Kind: KindExt, Path: arg}, nil
	case "ecr":
		if !hasArg {
			return Ref{Kind: KindECR}, nil
		}
		if !roleARNRE.MatchString(arg) {
			return fail("not an IAM role ARN (%s)", roleARNForm)
		}
		return Ref{Kind: KindECR, RoleARN: arg}, nil
	case "gcp":
		if hasArg {
			return fail("gcp takes no argument")
		}
		return Ref{Kind: KindGCP}, nil
	case "azure":
		if hasArg {
			return fail("azure takes no argument")
		}
		return Ref{Kind: KindAzure}, nil
	}
	return fail("unknown kind; want one of %s", credentialForms)
}

// parseNamespacedName reads <namespace>/<name>. Its errors say which part
// is wrong without quoting it.
func parseNamespacedName(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" {
		return "", "", errors.New("not <namespace>/<name>")
	}
	if len(namespace) > 63 || !dnsLabelRE.MatchString(namespace) {
		return "", "", errors.New("the namespace is not a valid namespace name")
	}
	if len(name) > 253 || !dnsSubdomainRE.MatchString(name) {
		return "", "", errors.New("the name is not a valid Secret name")
	}
	return namespace, name, nil
}
