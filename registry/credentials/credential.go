package credentials

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// Credential is a username and password for a registry. Its String, Format,
// GoString, LogValue and MarshalJSON all replace a non-empty password with
// "<redacted>", so a credential cannot leak through a log line or an error
// by accident. Code that needs the password reads the field.
type Credential struct {
	Username string
	Password string
}

const redacted = credref.Redacted

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
	return fmt.Sprintf("credentials.Credential{Username:%q, Password:%q}", c.Username, c.shownPassword())
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
