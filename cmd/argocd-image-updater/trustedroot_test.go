package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/testing/ca"

	"github.com/image-updater/argocd-image-updater/test/testenv/sigstoretest"
)

// The trusted root for keyless signatures is read once at start; one that
// cannot be read or parsed stops the start, naming the flag.
func TestLoadTrustedRoot(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "trusted_root.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, sigstoretest.TrustedRootJSON(t, vs, false), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"mediaType": "nope"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, wantErr string
		wantRoot            bool
	}{
		{name: "none"},
		{name: "a root", path: good, wantRoot: true},
		{name: "missing", path: filepath.Join(dir, "missing.json"), wantErr: "--sigstore-trusted-root: open"},
		{name: "not a root", path: bad, wantErr: "--sigstore-trusted-root " + bad + ": not a Sigstore trusted root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := loadTrustedRoot(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || (root != nil) != tt.wantRoot {
				t.Fatalf("root %v, error %v", root, err)
			}
		})
	}
}
