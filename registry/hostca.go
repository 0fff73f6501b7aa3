package registry

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/utils/lru"

	"github.com/image-updater/argocd-image-updater/registry/config"
)

// maxHostCABytes bounds one host's CA file: a full system bundle is about
// 200 KB.
const maxHostCABytes = 1 << 20

// WithHostCAs trusts, for a registry whose API host has a file of that
// name in dir, the PEM certificates in it besides the system's roots,
// without a registries.conf entry for it. dir is laid out as Argo CD's
// argocd-tls-certs-cm, which argocd-operator mounts at /app/config/tls:
// one file per host name, without port (a ConfigMap key cannot hold a
// colon), as v1.3.0 reads it. An entry with ca_file or `insecure: true`
// is not looked up; ca_data adds to the file. A file that changes is read
// again, and the registry's connections start anew.
func WithHostCAs(dir string) Option {
	return func(c *Client) {
		if dir != "" {
			c.hostCAs = &hostCAs{dir: dir, files: lru.New(hostCacheSize)}
		}
	}
}

// hostCAs reads the CA files of WithHostCAs, each again only when it
// changed.
type hostCAs struct {
	dir string

	mu    sync.Mutex
	files *lru.Cache // host → *hostCA
}

// hostCA is one host's file as last read.
type hostCA struct {
	info fs.FileInfo // the file read; another file, or a change, is read again
	pem  []byte
	id   string // the content's hash, which a stack is built for
}

// forEndpoint is the CA file of ep's API host; nil when there is none or
// the entry does not take one.
func (h *hostCAs) forEndpoint(ep config.Endpoint) (*hostCA, error) {
	if h == nil || ep.Insecure || ep.TLS != nil && ep.TLS.CAFile {
		return nil, nil
	}
	u, err := url.Parse(ep.APIURL)
	if err != nil || u.Scheme != "https" {
		return nil, nil
	}
	return h.lookup(strings.ToLower(u.Hostname()))
}

func (h *hostCAs) lookup(host string) (*hostCA, error) {
	// A host name is one path element; the folder of a mounted ConfigMap
	// holds its own entries ("..data") besides the keys.
	if host == "" || strings.HasPrefix(host, ".") || strings.ContainsAny(host, `/\`) {
		return nil, nil
	}
	name := filepath.Join(h.dir, host)
	st, err := os.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		h.forget(host)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CA file %s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return nil, nil
	}
	h.mu.Lock()
	v, ok := h.files.Get(host)
	h.mu.Unlock()
	if ok {
		if ca := v.(*hostCA); os.SameFile(ca.info, st) && ca.info.ModTime().Equal(st.ModTime()) && ca.info.Size() == st.Size() {
			return ca, nil
		}
	}
	ca, err := readHostCA(name)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.files.Add(host, ca)
	h.mu.Unlock()
	return ca, nil
}

func (h *hostCAs) forget(host string) {
	h.mu.Lock()
	h.files.Remove(host)
	h.mu.Unlock()
}

// readHostCA reads a CA file, through a root at its folder so that a
// symbolic link cannot lead out of it (the mounted ConfigMap's links
// stay inside).
func readHostCA(name string) (*hostCA, error) {
	root, err := os.OpenRoot(filepath.Dir(name))
	if err != nil {
		return nil, fmt.Errorf("CA file %s: %w", name, err)
	}
	defer root.Close()
	f, err := root.Open(filepath.Base(name))
	if err != nil {
		return nil, fmt.Errorf("CA file %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("CA file %s: %w", name, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxHostCABytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("CA file %s: %w", name, err)
	case len(data) > maxHostCABytes:
		return nil, fmt.Errorf("CA file %s is larger than %d bytes", name, maxHostCABytes)
	case !x509.NewCertPool().AppendCertsFromPEM(data):
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", name)
	}
	sum := sha256.Sum256(data)
	return &hostCA{info: st, pem: data, id: hex.EncodeToString(sum[:])}, nil
}
