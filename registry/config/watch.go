package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"time"
)

// defaultPollInterval is how often Watch looks at the file unless
// withPollInterval says otherwise. The kubelet takes up to a minute to
// update a ConfigMap volume, so polling faster would gain little.
const defaultPollInterval = 5 * time.Second

// WatchOption configures Watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	interval time.Duration
	onError  func(error)
	onReload func(*Config)
}

// withPollInterval sets how often the file is read. A non-positive value
// keeps defaultPollInterval.
func withPollInterval(d time.Duration) WatchOption {
	return func(o *watchOptions) {
		if d > 0 {
			o.interval = d
		}
	}
}

// WithErrorHandler is called when a changed file cannot be read or parsed;
// the previous configuration stays in force. It is called once per distinct
// broken content, not on every poll.
func WithErrorHandler(f func(error)) WatchOption {
	return func(o *watchOptions) { o.onError = f }
}

// WithReloadHandler is called with each new configuration after a change
// was loaded.
func WithReloadHandler(f func(*Config)) WatchOption {
	return func(o *watchOptions) { o.onReload = f }
}

// Watcher holds the current registries configuration and keeps it up to
// date with its file.
type Watcher struct {
	path    string
	opts    watchOptions
	cur     atomic.Pointer[Config]
	stopped chan struct{}

	// polls counts the polls done, for tests that wait for some to pass.
	polls atomic.Int64

	// Used by the polling goroutine only.
	goodSum [sha256.Size]byte
	badSum  [sha256.Size]byte
	haveBad bool
}

// Watch loads the registries configuration at path (a missing file is an
// empty configuration) and then polls it until ctx is done. A file that
// cannot be loaded at start is an error. Changes are found by content, not
// by file events, because a ConfigMap volume is updated by swapping a
// symlink to a directory, which file watches on the file itself miss.
// Callbacks run on the polling goroutine and should return quickly.
func Watch(ctx context.Context, path string, opts ...WatchOption) (*Watcher, error) {
	o := watchOptions{interval: defaultPollInterval}
	for _, opt := range opts {
		opt(&o)
	}
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading registries configuration: %w", err)
	}
	cfg, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	s := &Watcher{path: path, opts: o, stopped: make(chan struct{}), goodSum: fingerprint(data, cfg.files)}
	s.cur.Store(cfg)
	go s.run(ctx)
	return s, nil
}

// Current returns the configuration in force. It is safe for concurrent
// use; the returned value never changes.
func (s *Watcher) Current() *Config { return s.cur.Load() }

// done is closed when the polling goroutine has stopped.
func (s *Watcher) done() <-chan struct{} { return s.stopped }

func (s *Watcher) run(ctx context.Context) {
	defer close(s.stopped)
	t := time.NewTicker(s.opts.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.poll()
			s.polls.Add(1)
		}
	}
}

func (s *Watcher) poll() {
	data, readErr := readFile(s.path)
	// The files the configuration in force read (a CA, a client
	// certificate) count as part of it: a rotated one is a change.
	sum := fingerprint(data, s.cur.Load().files)
	if readErr != nil {
		// Key on the error text, so a lasting read problem is reported once.
		sum = sha256.Sum256([]byte("error\x00" + readErr.Error()))
	}
	if sum == s.goodSum {
		s.haveBad = false
		return
	}
	if s.haveBad && sum == s.badSum {
		return
	}
	var cfg *Config
	err := readErr
	if err != nil {
		err = fmt.Errorf("reading registries configuration: %w", err)
	} else {
		cfg, err = Parse(s.path, data)
	}
	if err != nil {
		s.badSum, s.haveBad = sum, true
		if s.opts.onError != nil {
			s.opts.onError(err)
		}
		return
	}
	s.cur.Store(cfg)
	s.goodSum, s.haveBad = fingerprint(data, cfg.files), false
	if s.opts.onReload != nil {
		s.opts.onReload(cfg)
	}
}

// readFile reads the file; a missing file is nil data, which Parse reads
// as an empty configuration.
func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// fingerprint hashes the content of registries.conf (nil: missing) and of
// the files it names, telling a missing file from an empty one.
func fingerprint(data []byte, files []string) [sha256.Size]byte {
	h := sha256.New()
	if data == nil {
		h.Write([]byte("missing\x00"))
	} else {
		fmt.Fprintf(h, "file %d\x00", len(data))
		h.Write(data)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(h, "\x00%s error %v", f, err)
			continue
		}
		fmt.Fprintf(h, "\x00%s %d\x00", f, len(b))
		h.Write(b)
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}
