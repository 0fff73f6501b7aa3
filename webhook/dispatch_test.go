package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/image-updater/argocd-image-updater/imageref"
)

type check struct {
	at      time.Duration // since the test started
	repos   []string
	trigger string
}

// fakeChecker records checks; each takes hold, when set.
type fakeChecker struct {
	start   time.Time
	hold    time.Duration
	updated bool
	// notRunning are repositories whose images no Application runs.
	notRunning []string
	// hidden are the checks, by repository:tag, during which the registry
	// does not list the tag yet.
	hidden map[string]int
	mu     sync.Mutex
	checks []check
}

func (c *fakeChecker) CheckRepositories(_ context.Context, repos []imageref.Reference, trigger string) CheckResult {
	names := make([]string, len(repos))
	for i, r := range repos {
		names[i] = r.String()
	}
	slices.Sort(names)
	c.mu.Lock()
	c.checks = append(c.checks, check{at: time.Since(c.start), repos: names, trigger: trigger})
	c.mu.Unlock()
	time.Sleep(c.hold)
	sum := CheckResult{Updated: c.updated}
	for _, r := range repos {
		if slices.Contains(c.notRunning, r.Name()) && !slices.ContainsFunc(sum.NotRunning, r.SameName) {
			sum.NotRunning = append(sum.NotRunning, r.WithoutVersion())
		}
		if c.hidden[r.String()] > 0 {
			c.hidden[r.String()]--
			sum.Unlisted = append(sum.Unlisted, r)
		}
	}
	return sum
}

// recorded are the checks so far.
func (c *fakeChecker) recorded() []check {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.checks)
}

// runDispatcher runs a Dispatcher over c until stop, which waits for Run
// to return; in a synctest bubble, Run is waiting when it returns.
func runDispatcher(t *testing.T, c Checker, opts ...DispatcherOption) (d *Dispatcher, stop func()) {
	d = NewDispatcher(c, opts...)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	synctest.Wait()
	return d, func() { cancel(); <-done }
}

func mustRef(t *testing.T, s string) imageref.Reference {
	t.Helper()
	r, err := imageref.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDispatcher(t *testing.T) {
	type note struct {
		at     time.Duration
		source string
		repos  []string
		times  int // how many times it is sent; 0 means once
	}
	tests := []struct {
		name  string
		hold  time.Duration // how long each check takes
		notes []note
		want  []check
	}{
		{
			name:  "the first check starts at once",
			notes: []note{{at: 0, source: Quay, repos: []string{"quay.io/a/x"}}},
			want:  []check{{at: 0, repos: []string{"quay.io/a/x"}, trigger: "a push notification from quay.io"}},
		},
		{
			name: "notifications further apart are checked apart",
			notes: []note{
				{at: 0, source: DockerHub, repos: []string{"docker.io/a/x"}},
				{at: 2 * time.Second, source: DockerHub, repos: []string{"docker.io/a/x"}},
			},
			want: []check{
				{at: 0, repos: []string{"docker.io/a/x"}, trigger: "a push notification from docker.io"},
				{at: 2 * time.Second, repos: []string{"docker.io/a/x"}, trigger: "a push notification from docker.io"},
			},
		},
		{
			name: "what arrives during a check is merged into the next",
			hold: 5 * time.Second,
			notes: []note{
				{at: 0, source: Distribution, repos: []string{"r.example.com/a"}},
				{at: 2 * time.Second, source: Distribution, repos: []string{"r.example.com/b", "r.example.com/a"}},
				{at: 3 * time.Second, source: GHCR, repos: []string{"ghcr.io/o/c"}},
				{at: 4 * time.Second, source: Distribution, repos: []string{"r.example.com/a"}},
			},
			want: []check{
				{at: 0, repos: []string{"r.example.com/a"}, trigger: "a push notification from distribution"},
				// The first check ends at 5s; the next starts then.
				{at: 5 * time.Second, repos: []string{"ghcr.io/o/c", "r.example.com/a", "r.example.com/b"},
					trigger: "push notifications from distribution and ghcr.io"},
			},
		},
		{
			name: "a burst of 100 is two checks",
			hold: time.Second,
			notes: []note{
				{at: 0, source: Harbor, repos: []string{"harbor.example.com/p/z"}, times: 100},
				{at: 0, source: Harbor, repos: []string{"harbor.example.com/p/y"}},
				{at: 10 * time.Millisecond, source: Harbor, repos: []string{"harbor.example.com/p/z"}, times: 100},
			},
			want: []check{
				{at: 0, repos: []string{"harbor.example.com/p/z"}, trigger: "a push notification from harbor"},
				{at: time.Second, repos: []string{"harbor.example.com/p/y", "harbor.example.com/p/z"}, trigger: "a push notification from harbor"},
			},
		},
		{
			name: "a notification during the trailing check gets one more",
			hold: time.Second,
			notes: []note{
				{at: 0, source: Quay, repos: []string{"quay.io/a/x"}},
				{at: 500 * time.Millisecond, source: Quay, repos: []string{"quay.io/a/x"}},
				{at: 1500 * time.Millisecond, source: Quay, repos: []string{"quay.io/a/x"}},
			},
			want: []check{
				{at: 0, repos: []string{"quay.io/a/x"}, trigger: "a push notification from quay.io"},
				{at: time.Second, repos: []string{"quay.io/a/x"}, trigger: "a push notification from quay.io"},
				{at: 2 * time.Second, repos: []string{"quay.io/a/x"}, trigger: "a push notification from quay.io"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &fakeChecker{start: time.Now(), hold: tt.hold}
				d, stop := runDispatcher(t, c)
				start := c.start
				for _, n := range tt.notes {
					time.Sleep(time.Until(start.Add(n.at)))
					var refs []imageref.Reference
					for _, r := range n.repos {
						refs = append(refs, mustRef(t, r))
					}
					for range max(n.times, 1) {
						if err := d.Notify(Notification{Source: n.source, Repositories: refs, Received: time.Now()}); err != nil {
							t.Fatal(err)
						}
						// Whatever the dispatcher does at once is done
						// before the next notification.
						synctest.Wait()
					}
				}
				time.Sleep(time.Minute)
				stop()
				if !slices.EqualFunc(c.checks, tt.want, func(a, b check) bool {
					return a.at == b.at && slices.Equal(a.repos, b.repos) && a.trigger == b.trigger
				}) {
					t.Errorf("checks\n%+v\nwant\n%+v", c.checks, tt.want)
				}
			})
		})
	}
}

// Notifications sent all at once, from many senders, while checks take
// time: each repository is checked at most twice, and every notification
// is followed by a check of its repository that started after it arrived.
func TestDispatcherConcurrentBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &fakeChecker{start: time.Now(), hold: 200 * time.Millisecond}
		d, stop := runDispatcher(t, c)
		repos := []string{"quay.io/a/x", "quay.io/a/y", "quay.io/a/z"}
		last := map[string]time.Duration{}
		var mu sync.Mutex
		var senders sync.WaitGroup
		for i := range 300 {
			senders.Go(func() {
				// Three waves, the last while the first check runs.
				time.Sleep(time.Duration(i%3) * 50 * time.Millisecond)
				r := repos[i%len(repos)]
				if err := d.Notify(Notification{Source: Quay, Repositories: []imageref.Reference{mustRef(t, r)}, Received: time.Now()}); err != nil {
					t.Error(err)
				}
				mu.Lock()
				last[r] = max(last[r], time.Since(c.start))
				mu.Unlock()
			})
		}
		senders.Wait()
		time.Sleep(time.Minute)
		stop()
		for _, r := range repos {
			var n int
			var lastCheck time.Duration
			for _, ch := range c.checks {
				if slices.Contains(ch.repos, r) {
					n++
					lastCheck = ch.at
				}
			}
			if n == 0 || n > 2 {
				t.Errorf("%s: checked %d times, want 1 or 2: %+v", r, n, c.checks)
			}
			if lastCheck < last[r] {
				t.Errorf("%s: notified at %s, last checked at %s: %+v", r, last[r], lastCheck, c.checks)
			}
		}
	})
}

// A repository whose image an Application does not run (yet: Argo CD may
// be rolling out another version) is checked again, three times at most;
// the others are not.
func TestDispatcherRechecks(t *testing.T) {
	const trigger = "a push notification from quay.io"
	first := check{at: 0, repos: []string{"quay.io/a/rolling", "quay.io/a/running"}, trigger: trigger}
	tests := []struct {
		name string
		opts []DispatcherOption
		want []check
	}{
		{
			name: "by default",
			want: []check{
				first,
				// DefaultRecheckAfter after the check, then 4 and 16
				// times that after the recheck before.
				{at: time.Second, repos: []string{"quay.io/a/rolling"}, trigger: trigger},
				{at: 5 * time.Second, repos: []string{"quay.io/a/rolling"}, trigger: trigger},
				{at: 21 * time.Second, repos: []string{"quay.io/a/rolling"}, trigger: trigger},
			},
		},
		{
			name: "once, a minute later",
			opts: []DispatcherOption{WithRechecks(1, time.Minute)},
			want: []check{first, {at: 60 * time.Second, repos: []string{"quay.io/a/rolling"}, trigger: trigger}},
		},
		{name: "disabled", opts: []DispatcherOption{WithRechecks(0, 0)}, want: []check{first}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &fakeChecker{start: time.Now(), notRunning: []string{"quay.io/a/rolling"}}
				d, stop := runDispatcher(t, c, tt.opts...)
				refs := []imageref.Reference{mustRef(t, "quay.io/a/rolling"), mustRef(t, "quay.io/a/running")}
				if err := d.Notify(Notification{Source: Quay, Repositories: refs, Received: time.Now()}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Minute)
				stop()
				if !slices.EqualFunc(c.checks, tt.want, func(a, b check) bool {
					return a.at == b.at && slices.Equal(a.repos, b.repos) && a.trigger == b.trigger
				}) {
					t.Errorf("checks\n%+v\nwant\n%+v", c.checks, tt.want)
				}
			})
		})
	}
}

// A notified tag that the check's listing lacked (the Distribution
// registry announces a manifest before it links the tag) is looked for
// again soon, with backoff, three times at most; a tag listed, or no tag
// named, costs no more checks.
func TestDispatcherUnlistedTags(t *testing.T) {
	const trigger = "a push notification from distribution"
	at := func(d time.Duration, repos ...string) check { return check{at: d, repos: repos, trigger: trigger} }
	tests := []struct {
		name       string
		notes      []string // notified at once, one notification each
		hidden     map[string]int
		notRunning []string
		want       []check
	}{
		{name: "listed at once", notes: []string{"r.example.com/a:v2"}, want: []check{at(0, "r.example.com/a:v2")}},
		{
			name: "listed at the first recheck", notes: []string{"r.example.com/a:v2"},
			hidden: map[string]int{"r.example.com/a:v2": 1},
			want:   []check{at(0, "r.example.com/a:v2"), at(unlistedAfter, "r.example.com/a:v2")},
		},
		{
			name: "never listed", notes: []string{"r.example.com/a:v2"},
			hidden: map[string]int{"r.example.com/a:v2": 100},
			want: []check{
				at(0, "r.example.com/a:v2"),
				at(unlistedAfter, "r.example.com/a:v2"),
				at(5*unlistedAfter, "r.example.com/a:v2"),  // 4x after
				at(21*unlistedAfter, "r.example.com/a:v2"), // 16x after
			},
		},
		{
			// A forged notification of a tag that never appears, for an
			// image not running: the two kinds of rechecks share one budget.
			name: "never listed, not running", notes: []string{"r.example.com/a:v2"},
			hidden: map[string]int{"r.example.com/a:v2": 100}, notRunning: []string{"r.example.com/a"},
			want: []check{
				at(0, "r.example.com/a:v2"),
				at(unlistedAfter, "r.example.com/a:v2"),
				at(5*unlistedAfter, "r.example.com/a:v2"),
				at(21*unlistedAfter, "r.example.com/a:v2"),
			},
		},
		{
			name: "not running, no tag named", notes: []string{"r.example.com/a"}, notRunning: []string{"r.example.com/a"},
			want: []check{at(0, "r.example.com/a"), at(DefaultRecheckAfter, "r.example.com/a"), at(5*DefaultRecheckAfter, "r.example.com/a"), at(21*DefaultRecheckAfter, "r.example.com/a")},
		},
		{name: "no tag named", notes: []string{"r.example.com/a"}, hidden: map[string]int{"r.example.com/a": 100}, want: []check{at(0, "r.example.com/a")}},
		{
			name:   "only the repository that lacks its tag",
			notes:  []string{"r.example.com/a:v2", "r.example.com/b:v7"},
			hidden: map[string]int{"r.example.com/b:v7": 1},
			want:   []check{at(0, "r.example.com/a:v2"), at(0, "r.example.com/b:v7"), at(unlistedAfter, "r.example.com/b:v7")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &fakeChecker{start: time.Now(), hidden: tt.hidden, notRunning: tt.notRunning}
				d, stop := runDispatcher(t, c)
				for _, n := range tt.notes {
					if err := d.Notify(Notification{Source: Distribution, Repositories: []imageref.Reference{mustRef(t, n)}, Received: time.Now()}); err != nil {
						t.Fatal(err)
					}
					synctest.Wait()
				}
				time.Sleep(time.Minute)
				stop()
				if !slices.EqualFunc(c.checks, tt.want, func(a, b check) bool {
					return a.at == b.at && slices.Equal(a.repos, b.repos) && a.trigger == b.trigger
				}) {
					t.Errorf("checks\n%+v\nwant\n%+v", c.checks, tt.want)
				}
			})
		})
	}
}

// The latest tags of a burst are the ones a recheck looks for, at most
// maxTags of them, in one check.
func TestDispatcherKeepsLatestTags(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &fakeChecker{start: time.Now(), hold: time.Second}
		d, stop := runDispatcher(t, c)
		for i := range 100 {
			ref := mustRef(t, fmt.Sprintf("r.example.com/a:v%d", i))
			if err := d.Notify(Notification{Source: Distribution, Repositories: []imageref.Reference{ref}, Received: time.Now()}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		time.Sleep(time.Minute)
		stop()
		if len(c.checks) != 2 {
			t.Fatalf("%d checks, want 2: %+v", len(c.checks), c.checks)
		}
		var want []string
		for i := 100 - maxTags; i < 100; i++ {
			want = append(want, fmt.Sprintf("r.example.com/a:v%d", i))
		}
		slices.Sort(want)
		if got := c.checks[1].repos; !slices.Equal(got, want) {
			t.Errorf("trailing check of %q, want %q", got, want)
		}
	})
}

// Notifications are taken only while Run runs: on the leader.
func TestDispatcherNotRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDispatcher(&fakeChecker{})
		n := Notification{Source: Quay, Repositories: []imageref.Reference{mustRef(t, "quay.io/a/x")}, Received: time.Now()}
		if err := d.Notify(n); !errors.Is(err, ErrNotRunning) {
			t.Fatalf("before Run: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		synctest.Wait()
		if err := d.Notify(n); err != nil {
			t.Fatalf("during Run: %v", err)
		}
		cancel()
		<-done
		if err := d.Notify(n); !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), "leader") {
			t.Fatalf("after Run: %v", err)
		}
	})
}

// Checks are counted; the latency from receipt to the end of the write-back
// is observed for checks that wrote, waiting for a check included.
func TestDispatcherMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := NewMetrics(prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		c := &fakeChecker{start: time.Now(), hold: 2 * time.Second, updated: true}
		d, stop := runDispatcher(t, c, WithDispatcherMetrics(m))
		// x is checked from 0 to 2s; y, notified at 1s, from 2s to 4s.
		for _, r := range []string{"quay.io/a/x", "quay.io/a/y"} {
			if err := d.Notify(Notification{Source: Quay, Repositories: []imageref.Reference{mustRef(t, r)}, Received: time.Now()}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		time.Sleep(time.Minute)
		stop()
		if got := testutil.ToFloat64(m.checks); got != 2 {
			t.Errorf("checks %v, want 2", got)
		}
		want := `
# HELP argocd_image_updater_webhook_update_latency_seconds Time from receiving a push notification to the end of the write-back of the check it caused, for checks that updated images.
# TYPE argocd_image_updater_webhook_update_latency_seconds histogram
argocd_image_updater_webhook_update_latency_seconds_bucket{le="0.25"} 0
argocd_image_updater_webhook_update_latency_seconds_bucket{le="0.5"} 0
argocd_image_updater_webhook_update_latency_seconds_bucket{le="1"} 0
argocd_image_updater_webhook_update_latency_seconds_bucket{le="2"} 1
argocd_image_updater_webhook_update_latency_seconds_bucket{le="4"} 2
argocd_image_updater_webhook_update_latency_seconds_bucket{le="8"} 2
argocd_image_updater_webhook_update_latency_seconds_bucket{le="16"} 2
argocd_image_updater_webhook_update_latency_seconds_bucket{le="32"} 2
argocd_image_updater_webhook_update_latency_seconds_bucket{le="64"} 2
argocd_image_updater_webhook_update_latency_seconds_bucket{le="128"} 2
argocd_image_updater_webhook_update_latency_seconds_bucket{le="256"} 2
argocd_image_updater_webhook_update_latency_seconds_bucket{le="512"} 2
argocd_image_updater_webhook_update_latency_seconds_bucket{le="+Inf"} 2
argocd_image_updater_webhook_update_latency_seconds_sum 5
argocd_image_updater_webhook_update_latency_seconds_count 2
`
		if err := testutil.CollectAndCompare(m.latency, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
	})
}

// One repository notified again and again while a check runs keeps a
// bounded number of receipt times.
func TestDispatcherBoundsReceived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, stop := runDispatcher(t, &fakeChecker{start: time.Now(), hold: time.Hour})
		n := Notification{Source: Quay, Repositories: []imageref.Reference{mustRef(t, "quay.io/a/x")}, Received: time.Now()}
		// The first is being checked; the others wait for the next check.
		if err := d.Notify(n); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for range 10 * maxReceived {
			n.Received = time.Now()
			if err := d.Notify(n); err != nil {
				t.Fatal(err)
			}
		}
		d.mu.Lock()
		got := len(d.pending["quay.io/a/x"].received)
		d.mu.Unlock()
		if got != maxReceived {
			t.Errorf("%d receipt times kept, want %d", got, maxReceived)
		}
		stop()
	})
}

// The repositories waiting for a check are bounded, while a long check
// holds the next one and while a replica that does not lead keeps what it
// accepted: past the bound a notification of a new repository is refused
// (ErrBusy, 503 to the sender), one of a repository already waiting is
// merged into its check.
func TestDispatcherBoundsPending(t *testing.T) {
	for _, leading := range []bool{true, false} {
		name := "leading"
		if !leading {
			name = "keeping for the leader"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opts []DispatcherOption
				if !leading {
					// No replica leads: what is accepted is kept.
					opts = append(opts, WithRelay(relayTestKey, func() Leader { return Leader{} }))
				}
				d := NewDispatcher(&fakeChecker{start: time.Now(), hold: time.Hour}, opts...)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				if leading {
					go func() { d.Run(ctx); close(done) }()
					synctest.Wait()
					// The first is being checked; the others wait.
					if err := d.Notify(notification(t, Quay, "quay.io/a/first")); err != nil {
						t.Fatal(err)
					}
					synctest.Wait()
				} else {
					close(done)
				}
				for i := range maxPending {
					if err := d.Notify(notification(t, Quay, fmt.Sprintf("quay.io/a/r%d", i))); err != nil {
						t.Fatalf("repository %d of %d: %v", i+1, maxPending, err)
					}
				}
				if err := d.Notify(notification(t, Quay, "quay.io/a/one-more")); !errors.Is(err, ErrBusy) {
					t.Errorf("a repository past %d waiting: %v, want ErrBusy", maxPending, err)
				}
				if err := d.Notify(notification(t, Harbor, "quay.io/a/r0")); err != nil {
					t.Errorf("a repository already waiting: %v", err)
				}
				d.mu.Lock()
				got := len(d.pending)
				d.mu.Unlock()
				if got != maxPending {
					t.Errorf("%d repositories waiting, want %d", got, maxPending)
				}
				cancel()
				<-done
			})
		})
	}
}
