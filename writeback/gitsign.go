package writeback

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Commit signing methods (--git-commit-signing-method).
const (
	SigningMethodOpenPGP = "openpgp"
	SigningMethodSSH     = "ssh"
)

// commitSigner signs the encoding of a commit without its signature and
// returns the armored signature git stores in the gpgsig header. It has
// the shape of go-git's Signer.
type commitSigner interface {
	Sign(message io.Reader) ([]byte, error)
}

// loadSigner reads a signing key file: an armored (or binary) OpenPGP
// private key for "openpgp", an OpenSSH private key for "ssh". Keys
// protected by a passphrase are refused, since nobody could type it.
func loadSigner(path, method string, now time.Time) (commitSigner, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	switch method {
	case SigningMethodOpenPGP, "":
		return loadOpenPGPSigner(path, data, now)
	case SigningMethodSSH:
		key, err := ssh.ParsePrivateKey(data)
		if err != nil {
			var missing *ssh.PassphraseMissingError
			if errors.As(err, &missing) {
				return nil, fmt.Errorf("SSH signing key %s is protected by a passphrase, which is not supported", path)
			}
			return nil, fmt.Errorf("SSH signing key %s: %w", path, err)
		}
		return sshSigner{key: key}, nil
	default:
		return nil, fmt.Errorf("unknown signing method %q: use %s or %s", method, SigningMethodOpenPGP, SigningMethodSSH)
	}
}

func loadOpenPGPSigner(path string, data []byte, now time.Time) (commitSigner, error) {
	entities, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
	if err != nil {
		if entities, err = openpgp.ReadKeyRing(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("OpenPGP signing key %s: %w", path, err)
		}
	}
	for _, e := range entities {
		key, ok := e.SigningKey(now)
		if !ok || key.PrivateKey == nil {
			continue
		}
		if key.PrivateKey.Encrypted {
			return nil, fmt.Errorf("OpenPGP signing key %s is protected by a passphrase, which is not supported", path)
		}
		return openPGPSigner{entity: e}, nil
	}
	return nil, fmt.Errorf("OpenPGP signing key %s holds no private key that can sign", path)
}

type openPGPSigner struct{ entity *openpgp.Entity }

func (s openPGPSigner) Sign(message io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&buf, s.entity, message, nil); err != nil {
		return nil, fmt.Errorf("OpenPGP sign: %w", err)
	}
	return buf.Bytes(), nil
}

// sshSigner makes the signatures `git commit -S` makes with
// gpg.format=ssh: SSHSIG in the "git" namespace over a SHA-512 hash of the
// commit, armored. For RSA keys the library signs with rsa-sha2-512, as
// ssh-keygen does; git refuses the SHA-1 "ssh-rsa" signatures.
type sshSigner struct{ key ssh.Signer }

func (s sshSigner) Sign(message io.Reader) ([]byte, error) {
	sig, err := sshsig.Sign(message, s.key, sshsig.HashSHA512, "git")
	if err != nil {
		return nil, fmt.Errorf("SSH sign: %w", err)
	}
	return sshsig.Armor(sig), nil
}
