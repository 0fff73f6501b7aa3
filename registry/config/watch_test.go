package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/test/poll"
)

// watchRecorder collects what the watch callbacks report.
type watchRecorder struct {
	mu      sync.Mutex
	errs    []error
	reloads int
}

func (w *watchRecorder) onError(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

func (w *watchRecorder) onReload(*Config) {
	w.mu.Lock()
	w.reloads++
	w.mu.Unlock()
}

func (w *watchRecorder) counts() (errs, reloads int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.errs), w.reloads
}

func (w *watchRecorder) lastErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errs[len(w.errs)-1]
}

func firstName(c *Config) string {
	if eps := c.endpoints(); len(eps) > 0 {
		return eps[0].Name
	}
	return ""
}

func confWithName(name string) string {
	return "registries:\n- name: " + name + "\n  prefix: ghcr.io\n"
}

const pollEvery = 5 * time.Millisecond

// waitPolls waits for three more polls of w: what a change would have
// caused has happened by then.
func waitPolls(t *testing.T, w *Watcher) {
	t.Helper()
	want := w.polls.Load() + 3
	poll.True(t, 10*time.Second, fmt.Sprintf("the watcher's poll count to reach %d", want), func() bool { return w.polls.Load() >= want })
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Write then rename, so that a poll never sees a half-written file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registries.conf")
	writeFile(t, path, confWithName("one"))
	rec := &watchRecorder{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	src, err := Watch(ctx, path, withPollInterval(pollEvery), WithErrorHandler(rec.onError), WithReloadHandler(rec.onReload))
	if err != nil {
		t.Fatal(err)
	}
	if firstName(src.Current()) != "one" {
		t.Fatalf("initial: %q", firstName(src.Current()))
	}

	writeFile(t, path, confWithName("two"))
	poll.True(t, 10*time.Second, "the configuration named two to be read", func() bool { return firstName(src.Current()) == "two" })

	// A broken version: the last good one stays, and it is reported once.
	writeFile(t, path, "registries:\n- name: three\n  prefix: ghcr.io\n  colour: red\n")
	poll.True(t, 10*time.Second, "the broken configuration to be reported", func() bool { n, _ := rec.counts(); return n == 1 })
	waitPolls(t, src)
	if n, _ := rec.counts(); n != 1 {
		t.Fatalf("the same broken content was reported %d times", n)
	}
	if firstName(src.Current()) != "two" {
		t.Fatalf("broken file replaced the config: %q", firstName(src.Current()))
	}
	if err := rec.lastErr(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), path+":4: registries[0].colour") {
		t.Fatalf("reported: %v", err)
	}

	// Another broken content is a new report.
	writeFile(t, path, "registries: 3\n")
	poll.True(t, 10*time.Second, "the second broken configuration to be reported", func() bool { n, _ := rec.counts(); return n == 2 })

	// Fixed.
	writeFile(t, path, confWithName("four"))
	poll.True(t, 10*time.Second, "the fixed configuration named four to be read", func() bool { return firstName(src.Current()) == "four" })
	if _, reloads := rec.counts(); reloads != 2 {
		t.Fatalf("%d reloads, want 2", reloads)
	}

	// A removed file is an empty configuration.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "the removed file to read as an empty configuration", func() bool { return len(src.Current().endpoints()) == 0 })

	cancel()
	select {
	case <-src.done():
	case <-time.After(5 * time.Second):
		t.Fatal("watcher did not stop")
	}
}

func TestWatchBrokenAgainAfterFix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registries.conf")
	writeFile(t, path, confWithName("good"))
	rec := &watchRecorder{}
	src, err := Watch(t.Context(), path, withPollInterval(pollEvery), WithErrorHandler(rec.onError))
	if err != nil {
		t.Fatal(err)
	}
	const broken = "registries: {}\n"
	writeFile(t, path, broken)
	poll.True(t, 10*time.Second, "the broken configuration to be reported", func() bool { n, _ := rec.counts(); return n == 1 })
	writeFile(t, path, confWithName("good"))
	waitPolls(t, src)
	writeFile(t, path, broken)
	poll.True(t, 10*time.Second, "the configuration broken again to be reported a second time", func() bool { n, _ := rec.counts(); return n == 2 })
	if firstName(src.Current()) != "good" {
		t.Fatal("lost the good config")
	}
}

func TestWatchStartup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "registries.conf")
	writeFile(t, path, "registries:\n- name: x\n")
	if _, err := Watch(t.Context(), path); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a broken file at start is an error: %v", err)
	}
	if _, err := Watch(t.Context(), dir); err == nil {
		t.Fatal("an unreadable file at start is an error")
	}

	// A file that appears later is picked up.
	missing := filepath.Join(dir, "later.conf")
	src, err := Watch(t.Context(), missing, withPollInterval(pollEvery))
	if err != nil || len(src.Current().endpoints()) != 0 {
		t.Fatalf("missing file: %v", err)
	}
	writeFile(t, missing, confWithName("later"))
	poll.True(t, 10*time.Second, "the file that appeared later to be read", func() bool { return firstName(src.Current()) == "later" })
}

// configMapVolume lays out a directory as the kubelet does for a ConfigMap:
// registries.conf -> ..data/registries.conf, ..data -> a timestamped
// directory, replaced by renaming a new symlink over ..data.
type configMapVolume struct {
	t   *testing.T
	dir string
	gen int
}

func newConfigMapVolume(t *testing.T, content string) *configMapVolume {
	v := &configMapVolume{t: t, dir: t.TempDir()}
	v.update(content)
	if err := os.Symlink(filepath.Join("..data", "registries.conf"), v.path()); err != nil {
		t.Fatal(err)
	}
	return v
}

func (v *configMapVolume) path() string { return filepath.Join(v.dir, "registries.conf") }

func (v *configMapVolume) update(content string) {
	v.t.Helper()
	v.gen++
	ts := "..2025_01_01_00_00_0" + string(rune('0'+v.gen))
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		v.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.dir, ts, "registries.conf"), []byte(content), 0o644); err != nil {
		v.t.Fatal(err)
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
}

func TestWatchConfigMapSymlinkSwap(t *testing.T) {
	vol := newConfigMapVolume(t, confWithName("v1"))
	rec := &watchRecorder{}
	src, err := Watch(t.Context(), vol.path(), withPollInterval(pollEvery), WithErrorHandler(rec.onError), WithReloadHandler(rec.onReload))
	if err != nil {
		t.Fatal(err)
	}
	if firstName(src.Current()) != "v1" {
		t.Fatalf("initial: %q", firstName(src.Current()))
	}
	vol.update(confWithName("v2"))
	poll.True(t, 10*time.Second, "the configuration named v2 to be read", func() bool { return firstName(src.Current()) == "v2" })

	vol.update("registries:\n- name: v3\n")
	poll.True(t, 10*time.Second, "the broken version v3 to be reported", func() bool { n, _ := rec.counts(); return n == 1 })
	if firstName(src.Current()) != "v2" {
		t.Fatal("broken version replaced the good one")
	}
	vol.update(confWithName("v4"))
	poll.True(t, 10*time.Second, "the configuration named v4 to be read", func() bool { return firstName(src.Current()) == "v4" })
	if n, reloads := rec.counts(); n != 1 || reloads != 2 {
		t.Fatalf("%d errors, %d reloads", n, reloads)
	}
}
