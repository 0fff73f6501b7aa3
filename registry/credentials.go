package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// CredentialKind says where a credential reference takes its credentials from.
type CredentialKind int

// The zero CredentialKind is no kind, so the zero CredentialRef means "no
// credentials".
const (
	CredentialPullSecret CredentialKind = iota + 1 // pullsecret:<ns>/<name>
	CredentialSecret                               // secret:<ns>/<name>#<field>
	CredentialEnv                                  // env:<VAR>
	CredentialExt                                  // ext:<absolute path>
	CredentialECR                                  // ecr or ecr:<role ARN>
	CredentialGCP                                  // gcp
)

var credentialKindNames = [...]string{
	CredentialPullSecret: "pullsecret",
	CredentialSecret:     "secret",
	CredentialEnv:        "env",
	CredentialExt:        "ext",
	CredentialECR:        "ecr",
	CredentialGCP:        "gcp",
}

// String is the kind's prefix in a reference ("pullsecret", "ecr").
func (k CredentialKind) String() string {
	if k > 0 && int(k) < len(credentialKindNames) {
		return credentialKindNames[k]
	}
	return "CredentialKind(" + strconv.Itoa(int(k)) + ")"
}

// Native reports whether credentials of this kind come from a cloud
// provider's SDK rather than from Kubernetes, the environment or a script.
func (k CredentialKind) Native() bool { return k == CredentialECR || k == CredentialGCP }

// CredentialRef is a parsed credential reference. Only the fields of its Kind
// are set. A reference names where a secret lives and never holds one, so it
// is safe to print.
type CredentialRef struct {
	Kind      CredentialKind
	Namespace string // pullsecret, secret
	Name      string // pullsecret, secret
	Field     string // secret
	Var       string // env
	Path      string // ext
	RoleARN   string // ecr; "" = the default credential chain's own identity
}

// IsZero reports whether r is the zero reference (no credentials).
func (r CredentialRef) IsZero() bool { return r == CredentialRef{} }

// String gives the reference back in the form ParseCredentialRef reads.
func (r CredentialRef) String() string {
	switch r.Kind {
	case CredentialPullSecret:
		return "pullsecret:" + r.Namespace + "/" + r.Name
	case CredentialSecret:
		return "secret:" + r.Namespace + "/" + r.Name + "#" + r.Field
	case CredentialEnv:
		return "env:" + r.Var
	case CredentialExt:
		return "ext:" + r.Path
	case CredentialECR:
		if r.RoleARN != "" {
			return "ecr:" + r.RoleARN
		}
		return "ecr"
	case CredentialGCP:
		return "gcp"
	}
	if r.IsZero() {
		return ""
	}
	return r.Kind.String()
}

// ErrInvalidCredentialRef is matched (errors.Is) by every error of
// ParseCredentialRef.
var ErrInvalidCredentialRef = errors.New("invalid credential reference")

// ErrNoNativeCredentials is wrapped by a NativeProvider's error when the
// environment offers no credentials of its kind at all (no cloud identity,
// no credentials file), so that a caller that chose the provider on its own
// can fall back to anonymous access instead of failing.
var ErrNoNativeCredentials = errors.New("no native cloud credentials available")

// CredentialRefError describes a credential reference that could not be
// parsed.
type CredentialRefError struct {
	Ref string // the reference as given
	Err error  // why it was rejected
}

func (e *CredentialRefError) Error() string {
	return fmt.Sprintf("invalid credential reference %q: %v", e.Ref, e.Err)
}

func (e *CredentialRefError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalidCredentialRef) true.
func (e *CredentialRefError) Is(target error) bool { return target == ErrInvalidCredentialRef }

// Kubernetes name rules, checked here so that a typo fails at parse time
// instead of as a confusing API error on every update cycle.
var (
	dnsLabelRE     = regexp.MustCompile(`^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomainRE = regexp.MustCompile(`^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$`)
	secretKeyRE    = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	envVarRE       = regexp.MustCompile(`^[^=\x00\s]+$`)
	roleARNRE      = regexp.MustCompile(`^arn:aws(?:-[a-z]+)*:iam::[0-9]{12}:role/(?:[A-Za-z0-9+=,.@_/-]*/)?[A-Za-z0-9+=,.@_-]{1,64}$`)
)

const credentialForms = "pullsecret:<namespace>/<name>, secret:<namespace>/<name>#<field>, env:<VAR>, ext:<absolute path>, ecr, ecr:<role ARN> or gcp"

// ParseCredentialRef parses a credential reference as written in
// registries.conf or in a pull-secret annotation. Surrounding white space is
// ignored.
func ParseCredentialRef(s string) (CredentialRef, error) {
	fail := func(format string, args ...any) (CredentialRef, error) {
		return CredentialRef{}, &CredentialRefError{Ref: s, Err: fmt.Errorf(format, args...)}
	}
	in := strings.TrimSpace(s)
	if in == "" {
		return fail("empty reference; want one of %s", credentialForms)
	}
	kind, arg, hasArg := strings.Cut(in, ":")
	switch kind {
	case "pullsecret":
		if !hasArg {
			return fail("want pullsecret:<namespace>/<name>")
		}
		ns, n, err := parseNamespacedName(arg)
		if err != nil {
			return fail("%v", err)
		}
		return CredentialRef{Kind: CredentialPullSecret, Namespace: ns, Name: n}, nil
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
			return fail("field %q is not a valid Secret key (letters, digits, '-', '_', '.')", field)
		}
		return CredentialRef{Kind: CredentialSecret, Namespace: ns, Name: n, Field: field}, nil
	case "env":
		if !hasArg || arg == "" {
			return fail("missing variable name: want env:<VAR>")
		}
		if !envVarRE.MatchString(arg) {
			return fail("%q is not a valid environment variable name", arg)
		}
		return CredentialRef{Kind: CredentialEnv, Var: arg}, nil
	case "ext":
		if !hasArg || arg == "" {
			return fail("missing script path: want ext:<absolute path>")
		}
		if !filepath.IsAbs(arg) || strings.ContainsRune(arg, 0) {
			return fail("script path %q is not absolute", arg)
		}
		return CredentialRef{Kind: CredentialExt, Path: arg}, nil
	case "ecr":
		if !hasArg {
			return CredentialRef{Kind: CredentialECR}, nil
		}
		if !roleARNRE.MatchString(arg) {
			return fail("%q is not an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)", arg)
		}
		return CredentialRef{Kind: CredentialECR, RoleARN: arg}, nil
	case "gcp":
		if hasArg {
			return fail("gcp takes no argument")
		}
		return CredentialRef{Kind: CredentialGCP}, nil
	}
	return fail("unknown kind %q; want one of %s", kind, credentialForms)
}

func parseNamespacedName(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" {
		return "", "", fmt.Errorf("%q is not <namespace>/<name>", s)
	}
	if len(namespace) > 63 || !dnsLabelRE.MatchString(namespace) {
		return "", "", fmt.Errorf("%q is not a valid namespace name", namespace)
	}
	if len(name) > 253 || !dnsSubdomainRE.MatchString(name) {
		return "", "", fmt.Errorf("%q is not a valid Secret name", name)
	}
	return namespace, name, nil
}

// Credential is a username and password for a registry. Its String, Format,
// GoString, LogValue and MarshalJSON all replace a non-empty password with
// "<redacted>", so a credential cannot leak through a log line or an error
// by accident. Code that needs the password reads the field.
type Credential struct {
	Username string
	Password string
}

const redacted = "<redacted>"

// IsZero reports whether c is empty, that is anonymous access.
func (c Credential) IsZero() bool { return c == Credential{} }

func (c Credential) shownPassword() string {
	if c.Password == "" {
		return ""
	}
	return redacted
}

// String shows the username and hides the password.
func (c Credential) String() string {
	return fmt.Sprintf("{Username:%q Password:%q}", c.Username, c.shownPassword())
}

// GoString is used by %#v; it hides the password too.
func (c Credential) GoString() string {
	return fmt.Sprintf("registry.Credential{Username:%q, Password:%q}", c.Username, c.shownPassword())
}

// Format routes every verb through String or GoString, so that no verb
// (%x, %+v, ...) prints the password.
func (c Credential) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = f.Write([]byte(c.GoString()))
	case verb == 'q':
		_, _ = f.Write([]byte(strconv.Quote(c.String())))
	default:
		_, _ = f.Write([]byte(c.String()))
	}
}

// LogValue makes slog print the username and a redacted password.
func (c Credential) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("username", c.Username),
		slog.String("password", c.shownPassword()),
	)
}

// MarshalJSON hides the password as well, for the same reason.
func (c Credential) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}{c.Username, c.shownPassword()})
}

// parseUserPass splits "username:password" at the first colon. The error
// deliberately says nothing about the value.
func parseUserPass(v string) (Credential, error) {
	v = strings.TrimSpace(v)
	user, pass, ok := strings.Cut(v, ":")
	if !ok || user == "" || strings.ContainsAny(v, "\r\n") {
		return Credential{}, fmt.Errorf("%w: the value is not a single line of the form username:password", ErrMalformedCredential)
	}
	return Credential{Username: user, Password: pass}, nil
}
