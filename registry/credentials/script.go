package credentials

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// maxScriptOutput caps what is kept of a script's stdout; a credential line
// is far shorter, and the cap keeps a runaway script from growing memory.
const maxScriptOutput = 64 << 10

// scriptWaitDelay is how long to wait, after the script exits or is
// killed, for something it started in the background to let go of its
// stdout before the pipe is closed on it.
const scriptWaitDelay = time.Second

// ScriptError is the error of an ext: script that did not produce
// credentials. It never carries the script's output, which may hold
// secrets, and its stderr only bounded and redacted.
type ScriptError struct {
	Path     string
	ExitCode int           // the exit status, or -1 when the script did not exit normally
	Timeout  time.Duration // non-zero when the script was killed for running too long
	Err      error         // the cause, if any: ErrMalformed or an exec error
	// Stderr is the end of what the script wrote to stderr, redacted.
	Stderr string
}

// maxShownStderr is how much of a failed script's stderr its error shows:
// the end, where a CLI says what went wrong.
const maxShownStderr = 512

// tokenRun matches runs of token or base64 characters; secretLike tells
// which of them could be a secret rather than a path or a word.
var tokenRun = regexp.MustCompile(`[A-Za-z0-9+/=_-]{16,}`)

// secretLike: a run mixing upper case, lower case and digits, as keys,
// tokens and base64 do and paths and messages seldom do.
func secretLike(s string) bool {
	return strings.ContainsAny(s, "0123456789") && strings.ContainsAny(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") && strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz")
}

// scriptStderr is the end of stderr, on one line, with the script's stdout
// (which may hold the credentials it meant to print) and anything that
// looks like a token replaced.
func scriptStderr(stderr, stdout []byte) string {
	s := string(stderr)
	for _, field := range strings.FieldsFunc(strings.TrimSpace(string(stdout)), func(r rune) bool { return r == '\n' || r == ':' }) {
		if len(field) >= 4 {
			s = strings.ReplaceAll(s, field, "[redacted]")
		}
	}
	s = tokenRun.ReplaceAllStringFunc(s, func(run string) string {
		if secretLike(run) {
			return "[redacted]"
		}
		return run
	})
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxShownStderr {
		s = "..." + s[len(s)-maxShownStderr:]
	}
	return s
}

func (e *ScriptError) Error() string {
	msg := e.message()
	if e.Stderr != "" {
		msg += "; stderr: " + e.Stderr
	}
	return msg
}

func (e *ScriptError) message() string {
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

func (s scripts) Credential(ctx context.Context, ref credref.Ref, _ Target) (Credential, time.Time, error) {
	c, err := s.run(ctx, ref.Path)
	return c, time.Time{}, err
}

// passedPrefixes and passedNames are the variables a credential script
// gets: what a shell and a cloud CLI need (PATH, HOME, the locale, proxies,
// CA bundles) and the settings of the cloud identities the pod may have
// (AWS_* under IRSA or ECS, GOOGLE_* and CLOUDSDK_* under Workload
// Identity, AZURE_*). Nothing else of the controller's environment, which
// holds its webhook secrets, the env: credentials of other registries, the
// Argo CD token and git's settings, reaches a script.
var (
	passedPrefixes = []string{"AWS_", "GOOGLE_", "CLOUDSDK_", "AZURE_", "LC_"}
	passedNames    = []string{"PATH", "HOME", "USER", "LANG", "TZ", "TMPDIR", "SHELL",
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}
)

// scriptEnviron is the part of environ that scripts get.
func scriptEnviron(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(passedNames, name) || slices.ContainsFunc(passedPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			env = append(env, kv)
		}
	}
	return env
}

// run executes the script directly (no shell, no arguments) with the part
// of the controller's environment scripts get (see passedNames), and reads
// "username:password" from its stdout.
// The script runs in its own process group so that a timeout also kills
// what it started (an aws or gcloud CLI, say).
func (s scripts) run(ctx context.Context, path string) (Credential, error) {
	sctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	out := &cappedBuffer{max: maxScriptOutput}
	stderr := &cappedBuffer{max: maxScriptOutput}
	cmd := exec.CommandContext(sctx, path)
	cmd.Stdout = out
	cmd.Env = scriptEnviron(os.Environ())
	// stderr says why a script failed (an aws CLI's error, say); it is
	// shown only for a failure, bounded and redacted (see scriptStderr).
	cmd.Stderr = stderr
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
				return Credential{}, &ScriptError{Path: path, ExitCode: code, Stderr: scriptStderr(stderr.buf, out.buf)}
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
		return Credential{}, &ScriptError{Path: path, Err: fmt.Errorf("%w: the output is not a single line of the form username:password", ErrMalformed),
			Stderr: scriptStderr(stderr.buf, out.buf)}
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
