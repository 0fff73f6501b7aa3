package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/test/testenv"
)

func TestTestCommand(t *testing.T) {
	reg := testenv.StartRegistry(t)
	digests := map[string]string{}
	for _, tag := range []string{"v1.25.0", "v1.26.0", "v1.26.3", "v1.27.0-rc.1", "v2.0.0", "latest"} {
		digests[tag] = reg.PushImage(t, "team/web", []string{tag}).String()
	}
	// The registry's push times, from a Harbor API beside it; the
	// release candidate and latest have none.
	harbor := testenv.StartPushTimes(t, "harbor", reg.Host)
	harbor.Credentials(reg.Username, reg.Password)
	now := time.Now()
	for tag, age := range map[string]time.Duration{"v1.25.0": 50 * 24 * time.Hour, "v1.26.0": 40 * 24 * time.Hour, "v1.26.3": 30 * 24 * time.Hour, "v2.0.0": time.Hour} {
		harbor.Push("team/web", tag, now.Add(-age))
	}
	conf := filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("registries:\n- name: test\n  prefix: %s\n  api_url: http://%s\n  credentials: env:TEST_REGISTRY\n  pushtimes: harbor\n  pushtimes_url: %s\n", reg.Host, reg.Host, harbor.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TEST_REGISTRY": reg.Username + ":" + reg.Password, "WRONG": reg.Username + ":nope"}
	image := reg.Repo("team/web")

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "semver constraint", args: []string{image, "--semver-constraint", "~1.26"}, wantStdout: "result:      v1.26.3"},
		{name: "highest release", args: []string{image}, wantStdout: "result:      v2.0.0"},
		{name: "alphabetical", args: []string{image, "--update-strategy", "alphabetical", "--ignore-tags", "latest"}, wantStdout: "result:      v2.0.0"},
		{name: "nothing qualifies", args: []string{image, "--semver-constraint", "~3"}, wantCode: 1, wantStdout: "no version qualifies"},
		{name: "bad strategy", args: []string{image, "--update-strategy", "newest"}, wantCode: 2, wantStderr: `"newest"`},
		{name: "bad constraint", args: []string{image, "--semver-constraint", ">=>1"}, wantCode: 2, wantStderr: "constraint"},
		{name: "wrong credentials", args: []string{image, "--credentials", "env:WRONG"}, wantCode: 2, wantStderr: "401"},
		{name: "unreachable registry", args: []string{"127.0.0.1:1/team/web", "--registries-conf-path", ""}, wantCode: 2, wantStderr: "127.0.0.1:1"},
		{name: "bad image", args: []string{"UPPER/Case::x"}, wantCode: 2, wantStderr: "UPPER/Case::x"},
		{name: "pinned by digest", args: []string{image, "--pin-digest", "always"}, wantStdout: "result:      v2.0.0@" + digests["v2.0.0"]},
		{name: "the running pin kept", args: []string{image + ":v2.0.0@" + digests["v1.25.0"], "--pin-digest", "if-not-present"}, wantStdout: "result:      v2.0.0@" + digests["v1.25.0"]},
		{name: "bad pin", args: []string{image, "--pin-digest", "sometimes"}, wantCode: 2, wantStderr: `--pin-digest: "sometimes" is not never, if-not-present or always`},
		{name: "minimum release age: the newest waits from its push", args: []string{image, "--minimum-release-age", "7d"},
			wantStdout: "waiting:     version v2.0.0 waits for its minimum release age (168h0m0s) until " + now.Add(-time.Hour+7*24*time.Hour).UTC().Format("2006-01-02T15")},
		{name: "minimum release age: the older push taken meanwhile", args: []string{image, "--minimum-release-age", "7d"}, wantStdout: "result:      v1.26.3"},
		{name: "minimum release age: none old enough", args: []string{image, "--minimum-release-age", "60d"}, wantCode: 1, wantStdout: "waiting:     version v2.0.0 waits"},
		{name: "bad minimum release age", args: []string{image, "--minimum-release-age", "a week"}, wantCode: 2, wantStderr: "--minimum-release-age"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"test", "--registries-conf-path", conf}, tt.args...)
			code := execute(context.Background(), args, &stdout, &stderr, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stdout %q stderr %q", code, tt.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tt.wantStderr)
			}
			if strings.Contains(stdout.String()+stderr.String(), reg.Password) {
				t.Error("the registry password was printed")
			}
		})
	}

	// Without --registries-conf-path, test reads the file run reads by
	// default when there is one: here the entry that gives the registry's
	// plain HTTP and credentials, without which it is asked anonymously.
	t.Run("default registries.conf", func(t *testing.T) {
		dir := t.TempDir()
		for _, tt := range []struct {
			name        string
			defaultConf string
			args        []string
			wantCode    int
			wantStderr  string
		}{
			{name: "the default file exists", defaultConf: conf, wantCode: 0},
			{name: "no file at the default path", defaultConf: filepath.Join(dir, "missing.conf"), wantCode: 2, wantStderr: "anonymously"},
			{name: "a folder at the default path", defaultConf: dir, wantCode: 2, wantStderr: "anonymously"},
			{name: "an explicit empty path reads none", defaultConf: conf, args: []string{"--registries-conf-path", ""}, wantCode: 2, wantStderr: "anonymously"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := executeTestWithDefaultConf(tt.defaultConf, append([]string{image}, tt.args...), &stdout, &stderr,
					func(k string) (string, bool) { v, ok := env[k]; return v, ok })
				if code != tt.wantCode || !strings.Contains(stderr.String(), tt.wantStderr) {
					t.Errorf("exit code %d (want %d), stderr %q (want %q); stdout %q", code, tt.wantCode, stderr.String(), tt.wantStderr, stdout.String())
				}
				if tt.wantCode == 0 && !strings.Contains(stdout.String(), "result:      v2.0.0") {
					t.Errorf("stdout %q", stdout.String())
				}
			})
		}
	})

	t.Run("json", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := execute(context.Background(), []string{"test", "--registries-conf-path", conf, "--output", "json", image, "--semver-constraint", "^1"},
			&stdout, &stderr, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if code != 0 {
			t.Fatalf("exit code %d: %s", code, stderr.String())
		}
		var out testOutput
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("%v: %s", err, stdout.String())
		}
		want := testOutput{Image: image, Strategy: "semver", Constraint: "^1", Tag: "v1.26.3", TagsSeen: 6, TagsConsidered: 6}
		if !reflect.DeepEqual(out, want) {
			t.Errorf("json %+v, want %+v", out, want)
		}
	})

	t.Run("verify-signature", func(t *testing.T) {
		key := testenv.NewSigningKey(t)
		keyFile := filepath.Join(t.TempDir(), "cosign.pub")
		if err := os.WriteFile(keyFile, key.PublicPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		signed := reg.PushImage(t, "team/signed", []string{"v1.0.0"})
		reg.SignImage(t, "team/signed", signed, key)
		unsigned := reg.PushImage(t, "team/signed", []string{"v1.1.0"})
		var stdout, stderr bytes.Buffer
		code := execute(context.Background(), []string{"test", "--registries-conf-path", conf, "--output", "json",
			reg.Repo("team/signed"), "--verify-signature", keyFile},
			&stdout, &stderr, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if code != 0 {
			t.Fatalf("exit code %d: %s", code, stderr.String())
		}
		var out testOutput
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("%v: %s", err, stdout.String())
		}
		if out.Tag != "v1.0.0" || len(out.Skipped) != 1 || out.Skipped[0].Tag != "v1.1.0" || out.Skipped[0].Digest != unsigned.String() ||
			!strings.Contains(out.Skipped[0].Reason, "no signature") {
			t.Errorf("output %s", stdout.String())
		}

		code = execute(context.Background(), []string{"test", "--registries-conf-path", conf,
			reg.Repo("team/signed"), "--verify-signature", filepath.Join(t.TempDir(), "missing.pub")},
			&stdout, &stderr, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if code != 2 || !strings.Contains(stderr.String(), "missing.pub") {
			t.Errorf("a missing key file: exit code %d, stderr %q", code, stderr.String())
		}
	})
}

// A file at the default path that does not load is an error naming it,
// not skipped: the operator who put it there meant it to be read.
func TestTestCommandDefaultConfInvalid(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(conf, []byte("registries:\n- name: x\n  prefix: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := executeTestWithDefaultConf(conf, []string{"registry.invalid/team/web"}, &stdout, &stderr, func(string) (string, bool) { return "", false })
	if code != 2 || !strings.Contains(stderr.String(), conf) {
		t.Errorf("exit code %d, stderr %q: want 2 and the file's path", code, stderr.String())
	}
}

// executeTestWithDefaultConf runs the test command with args as execute
// does, with defaultConf as the default registries configuration.
func executeTestWithDefaultConf(defaultConf string, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	root := newRootCommand(lookupEnv)
	for _, c := range root.Commands() {
		if c.Name() == "test" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newTestCommandFor(&testOptions{defaultRegistriesConf: defaultConf}, lookupEnv))
	return executeRoot(context.Background(), root, append([]string{"test"}, args...), stdout, stderr)
}
