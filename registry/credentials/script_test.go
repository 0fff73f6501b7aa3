//go:build unix

package credentials

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/poll"
)

// writeScript writes an executable shell script into a fresh directory.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "creds.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func extRef(path string) credref.Ref { return credref.Ref{Kind: credref.KindExt, Path: path} }

// processGone reports whether pid has exited; a zombie counts as exited,
// since nothing may reap orphans inside a container.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	poll.True(t, 10*time.Second, "the script to write its child's PID to "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

func TestExtScript(t *testing.T) {
	r := NewResolver(withScriptTimeout(5 * time.Second))
	tests := []struct {
		name, body string
		want       Credential
		exitCode   int
		is         error
		msg        string
		// maxStderr, when set, bounds the stderr the error quotes.
		maxStderr int
	}{
		{name: "success", body: "echo 'robot:pa:ss'", want: Credential{"robot", "pa:ss"}},
		{name: "white space and stderr", body: "echo noise >&2; printf '\\n  AWS:token  \\n\\n'", want: Credential{"AWS", "token"}},
		{name: "garbage", body: "echo 'this is not it'", is: ErrMalformed, msg: "output is not a single line of the form username:password (output withheld)"},
		{name: "two lines", body: "echo a:b; echo c:d", is: ErrMalformed, msg: "output withheld"},
		{name: "empty", body: "true", is: ErrMalformed, msg: "output withheld"},
		{name: "too long", body: "head -c 200000 /dev/zero | tr '\\0' a; echo :x", is: ErrMalformed, msg: "too long"},
		{name: "exit code", body: "echo 'u:p'; echo oops >&2; exit 3", exitCode: 3, msg: "exited with code 3; stderr: oops"},
		{
			// 60 KB of stderr: its end is quoted, where a CLI says what
			// went wrong.
			name: "long stderr", body: "yes 'a line of progress' | head -n 3000 >&2; echo 'the last words' >&2; exit 1", exitCode: 1,
			msg: "stderr: ...", maxStderr: len("...") + maxShownStderr,
		},
		{
			// What seed 003's script says when the pod has no AWS identity;
			// a key in stderr and what the script printed are withheld.
			name:     "stderr of a failed CLI, redacted",
			body:     "echo 'AWS:hunter2secret'; echo 'Unable to locate credentials. You can configure credentials by running \"aws configure\".' >&2; echo 'key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY and hunter2secret' >&2; exit 253",
			exitCode: 253,
			msg:      `stderr: Unable to locate credentials. You can configure credentials by running "aws configure". key [redacted]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeScript(t, tt.body)
			got, err := r.Resolve(t.Context(), extRef(path), Target{Host: "ghcr.io"})
			if tt.is == nil && tt.exitCode == 0 {
				if err != nil || got != tt.want {
					t.Fatalf("got %#v, %v; want %#v", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; got %#v", got)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("want errors.Is %v: %v", tt.is, err)
			}
			var se *ScriptError
			if !errors.As(err, &se) || se.Path != path {
				t.Fatalf("not a *ScriptError: %#v", err)
			}
			if tt.exitCode != 0 && se.ExitCode != tt.exitCode {
				t.Errorf("exit code %d, want %d", se.ExitCode, tt.exitCode)
			}
			if tt.maxStderr > 0 && (len(se.Stderr) > tt.maxStderr || !strings.HasSuffix(se.Stderr, "the last words")) {
				t.Errorf("stderr quoted: %d characters ending %q, want at most %d ending with the last words", len(se.Stderr), se.Stderr[max(0, len(se.Stderr)-20):], tt.maxStderr)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q should name %s and contain %q", err.Error(), path, tt.msg)
			}
			for _, secret := range []string{"hunter2secret", "wJalrXUtnFEMI", "EXAMPLEKEY"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("message shows %s: %q", secret, err.Error())
				}
			}
		})
	}

	t.Run("not executable", func(t *testing.T) {
		path := writeScript(t, "echo u:p")
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := r.Resolve(t.Context(), extRef(path), Target{Host: "ghcr.io"})
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, err := r.Resolve(t.Context(), extRef("/nonexistent/creds.sh"), Target{Host: "ghcr.io"})
		if err == nil || !strings.Contains(err.Error(), "/nonexistent/creds.sh") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestExtScriptTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	path := writeScript(t, "sleep 300 &\necho $! > "+pidFile+"\nwait")
	r := NewResolver(withScriptTimeout(time.Second))

	start := time.Now()
	_, err := r.Resolve(t.Context(), extRef(path), Target{Host: "ghcr.io"})
	elapsed := time.Since(start)
	if !errors.Is(err, ErrScriptTimeout) {
		t.Fatalf("want ErrScriptTimeout, got %v", err)
	}
	if !strings.Contains(err.Error(), "timed out after 1s") || !strings.Contains(err.Error(), path) {
		t.Errorf("message: %q", err.Error())
	}
	if elapsed > 5*time.Second {
		t.Errorf("took %v to give up", elapsed)
	}
	child := readPID(t, pidFile)
	poll.True(t, 10*time.Second, "the timed-out script's child process to be gone", func() bool { return processGone(child) })
}

func TestExtScriptLeftoverChild(t *testing.T) {
	// The script succeeds but leaves a child holding its stdout open.
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	path := writeScript(t, "sleep 300 &\necho $! > "+pidFile+"\necho u:p")
	r := NewResolver(withScriptTimeout(10 * time.Second))
	got, err := r.Resolve(t.Context(), extRef(path), Target{Host: "ghcr.io"})
	if err != nil || got != (Credential{"u", "p"}) {
		t.Fatalf("got %#v, %v", got, err)
	}
	child := readPID(t, pidFile)
	poll.True(t, 10*time.Second, "the child left holding the script's stdout to be gone", func() bool { return processGone(child) })
}

func TestExtScriptCancelled(t *testing.T) {
	path := writeScript(t, "sleep 300")
	r := NewResolver(withScriptTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := r.Resolve(ctx, extRef(path), Target{Host: "ghcr.io"})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrScriptTimeout) {
		t.Fatalf("a caller's deadline is not the script timeout: %v", err)
	}
}

func TestExtScriptCachedConcurrently(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "runs")
	path := writeScript(t, "echo run >> "+counter+"\nsleep 0.3\necho AWS:token")
	runs := func() int {
		b, _ := os.ReadFile(counter)
		return strings.Count(string(b), "run")
	}
	clock := newFakeClock()
	r := NewResolver(WithClock(clock.Now), withScriptTimeout(10*time.Second))
	ref := extRef(path)
	host := "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com"

	resolveAll := func() {
		t.Helper()
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 20)
		for range 20 {
			wg.Go(func() {
				<-start
				c, err := r.ResolveCached(t.Context(), ref, Target{Host: host}, 10*time.Hour)
				if err == nil && c != (Credential{"AWS", "token"}) {
					err = errors.New("wrong credential " + c.String())
				}
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	resolveAll()
	if n := runs(); n != 1 {
		t.Fatalf("20 concurrent callers ran the script %d times, want 1", n)
	}
	resolveAll()
	if n := runs(); n != 1 {
		t.Fatalf("cached: %d runs", n)
	}
	clock.Advance(10 * time.Hour)
	resolveAll()
	if n := runs(); n != 2 {
		t.Fatalf("after credsexpire: %d runs, want 2", n)
	}
	r.Invalidate(ref, host)
	resolveAll()
	if n := runs(); n != 3 {
		t.Fatalf("after Invalidate: %d runs, want 3", n)
	}
}

// TestNoSecretsInErrors collects the errors of every way a source can hold
// something wrong, and checks that none repeats what the source held.
func TestNoSecretsInErrors(t *testing.T) {
	const marker = "SECRETVALUE"
	secrets := &fakeSecrets{data: map[string]map[string][]byte{
		"ns/field":   {"nocolon": []byte(marker), "multiline": []byte("u:" + marker + "\nmore:" + marker)},
		"ns/syntax":  {".dockerconfigjson": []byte(`{"auths": ` + marker + `}`)},
		"ns/types":   {".dockerconfigjson": []byte(`{"auths": {"ghcr.io": {"username": 5, "password": "` + marker + `"}}}`)},
		"ns/b64":     dockerConfig(`"ghcr.io": {"auth": "` + marker + `!!"}`),
		"ns/nocolon": dockerConfig(`"ghcr.io": {"auth": "` + b64(marker) + `"}`),
		"ns/cfgarr":  {".dockerconfigjson": []byte(`["` + marker + `"]`)},
	}}
	env := map[string]string{"NOCOLON": marker, "MULTI": "a:" + marker + "\nb:" + marker}
	refs := []string{
		"secret:ns/field#nocolon", "secret:ns/field#multiline",
		"pullsecret:ns/syntax", "pullsecret:ns/types", "pullsecret:ns/b64", "pullsecret:ns/nocolon", "pullsecret:ns/cfgarr",
		"env:NOCOLON", "env:MULTI",
		"ext:" + writeScript(t, "echo "+marker),
		"ext:" + writeScript(t, "printf 'a:"+marker+"\\nb:"+marker+"\\n'"),
		"ext:" + writeScript(t, "echo 'user:"+marker+"'; echo '"+marker+"' >&2; exit 4"),
		"ext:" + writeScript(t, "echo '"+marker+"' >&2; echo 'user:"+marker+"'; sleep 10"),
	}
	r := NewResolver(
		WithSecretGetter(secrets),
		WithEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }),
		withScriptTimeout(300*time.Millisecond),
	)
	for _, s := range refs {
		_, err := r.Resolve(t.Context(), mustRef(t, s), Target{Host: "ghcr.io"})
		if err == nil {
			t.Errorf("%s: expected an error", s)
			continue
		}
		t.Log(err)
		for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			if strings.Contains(text, marker) {
				t.Errorf("%s: error shows the secret: %s", s, text)
			}
		}
	}
}

// An image-level ext: script runs once per cycle and registry, however
// many requests of the cycle need its credentials, and again in the next
// cycle.
func TestExtScriptReusedWithinCycle(t *testing.T) {
	const ecrHost = "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
	type call struct {
		cycle int    // which cycle's context; -1: none
		host  string // registry asked for
	}
	tests := []struct {
		name     string
		body     string
		calls    []call
		wantRuns int
		wantErr  bool
	}{
		{
			name:     "one run for every request of a cycle",
			body:     "echo AWS:token",
			calls:    []call{{0, ecrHost}, {0, ecrHost}, {0, ecrHost}, {0, ecrHost}},
			wantRuns: 1,
		},
		{
			name:     "each cycle runs it afresh",
			body:     "echo AWS:token",
			calls:    []call{{0, ecrHost}, {0, ecrHost}, {1, ecrHost}, {1, ecrHost}, {2, ecrHost}},
			wantRuns: 3,
		},
		{
			name:     "per registry",
			body:     "echo AWS:token",
			calls:    []call{{0, ecrHost}, {0, "ghcr.io"}, {0, ecrHost}, {0, "GHCR.io"}},
			wantRuns: 2,
		},
		{
			name:     "outside a cycle, on every use",
			body:     "echo AWS:token",
			calls:    []call{{-1, ecrHost}, {-1, ecrHost}, {-1, ecrHost}},
			wantRuns: 3,
		},
		{
			name:     "a failure is not retried within the cycle",
			body:     "exit 3",
			calls:    []call{{0, ecrHost}, {0, ecrHost}, {0, ecrHost}, {1, ecrHost}},
			wantRuns: 2,
			wantErr:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counter := filepath.Join(t.TempDir(), "runs")
			ref := extRef(writeScript(t, "echo run >> "+counter+"\n"+tt.body))
			r := NewResolver(withScriptTimeout(5 * time.Second))
			cycles := map[int]context.Context{}
			for _, c := range tt.calls {
				ctx := t.Context()
				if c.cycle >= 0 {
					if cycles[c.cycle] == nil {
						cycles[c.cycle] = WithCycle(t.Context())
					}
					ctx = cycles[c.cycle]
				}
				cred, err := r.Resolve(ctx, ref, Target{Host: c.host, Repository: "app"})
				if (err != nil) != tt.wantErr {
					t.Fatalf("error %v, want an error: %v", err, tt.wantErr)
				}
				if err == nil && cred != (Credential{"AWS", "token"}) {
					t.Fatalf("got %v", cred)
				}
			}
			b, _ := os.ReadFile(counter)
			if n := strings.Count(string(b), "run"); n != tt.wantRuns {
				t.Errorf("the script ran %d times, want %d", n, tt.wantRuns)
			}
		})
	}

	t.Run("concurrent requests of a cycle share one run", func(t *testing.T) {
		counter := filepath.Join(t.TempDir(), "runs")
		ref := extRef(writeScript(t, "echo run >> "+counter+"\nsleep 0.3\necho AWS:token"))
		r := NewResolver(withScriptTimeout(5 * time.Second))
		ctx := WithCycle(t.Context())
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if _, err := r.Resolve(ctx, ref, Target{Host: ecrHost}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		b, _ := os.ReadFile(counter)
		if n := strings.Count(string(b), "run"); n != 1 {
			t.Errorf("the script ran %d times, want 1", n)
		}
	})

	t.Run("a caller that gives up leaves no failure behind", func(t *testing.T) {
		ref := extRef(writeScript(t, "sleep 0.5\necho AWS:token"))
		r := NewResolver(withScriptTimeout(5 * time.Second))
		ctx := WithCycle(t.Context())
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := r.Resolve(short, ref, Target{Host: ecrHost}); err == nil {
			t.Fatal("want the caller's deadline")
		}
		if _, err := r.Resolve(ctx, ref, Target{Host: ecrHost}); err != nil {
			t.Errorf("the next request of the cycle failed: %v", err)
		}
	})
}

// A script gets only what a shell and a cloud CLI need, and the variables
// of cloud identities (IRSA, Workload Identity); none of the controller's
// other settings and secrets. The script writes its environment to a file: its stdout must be
// the credentials.
func TestExtScriptEnvironment(t *testing.T) {
	vars := []struct {
		name string
		kept bool
	}{
		{"PATH", true},
		{"HOME", true},
		{"HTTPS_PROXY", true},
		{"AWS_ROLE_ARN", true},
		{"AWS_WEB_IDENTITY_TOKEN_FILE", true},
		{"AWS_REGION", true},
		{"AWS_DEFAULT_REGION", true},
		{"AWS_STS_REGIONAL_ENDPOINTS", true},
		{"AWS_CONTAINER_CREDENTIALS_FULL_URI", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", true},
		{"IMAGE_UPDATER_INTERVAL", false},
		{"GHCR_WEBHOOK_SECRET", false},
		{"DOCKER_WEBHOOK_SECRET", false},
		{"OTHER_REGISTRY_CREDS", false},
		{"ARGOCD_TOKEN", false},
		{"ARGOCD_AUTH_TOKEN", false},
		{"ARGOCD_SERVER", false},
		{"GIT_PASSWORD", false},
		{"GIT_TOKEN", false},
		{"GIT_ASKPASS", false},
		{"GIT_CONFIG_VALUE_0", false},
		{"GIT_COMMIT_SIGNING_KEY", false},
		{"GNUPGHOME", false},
		{"SSH_AUTH_SOCK", false},
		{"KUBECONFIG", false},
	}
	want := map[string]string{}
	for _, v := range vars {
		value := "value-of-" + strings.ToLower(v.name)
		if v.name == "PATH" || v.name == "HOME" {
			value = os.Getenv(v.name)
		}
		t.Setenv(v.name, value)
		want[v.name] = value
	}
	dump := filepath.Join(t.TempDir(), "env")
	ref := extRef(writeScript(t, "env > "+dump+"\necho AWS:token"))
	if _, err := NewResolver().Resolve(t.Context(), ref, Target{Host: "ghcr.io"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	for _, v := range vars {
		value, ok := got[v.name]
		switch {
		case v.kept && value != want[v.name]:
			t.Errorf("%s = %q in the script, want %q", v.name, value, want[v.name])
		case !v.kept && ok:
			t.Errorf("%s reached the script", v.name)
		}
	}
}
