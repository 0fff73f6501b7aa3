package v1alpha1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent regenerates the CRD and the deep-copy
// functions from the Go types and compares them with the committed ones.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("go", append([]string{"tool", "controller-gen"}, args...)...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("controller-gen %v: %v\n%s", args, err, stderr.Bytes())
		}
		return b
	}
	run("crd", "paths=./api/...", "output:crd:artifacts:config="+out)
	// The object generator writes beside the types unless told stdout.
	if err := os.WriteFile(filepath.Join(out, "zz_generated.deepcopy.go"), run("object", "paths=./api/...", "output:object:stdout"), 0o600); err != nil {
		t.Fatal(err)
	}

	const crd = "argocd-image-updater.argoproj.io_imageupdaters.yaml"
	for committed, generated := range map[string]string{
		"manifests/base/crd/" + crd:                crd,
		"charts/argocd-image-updater/files/" + crd: crd,
		"api/v1alpha1/zz_generated.deepcopy.go":    "zz_generated.deepcopy.go",
	} {
		want, err := os.ReadFile(filepath.Join(out, generated))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, committed))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate`", committed)
		}
	}
}
