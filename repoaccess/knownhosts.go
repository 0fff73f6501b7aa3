package repoaccess

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// HostKeyCallback checks SSH host keys against the known_hosts lines of
// Argo CD's argocd-ssh-known-hosts-cm, with errors that name the host.
func (r *Resolver) HostKeyCallback(ctx context.Context) (ssh.HostKeyCallback, error) {
	r.hostsOnce.Do(func() { r.hostKeys, r.hostsErr = r.loadKnownHosts(ctx) })
	return r.hostKeys, r.hostsErr
}

func (r *Resolver) loadKnownHosts(ctx context.Context) (ssh.HostKeyCallback, error) {
	where := "ConfigMap " + r.namespace + "/" + argoCDKnownHostsConfigMap
	cm, err := r.lister.ConfigMap(ctx, r.namespace, argoCDKnownHostsConfigMap)
	switch {
	case apierrors.IsNotFound(err):
		return func(host string, _ net.Addr, key ssh.PublicKey) error {
			return fmt.Errorf("SSH host key %s of %s cannot be checked: %s does not exist", ssh.FingerprintSHA256(key), host, where)
		}, nil
	case err != nil:
		return nil, fmt.Errorf("read SSH known hosts from %s: %w", where, err)
	}
	// The known_hosts parser reads files only; the file lives just long
	// enough to be parsed.
	f, err := os.CreateTemp(r.tempDir, "known_hosts-*")
	if err != nil {
		return nil, fmt.Errorf("read SSH known hosts: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(cm.Data[argoCDKnownHostsKey])
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("read SSH known hosts: %w", err)
	}
	check, err := knownhosts.New(f.Name())
	if err != nil {
		return nil, fmt.Errorf("parse key %s of %s: %w", argoCDKnownHostsKey, where, err)
	}
	return func(host string, remote net.Addr, key ssh.PublicKey) error {
		err := check(host, remote, key)
		var keyErr *knownhosts.KeyError
		switch {
		case errors.As(err, &keyErr) && len(keyErr.Want) == 0:
			return fmt.Errorf("SSH host key %s of %s is unknown: add it to %s: %w", ssh.FingerprintSHA256(key), host, where, err)
		case errors.As(err, &keyErr):
			return fmt.Errorf("SSH host key %s of %s does not match the keys in %s: %w", ssh.FingerprintSHA256(key), host, where, err)
		}
		return err
	}, nil
}
