package repoaccess

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/image-updater/argocd-image-updater/internal/budget"
)

// transportBytes is what one kept transport is counted for: its idle
// connections (two a host, each with its TLS state and read and write
// buffers) rather than the struct itself.
const transportBytes = 64 << 10

// DefaultKeptTransports bounds the transports kept between cycles: 64 at
// transportBytes each.
const DefaultKeptTransports = 4 << 20

// Transports keeps the HTTP transports that Resolvers build, between the
// cycles that build a Resolver each, so that a repository's connections
// are reused from one cycle to the next. A transport is kept by all that
// shapes it (host, TLS roots, client certificate, insecure, proxy), never
// by who asked; credentials sent per request are not part of it. The
// least recently used is dropped beyond the bound in bytes; its idle
// connections close after the transport's idle timeout.
type Transports struct {
	kept *budget.LRU[string, keptTransport]
}

type keptTransport struct{ tr *http.Transport }

func (keptTransport) Bytes() int64 { return transportBytes }

// NewTransports keeps transports within limit bytes (DefaultKeptTransports
// when limit <= 0).
func NewTransports(limit int64) *Transports {
	if limit <= 0 {
		limit = DefaultKeptTransports
	}
	return &Transports{kept: budget.NewLRU[string, keptTransport](limit)}
}

// ResolverOption changes how a Resolver works.
type ResolverOption func(*Resolver)

// KeepTransports has the Resolver take its HTTP transports from t, and
// keep those it builds there.
func KeepTransports(t *Transports) ResolverOption { return func(r *Resolver) { r.transports = t } }

// transportKey identifies a transport by what shapes it; the client key
// is hashed with the rest, so that the key holds no secret.
func transportKey(host string, c Credentials, roots string) string {
	h := sha256.New()
	for _, part := range []string{host, c.Proxy, c.TLSClientCert, c.TLSClientKey, roots} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	if c.Insecure {
		h.Write([]byte{1})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// get is the transport for key, built by build when none is kept.
func (t *Transports) get(key string, build func() (*http.Transport, error)) (*http.Transport, error) {
	if k, ok := t.kept.Get(key); ok {
		return k.tr, nil
	}
	tr, err := build()
	if err != nil {
		return nil, err
	}
	t.kept.Put(key, keptTransport{tr})
	return tr, nil
}
