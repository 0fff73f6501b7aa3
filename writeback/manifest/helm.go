package manifest

import "github.com/image-updater/argocd-image-updater/writeback"

// helmParameter is one name/value pair an update writes.
type helmParameter struct {
	name, value string
	imageName   bool // the value is the image name alone
}

// helmParametersFor lists the parameters an update sets: one "name:version"
// parameter with an image-spec, else the name and the version separately.
func helmParametersFor(img writeback.ImageUpdate) []helmParameter {
	if img.HelmImageSpec != "" {
		return []helmParameter{{name: img.HelmImageSpec, value: img.Written()}}
	}
	name, tag := img.HelmParameters()
	return []helmParameter{{name: name, value: img.Image.OriginalName(), imageName: true}, {name: tag, value: img.New.String()}}
}

// UpdateHelmParameters returns the parameter list with each update merged
// in by name. An entry whose value differs gets the new value and
// forceString true, keeping every other key it has (even keys unknown to
// Argo CD's Go types); an entry already holding the value is left alone;
// missing parameters are appended. changed lists the updates that altered
// the list. current and its entries are not modified.
func UpdateHelmParameters(current []any, images []writeback.ImageUpdate) (next []any, changed []writeback.ImageUpdate) {
	next = append([]any(nil), current...)
	for _, img := range images {
		modified := false
		for _, p := range helmParametersFor(img) {
			found := false
			for i, e := range next {
				entry, ok := e.(map[string]any)
				if !ok || entry["name"] != p.name {
					continue
				}
				// Helm applies parameters in order, so every entry of that
				// name must hold the value for it to take effect.
				found = true
				if v, ok := entry["value"].(string); ok && v == p.value {
					continue
				}
				updated := make(map[string]any, len(entry)+2)
				for k, v := range entry {
					updated[k] = v
				}
				updated["value"] = p.value
				updated["forceString"] = true
				next[i] = updated
				modified = true
			}
			if !found {
				next = append(next, map[string]any{"name": p.name, "value": p.value, "forceString": true})
				modified = true
			}
		}
		if modified {
			changed = append(changed, img)
		}
	}
	return next, changed
}
