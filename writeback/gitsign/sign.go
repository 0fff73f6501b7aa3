// Package gitsign signs commits the way git does: an OpenPGP key (from a
// key file or the GnuPG keyring) or an SSH key, making the signature git
// stores in a commit's gpgsig header.
package gitsign

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Commit signing methods (--git-commit-signing-method).
const (
	MethodOpenPGP = "openpgp"
	MethodSSH     = "ssh"
)

// Signer signs the encoding of a commit without its signature and
// returns the armored signature git stores in the gpgsig header. It has
// the shape of go-git's Signer.
type Signer interface {
	Sign(message io.Reader) ([]byte, error)
}

// Load reads a signing key: for "openpgp", an armored (or binary)
// OpenPGP private key file, or the name of a key (key ID, fingerprint,
// user ID) in the GnuPG keyring in gnupgHome when no file has that name;
// for "ssh", an OpenSSH private key file. Keys protected by a passphrase
// are refused, since nobody could type it.
func Load(key, method, gnupgHome string, now time.Time) (Signer, error) {
	if method != MethodOpenPGP && method != "" && method != MethodSSH {
		return nil, fmt.Errorf("unknown signing method %q: use %s or %s", method, MethodOpenPGP, MethodSSH)
	}
	data, err := os.ReadFile(key)
	if err != nil {
		if method != MethodSSH && errors.Is(err, fs.ErrNotExist) && isKeyringName(key) {
			if data, err = exportGnuPGKey(key, gnupgHome); err != nil {
				return nil, err
			}
			return loadOpenPGPSigner(fmt.Sprintf("%q of the GnuPG keyring in %s", key, gnupgHome), key, data, now)
		}
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	if method == MethodSSH {
		signer, err := ssh.ParsePrivateKey(data)
		if err != nil {
			var missing *ssh.PassphraseMissingError
			if errors.As(err, &missing) {
				return nil, fmt.Errorf("SSH signing key %s is protected by a passphrase, which is not supported", key)
			}
			return nil, fmt.Errorf("SSH signing key %s: %w", key, err)
		}
		return sshSigner{key: signer}, nil
	}
	return loadOpenPGPSigner(key, "", data, now)
}

// loadOpenPGPSigner picks the key to sign with from data: the first one
// that can sign, or, when name is a key ID or fingerprint, the one it
// designates (gpg exports every key a user ID matches).
func loadOpenPGPSigner(what, name string, data []byte, now time.Time) (Signer, error) {
	entities, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
	if err != nil {
		if entities, err = openpgp.ReadKeyRing(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("OpenPGP signing key %s: %w", what, err)
		}
	}
	if id := hexKeyID(name); id != "" {
		entities = slices.DeleteFunc(entities, func(e *openpgp.Entity) bool { return !designates(e, id) })
	}
	for _, e := range entities {
		key, ok := e.SigningKey(now)
		if !ok || key.PrivateKey == nil {
			continue
		}
		if key.PrivateKey.Encrypted {
			return nil, fmt.Errorf("OpenPGP signing key %s is protected by a passphrase, which is not supported", what)
		}
		return openPGPSigner{entity: e}, nil
	}
	return nil, fmt.Errorf("OpenPGP signing key %s holds no private key that can sign", what)
}

// hexKeyID is name as upper-case hex when it is a key ID or fingerprint
// in one of the spellings gpg accepts (0x prefix, spaces, a trailing !),
// else "".
func hexKeyID(name string) string {
	id := strings.ToUpper(strings.ReplaceAll(strings.TrimSuffix(name, "!"), " ", ""))
	id = strings.TrimPrefix(id, "0X")
	switch len(id) {
	case 8, 16, 40, 64:
	default:
		return ""
	}
	if strings.Trim(id, "0123456789ABCDEF") != "" {
		return ""
	}
	return id
}

// designates tells whether the hex key ID or fingerprint id names e's
// primary key or one of its subkeys.
func designates(e *openpgp.Entity, id string) bool {
	matches := func(fingerprint []byte) bool {
		return strings.HasSuffix(strings.ToUpper(hex.EncodeToString(fingerprint)), id)
	}
	if matches(e.PrimaryKey.Fingerprint) {
		return true
	}
	for _, sub := range e.Subkeys {
		if matches(sub.PublicKey.Fingerprint) {
			return true
		}
	}
	return false
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
