package bench

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/strategy"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// size is the shape of one scenario.
type size struct {
	Name     string // "a", "b", "smoke"
	Title    string
	Apps     int // Applications, git ones included
	Images   int // image repositories
	Tags     int // tags per repository
	BigRepos int // repositories with BigTags tags instead
	BigTags  int
	GitApps  int // Applications written back to one git repository
	// Change adds cycles after new tags were pushed for every git
	// Application's image and a few others (twice: the first write after
	// start makes the clone, the second finds it), and one cycle between
	// them in which nothing new was pushed.
	Change bool
	// ChangeOnce keeps of those only the first change cycle.
	ChangeOnce bool
	// Webhook is how many push notifications are timed, after the cycles,
	// with the controller started again under a long interval.
	Webhook  int
	Interval time.Duration
	// OnRequest: run only when -scale.only names it.
	OnRequest bool
}

// The repository kinds, each read by one update strategy.
type repoKind string

const (
	kindSemver repoKind = "semver" // semver tags, one image
	kindGit    repoKind = "git"    // the same, used only by git write-back Applications
	kindBuild  repoKind = "build"  // build-NNNN tags, one image per tag (newest-build)
	kindDigest repoKind = "digest" // semver tags and "latest" (digest)
	kindAlpha  repoKind = "alpha"  // release-<date> tags (alphabetical)
)

// image is one image manifest with its config, as the registry stores it.
type image struct {
	manifest, config []byte
	digest           string // of the manifest
	configDigest     string
	created          time.Time
}

type repo struct {
	Name     string // path in the registry, "bench/semver-0001"
	Kind     repoKind
	Big      bool
	Tags     []string
	tagImage map[string]*image
}

// imageEntry is one image of an Application's image-list.
type imageEntry struct {
	Alias      string
	Repo       *repo
	Strategy   string
	Constraint string
	AllowTags  string
	Creds      string // pull-secret; "" means the registries.conf entry's
	Current    imageref.Version
	// Helm parameter names; empty for Kustomize sources.
	HelmName, HelmTag, HelmSpec string
	policy                      *strategy.Policy
}

type benchApp struct {
	Name     string
	Git      bool
	Helm     bool
	Override bool // the source already holds an override for each image
	Images   []*imageEntry
}

// workload is everything a scenario creates, and what the controller
// should choose for it.
type workload struct {
	size    size
	host    string // the registry part of image names
	gitURL  string
	layer   []byte // one shared layer blob
	diffID  string
	repos   []*repo
	apps    []*benchApp
	nextImg int // images created so far, so that every image differs
}

const (
	argocdNS        = testenv.ArgoCDNamespace
	pullSecretName  = "bench-pull"
	credsSecretName = "bench-creds"
	gitRepoName     = "deploy"
)

var (
	platform = v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	epoch    = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
)

// newWorkload lays out repositories, tags and Applications for a size,
// deterministically, and computes each image's current version as the one
// its strategy chooses, so that a cycle over the fresh workload has nothing
// to write.
func newWorkload(s size, host, gitURL string) (*workload, error) {
	w := &workload{size: s, host: host, gitURL: gitURL}
	w.layer, w.diffID = makeLayer()

	atLeast1 := func(n int) int { return max(1, n) }
	counts := []struct {
		kind repoKind
		n    int
	}{
		{kindGit, 0},
		{kindBuild, atLeast1(s.Images * 2 / 100)},
		{kindDigest, atLeast1(s.Images * 5 / 100)},
		{kindAlpha, atLeast1(s.Images * 3 / 100)},
	}
	if s.GitApps > 0 {
		counts[0].n = atLeast1(s.GitApps / 10)
	}
	rest := s.Images
	for _, c := range counts {
		rest -= c.n
	}
	if rest < s.BigRepos+1 {
		return nil, fmt.Errorf("size %s: %d images leave no room for semver repositories", s.Name, s.Images)
	}
	counts = append(counts, struct {
		kind repoKind
		n    int
	}{kindSemver, rest})
	byKind := map[repoKind][]*repo{}
	for _, c := range counts {
		for i := 0; i < c.n; i++ {
			n := s.Tags
			if c.kind == kindSemver && i < s.BigRepos {
				n = s.BigTags
			}
			r := w.newRepo(fmt.Sprintf("bench/%s-%04d", c.kind, i), c.kind, n)
			r.Big = c.kind == kindSemver && i < s.BigRepos
			w.repos = append(w.repos, r)
			byKind[c.kind] = append(byKind[c.kind], r)
		}
	}

	next := map[repoKind]int{}
	pick := func(k repoKind) *repo {
		rs := byKind[k]
		r := rs[next[k]%len(rs)]
		next[k]++
		return r
	}
	for i := 0; i < s.Apps; i++ {
		if i < s.GitApps {
			a := &benchApp{Name: fmt.Sprintf("git-%05d", i), Git: true, Override: false}
			a.Images = []*imageEntry{{Alias: "app", Repo: pick(kindGit), Strategy: "semver", Constraint: "^1.0"}}
			w.apps = append(w.apps, a)
			continue
		}
		// j numbers the argocd Applications; every mix below is by j, so
		// that even the smoke size has each kind.
		j := i - s.GitApps
		a := &benchApp{Name: fmt.Sprintf("app-%05d", i), Override: j%2 == 0}
		switch r := j % 100; {
		case r == 0:
			a.Images = []*imageEntry{{Alias: "app", Repo: pick(kindBuild), Strategy: "newest-build", AllowTags: "regexp:^build-"}}
		case r <= 5:
			a.Override = true
			a.Images = []*imageEntry{{Alias: "app", Repo: pick(kindDigest), Strategy: "digest", Constraint: "latest"}}
		case r <= 7:
			a.Images = []*imageEntry{{Alias: "app", Repo: pick(kindAlpha), Strategy: "alphabetical"}}
		default:
			a.Helm = j%10 < 3
			creds := ""
			switch {
			case j%20 == 7:
				creds = "pullsecret:" + argocdNS + "/" + pullSecretName
			case j%50 == 13:
				creds = "secret:" + argocdNS + "/" + credsSecretName + "#creds"
			}
			app := &imageEntry{Alias: "app", Repo: pick(kindSemver), Strategy: "semver", Creds: creds}
			app.Constraint = semverConstraint(j, len(app.Repo.Tags))
			a.Images = []*imageEntry{app}
			if j%3 == 0 {
				web := &imageEntry{Alias: "web", Repo: pick(kindSemver), Strategy: "semver", Creds: creds}
				web.Constraint = semverConstraint(j/3, len(web.Repo.Tags))
				a.Images = append(a.Images, web)
			}
			if a.Helm {
				// Default parameter names, custom ones, or one image-spec
				// parameter; a second image always has its own names.
				switch j % 3 {
				case 0:
					app.HelmName, app.HelmTag = settings.DefaultHelmImageName, settings.DefaultHelmImageTag
				case 1:
					app.HelmName, app.HelmTag = "app.image.repository", "app.image.tag"
				default:
					app.HelmSpec = "app.image"
				}
				if len(a.Images) > 1 {
					a.Images[1].HelmName, a.Images[1].HelmTag = "web.image.name", "web.image.tag"
				}
			}
		}
		w.apps = append(w.apps, a)
	}

	for _, a := range w.apps {
		for _, e := range a.Images {
			p, err := strategy.New(strategy.Settings{
				Strategy: e.Strategy, Constraint: e.Constraint, AllowTags: e.AllowTags,
				Platforms: []v1.Platform{{OS: platform.OS, Architecture: platform.Architecture}},
			})
			if err != nil {
				return nil, fmt.Errorf("application %s image %s: %w", a.Name, e.Alias, err)
			}
			e.policy = p
			res, err := w.choose(e)
			if err != nil {
				return nil, err
			}
			if res.Tag == "" {
				return nil, fmt.Errorf("application %s image %s: nothing qualifies: %s", a.Name, e.Alias, res.Reason)
			}
			e.Current = imageref.Version{Tag: res.Tag, Digest: res.Digest}
			if e.Strategy != "digest" {
				e.Current.Digest = ""
			}
		}
	}
	return w, nil
}

// semverConstraint varies the constraints Applications use: none, a caret
// range, a tilde range, a wildcard, an explicit range.
func semverConstraint(i, tags int) string {
	minors := max(1, tags/10)
	k := (i / 7) % minors
	switch (i / 5) % 5 {
	case 0:
		return ""
	case 1:
		return "^1.0"
	case 2:
		return fmt.Sprintf("~1.%d", k)
	case 3:
		return fmt.Sprintf("1.%d.x", k)
	default:
		// Space, not comma: image-list entries are separated by commas.
		return fmt.Sprintf(">=1.0.0 <1.%d.0", k+1)
	}
}

func (w *workload) newRepo(name string, kind repoKind, n int) *repo {
	r := &repo{Name: name, Kind: kind, tagImage: map[string]*image{}}
	shared := w.newImage(name, epoch.Add(time.Duration(len(w.repos))*time.Minute))
	for i := 0; i < n; i++ {
		var tag string
		img := shared
		switch kind {
		case kindBuild:
			tag = fmt.Sprintf("build-%04d", i+1)
			img = w.newImage(name, epoch.Add(time.Duration(i)*time.Hour))
		case kindAlpha:
			tag = "release-" + epoch.AddDate(0, 0, i).Format("2006-01-02")
		case kindDigest:
			if i == n-1 {
				tag = "latest"
				break
			}
			fallthrough
		default:
			tag = fmt.Sprintf("1.%d.%d", i/10, i%10)
		}
		r.Tags = append(r.Tags, tag)
		r.tagImage[tag] = img
	}
	return r
}

// nextTag is the tag a change pushes: a higher semver version than any.
func (r *repo) nextTag() string {
	n := 0
	for _, t := range r.Tags {
		if strings.HasPrefix(t, "1.") && strings.HasSuffix(t, ".0") {
			n++
		}
	}
	return fmt.Sprintf("1.%d.0", n)
}

// ref is the image's name as Applications write it.
func (w *workload) ref(r *repo) string { return w.host + "/" + r.Name }

// choose is what the controller should decide for an image now.
func (w *workload) choose(e *imageEntry) (strategy.Result, error) {
	meta := func(_ context.Context, tag string) (strategy.TagInfo, error) {
		img, ok := e.Repo.tagImage[tag]
		if !ok {
			return strategy.TagInfo{}, fmt.Errorf("no tag %s", tag)
		}
		return strategy.TagInfo{Tag: tag, Digest: img.digest, Created: img.created,
			Platforms: []v1.Platform{{OS: platform.OS, Architecture: platform.Architecture}}}, nil
	}
	return e.policy.Choose(context.Background(), e.Repo.Tags, e.Current, meta)
}

// credsKey groups image entries the way the controller lists tags: one
// listing per repository and credential reference.
func (e *imageEntry) credsKey() string { return e.Repo.Name + "\x00" + e.Creds }

// stats are counts the report and the checks compare against.
type stats struct {
	Entries      int // image entries over all Applications
	Listings     int // distinct (repository, credentials)
	NewestBuild  int // image entries using newest-build
	Digest       int // image entries using digest
	MetaHeads    int // manifest HEADs if every image entry looked up its tags on its own
	SharedHeads  int // manifest HEADs if each (repository, credentials, tag) is looked up once a cycle
	DigestHeads  int // distinct (repository, credentials, tag) that digest images follow
	GitApps      int
	HelmApps     int
	CredsEntries int // entries with their own pull-secret
	TotalTags    int
	ByStrategy   map[string]int
}

func (w *workload) stats() stats {
	s := stats{ByStrategy: map[string]int{}}
	keys := map[string]bool{}
	looked := map[string]bool{}
	followed := map[string]bool{}
	for _, a := range w.apps {
		if a.Git {
			s.GitApps++
		}
		if a.Helm {
			s.HelmApps++
		}
		for _, e := range a.Images {
			s.Entries++
			s.ByStrategy[e.Strategy]++
			keys[e.credsKey()] = true
			if e.Creds != "" {
				s.CredsEntries++
			}
			switch e.Strategy {
			case "newest-build":
				s.NewestBuild++
				s.MetaHeads += len(e.Repo.Tags)
				for _, tag := range e.Repo.Tags {
					looked[e.credsKey()+"\x00"+tag] = true
				}
			case "digest":
				s.Digest++
				s.MetaHeads++
				looked[e.credsKey()+"\x00"+e.Constraint] = true
				followed[e.credsKey()+"\x00"+e.Constraint] = true
			}
		}
	}
	s.Listings = len(keys)
	s.SharedHeads = len(looked)
	s.DigestHeads = len(followed)
	for _, r := range w.repos {
		s.TotalTags += len(r.Tags)
	}
	return s
}

// change pushes a new, higher tag to every git Application's repository
// and to one semver repository in twenty (never a big one), and returns
// the repositories touched and what the controller should now write:
// images per Application, Applications patched, git Applications changed.
type changeSet struct {
	Repos      []*repo
	Tags       map[*repo]string
	Images     int
	Patched    int // argocd Applications with a new version
	GitChanged int
}

func (w *workload) planChange() *changeSet {
	cs := &changeSet{Tags: map[*repo]string{}}
	semver := 0
	for _, r := range w.repos {
		switch {
		case r.Kind == kindGit:
		case r.Kind == kindSemver && !r.Big:
			if semver%20 != 1 {
				semver++
				continue
			}
			semver++
		default:
			continue
		}
		cs.Repos = append(cs.Repos, r)
		cs.Tags[r] = r.nextTag()
	}
	return cs
}

// apply adds the change's tags to the model and counts what changes.
// The images are created here; fill writes them to the registry.
func (w *workload) apply(cs *changeSet) ([]*repo, error) {
	for _, r := range cs.Repos {
		tag := cs.Tags[r]
		r.Tags = append(r.Tags, tag)
		r.tagImage[tag] = w.newImage(r.Name, epoch.AddDate(1, 0, 0))
	}
	touched := map[*repo]bool{}
	for _, r := range cs.Repos {
		touched[r] = true
	}
	for _, a := range w.apps {
		changed := 0
		for _, e := range a.Images {
			if !touched[e.Repo] {
				continue
			}
			res, err := w.choose(e)
			if err != nil {
				return nil, err
			}
			if res.Update {
				changed++
			}
		}
		cs.Images += changed
		switch {
		case changed == 0:
		case a.Git:
			cs.GitChanged++
		default:
			cs.Patched++
		}
	}
	return cs.Repos, nil
}

// settle records the versions the controller wrote for argocd
// Applications (git ones still run the old version until Argo CD syncs).
func (w *workload) settle() error {
	for _, a := range w.apps {
		if a.Git {
			continue
		}
		for _, e := range a.Images {
			res, err := w.choose(e)
			if err != nil {
				return err
			}
			if res.Update {
				e.Current = imageref.Version{Tag: res.Tag, Digest: res.Digest}
				if e.Strategy != "digest" {
					e.Current.Digest = ""
				}
			}
		}
	}
	return nil
}

// object is the Application as Argo CD would hold it: annotations, a
// source with or without overrides, and the running images in the status.
func (w *workload) object(a *benchApp) *unstructured.Unstructured {
	ann := map[string]any{}
	set := func(k, v string) { ann[settings.AnnotationPrefix+k] = v }
	var list, running []string
	for _, e := range a.Images {
		entry := e.Alias + "=" + w.ref(e.Repo)
		if e.Constraint != "" {
			entry += ":" + e.Constraint
		}
		list = append(list, entry)
		set(e.Alias+".update-strategy", e.Strategy)
		if e.AllowTags != "" {
			set(e.Alias+".allow-tags", e.AllowTags)
		}
		if e.HelmSpec != "" {
			set(e.Alias+".helm.image-spec", e.HelmSpec)
		} else if e.HelmName != "" && e.HelmName != settings.DefaultHelmImageName {
			set(e.Alias+".helm.image-name", e.HelmName)
			set(e.Alias+".helm.image-tag", e.HelmTag)
		}
		running = append(running, imageWithVersion(w.ref(e.Repo), e.Current))
	}
	set("image-list", strings.Join(list, ","))
	if creds := a.Images[0].Creds; creds != "" {
		set("pull-secret", creds)
	}
	source := map[string]any{"repoURL": "https://git.example.com/platform/apps.git", "targetRevision": "main",
		"path": "apps/" + a.Name}
	sourceType := "Kustomize"
	switch {
	case a.Git:
		set("write-back-method", "git")
		set("write-back-target", "kustomization")
		set("git-branch", "main")
		source["repoURL"] = w.gitURL
		source["kustomize"] = map[string]any{}
	case a.Helm:
		sourceType = "Helm"
		helm := map[string]any{}
		if a.Override {
			var params []any
			for _, e := range a.Images {
				if e.HelmSpec != "" {
					params = append(params, map[string]any{"name": e.HelmSpec, "value": imageWithVersion(w.ref(e.Repo), e.Current)})
					continue
				}
				params = append(params,
					map[string]any{"name": e.HelmName, "value": w.ref(e.Repo)},
					map[string]any{"name": e.HelmTag, "value": e.Current.String()})
			}
			helm["parameters"] = params
		}
		source["helm"] = helm
	default:
		if !a.Override {
			set("write-back-method", "argocd")
		}
		kust := map[string]any{}
		if a.Override {
			var images []any
			for _, e := range a.Images {
				images = append(images, imageWithVersion(w.ref(e.Repo), e.Current))
			}
			kust["images"] = images
		}
		source["kustomize"] = kust
	}
	imgs := make([]any, len(running))
	for i, r := range running {
		imgs[i] = r
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": a.Name, "namespace": argocdNS, "annotations": ann,
			"labels": map[string]any{"bench": w.size.Name}},
		"spec": map[string]any{
			"project": "default", "source": source,
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": a.Name},
		},
		"status": map[string]any{"sourceType": sourceType, "summary": map[string]any{"images": imgs}},
	}}
}

func imageWithVersion(ref string, c imageref.Version) string {
	switch {
	case c.Tag != "" && c.Digest != "":
		return ref + ":" + c.Tag + "@" + c.Digest
	case c.Digest != "":
		return ref + "@" + c.Digest
	default:
		return ref + ":" + c.Tag
	}
}

// gitFiles is the monorepo the git Applications write to: a base and one
// overlay per Application whose images block names what runs now.
func (w *workload) gitFiles() map[string]string {
	files := map[string]string{
		"base/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- deployment.yaml\n",
		"base/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  template:\n    spec:\n" +
			"      containers:\n      - name: app\n        image: app\n",
	}
	for _, a := range w.apps {
		if !a.Git {
			continue
		}
		var b strings.Builder
		b.WriteString("# Overlay of " + a.Name + ".\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
		b.WriteString("namespace: " + a.Name + "\nresources:\n- ../../base\nimages:\n")
		for _, e := range a.Images {
			fmt.Fprintf(&b, "- name: %s\n  newTag: %s\n", w.ref(e.Repo), e.Current.Tag)
		}
		files["apps/"+a.Name+"/kustomization.yaml"] = b.String()
	}
	return files
}

// makeLayer is a small gzipped tar, the one layer every image shares.
func makeLayer() (blob []byte, diffID string) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	content := []byte("benchmark image\n")
	_ = tw.WriteHeader(&tar.Header{Name: "etc/bench", Mode: 0o644, Size: int64(len(content)), ModTime: epoch})
	_, _ = tw.Write(content)
	_ = tw.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(tarBuf.Bytes())
	_ = zw.Close()
	return gz.Bytes(), sha256Digest(tarBuf.Bytes())
}

// newImage makes an image whose config differs from every other one (a
// counter label), so each has its own digest.
func (w *workload) newImage(repoName string, created time.Time) *image {
	w.nextImg++
	diffID, _ := v1.NewHash(w.diffID)
	cfg := v1.ConfigFile{
		Architecture: platform.Architecture, OS: platform.OS,
		Created: v1.Time{Time: created},
		Config:  v1.Config{Labels: map[string]string{"bench.repository": repoName, "bench.image": fmt.Sprint(w.nextImg)}},
		RootFS:  v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{diffID}},
	}
	config, _ := json.Marshal(cfg)
	configHash, _ := v1.NewHash(sha256Digest(config))
	layerHash, _ := v1.NewHash(sha256Digest(w.layer))
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(config)), Digest: configHash},
		Layers:        []v1.Descriptor{{MediaType: types.OCILayer, Size: int64(len(w.layer)), Digest: layerHash}},
	}
	manifest, _ := json.Marshal(m)
	return &image{manifest: manifest, config: config, digest: sha256Digest(manifest), configDigest: configHash.String(), created: created}
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
