package credentials

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// envVars serves env:<VAR> references: the variable holds username:password.
type envVars struct {
	lookup func(string) (string, bool)
}

func (s envVars) Credential(_ context.Context, ref credref.Ref, _ Target) (Credential, time.Time, error) {
	v, ok := s.lookup(ref.Var)
	if !ok {
		return Credential{}, time.Time{}, fmt.Errorf("%w: environment variable %s is not set", ErrNotFound, ref.Var)
	}
	c, err := parseUserPass(v)
	if err != nil {
		return Credential{}, time.Time{}, fmt.Errorf("environment variable %s: %w", ref.Var, err)
	}
	return c, time.Time{}, nil
}

// secretFields serves secret:<ns>/<name>#<field> references: the field
// holds username:password.
type secretFields struct {
	secrets SecretGetter
}

func (s secretFields) Credential(ctx context.Context, ref credref.Ref, _ Target) (Credential, time.Time, error) {
	data, err := getSecret(ctx, s.secrets, ref)
	if err != nil {
		return Credential{}, time.Time{}, err
	}
	v, ok := data[ref.Field]
	if !ok {
		return Credential{}, time.Time{}, fmt.Errorf("%w: secret %s/%s has no field %q", ErrNotFound, ref.Namespace, ref.Name, ref.Field)
	}
	c, err := parseUserPass(string(v))
	if err != nil {
		return Credential{}, time.Time{}, fmt.Errorf("field %q of secret %s/%s: %w", ref.Field, ref.Namespace, ref.Name, err)
	}
	return c, time.Time{}, nil
}

func getSecret(ctx context.Context, g SecretGetter, ref credref.Ref) (map[string][]byte, error) {
	if g == nil {
		return nil, ErrNoSecretGetter
	}
	data, err := g.GetSecret(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("reading secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return data, nil
}

// parseUserPass splits "username:password" at the first colon. The error
// deliberately says nothing about the value.
func parseUserPass(v string) (Credential, error) {
	v = strings.TrimSpace(v)
	user, pass, ok := strings.Cut(v, ":")
	if !ok || user == "" || strings.ContainsAny(v, "\r\n") {
		return Credential{}, fmt.Errorf("%w: the value is not a single line of the form username:password", ErrMalformed)
	}
	return Credential{Username: user, Password: pass}, nil
}
