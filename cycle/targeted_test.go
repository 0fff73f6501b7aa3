package cycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/poll"
	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// A targeted check runs the cycle's pipeline over the named repositories
// only: other images and Applications are neither listed nor written.
func TestCheckRepositories(t *testing.T) {
	k := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	for _, repo := range []string{"tc-app", "tc-web", "tc-idle"} {
		reg.PushImage(t, repo, []string{"1.0.0"})
		reg.PushImage(t, repo, []string{"1.1.0"})
	}
	ref := func(repo string) imageref.Reference {
		r, err := imageref.Parse(reg.Repo(repo))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	tests := []struct {
		name        string
		repos       []string
		wantUpdated map[string][]string // Application suffix -> kustomize images after the check
		wantApps    int
		wantLists   int64
	}{
		{
			name:  "one repository, two Applications",
			repos: []string{"tc-app"},
			wantUpdated: map[string][]string{
				"a":    {reg.Repo("tc-app") + ":1.1.0"},
				"both": {reg.Repo("tc-app") + ":1.1.0"},
			},
			wantApps: 2, wantLists: 1,
		},
		{
			name:  "two repositories",
			repos: []string{"tc-app", "tc-web"},
			wantUpdated: map[string][]string{
				"a":    {reg.Repo("tc-app") + ":1.1.0"},
				"w":    {reg.Repo("tc-web") + ":1.1.0"},
				"both": {reg.Repo("tc-app") + ":1.1.0", reg.Repo("tc-web") + ":1.1.0"},
			},
			wantApps: 3, wantLists: 2,
		},
		{name: "a repository no Application uses", repos: []string{"tc-unused"}},
		{name: "no repository"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := "tc" + string(rune('a'+i)) + "-"
			w := newWorld(t, k, reg, worldOptions{names: prefix + "*"})
			w.create(t,
				appObject(prefix+"a", map[string]string{"image-list": "app=" + reg.Repo("tc-app")}, nil, reg.Repo("tc-app")+":1.0.0"),
				appObject(prefix+"w", map[string]string{"image-list": "web=" + reg.Repo("tc-web")}, nil, reg.Repo("tc-web")+":1.0.0"),
				appObject(prefix+"both", map[string]string{"image-list": "app=" + reg.Repo("tc-app") + ",web=" + reg.Repo("tc-web")}, nil,
					reg.Repo("tc-app")+":1.0.0", reg.Repo("tc-web")+":1.0.0"),
				appObject(prefix+"idle", map[string]string{"image-list": "idle=" + reg.Repo("tc-idle")}, nil, reg.Repo("tc-idle")+":1.0.0"),
			)
			var repos []imageref.Reference
			for _, r := range tt.repos {
				repos = append(repos, ref(r))
			}

			sum := w.updater.CheckRepositories(t.Context(), repos, "a push notification from test")
			if sum.Applications != tt.wantApps || sum.Errors != 0 || sum.TagListings != int(tt.wantLists) {
				t.Errorf("summary %+v, want %d Applications and %d listings", sum, tt.wantApps, tt.wantLists)
			}
			if got := w.requests.tagLists.Load(); got != tt.wantLists {
				t.Errorf("%d tag listings reached the registry, want %d", got, tt.wantLists)
			}
			for _, suffix := range []string{"a", "w", "both", "idle"} {
				got := testenv.KustomizeImages(t, w.get(t, prefix+suffix))
				slices.Sort(got)
				if want := tt.wantUpdated[suffix]; !slices.Equal(got, want) {
					t.Errorf("%s: kustomize images %v, want %v", suffix, got, want)
				}
			}
			for suffix := range tt.wantUpdated {
				var evs []string
				poll.True(t, 15*time.Second, "an event on the Application "+prefix+suffix, func() bool {
					evs = nil
					for _, e := range w.events(t, prefix+suffix) {
						evs = append(evs, e.Reason+": "+e.Message)
					}
					return len(evs) > 0
				})
				if len(evs) != 1 || !strings.HasPrefix(evs[0], ReasonImagesUpdated+": ") || !strings.Contains(evs[0], "after a push notification from test: ") {
					t.Errorf("%s: events %q", suffix, evs)
				}
			}
			// A check is not a cycle: the gauges of what is watched are the
			// cycles' to set.
			if got := testutil.CollectAndCount(w.metrics.imagesWatchedVec); got != 0 {
				t.Errorf("a check set %d images-watched series", got)
			}
		})
	}
}

// An image its Application does not run is skipped, and the summary names
// its repository once, so that the check can be made again (Argo CD may be
// rolling out another version).
func TestCheckRepositoriesNotRunning(t *testing.T) {
	k := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	reg.PushImage(t, "nr-app", []string{"1.0.0", "1.1.0"})
	reg.PushImage(t, "nr-web", []string{"1.0.0", "1.1.0"})
	w := newWorld(t, k, reg, worldOptions{names: "nr-*"})
	w.create(t,
		appObject("nr-a", map[string]string{"image-list": "app=" + reg.Repo("nr-app")}, nil),
		appObject("nr-b", map[string]string{"image-list": "app=" + reg.Repo("nr-app")}, nil),
		appObject("nr-w", map[string]string{"image-list": "web=" + reg.Repo("nr-web")}, nil, reg.Repo("nr-web")+":1.0.0"),
	)
	refs := []imageref.Reference{mustParse(t, reg.Repo("nr-app")), mustParse(t, reg.Repo("nr-web"))}
	sum := w.updater.CheckRepositories(t.Context(), refs, "a push notification from test")
	if sum.Skipped != 2 || sum.Updated != 1 {
		t.Errorf("summary %+v, want 2 images skipped and 1 Application updated", sum)
	}
	if len(sum.NotRunning) != 1 || !sum.NotRunning[0].SameName(refs[0]) {
		t.Errorf("not running %v, want %s once", sum.NotRunning, refs[0].Name())
	}
}

// A repository named with the tag a notification named is reported when
// its listing lacks that tag (the registry announced the push before it
// showed the tag), and not when it has it or no tag was named.
func TestCheckRepositoriesUnlisted(t *testing.T) {
	k := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	reg.PushImage(t, "ul-app", []string{"1.0.0", "1.1.0"})
	w := newWorld(t, k, reg, worldOptions{names: "ul-*"})
	w.create(t, appObject("ul-a", map[string]string{"image-list": "app=" + reg.Repo("ul-app")}, nil, reg.Repo("ul-app")+":1.0.0"))
	bare := mustParse(t, reg.Repo("ul-app"))
	tagged := func(tag string) imageref.Reference { return mustParse(t, reg.Repo("ul-app")+":"+tag) }
	tests := []struct {
		name  string
		repos []imageref.Reference
		want  []string
	}{
		{name: "without a tag", repos: []imageref.Reference{bare}},
		{name: "a listed tag", repos: []imageref.Reference{tagged("1.1.0")}},
		{name: "a tag not listed yet", repos: []imageref.Reference{tagged("1.2.0")}, want: []string{reg.Repo("ul-app") + ":1.2.0"}},
		{name: "one of two tags", repos: []imageref.Reference{tagged("1.1.0"), tagged("1.3.0")}, want: []string{reg.Repo("ul-app") + ":1.3.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum := w.updater.CheckRepositories(t.Context(), tt.repos, "a push notification from test")
			var got []string
			for _, r := range sum.Unlisted {
				got = append(got, r.String())
			}
			if sum.Errors != 0 || sum.TagListings != 1 || !slices.Equal(got, tt.want) {
				t.Errorf("summary %+v: unlisted %q, want %q after one listing", sum, got, tt.want)
			}
		})
	}
}

// A steady cycle asks no tag's digest it learnt while the tag list stayed
// the same, but a digest image's tag every time; a push notification makes
// the next check ask again, and so finds a tag pushed again to a newer
// image, which the tag list does not show.
func TestSteadyCyclesAndPushNotification(t *testing.T) {
	k := testenv.SharedKube(t)
	reg := testenv.StartRegistry(t)
	old, newer := testenv.Created(time.Unix(1e9, 0)), testenv.Created(time.Unix(1.1e9, 0))
	reg.PushImage(t, "hd-app", []string{"build-1"}, old)
	reg.PushImage(t, "hd-app", []string{"build-2"}, newer)
	reg.PushImage(t, "hd-app", []string{"latest"}, newer)
	w := newWorld(t, k, reg, worldOptions{names: "hd-*"})
	repo := reg.Repo("hd-app")
	w.create(t,
		appObject("hd-newest", map[string]string{
			"image-list":          "app=" + repo,
			"app.update-strategy": "newest-build",
			"app.allow-tags":      "regexp:^build-",
		}, nil, repo+":build-2"),
		appObject("hd-digest", map[string]string{
			"image-list":          "app=" + repo + ":latest",
			"app.update-strategy": "digest",
		}, nil, repo+":latest"),
	)
	cycle := func(what string, wantHeads int64) Summary {
		t.Helper()
		w.requests.heads.Store(0)
		sum := w.updater.RunOnce(t.Context())
		if sum.Errors != 0 {
			t.Fatalf("%s: summary %+v", what, sum)
		}
		if got := w.requests.heads.Load(); got != wantHeads {
			t.Errorf("%s: %d manifest HEADs, want %d", what, got, wantHeads)
		}
		return sum
	}
	// The first cycle asks each tag once (build-1, build-2, latest); the
	// digest image pins latest's digest.
	cycle("first cycle", 3)
	// Then only the digest image's tag.
	cycle("steady cycle", 1)

	// build-1 is pushed again, to the newest image: the tag list is the
	// same, so a cycle does not see it.
	reg.PushImage(t, "hd-app", []string{"build-1"}, testenv.Created(time.Unix(1.2e9, 0)))
	if sum := cycle("cycle after a quiet push", 1); sum.Updated != 0 {
		t.Errorf("cycle after a quiet push: %d updated", sum.Updated)
	}
	// A push notification does.
	w.requests.heads.Store(0)
	sum := w.updater.CheckRepositories(t.Context(), []imageref.Reference{mustParse(t, repo)}, "a push notification from test")
	if sum.Updated != 1 || sum.Errors != 0 {
		t.Errorf("check: summary %+v, want hd-newest updated", sum)
	}
	if got := w.requests.heads.Load(); got != 3 {
		t.Errorf("check: %d manifest HEADs, want 3", got)
	}
	if got := testenv.KustomizeImages(t, w.get(t, "hd-newest")); !slices.Equal(got, []string{repo + ":build-1"}) {
		t.Errorf("hd-newest runs %v, want build-1", got)
	}
}

// A check waits for a cycle under way: the two never overlap.
func TestCheckWaitsForCycle(t *testing.T) {
	apps := &countingApps{block: make(chan struct{}), entered: make(chan struct{}, 2)}
	u := mustNew(t, apps, nil, nil)
	ref, err := imageref.Parse("registry.example.com/app")
	if err != nil {
		t.Fatal(err)
	}
	cycleDone := make(chan struct{})
	go func() { u.RunOnce(context.Background()); close(cycleDone) }()
	<-apps.entered // the cycle holds the Updater

	checkDone := make(chan Summary)
	go func() { checkDone <- u.CheckRepositories(context.Background(), []imageref.Reference{ref}, "test") }()
	select {
	case <-apps.entered:
		t.Fatal("the check started while the cycle ran")
	case <-checkDone:
		t.Fatal("the check finished while the cycle ran")
	case <-time.After(200 * time.Millisecond):
	}
	close(apps.block)
	<-cycleDone
	sum := <-checkDone
	if apps.calls.Load() != 2 || sum.Trigger != "test" {
		t.Errorf("%d plans, summary %+v", apps.calls.Load(), sum)
	}
}

// countingApps holds every run that lists it until block is closed.
type countingApps struct {
	block   chan struct{}
	entered chan struct{}
	calls   atomic.Int32
}

func (c *countingApps) Applications(...imageref.Option) []*application.Application {
	c.calls.Add(1)
	c.entered <- struct{}{}
	<-c.block
	return nil
}

// A check hands the git write-backs of all the Applications it updates to
// the git writer at once, as a cycle does, so that each repository and
// branch gets one push.
func TestCheckRepositoriesBatchesGitWrites(t *testing.T) {
	var apps fixedApps
	for _, name := range []string{"git-a", "git-b", "git-other"} {
		image := "registry.example.com/team/api"
		if name == "git-other" {
			image = "registry.example.com/team/web"
		}
		obj := appObject(name, map[string]string{"write-back-method": "git", "image-list": "app=" + image}, nil, image+":1.0.0")
		app, err := application.FromUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		apps = append(apps, app)
	}
	reg := &listingRegistry{tags: []string{"1.0.0", "1.1.0"}}
	git := &batchRecorder{}
	u := mustNew(t, apps, reg, nil, WithGitWriter(git))

	sum := u.CheckRepositories(t.Context(), []imageref.Reference{mustParse(t, "registry.example.com/team/api:9.9.9")}, "a push notification from test")
	if sum.Updated != 2 || sum.Errors != 0 || sum.TagListings != 1 || reg.calls.Load() != 1 {
		t.Fatalf("summary %+v, %d listings", sum, reg.calls.Load())
	}
	if len(git.batches) != 1 {
		t.Fatalf("%d git batches, want 1", len(git.batches))
	}
	var names []string
	for _, gu := range git.batches[0] {
		names = append(names, gu.App.Name)
		if len(gu.Images) != 1 || gu.Images[0].New.Tag != "1.1.0" {
			t.Errorf("%s: images %+v", gu.App.Name, gu.Images)
		}
	}
	if !slices.Equal(names, []string{"git-a", "git-b"}) {
		t.Errorf("batch of %v, want git-a and git-b", names)
	}
}

func mustParse(t *testing.T, s string) imageref.Reference {
	t.Helper()
	r, err := imageref.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type fixedApps []*application.Application

func (a fixedApps) Applications(...imageref.Option) []*application.Application { return a }

// listingRegistry answers every tag listing with tags and counts them.
type listingRegistry struct {
	tags  []string
	calls atomic.Int32
}

func (r *listingRegistry) Tags(context.Context, imageref.Reference, credref.Ref) ([]string, error) {
	r.calls.Add(1)
	return slices.Clone(r.tags), nil
}

func (*listingRegistry) ForgetTags(imageref.Reference) {}
func (*listingRegistry) PushTimes(context.Context, imageref.Reference, credref.Ref, []string) (map[string]time.Time, error) {
	return nil, registry.ErrNoPushTimes
}

func (r *listingRegistry) Metadata(context.Context, imageref.Reference, credref.Ref, []v1.Platform, ...registry.MetadataOption) (registry.ImageMetadata, error) {
	return registry.ImageMetadata{}, errors.New("no metadata in this test")
}

func (r *listingRegistry) Endpoint(imageref.Reference) config.Endpoint { return config.Endpoint{} }

// batchRecorder is a git writer that keeps each batch and reports every
// change as pushed.
type batchRecorder struct{ batches [][]writeback.Change }

func (b *batchRecorder) Write(_ context.Context, changes []writeback.Change) []writeback.Result {
	b.batches = append(b.batches, changes)
	results := make([]writeback.Result, len(changes))
	for i, c := range changes {
		results[i] = writeback.Result{Namespace: c.App.Namespace, Name: c.App.Name, Changed: c.Images, Written: true, Commit: "0123abcd", Branch: "main"}
	}
	return results
}
