package webhook

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// GoogleJWKS is where Google publishes the keys that sign the OIDC tokens
// of Pub/Sub push subscriptions.
const GoogleJWKS = "https://www.googleapis.com/oauth2/v3/certs"

// googleIssuers are the iss values of Google's OIDC tokens.
var googleIssuers = []string{"https://accounts.google.com", "accounts.google.com"}

// jwksRefresh bounds how often the keys are fetched again for a token
// signed by an unknown key, so that forged key IDs cannot make the
// controller hammer the key endpoint.
const jwksRefresh = time.Minute

// jwksTimeout bounds a fetch of the keys.
const jwksTimeout = 10 * time.Second

// maxJWKS bounds the key set read: Google's is a few kilobytes.
const maxJWKS = 1 << 20

// OIDCVerifier checks the OIDC token a Pub/Sub push subscription sends in
// the Authorization header: signed (RS256) by a key of the JWKS, issued
// by Google, for the audience the subscription was given and, when set,
// by the service account it was given.
type OIDCVerifier struct {
	audience, email, jwksURL string
	client                   *http.Client
	// timeout bounds one fetch of the keys: jwksTimeout.
	timeout time.Duration

	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey
	fetched time.Time
}

// NewOIDCVerifier checks tokens for audience, naming the service account
// email; jwksURL is GoogleJWKS unless the operator points elsewhere. Both
// are required: any Google account can have Google sign a token for any
// audience, so the audience alone admits anyone.
func NewOIDCVerifier(audience, email, jwksURL string, client *http.Client) (*OIDCVerifier, error) {
	if audience == "" {
		return nil, errors.New("an OIDC audience is required: the one the push subscription was given, by default its endpoint URL")
	}
	if email == "" {
		return nil, errors.New("the push subscription's service account is required with its audience: any Google account can obtain a Google-signed token for any audience")
	}
	if jwksURL == "" {
		jwksURL = GoogleJWKS
	}
	if client == nil {
		client = &http.Client{Timeout: jwksTimeout}
	}
	return &OIDCVerifier{audience: audience, email: email, jwksURL: jwksURL, client: client, timeout: jwksTimeout}, nil
}

// Verify checks the Authorization header's token.
func (v *OIDCVerifier) Verify(ctx context.Context, authorization string) error {
	raw, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || raw == "" {
		return errors.New("no Bearer token")
	}
	claims := jwt.MapClaims{}
	// The parser checks an expiry only when there is one unless told to
	// require it: a token without would be good for ever. Nor does it
	// check the issue time unless told; a token issued in the future is
	// refused, with no leeway, as before.
	_, err := jwt.ParseWithClaims(raw, claims, func(tok *jwt.Token) (any, error) {
		kid, _ := tok.Header["kid"].(string)
		return v.key(ctx, kid)
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	switch {
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return errors.New("token has no expiry")
	case err != nil:
		return fmt.Errorf("token: %w", err)
	}
	if aud, err := claims.GetAudience(); err != nil || !slices.Contains(aud, v.audience) {
		return fmt.Errorf("token audience is not %q", v.audience)
	}
	iss, _ := claims["iss"].(string)
	if iss != googleIssuers[0] && iss != googleIssuers[1] {
		return fmt.Errorf("token issuer %q is not Google", iss)
	}
	email, _ := claims["email"].(string)
	verified, _ := claims["email_verified"].(bool)
	if email != v.email || !verified {
		return fmt.Errorf("token is not of the service account %s", v.email)
	}
	return nil
}

// key is the public key kid, fetching the set again when kid is unknown
// and the last fetch is older than jwksRefresh.
func (v *OIDCVerifier) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[kid]; ok {
		return k, nil
	}
	if time.Since(v.fetched) < jwksRefresh {
		return nil, fmt.Errorf("unknown signing key %q", kid)
	}
	v.fetched = time.Now()
	// The fetch outlives the request that caused it: a sender that hangs
	// up at once must not spend the refresh, leaving a new key unknown.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.timeout)
	defer cancel()
	keys, err := v.fetch(fctx)
	if err != nil {
		return nil, err
	}
	v.keys = keys
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown signing key %q", kid)
}

func (v *OIDCVerifier) fetch(ctx context.Context) (map[string]*rsa.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.jwksURL, nil)
	if err != nil {
		return nil, fmt.Errorf("OIDC keys %s: %w", v.jwksURL, err)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("OIDC keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("OIDC keys %s: status %d", v.jwksURL, resp.StatusCode)
	}
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
			Kty string `json:"kty"`
			N   string `json:"n"`
			E   string `json:"e"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKS)).Decode(&set); err != nil {
		return nil, fmt.Errorf("OIDC keys %s: %w", v.jwksURL, err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" {
			continue
		}
		n, errN := base64.RawURLEncoding.DecodeString(k.N)
		e, errE := base64.RawURLEncoding.DecodeString(k.E)
		if errN != nil || errE != nil || len(e) == 0 || len(e) > 4 {
			continue
		}
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	return keys, nil
}
