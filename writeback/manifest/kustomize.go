package manifest

import (
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// kustomizeOverride is the images entry an update writes:
// "<orig>=<name>:<version>" when the override replaces another image name,
// else "<name>:<version>". spelling is how an existing entry writes the
// name it overrides ("" for a new entry): it is kept, so an entry for
// "docker.io/library/nginx" stays one when the image is "nginx".
func kustomizeOverride(img writeback.ImageUpdate, spelling string) string {
	k := img.KustomizeName()
	if spelling == "" {
		spelling = k.OriginalName()
	}
	if !k.SameName(img.Image) {
		return spelling + "=" + img.Written()
	}
	if spelling == img.Image.OriginalName() {
		return img.Written()
	}
	respelt, err := imageref.Parse(spelling)
	if err != nil {
		return img.Written()
	}
	out, err := respelt.WithVersion(img.New)
	if err != nil {
		return img.Written()
	}
	return out.Original()
}

// UpdateKustomizeImages returns the images list with each update applied:
// every entry overriding the update's image (in any spelling of its name,
// see imageref.Reference.MatchesName) is rewritten in place; without one,
// a plain entry naming the image's repository on another registry is
// replaced, the image having moved there (settings.ImageSpec.KustomizeEntry);
// else the update is appended. All other entries (including ones that are
// not strings) are kept in place. changed lists the updates that altered
// the list. current is not modified.
func UpdateKustomizeImages(current []any, images []writeback.ImageUpdate) (next []any, changed []writeback.ImageUpdate) {
	next = append([]any(nil), current...)
	for _, img := range images {
		entries := make([]string, len(next))
		for i, e := range next {
			entries[i], _ = e.(string)
		}
		target := img.KustomizeName()
		moved, byName, found := img.KustomizeEntry(entries)
		modified := false
		for i, s := range entries {
			orig, _, _ := settings.SplitKustomizeImage(s)
			want := ""
			switch {
			case s == "":
				continue
			case byName && target.MatchesName(orig):
				want = kustomizeOverride(img, orig)
			case found && !byName && i == moved:
				want = kustomizeOverride(img, "")
			default:
				continue
			}
			if s != want {
				next[i] = want
				modified = true
			}
		}
		if !found {
			next = append(next, kustomizeOverride(img, ""))
			modified = true
		}
		if modified {
			changed = append(changed, img)
		}
	}
	return next, changed
}
