package manifest

import (
	"maps"

	"github.com/image-updater/argocd-image-updater/writeback"
)

// helmParameter is one name/value pair an update writes.
type helmParameter struct {
	name, value string
	imageName   bool // the value is the image name alone
}

// helmParametersFor lists the parameters an update sets: one "name:version"
// parameter with an image-spec, else the name and the version separately,
// and with an image-digest the tag and the digest separately (an empty
// digest for a version not pinned, so that no earlier pin stays).
func helmParametersFor(img writeback.ImageUpdate) []helmParameter {
	if img.HelmImageSpec != "" {
		return []helmParameter{{name: img.HelmImageSpec, value: img.Written()}}
	}
	name, tag := img.HelmParameters()
	if img.HelmImageDigest != "" {
		return []helmParameter{{name: name, value: img.Image.OriginalName(), imageName: true}, {name: tag, value: img.New.Tag}, {name: img.HelmImageDigest, value: img.New.Digest}}
	}
	return []helmParameter{{name: name, value: img.Image.OriginalName(), imageName: true}, {name: tag, value: img.New.String()}}
}

// pluginEnvFor lists the plugin environment variables an update sets, as
// helmParametersFor: "name:version" in PluginEnvSpec, else the name and the
// version in those of PluginEnvName and PluginEnvTag that are set.
func pluginEnvFor(img writeback.ImageUpdate) []helmParameter {
	if img.PluginEnvSpec != "" {
		return []helmParameter{{name: img.PluginEnvSpec, value: img.Written()}}
	}
	var env []helmParameter
	if img.PluginEnvName != "" {
		env = append(env, helmParameter{name: img.PluginEnvName, value: img.Image.OriginalName(), imageName: true})
	}
	if img.PluginEnvTag != "" {
		env = append(env, helmParameter{name: img.PluginEnvTag, value: img.New.String()})
	}
	return env
}

// UpdateHelmParameters returns the parameter list with each update merged
// in by name. An entry whose value differs gets the new value and
// forceString true, keeping every other key it has (even keys unknown to
// Argo CD's Go types); an entry already holding the value is left alone;
// missing parameters are appended. changed lists the updates that altered
// the list. current and its entries are not modified.
func UpdateHelmParameters(current []any, images []writeback.ImageUpdate) (next []any, changed []writeback.ImageUpdate) {
	return updateNamedValues(current, images, helmParametersFor, map[string]any{"forceString": true})
}

// UpdatePluginEnv is UpdateHelmParameters for a config management plugin's
// environment (spec.source.plugin.env): the variables the images' plugin
// targets name, entries of {name, value}.
func UpdatePluginEnv(current []any, images []writeback.ImageUpdate) (next []any, changed []writeback.ImageUpdate) {
	return updateNamedValues(current, images, pluginEnvFor, nil)
}

// updateNamedValues merges into a list of {name, value} objects the entries
// each update sets, with the extra keys on every entry it writes.
func updateNamedValues(current []any, images []writeback.ImageUpdate, entriesFor func(writeback.ImageUpdate) []helmParameter, extra map[string]any) (next []any, changed []writeback.ImageUpdate) {
	next = append([]any(nil), current...)
	for _, img := range images {
		modified := false
		for _, p := range entriesFor(img) {
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
				maps.Copy(updated, extra)
				next[i] = updated
				modified = true
			}
			if !found {
				entry := map[string]any{"name": p.name, "value": p.value}
				maps.Copy(entry, extra)
				next = append(next, entry)
				modified = true
			}
		}
		if modified {
			changed = append(changed, img)
		}
	}
	return next, changed
}
