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
// the name alone, "<alias>:digest" for the digest of a pinned version
// alone (then the file's "<alias>:tag" values get the tag alone). It follows the form of Flux's image setters
// ({"$imagepolicy": ...}), whose users mark their manifests the same way.
//
// In the files of an app-of-apps parent, "<application>/<alias>" or
// "<namespace>/<application>/<alias>" marks a value of a child
// Application: one of its images, in the same three forms, or the version
// of one of its charts (see SetApplicationMarkers).
const MarkerKey = "$imageupdater"

var markerRE = regexp.MustCompile(`#\s*\{\s*"\$imageupdater"\s*:\s*"([^"]*)"\s*\}`)

// HasMarkers tells whether a file has marker comments at all.
func HasMarkers(src []byte) bool { return bytes.Contains(src, []byte(`"`+MarkerKey+`"`)) }

// SetMarkedImages writes the updates into the values that marker comments
// name, as a text edit: only the value before each marker changes, its
// quotes kept. A marker naming an alias that is not updated, or naming an
// Application ("<application>/<alias>"), is left alone. found lists the
// aliases marked in the file; changed the updates that altered it.
func SetMarkedImages(name string, src []byte, images []writeback.ImageUpdate) (out []byte, found map[string]bool, changed []writeback.ImageUpdate, _ error) {
	byAlias := aliasesOf(images)
	digests := digestMarked(src)
	out, found, modified, err := setMarked(name, src, func(ref string) (string, string, bool, error) {
		alias, part, _ := strings.Cut(ref, ":")
		img, ok := byAlias[alias]
		if !ok {
			return "", "", false, nil
		}
		v, err := imageValue(img, ref, part, digests[alias])
		return v, alias, true, err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	for _, img := range images {
		if modified[img.Alias] {
			changed = append(changed, img)
		}
	}
	return out, found, changed, nil
}

// MarkedChange is what SetApplicationMarkers found and wrote: the aliases
// of images and of charts marked in the file, and the updates that
// altered it.
type MarkedChange struct {
	Images, Charts map[string]bool
	ChangedImages  []writeback.ImageUpdate
	ChangedCharts  []writeback.ChartUpdate
}

// SetApplicationMarkers writes the images and chart versions of the child
// Application def into the values its parent's files mark with
// # {"$imageupdater": "<application>/<alias>"} (the child in
// def.DefaultNamespace, where Argo CD creates an Application whose
// manifest names no namespace; none when that is not known) or
// "<namespace>/<application>/<alias>":
// an image alias as SetMarkedImages writes it (":tag" and ":name"
// included), a chart alias as the chart's new version. It is a text edit
// of the values before the markers, as SetMarkedImages; markers of other
// Applications, and those naming no Application, are left alone.
func SetApplicationMarkers(name string, src []byte, def ApplicationDefinition, images []writeback.ImageUpdate, charts []writeback.ChartUpdate) (out []byte, _ MarkedChange, _ error) {
	byAlias := aliasesOf(images)
	chartByAlias := map[string]writeback.ChartUpdate{}
	for _, c := range charts {
		if c.Alias != "" {
			chartByAlias[c.Alias] = c
		}
	}
	isChart := map[string]bool{}
	digests := digestMarked(src)
	out, found, modified, err := setMarked(name, src, func(ref string) (string, string, bool, error) {
		parts := strings.Split(ref, "/")
		ns := def.DefaultNamespace
		switch len(parts) {
		case 2:
			if ns == "" {
				return "", "", false, nil
			}
		case 3:
			ns = parts[0]
		default:
			return "", "", false, nil
		}
		if parts[len(parts)-2] != def.Name || ns != def.Namespace {
			return "", "", false, nil
		}
		alias, part, _ := strings.Cut(parts[len(parts)-1], ":")
		if img, ok := byAlias[alias]; ok {
			whole, _, _ := strings.Cut(ref, ":")
			v, err := imageValue(img, ref, part, digests[whole])
			return v, alias, true, err
		}
		c, ok := chartByAlias[alias]
		if !ok {
			return "", "", false, nil
		}
		isChart[alias] = true
		if part != "" {
			return "", "", false, fmt.Errorf("marker %q: %s is a chart, whose version is written whole: want %q", ref, alias, strings.TrimSuffix(ref, ":"+part))
		}
		return c.New, alias, true, nil
	})
	if err != nil {
		return nil, MarkedChange{}, err
	}
	mc := MarkedChange{Images: map[string]bool{}, Charts: map[string]bool{}}
	for a := range found {
		if isChart[a] {
			mc.Charts[a] = true
		} else {
			mc.Images[a] = true
		}
	}
	for _, img := range images {
		if img.Alias != "" && modified[img.Alias] && !isChart[img.Alias] {
			mc.ChangedImages = append(mc.ChangedImages, img)
		}
	}
	for _, c := range charts {
		if c.Alias != "" && modified[c.Alias] && isChart[c.Alias] {
			mc.ChangedCharts = append(mc.ChangedCharts, c)
		}
	}
	return out, mc, nil
}

func aliasesOf(images []writeback.ImageUpdate) map[string]writeback.ImageUpdate {
	byAlias := map[string]writeback.ImageUpdate{}
	for _, img := range images {
		if img.Alias != "" {
			byAlias[img.Alias] = img
		}
	}
	return byAlias
}

// imageValue is what a marker ref, of part "" (the whole reference),
// "tag", "name" or "digest", writes of an image; splitDigest says the
// file marks the image's digest too, which the tag then leaves out. The
// digest of a version not pinned is empty, so that no earlier pin stays.
func imageValue(img writeback.ImageUpdate, ref, part string, splitDigest bool) (string, error) {
	switch part {
	case "":
		return img.Written(), nil
	case "tag":
		if splitDigest {
			return img.New.Tag, nil
		}
		return img.New.String(), nil
	case "name":
		return img.Image.OriginalName(), nil
	case "digest":
		return img.New.Digest, nil
	}
	whole := strings.TrimSuffix(ref, ":"+part)
	return "", fmt.Errorf("marker %q: want %q, %q, %q or %q", ref, whole, whole+":tag", whole+":name", whole+":digest")
}

// digestMarked lists what the markers of src mark the digest of: the
// marker's reference without ":digest".
func digestMarked(src []byte) map[string]bool {
	marked := map[string]bool{}
	for _, m := range markerRE.FindAllSubmatch(src, -1) {
		if whole, ok := strings.CutSuffix(string(m[1]), ":digest"); ok {
			marked[whole] = true
		}
	}
	return marked
}

// setMarked replaces the value before each marker comment of src that
// value resolves: value returns what to write and the alias it counts
// for, or ok false to leave the marker alone. found holds the aliases of
// the markers resolved, modified those whose value changed. Errors are
// named file:line.
func setMarked(name string, src []byte, value func(ref string) (v, alias string, ok bool, err error)) (out []byte, found, modified map[string]bool, _ error) {
	if err := repoyaml.CheckSize(name, src); err != nil {
		return nil, nil, nil, err
	}
	found = map[string]bool{}
	modified = map[string]bool{}
	lines := strings.SplitAfter(string(src), "\n")
	for i, line := range lines {
		m := markerRE.FindStringSubmatchIndex(line)
		if m == nil {
			continue
		}
		v, alias, ok, err := value(line[m[2]:m[3]])
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s:%d: %w", name, i+1, err)
		}
		if !ok {
			continue
		}
		found[alias] = true
		edited, err := replaceMarkedValue(line, m[0], v)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s:%d: %w", name, i+1, err)
		}
		if edited != line {
			lines[i] = edited
			modified[alias] = true
		}
	}
	if len(modified) == 0 {
		return src, found, modified, nil
	}
	return []byte(strings.Join(lines, "")), found, modified, nil
}

// replaceMarkedValue replaces the scalar before the marker at col: the
// last word of "key: value" or "- value", quoted or not. Unquoted, a value
// that YAML would read as no string (a number such as 1.10, a boolean) is
// quoted, as the targetRevision edit does.
func replaceMarkedValue(line string, col int, value string) (string, error) {
	before := strings.TrimRight(line[:col], " \t")
	start := strings.LastIndexAny(before, " \t") + 1
	lead := strings.TrimRight(before[:start], " \t")
	word := before[start:]
	if word == "" || word == "-" || strings.HasSuffix(word, ":") || !(strings.HasSuffix(lead, ":") || strings.HasSuffix(lead, "-")) {
		return "", fmt.Errorf("the marker comment follows no value: it goes after \"image: <value>\" or \"- <value>\" on the same line")
	}
	var quote byte
	if q := word[0]; (q == '"' || q == '\'') && len(word) > 1 && word[len(word)-1] == q {
		quote = q
	}
	r, err := renderString(value, quote)
	if err != nil {
		return "", err
	}
	return before[:start] + r + line[len(before):], nil
}
