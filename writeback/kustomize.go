package writeback

import "strings"

// kustomizeOverride is the images entry an update writes:
// "<orig>=<name>:<version>" when the override replaces another image name,
// else "<name>:<version>".
func kustomizeOverride(img ImageUpdate) string {
	if img.KustomizeImageName != "" && img.KustomizeImageName != img.Image {
		return img.KustomizeImageName + "=" + img.reference()
	}
	return img.reference()
}

// kustomizeTarget is the image name whose override an update replaces.
func kustomizeTarget(img ImageUpdate) string {
	if img.KustomizeImageName != "" {
		return img.KustomizeImageName
	}
	return img.Image
}

// kustomizeOriginalName returns the image name an images entry
// "[<orig>=]<name>[:<tag>][@<digest>]" overrides. Names are compared
// literally, as Kustomize matches them against the manifests' images.
func kustomizeOriginalName(entry string) string {
	if orig, _, ok := strings.Cut(entry, "="); ok {
		return orig
	}
	return imageNameOf(entry)
}

// imageNameOf strips tag and digest from a reference. A colon before the
// last slash belongs to a registry port ("localhost:5000/app"), not a tag.
func imageNameOf(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	slash := strings.LastIndex(ref, "/")
	if colon := strings.LastIndex(ref, ":"); colon > slash {
		ref = ref[:colon]
	}
	return ref
}

// updateKustomizeImages returns the images list with each update applied:
// every entry overriding the update's image is rewritten in place, an
// update without one is appended, and all other entries (including ones
// that are not strings) are kept in place. changed lists the updates that
// altered the list. current is not modified.
func updateKustomizeImages(current []any, images []ImageUpdate) (next []any, changed []ImageUpdate) {
	next = append([]any(nil), current...)
	for _, img := range images {
		want, target := kustomizeOverride(img), kustomizeTarget(img)
		found, modified := false, false
		for i, e := range next {
			s, ok := e.(string)
			if !ok || kustomizeOriginalName(s) != target {
				continue
			}
			found = true
			if s != want {
				next[i] = want
				modified = true
			}
		}
		if !found {
			next = append(next, want)
			modified = true
		}
		if modified {
			changed = append(changed, img)
		}
	}
	return next, changed
}
