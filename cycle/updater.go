package cycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/firstseen"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/strategy"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// Applications is where the cycle finds the managed Applications, with
// image names read with opts.
type Applications interface {
	Applications(opts ...imageref.Option) []*application.Application
}

// Registry answers questions about image repositories.
type Registry interface {
	Tags(ctx context.Context, ref imageref.Reference, creds credref.Ref) ([]string, error)
	Metadata(ctx context.Context, ref imageref.Reference, creds credref.Ref, platforms []v1.Platform, opts ...registry.MetadataOption) (registry.ImageMetadata, error)
	// ForgetTags forgets what is known of the tags of ref's repository: a
	// push notification says they may have moved.
	ForgetTags(ref imageref.Reference)
	// Endpoint is the registries.conf entry that serves ref.
	Endpoint(ref imageref.Reference) config.Endpoint
	// PushTimes is when the registry says tags of ref's repository were
	// pushed; registry.ErrNoPushTimes where it cannot say.
	PushTimes(ctx context.Context, ref imageref.Reference, creds credref.Ref, tags []string) (map[string]time.Time, error)
}

// ApplicationWriter writes new versions into the Application itself
// (write-back method argocd), and asks Argo CD to read an Application's
// sources now, after another method wrote to them.
type ApplicationWriter interface {
	writeback.Writer
	// Refresh asks Argo CD to read the Application's sources now, and
	// sets the annotations of also in the same request.
	Refresh(ctx context.Context, namespace, name string, also map[string]string) error
}

// Updater runs update cycles. It holds only what it is configured with
// and what stays from one pass to the next; a pass's own state is a run.
type Updater struct {
	// What it reads.
	apps             Applications
	registry         Registry
	config           func() *config.Config
	defaultPlatforms []v1.Platform
	// controllerNamespace alone may name env: and ext: credentials.
	controllerNamespace string
	signatures          Signatures
	charts              ChartRepositories
	gitTags             GitTags
	keySecrets          credentials.SecretGetter
	trustedRoot         *signature.TrustedRoot

	// Where it writes, and when it may.
	argocd          ApplicationWriter
	git             writeback.Writer
	dryRun          bool
	refreshAfterGit bool
	writeGate       func() error
	writeCtx        context.Context
	gate            HealthGate
	notices         Notices
	// maxNotices is maxNoticesPerPass unless a test lowers it.
	maxNotices int
	// minReleaseAge is the images' default minimum release age, the
	// times those firstSeen keeps.
	minReleaseAge time.Duration
	firstSeen     *firstseen.Store
	syncWindows   SyncWindows

	// Its bounds.
	maxConcurrency     int
	imageTimeout       time.Duration
	applicationTimeout time.Duration
	passBudget         int64
	// slots are the maxConcurrency slots, shared by the passes under way.
	slots *slots

	// Whom it tells.
	logger   *slog.Logger
	events   *EventReporter
	metrics  *Metrics
	observer Observer

	now func() time.Time
	// running is held by each pass: a cycle or a check of repositories
	// overlaps no other pass; checks of ImageUpdaters, each of its own
	// Applications, overlap each other.
	running sync.RWMutex
	// writing is held by each batch of writes: those of passes that
	// overlap never do.
	writing sync.Mutex
	// pending counts the passes under way or waiting for their turn;
	// progress is when one last started while none was, or an image or
	// a chart was last checked or a write made (Unix nanoseconds): what
	// Stalled reads.
	pending  atomic.Int32
	progress atomic.Int64
}

// Option configures an Updater.
type Option func(*Updater)

// WithRegistryConfig gives the current registries.conf.
func WithRegistryConfig(cfg func() *config.Config) Option {
	return func(u *Updater) { u.config = cfg }
}

// WithMaxConcurrency bounds the registry listings and write-backs in flight.
func WithMaxConcurrency(n int) Option { return func(u *Updater) { u.maxConcurrency = n } }

// DefaultImageTimeout is how long one tag listing, and the choice of one
// image's new version with the metadata it needs, may take.
const DefaultImageTimeout = 5 * time.Minute

// WithImageTimeout bounds each tag listing and each image's choice of a
// version in place of DefaultImageTimeout, so that a cycle ends whatever
// one registry does.
func WithImageTimeout(d time.Duration) Option { return func(u *Updater) { u.imageTimeout = d } }

// DefaultPassBudget bounds in bytes the tag lists and chart versions one
// pass holds at once, from the registries and chart repositories tenants
// name: at the install's 512 MiB, a quarter; some 3 million tags.
const DefaultPassBudget = 128 << 20

// WithPassBudget sets the bytes of tag lists and chart versions one pass
// may hold (DefaultPassBudget); a listing that would pass it fails its
// images or charts alone.
func WithPassBudget(n int64) Option { return func(u *Updater) { u.passBudget = n } }

// WithRefreshAfterGit makes Argo CD read an Application's sources as soon
// as a git write-back for it landed, instead of at its next poll.
func WithRefreshAfterGit(on bool) Option { return func(u *Updater) { u.refreshAfterGit = on } }

// WithDryRun computes and logs every change and writes nothing.
func WithDryRun(dryRun bool) Option { return func(u *Updater) { u.dryRun = dryRun } }

// WithDefaultPlatforms sets the platforms of images that name none; the
// controller's own platform in production.
func WithDefaultPlatforms(ps ...v1.Platform) Option {
	return func(u *Updater) { u.defaultPlatforms = ps }
}

// WithGitWriter writes Applications whose write-back-method is git, all
// changes of a cycle at once, so that each repository and branch gets one
// push; without it such Applications are reported as errors.
func WithGitWriter(w writeback.Writer) Option { return func(u *Updater) { u.git = w } }

// WithControllerNamespace is the Argo CD namespace the controller runs in.
// Only Applications in it may name env: and ext: credentials in their
// annotations; without it, none may.
func WithControllerNamespace(ns string) Option {
	return func(u *Updater) { u.controllerNamespace = ns }
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(u *Updater) { u.logger = l } }

// WithEvents reports to Kubernetes events; nil reports nothing.
func WithEvents(e *EventReporter) Option { return func(u *Updater) { u.events = e } }

// WithMetrics records metrics; nil records nothing.
func WithMetrics(m *Metrics) Option { return func(u *Updater) { u.metrics = m } }

// WithWriteGate is asked before the changes of a cycle are handed to each
// write-back method (the writers ask it again before each patch and push:
// argocd.WithWriteGate, git.WithPushGate). An error keeps the writes from
// starting, without reporting a failure: the controller refuses writes
// once it is stopping or no longer holds the leader Lease, and a later
// cycle, or the replica that leads then, writes the change.
func WithWriteGate(gate func() error) Option { return func(u *Updater) { u.writeGate = gate } }

// WithWriteContext runs writes under wctx instead of the cycle's context,
// so that a write in flight when the cycle is stopped can finish (the
// controller cancels wctx when its shutdown grace period ends). A stopped
// cycle starts no further write either way.
func WithWriteContext(wctx context.Context) Option { return func(u *Updater) { u.writeCtx = wctx } }

// WithObserver is told, at the end of each cycle, what it did for each
// Application (targeted checks are not reported).
func WithObserver(o Observer) Option { return func(u *Updater) { u.observer = o } }

// WithMinReleaseAge sets the minimum release age of the images that set
// none (default 0, none).
func WithMinReleaseAge(d time.Duration) Option { return func(u *Updater) { u.minReleaseAge = d } }

// WithFirstSeen keeps when the versions of repositories with a minimum
// release age were first seen in s, which each cycle saves; by default
// the times are kept in memory only.
func WithFirstSeen(s *firstseen.Store) Option { return func(u *Updater) { u.firstSeen = s } }

// withClock replaces time.Now, for tests.
func withClock(now func() time.Time) Option { return func(u *Updater) { u.now = now } }

// New returns an Updater. argocd writes the argocd write-back method. The
// options are checked together: an error names each that cannot work.
func New(apps Applications, reg Registry, argocd ApplicationWriter, opts ...Option) (*Updater, error) {
	u := &Updater{
		apps:           apps,
		registry:       reg,
		argocd:         argocd,
		config:         func() *config.Config { return &config.Config{} },
		maxConcurrency: 10,
		imageTimeout:   DefaultImageTimeout,
		logger:         slog.New(slog.DiscardHandler),
		now:            time.Now,
	}
	for _, opt := range opts {
		opt(u)
	}
	if err := u.check(); err != nil {
		return nil, fmt.Errorf("the update cycle: %w", err)
	}
	if u.applicationTimeout == 0 {
		u.applicationTimeout = defaultApplicationTimeoutFactor * u.imageTimeout
	}
	if u.passBudget <= 0 {
		u.passBudget = DefaultPassBudget
	}
	u.slots = newSlots(u.maxConcurrency)
	if u.firstSeen == nil {
		u.firstSeen = firstseen.New(nil, firstseen.WithClock(func() time.Time { return u.now() }))
	}
	return u, nil
}

func (u *Updater) check() error {
	var errs []error
	if u.maxConcurrency < 1 {
		errs = append(errs, fmt.Errorf("a maximum concurrency of %d: at least 1 is needed", u.maxConcurrency))
	}
	if u.imageTimeout <= 0 {
		errs = append(errs, fmt.Errorf("an image timeout of %s: it must be positive", u.imageTimeout))
	}
	if u.minReleaseAge < 0 || u.minReleaseAge > settings.MaxReleaseAge {
		errs = append(errs, fmt.Errorf("a minimum release age of %s: from 0 to %s", u.minReleaseAge, settings.MaxReleaseAge))
	}
	if u.applicationTimeout < 0 {
		errs = append(errs, fmt.Errorf("an Application timeout of %s: it must not be negative", u.applicationTimeout))
	}
	if u.config == nil {
		errs = append(errs, errors.New("no registries configuration (WithRegistryConfig(nil))"))
	}
	if u.logger == nil {
		errs = append(errs, errors.New("no logger (WithLogger(nil))"))
	}
	if u.signatures != nil && u.keySecrets == nil {
		errs = append(errs, errors.New("signatures are checked, and no Secrets can be read for their keys"))
	}
	return errors.Join(errs...)
}

// Summary is what one cycle did.
type Summary struct {
	Applications int
	Images       int
	// Charts counts the charts of chart-list and the repositories of
	// git-tag-list, ChartListings the index reads, OCI tag listings and
	// git tag listings they took. An OCI repository that holds images
	// the cycle checks too is listed once for both, counted in each.
	Charts        int
	ChartListings int
	Skipped       int
	Updated       int
	Errors        int
	// NotWritten counts the Applications whose changes were not written
	// because no write could start (this replica lost its Lease, the run
	// was stopped): no failure of theirs, but nothing was written.
	NotWritten int
	// Waiting counts the images whose newer version waits for its
	// minimum release age, WaitingWindow those whose change waits for
	// its Application's update window, and NextWindow is when the first
	// of those windows opens (zero: none within a year).
	Waiting       int
	WaitingWindow int
	NextWindow    time.Time
	// WaitingPromotion counts the images promoted from a stage that have
	// nothing to take from it yet.
	WaitingPromotion int
	TagListings      int
	Duration         time.Duration
	// Trigger is what asked for a targeted check (CheckRepositories);
	// empty for a cycle.
	Trigger string
	// NotRunning are the repositories of images skipped because their
	// Application does not run them, once each.
	NotRunning []imageref.Reference
	// Unlisted are the repositories, each with a tag it was asked to
	// check, whose listing lacked that tag: a registry may announce a push
	// before it lists the tag. Only for CheckRepositories; a listing that
	// failed says nothing here.
	Unlisted []imageref.Reference
}

// Run runs a cycle every interval until ctx ends. A cycle never overlaps
// the previous one: the next starts interval after the previous began, or
// at once if it took longer. When ctx ends, the cycle running stops
// reading and starts no write; Run returns when its writes in flight are
// done.
func (u *Updater) Run(ctx context.Context, interval time.Duration) {
	for ctx.Err() == nil {
		start := u.now()
		sum := u.RunOnce(ctx)
		wait := interval - u.now().Sub(start)
		if opens := sum.NextWindow.Sub(u.now()); !sum.NextWindow.IsZero() && opens < wait {
			// Changes wait for an update window: written as it opens.
			wait = opens
		}
		if wait < 0 {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Stalled reports whether a pass (a cycle or a check) is under way and,
// for longer than after, no image or chart was checked (whatever the
// answer) nor any write made, nor a pass started: something holds the
// controller, and a restart is the way out. A long cycle that makes
// progress is not stalled, and none is while no pass is under way, as
// between cycles or on a replica that does not hold the leader Lease.
func (u *Updater) Stalled(after time.Duration) bool {
	return u.pending.Load() > 0 && u.now().Sub(time.Unix(0, u.progress.Load())) > after
}

// progressed records that an image or a chart was checked, or a write made.
func (u *Updater) progressed() { u.progress.Store(u.now().UnixNano()) }

// RunOnce runs one cycle. ctx bounds its reads, and once it ends no write
// starts; see WithWriteContext for the writes in flight.
func (u *Updater) RunOnce(ctx context.Context) Summary { return u.run(ctx, scope{}) }

type tagResult struct {
	tags []string
	err  error
	// bytes is what tags count against the pass's budget.
	bytes int64
}

// listTags lists the tags of ref's repository with creds, within ctx.
func (u *Updater) listTags(ctx context.Context, ref imageref.Reference, creds credref.Ref) tagResult {
	var tags []string
	err := u.guard("listing the tags of "+ref.Name(), func() (err error) {
		tags, err = u.registry.Tags(ctx, ref, creds)
		return err
	})
	return tagResult{tags: tags, err: u.timedOut(ctx, ref.Name(), err)}
}

// appUpdate collects the changes of one Application.
type appUpdate struct {
	app     *application.Application
	source  application.Source
	changes []writeback.ImageUpdate
	charts  []writeback.ChartUpdate
	// revert: the health gate writes a version back (see Revert).
	revert bool
}

// outcome is what choosing a version for one job gave.
type outcome struct {
	job     *job
	result  strategy.Result
	labels  map[string]string
	skipped []Skipped
	// waiting is a newer version held back (its age, its stage).
	waiting *Waiting
	err     error
}

// chooseOne runs the job's strategy over its repository's tags, with
// metadata asked for once per cycle (memo) and, when a signature key is
// set, only among signed versions.
func (u *Updater) chooseOne(ctx context.Context, j *job, tr tagResult, memo *passMemo, keys map[keyID]loadedKey) outcome {
	if tr.err != nil {
		return outcome{job: j, err: tr.err}
	}
	var opts []registry.MetadataOption
	if j.policy.Name() == strategy.Digest {
		// It follows the tag: ask where it points each time.
		opts = append(opts, registry.FollowTag())
	}
	fetch := MetadataFunc(u.registry, j.ref, j.creds, j.platforms, opts...)
	remembered := func(ctx context.Context, tag string) (strategy.TagInfo, error) {
		return memo.meta.get(ctx, j.metadataKey(tag), func(ctx context.Context) (strategy.TagInfo, error) { return fetch(ctx, tag) })
	}
	meta := remembered
	if j.policy.Name() == strategy.NewestBuild {
		if mode := u.registry.Endpoint(j.ref).TagSortMode; mode != config.TagSortNone {
			meta = orderedMetadata(tr.tags, mode)
		}
	}
	if j.stageErr != nil {
		return outcome{job: j, err: j.stageErr}
	}
	c := Choice{Pin: Pin{Mode: j.spec.PinDigest}, Age: u.releaseAge(j, memo)}
	if j.stage != nil {
		v, wait := u.promotable(j.stage)
		c.promote = &promotion{version: v, wait: wait}
	}
	if c.Pin.Mode != settings.PinNever {
		follow := MetadataFunc(u.registry, j.ref, j.creds, j.platforms, registry.FollowTag())
		c.Pin.Digest = func(ctx context.Context, tag string) (string, error) {
			info, err := memo.meta.get(ctx, j.metadataKey(tag)+"\x00follow", func(ctx context.Context) (strategy.TagInfo, error) { return follow(ctx, tag) })
			return info.Digest, err
		}
	}
	ctx, cancel := u.withImageTimeout(ctx)
	defer cancel()
	var res strategy.Result
	var skipped []Skipped
	var waiting *Waiting
	err := u.guard("choosing a version of "+j.spec.Key(), func() (err error) {
		if j.sigKey.IsZero() {
			res, waiting, err = Choose(ctx, j.policy, tr.tags, j.current, meta, c)
			return err
		}
		if u.signatures == nil {
			return configError{fmt.Errorf("%s names a signature key, and this controller does not check signatures", j.sigKey.Origin)}
		}
		k := keys[keyOf(j.sigKey)]
		if k.err != nil {
			return k.err
		}
		digest := func(ctx context.Context, tag string) (string, error) {
			info, err := remembered(ctx, tag)
			return info.Digest, err
		}
		verify := func(ctx context.Context, d string) error { return u.signatures.Verify(ctx, j.ref, j.creds, d, k.key) }
		res, skipped, waiting, err = ChooseVerified(ctx, j.policy, tr.tags, j.current, meta, SignatureCheck{Digest: digest, Verify: verify}, c)
		return err
	})
	// The chosen tag's labels, when the strategy read its metadata; never
	// a request of their own.
	info, _ := memo.meta.known(j.metadataKey(res.Tag))
	return outcome{job: j, result: res, labels: info.Labels, skipped: skipped, waiting: waiting, err: u.timedOut(ctx, j.ref.Name(), err)}
}

// releaseAge is the job's minimum release age: its own, else the
// controller's default; the times are the registry's push times where it
// gives them, else those the updater first saw the repository's versions.
// Push times are asked once a pass for the same tags; a registry that
// cannot give them leaves the first sightings, which come later.
func (u *Updater) releaseAge(j *job, memo *passMemo) Age {
	min := u.minReleaseAge
	if j.spec.MinReleaseAgeOrigin != "" {
		min = j.spec.MinReleaseAge
	}
	repo := j.ref.Name()
	pushed := func(ctx context.Context, tags []string) map[string]time.Time {
		key := j.repoKey() + "\x00" + strings.Join(tags, "\x00")
		times, err := memo.pushed.get(ctx, key, func(ctx context.Context) (map[string]time.Time, error) {
			return u.registry.PushTimes(ctx, j.ref, j.creds, tags)
		})
		if err != nil && !errors.Is(err, registry.ErrNoPushTimes) && ctx.Err() == nil {
			u.logger.Info("push times not read; versions are aged from when they were first seen",
				"application", j.app.Key(), "image", j.spec.Key(), "error", err)
		}
		return times
	}
	return Age{Min: min, Now: u.now, Pushed: pushed, FirstSeen: func(versions []string) map[string]time.Time { return u.firstSeen.Times(repo, versions) }}
}

// errImageTimeout is the cause of a context that withImageTimeout ended.
var errImageTimeout = errors.New("image timeout")

// withImageTimeout bounds one listing or one image's choice.
func (u *Updater) withImageTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, u.imageTimeout, errImageTimeout)
}

// timedOut says so when err came from running out of the image timeout,
// which the registry's own error may not make plain (the context's
// deadline error looks like any other).
func (u *Updater) timedOut(ctx context.Context, repo string, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), errImageTimeout) {
		return err
	}
	return fmt.Errorf("gave up on %s after %s, the time allowed for one image: %w", repo, u.imageTimeout, err)
}

// guard runs f and turns a panic in it into an error for what it was
// doing, with the stack in the log: input from a registry, a repository or
// an Application must not be able to stop the controller.
func (u *Updater) guard(what string, f func() error) error {
	err := safe.Call(f)
	safe.Log(u.logger, what, err)
	return err
}

func isWarning(err error) bool {
	var p settings.Problem
	return errors.As(err, &p) && p.Warning
}

// MetadataFunc gives a strategy the registry's metadata of the tags of
// ref's repository, for the given platforms.
func MetadataFunc(reg Registry, ref imageref.Reference, creds credref.Ref, platforms []v1.Platform, opts ...registry.MetadataOption) strategy.MetadataFunc {
	return func(ctx context.Context, tag string) (strategy.TagInfo, error) {
		tagged, err := ref.WithTag(tag)
		if err != nil {
			return strategy.TagInfo{}, err
		}
		md, err := reg.Metadata(ctx, tagged, creds, platforms, opts...)
		// An image without the wanted platform is not an error: its
		// platforms make the strategy pass it over.
		if err != nil && !errors.Is(err, registry.ErrNoMatchingPlatform) {
			return strategy.TagInfo{}, err
		}
		return strategy.TagInfo{Tag: tag, Digest: md.Digest, Created: md.Created, Platforms: md.Platforms, Labels: md.Labels}, nil
	}
}

// orderedMetadata stands in for registry metadata when registries.conf
// says the registry lists tags newest first or last (tagsortmode): the
// position in the listing is the age, so newest-build needs no request
// per tag. Platforms are not known this way and are not checked.
func orderedMetadata(tags []string, mode config.TagSortMode) strategy.MetadataFunc {
	rank := make(map[string]int, len(tags))
	for i, t := range tags {
		if mode == config.TagSortLatestFirst {
			i = len(tags) - 1 - i
		}
		if _, seen := rank[t]; !seen {
			rank[t] = i
		}
	}
	epoch := time.Unix(0, 0)
	return func(_ context.Context, tag string) (strategy.TagInfo, error) {
		r, ok := rank[tag]
		if !ok {
			return strategy.TagInfo{}, fmt.Errorf("tag %s is not in the listing", tag)
		}
		return strategy.TagInfo{Tag: tag, Created: epoch.Add(time.Duration(r+1) * time.Second)}, nil
	}
}

// newVersion is the version written for the job: the digest strategy
// pins a digest, since following a mutable tag means following its
// digest, and so does an image whose pin-digest says so; other images get
// tags, as users of Argo CD Image Updater expect.
func (j *job) newVersion(r strategy.Result) imageref.Version {
	if j.policy.Name() == strategy.Digest || j.spec.PinDigest != settings.PinNever {
		return r.Version()
	}
	return imageref.Version{Tag: r.Tag}
}
