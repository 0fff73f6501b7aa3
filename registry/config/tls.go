package config

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// TLS is what an entry adds to the default TLS settings of its registry:
// roots to trust besides the system's (ca_file, ca_data) and a client
// certificate (client_cert_file, client_key_file). The files are read when
// the configuration is parsed; Watch parses again when one of them
// changes.
type TLS struct {
	// RootCAs are the system's roots plus the entry's CAs; nil when the
	// entry names none, which means the system's roots alone.
	RootCAs *x509.CertPool
	// Certificate is presented when the registry asks for a client
	// certificate; nil when the entry has none.
	Certificate *tls.Certificate
	// ID is the same for the same material and differs otherwise, so that
	// a reload that changes nothing keeps the registry's connections.
	ID string
	// CAFile tells that the entry names a ca_file: the CAs of its host's
	// file in the folder of Argo CD's TLS certificates are then not added
	// (as v1.3.0 does; ca_data adds to them).
	CAFile bool
}

// tlsFields are the TLS fields of one entry as found in the file.
type tlsFields struct {
	caFile, caData, certFile, keyFile *yaml.Node
}

// tls reads and checks the TLS fields of registries[i]; nil when there
// are none. Problems are recorded with their line and field.
func (p *configParser) tls(path string, f tlsFields) (*TLS, []string) {
	if f.caFile == nil && f.caData == nil && f.certFile == nil && f.keyFile == nil {
		return nil, nil
	}
	before := len(p.errs)
	id := sha256.New()
	var files []string
	var roots *x509.CertPool
	addRoots := func(n *yaml.Node, field string, pemData []byte, what string) {
		if !x509.NewCertPool().AppendCertsFromPEM(pemData) {
			p.errorf(n, field, "%sholds no PEM certificate", what)
			return
		}
		if roots == nil {
			var err error
			if roots, err = x509.SystemCertPool(); err != nil {
				roots = x509.NewCertPool()
			}
		}
		roots.AppendCertsFromPEM(pemData)
		fmt.Fprintf(id, "roots %d\n%s\n", len(pemData), pemData)
	}
	if f.caData != nil {
		if s, ok := p.scalar(f.caData, path+".ca_data", "PEM certificates"); ok {
			addRoots(f.caData, path+".ca_data", []byte(s), "")
		}
	}
	if f.caFile != nil {
		field := path + ".ca_file"
		if name, data, ok := p.readFile(f.caFile, field); ok {
			files = append(files, name)
			addRoots(f.caFile, field, data, name+" ")
		}
	}

	var cert *tls.Certificate
	switch {
	case f.certFile != nil && f.keyFile == nil:
		p.errorf(f.certFile, path+".client_cert_file", "needs client_key_file as well")
	case f.keyFile != nil && f.certFile == nil:
		p.errorf(f.keyFile, path+".client_key_file", "needs client_cert_file as well")
	case f.certFile != nil:
		certName, certPEM, certOK := p.readFile(f.certFile, path+".client_cert_file")
		keyName, keyPEM, keyOK := p.readFile(f.keyFile, path+".client_key_file")
		if !certOK || !keyOK {
			break
		}
		files = append(files, certName, keyName)
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// The error names what does not fit, never the key.
			p.errorf(f.certFile, path+".client_cert_file", "%s and %s are not a certificate and its key: %v", certName, keyName, err)
			break
		}
		cert = &c
		fmt.Fprintf(id, "cert %d\n%s\nkey %d\n%s\n", len(certPEM), certPEM, len(keyPEM), keyPEM)
	}
	if len(p.errs) > before || (roots == nil && cert == nil) {
		return nil, files
	}
	return &TLS{RootCAs: roots, Certificate: cert, ID: hex.EncodeToString(id.Sum(nil)), CAFile: f.caFile != nil}, files
}

// readFile reads the file a field names, which must be an absolute path:
// relative to what would depend on where the controller was started.
func (p *configParser) readFile(n *yaml.Node, field string) (name string, data []byte, ok bool) {
	name, ok = p.scalar(n, field, "an absolute file path")
	if !ok || name == "" {
		if ok {
			p.errorf(n, field, "empty file path")
		}
		return "", nil, false
	}
	if !filepath.IsAbs(name) {
		p.errorf(n, field, "%q is not an absolute path", name)
		return "", nil, false
	}
	data, err := os.ReadFile(name)
	if err != nil {
		p.errorf(n, field, "%v", err)
		return "", nil, false
	}
	return name, data, true
}
