package cycle

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
)

// CheckRepositories checks now the images and the charts in OCI
// registries, of every managed Application, whose repository is one of
// repos (compared by registry and repository,
// whatever the tag), through the same steps as a cycle.
// A repository may be named with a tag, once for each tag a push
// notification named; Summary.Unlisted says which of those the listing
// lacked. The steps: what was known of
// those repositories' tags is forgotten, since a push may move a tag
// without changing the listing; then one tag listing per
// repository and credentials, the images' own strategies and filters, and
// write-back with one push per repository and branch. Other images are not
// looked at. trigger says what asked for the check ("a push notification
// from quay.io"); the ImagesUpdated events name it.
//
// A check waits for a cycle under way to finish and a cycle for a check:
// the two never overlap. A check does not count as a cycle for the cycle
// metrics; for Stalled, its progress counts as a cycle's.
func (u *Updater) CheckRepositories(ctx context.Context, repos []imageref.Reference, trigger string) Summary {
	if len(repos) == 0 {
		return Summary{Trigger: trigger}
	}
	names := make(map[string]bool, len(repos))
	for _, r := range repos {
		names[r.Name()] = true
	}
	return u.run(ctx, scope{repos: repos, names: names, why: trigger})
}

// CheckImageUpdaters checks now every image of the Applications that the
// named ImageUpdater resources select, through the same steps as a cycle,
// and writes those resources' status (that of a resource that cannot be
// used at all too, naming why). It is how a resource that was created or
// changed takes effect without waiting for the next cycle, and with the
// v1.x line's interval 0 the only way it takes effect. Checks of
// ImageUpdaters overlap each other (not a cycle, nor a check of
// repositories): each covers the Applications of its own resources, and
// shares the slots with the others as a cycle's Applications do, so that
// one whose registries never answer does not hold the others'.
func (u *Updater) CheckImageUpdaters(ctx context.Context, names []types.NamespacedName, trigger string) Summary {
	if len(names) == 0 {
		return Summary{Trigger: trigger}
	}
	return u.run(ctx, scope{updaters: names, why: trigger})
}

// scope is what a run covers: some repositories, or the Applications of
// some ImageUpdaters; the zero scope is a full cycle.
type scope struct {
	repos    []imageref.Reference
	names    map[string]bool // of repos, by Name
	updaters []types.NamespacedName
	// why is what asked for the run; empty for a cycle.
	why string
}

// full tells whether the run is a full cycle, which alone counts for the
// cycle metrics and Stalled, and alone tells what is watched.
func (s scope) full() bool { return len(s.repos) == 0 && len(s.updaters) == 0 }

// observed tells whether the observer hears of the run: it writes the
// status of every ImageUpdater a full cycle covers, or of those named.
func (s scope) observed() bool { return s.full() || len(s.updaters) > 0 }

func (s scope) includes(ref imageref.Reference) bool { return s.names[ref.Name()] }

// applications keeps the Applications that have an image or a chart in
// an OCI registry in scope, each reduced to those images and charts, so
// that planning, listing and writing see nothing else. Problems of the
// others are left to the cycles; those of the Application itself stay,
// since they stop its write-back.
func (s scope) applications(apps []*application.Application) []*application.Application {
	if len(s.updaters) > 0 {
		// A new slice: apps may be shared with passes under way.
		var out []*application.Application
		for _, app := range apps {
			if app.ImageUpdater.Name != "" && slices.Contains(s.updaters, app.ImageUpdater) {
				out = append(out, app)
			}
		}
		return out
	}
	var out []*application.Application
	for _, app := range apps {
		var images []settings.ImageSpec
		for _, spec := range app.Settings.Images {
			if s.includes(spec.Image) {
				images = append(images, spec)
			}
		}
		var charts []settings.ChartSpec
		for _, spec := range app.Settings.Charts {
			if src, ok := app.ChartSource(spec); ok && src.ChartRepo.IsOCI() && s.includes(src.ChartRepo.OCI) {
				charts = append(charts, spec)
			}
		}
		if len(images) == 0 && len(charts) == 0 {
			continue
		}
		reduced := *app
		reduced.Settings.Images, reduced.Settings.Charts = images, charts
		reduced.Settings.Problems = nil
		for _, p := range app.Settings.Problems {
			if p.Image == "" {
				reduced.Settings.Problems = append(reduced.Settings.Problems, p)
			}
		}
		out = append(out, &reduced)
	}
	return out
}

// unlisted are the scope's repositories named with a tag that a listing
// of the repository (for whatever credentials) succeeded without, and
// none listed.
func (s scope) unlisted(byRepo map[string][]*job, tags map[string]tagResult) []imageref.Reference {
	if len(s.repos) == 0 {
		return nil
	}
	// The successful listings by repository, so that many repositories
	// and listings cost time in proportion to them.
	tagged := map[string]bool{}
	for _, r := range s.repos {
		if r.Tag() != "" {
			tagged[r.Name()] = true
		}
	}
	listings := map[string][][]string{}
	for key, js := range byRepo {
		name := js[0].ref.Name()
		if tr := tags[key]; tr.err == nil && tagged[name] {
			listings[name] = append(listings[name], tr.tags)
		}
	}
	var out []imageref.Reference
	for _, r := range s.repos {
		ls := listings[r.Name()]
		if r.Tag() == "" || len(ls) == 0 {
			continue
		}
		if !slices.ContainsFunc(ls, func(l []string) bool { return slices.Contains(l, r.Tag()) }) {
			out = append(out, r)
		}
	}
	return out
}
