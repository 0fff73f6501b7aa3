package gitsign

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// gnupgTimeout bounds reading a key with gpg, which runs once, at start.
const gnupgTimeout = 30 * time.Second

// isKeyringName tells a GnuPG key name (key ID, fingerprint, user ID)
// from a file path: the signing key of the old updater was a key ID that
// git handed to gpg, so a value without a path separator that is not a
// file is looked up in the keyring.
func isKeyringName(key string) bool {
	return key != "" && !strings.ContainsRune(key, filepath.Separator)
}

// exportGnuPGKey reads the secret key that name designates from the
// GnuPG keyring in home, armored, with gpg --export-secret-keys: gpg
// knows every keyring layout its versions have used, which reading the
// files here would not. gpg works on a private copy of home, because it
// writes to its home (agent sockets, trust database, locks) and home is
// usually a read-only Secret or ConfigMap mount; the copy, and the agent
// gpg starts for it, are gone when this returns. Keys protected by a
// passphrase cannot be exported without one and are refused.
func exportGnuPGKey(name, home string) ([]byte, error) {
	where := fmt.Sprintf("signing key %q is not a file, and no secret key of that name could be read from the GnuPG keyring in %s (GNUPGHOME)", name, home)
	gpg, err := exec.LookPath("gpg")
	if err != nil {
		return nil, fmt.Errorf("%s: gpg is not installed", where)
	}
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s: the folder does not exist", where)
	}
	work, err := os.MkdirTemp("", "gnupg-")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	defer os.RemoveAll(work)
	if err := copyKeyring(home, work); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	defer stopGnuPGAgent(work)

	ctx, cancel := context.WithTimeout(context.Background(), gnupgTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, gpg, "--homedir", work, "--batch", "--no-tty",
		"--pinentry-mode", "loopback", "--passphrase", "", "--armor", "--export-secret-keys", "--", name)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "GNUPGHOME="+work)
	runErr := cmd.Run()
	if stdout.Len() == 0 || runErr != nil {
		var reason string
		switch {
		case strings.Contains(strings.ToLower(stderr.String()), "passphrase"):
			reason = "the key is protected by a passphrase, which is not supported"
		case runErr == nil:
			reason = "gpg has no secret key of that name"
		case lastLine(stderr.String()) != "":
			reason = lastLine(stderr.String())
		default:
			reason = runErr.Error()
		}
		return nil, fmt.Errorf("%s: %s", where, reason)
	}
	return stdout.Bytes(), nil
}

// copyKeyring copies the regular files of a GnuPG home, recursively and
// following symbolic links, as Kubernetes mounts Secret and ConfigMap
// entries through them. Sockets of a running agent, lock files and the
// folders behind Kubernetes' links (named "..something") stay behind.
func copyKeyring(from, to string) error {
	return copyKeyringFolder(from, to, 0)
}

func copyKeyringFolder(from, to string, depth int) error {
	if depth > 4 {
		return nil
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") || strings.HasSuffix(name, ".lock") {
			continue
		}
		src, dst := filepath.Join(from, name), filepath.Join(to, name)
		fi, err := os.Stat(src)
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			if err := os.Mkdir(dst, 0o700); err != nil {
				return err
			}
			if err := copyKeyringFolder(src, dst, depth+1); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := copyFile(src, dst); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}

// stopGnuPGAgent ends the agent gpg started for home. It would end by
// itself once home is removed; this only makes it prompt.
func stopGnuPGAgent(home string) {
	gpgconf, err := exec.LookPath("gpgconf")
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpgconf, "--homedir", home, "--kill", "gpg-agent")
	cmd.Env = append(os.Environ(), "GNUPGHOME="+home)
	_ = cmd.Run()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(strings.TrimPrefix(lines[len(lines)-1], "gpg: "))
}
