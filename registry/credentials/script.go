package credentials

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// maxScriptOutput caps what is kept of a script's stdout; a credential line
// is far shorter, and the cap keeps a runaway script from growing memory.
const maxScriptOutput = 64 << 10

// scriptWaitDelay is how long to wait, after the script exits or is
// killed, for something it started in the background to let go of its
// stdout before the pipe is closed on it.
const scriptWaitDelay = time.Second

// ScriptError is the error of an ext: script that did not produce
// credentials. It never carries the script's output or stderr, which may
// hold secrets.
type ScriptError struct {
	Path     string
	ExitCode int           // the exit status, or -1 when the script did not exit normally
	Timeout  time.Duration // non-zero when the script was killed for running too long
	Err      error         // the cause, if any: ErrMalformed or an exec error
}

func (e *ScriptError) Error() string {
	switch {
	case e.Timeout > 0:
		return fmt.Sprintf("script %s timed out after %s and was killed", e.Path, e.Timeout)
	case e.ExitCode > 0:
		return fmt.Sprintf("script %s exited with code %d", e.Path, e.ExitCode)
	case errors.Is(e.Err, ErrMalformed):
		return fmt.Sprintf("script %s: %v (output withheld)", e.Path, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("script %s failed: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("script %s failed", e.Path)
}

func (e *ScriptError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrScriptTimeout) true for a timeout.
func (e *ScriptError) Is(target error) bool { return target == ErrScriptTimeout && e.Timeout > 0 }

// scripts serves ext:<path> references: the script prints
// username:password.
type scripts struct {
	timeout time.Duration
}

func (s scripts) Credential(ctx context.Context, ref Ref, _ Target) (Credential, time.Time, error) {
	c, err := s.run(ctx, ref.Path)
	return c, time.Time{}, err
}

// withheldPrefixes and withheldNames are the controller's own secrets, and what leads to
// them, that a credential script has no use for: the Argo CD API token and
// settings (ARGOCD_*), git's credentials and settings, which may carry
// credentials too (GIT_*: GIT_ASKPASS, GIT_CONFIG_*, the commit signing
// key), the GnuPG keyring, an SSH agent and a kubeconfig. Everything else,
// PATH, HOME, proxies, AWS_* and the Google and Azure variables that
// cloud CLIs read under IRSA or Workload Identity, is passed on.
var (
	withheldPrefixes = []string{"ARGOCD_", "GIT_"}
	withheldNames    = []string{"GNUPGHOME", "SSH_AUTH_SOCK", "KUBECONFIG"}
)

// scriptEnviron is environ without the variables withheld from scripts.
func scriptEnviron(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(withheldNames, name) || slices.ContainsFunc(withheldPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// run executes the script directly (no shell, no arguments) with the
// controller's environment less its own secrets (see withheldPrefixes),
// and reads "username:password" from its stdout.
// The script runs in its own process group so that a timeout also kills
// what it started (an aws or gcloud CLI, say).
func (s scripts) run(ctx context.Context, path string) (Credential, error) {
	sctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	out := &cappedBuffer{max: maxScriptOutput}
	cmd := exec.CommandContext(sctx, path)
	cmd.Stdout = out
	cmd.Env = scriptEnviron(os.Environ())
	// stderr is discarded rather than reported: it may echo secrets.
	cmd.Stderr = nil
	cmd.WaitDelay = scriptWaitDelay
	setProcessGroup(cmd)

	err := cmd.Run()
	switch {
	case err == nil:
	case errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success():
		// The script succeeded but left something running that holds its
		// stdout; what it printed is complete, the leftovers go.
		_ = killProcessGroup(cmd)
	case ctx.Err() != nil:
		return Credential{}, &ScriptError{Path: path, ExitCode: -1, Err: ctx.Err()}
	case sctx.Err() != nil:
		return Credential{}, &ScriptError{Path: path, ExitCode: -1, Timeout: s.timeout, Err: sctx.Err()}
	default:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if code := exitErr.ExitCode(); code >= 0 {
				return Credential{}, &ScriptError{Path: path, ExitCode: code}
			}
			return Credential{}, &ScriptError{Path: path, ExitCode: -1, Err: errors.New(exitErr.ProcessState.String())}
		}
		return Credential{}, &ScriptError{Path: path, ExitCode: -1, Err: err}
	}

	if out.overflow {
		return Credential{}, &ScriptError{Path: path, Err: fmt.Errorf("%w: the output is too long to be username:password", ErrMalformed)}
	}
	c, err := parseUserPass(string(out.buf))
	if err != nil {
		return Credential{}, &ScriptError{Path: path, Err: fmt.Errorf("%w: the output is not a single line of the form username:password", ErrMalformed)}
	}
	return c, nil
}

// cappedBuffer keeps the first max bytes written and swallows the rest, so
// the script never blocks on a full pipe.
type cappedBuffer struct {
	buf      []byte
	max      int
	overflow bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - len(b.buf); room < len(p) {
		b.buf = append(b.buf, p[:max(room, 0)]...)
		b.overflow = true
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}
