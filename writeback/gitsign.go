package writeback

import (
	"bytes"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
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
// gpg.format=ssh: OpenSSH's SSHSIG format (PROTOCOL.sshsig) in the "git"
// namespace over a SHA-512 hash of the commit, armored.
type sshSigner struct{ key ssh.Signer }

const (
	sshsigMagic     = "SSHSIG"
	sshsigVersion   = 1
	sshsigNamespace = "git"
	sshsigHash      = "sha512"
)

func (s sshSigner) Sign(message io.Reader) ([]byte, error) {
	h := sha512.New()
	if _, err := io.Copy(h, message); err != nil {
		return nil, err
	}
	signed := []byte(sshsigMagic)
	signed = appendSSHString(signed, []byte(sshsigNamespace))
	signed = appendSSHString(signed, nil) // reserved
	signed = appendSSHString(signed, []byte(sshsigHash))
	signed = appendSSHString(signed, h.Sum(nil))

	var sig *ssh.Signature
	var err error
	// ssh-keygen signs with SHA-512 RSA signatures; plain Sign would pick
	// the SHA-1 "ssh-rsa" one that git refuses.
	if as, ok := s.key.(ssh.AlgorithmSigner); ok && s.key.PublicKey().Type() == ssh.KeyAlgoRSA {
		sig, err = as.SignWithAlgorithm(rand.Reader, signed, ssh.KeyAlgoRSASHA512)
	} else {
		sig, err = s.key.Sign(rand.Reader, signed)
	}
	if err != nil {
		return nil, fmt.Errorf("SSH sign: %w", err)
	}

	blob := []byte(sshsigMagic)
	blob = binary.BigEndian.AppendUint32(blob, sshsigVersion)
	blob = appendSSHString(blob, s.key.PublicKey().Marshal())
	blob = appendSSHString(blob, []byte(sshsigNamespace))
	blob = appendSSHString(blob, nil)
	blob = appendSSHString(blob, []byte(sshsigHash))
	blob = appendSSHString(blob, ssh.Marshal(sig))
	return armorSSHSignature(blob), nil
}

func appendSSHString(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// armorSSHSignature wraps the base64 text at 70 columns like ssh-keygen.
func armorSSHSignature(blob []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(blob)
	var buf bytes.Buffer
	buf.WriteString("-----BEGIN SSH SIGNATURE-----\n")
	for len(enc) > 70 {
		buf.WriteString(enc[:70] + "\n")
		enc = enc[70:]
	}
	buf.WriteString(enc + "\n-----END SSH SIGNATURE-----\n")
	return buf.Bytes()
}
