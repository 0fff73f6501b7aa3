package manifest

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/image-updater/argocd-image-updater/internal/repoyaml"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// MarkerKey is the key of the marker comment that tells which image a
// value of a plain manifest holds: # {"$imageupdater": "<alias>"} for the
// whole reference, "<alias>:tag" for the version alone, "<alias>:name" for
// the name alone. It follows the form of Flux's image setters
// ({"$imagepolicy": ...}), whose users mark their manifests the same way.
const MarkerKey = "$imageupdater"

var markerRE = regexp.MustCompile(`#\s*\{\s*"\$imageupdater"\s*:\s*"([^"]*)"\s*\}`)

// HasMarkers tells whether a file has marker comments at all.
func HasMarkers(src []byte) bool { return bytes.Contains(src, []byte(`"`+MarkerKey+`"`)) }

// SetMarkedImages writes the updates into the values that marker comments
// name, as a text edit: only the value before each marker changes, its
// quotes kept. A marker naming an alias that is not updated is left
// alone. found lists the aliases marked in the file; changed the updates
// that altered it.
func SetMarkedImages(name string, src []byte, images []writeback.ImageUpdate) (out []byte, found map[string]bool, changed []writeback.ImageUpdate, _ error) {
	if err := repoyaml.CheckSize(name, src); err != nil {
		return nil, nil, nil, err
	}
	byAlias := map[string]writeback.ImageUpdate{}
	for _, img := range images {
		if img.Alias != "" {
			byAlias[img.Alias] = img
		}
	}
	found = map[string]bool{}
	modified := map[string]bool{}
	lines := strings.SplitAfter(string(src), "\n")
	for i, line := range lines {
		m := markerRE.FindStringSubmatchIndex(line)
		if m == nil {
			continue
		}
		ref := line[m[2]:m[3]]
		alias, part, _ := strings.Cut(ref, ":")
		img, ok := byAlias[alias]
		if !ok {
			continue
		}
		found[alias] = true
		var value string
		switch part {
		case "":
			value = img.Written()
		case "tag":
			value = img.New.String()
		case "name":
			value = img.Image.OriginalName()
		default:
			return nil, nil, nil, fmt.Errorf("%s:%d: marker %q: want %q, %q or %q", name, i+1, ref, alias, alias+":tag", alias+":name")
		}
		edited, err := replaceMarkedValue(line, m[0], value)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s:%d: %w", name, i+1, err)
		}
		if edited != line {
			lines[i] = edited
			modified[alias] = true
		}
	}
	for _, img := range images {
		if modified[img.Alias] {
			changed = append(changed, img)
		}
	}
	if len(changed) == 0 {
		return src, found, nil, nil
	}
	return []byte(strings.Join(lines, "")), found, changed, nil
}

// replaceMarkedValue replaces the scalar before the marker at col: the
// last word of "key: value" or "- value", quoted or not.
func replaceMarkedValue(line string, col int, value string) (string, error) {
	before := strings.TrimRight(line[:col], " \t")
	start := strings.LastIndexAny(before, " \t") + 1
	lead := strings.TrimRight(before[:start], " \t")
	word := before[start:]
	if word == "" || word == "-" || strings.HasSuffix(word, ":") || !(strings.HasSuffix(lead, ":") || strings.HasSuffix(lead, "-")) {
		return "", fmt.Errorf("the marker comment follows no value: it goes after \"image: <value>\" or \"- <value>\" on the same line")
	}
	quote := ""
	if q := word[0]; (q == '"' || q == '\'') && len(word) > 1 && word[len(word)-1] == q {
		quote = string(q)
	}
	// An image reference starts with a letter or digit and holds no space,
	// so it is a plain scalar as it is.
	return before[:start] + quote + value + quote + line[len(before):], nil
}
