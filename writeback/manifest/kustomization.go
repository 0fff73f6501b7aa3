package manifest

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/image-updater/argocd-image-updater/internal/repoyaml"
	"github.com/image-updater/argocd-image-updater/writeback"
	"go.yaml.in/yaml/v3"
)

// KustomizationFileNames are the file names kustomize reads a
// kustomization from.
func KustomizationFileNames() []string {
	return []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}
}

// kustomizeImage is one entry of a kustomization's images list, as
// `kustomize edit set image [<name>=]<newName>:<newTag>[@<digest>]` writes
// it. Empty fields are left out of the entry.
type kustomizeImage struct {
	name, newName, newTag, digest string
	// matches tells the entries that are this image's: its name in any
	// spelling (see imageref.Reference.MatchesName). A matched entry keeps
	// its own spelling of the name.
	matches func(name string) bool
}

// entryOf reports whether a YAML images entry is want's.
func (e kustomizeImage) entryOf(n *yaml.Node) bool {
	_, name := mappingGet(n, "name")
	return name != nil && name.Kind == yaml.ScalarNode && e.matches(name.Value)
}

type yamlField struct{ key, value string }

func kustomizeImageFor(img writeback.ImageUpdate) kustomizeImage {
	target := img.KustomizeName()
	e := kustomizeImage{name: target.OriginalName(), newTag: img.New.Tag, digest: img.New.Digest, matches: target.MatchesName}
	if !target.SameName(img.Image) {
		e.newName = img.Image.OriginalName()
	}
	return e
}

// fields are the managed fields besides name, in the order a new entry
// lists them. Keys of an entry not listed here are left alone.
func (e kustomizeImage) fields() []yamlField {
	return []yamlField{{"newName", e.newName}, {"newTag", e.newTag}, {"digest", e.digest}}
}

// SetKustomizationImages sets the images list of a kustomization file so
// that each update's image has its entry, changing only those entries'
// text. changed lists the updates whose entry was not yet as wanted.
//
// The file is parsed once, and the entries of all images are edited from
// that one parse and checked once, when their layout allows (block style,
// values in place); the others are edited one image at a time, each edit
// parsed and checked, up to maxChainedEdits images (a 95 KB kustomization
// took 0.1 s per image that way), and past it the images block is
// rendered anew once.
func SetKustomizationImages(name string, src []byte, images []writeback.ImageUpdate) (out []byte, changed []writeback.ImageUpdate, _ error) {
	if err := repoyaml.CheckSize(name, src); err != nil {
		return nil, nil, err
	}
	y, err := parseYAMLText(name, src)
	if err != nil {
		return nil, nil, err
	}
	if err := checkKustomizationShape(y); err != nil {
		return nil, nil, err
	}
	var before any
	if err := y.doc.Decode(&before); err != nil {
		return nil, nil, fmt.Errorf("%s: invalid YAML: %w", name, err)
	}
	expected, err := withKustomizeImages(before, images, &changed)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(changed) == 0 {
		return src, nil, nil
	}
	if out, ok := y.kustomizeEditsAtOnce(changed); ok && checkEdit(name, out, expected) == nil {
		return out, changed, nil
	}
	if len(changed) > maxChainedEdits {
		// One parse per image would make the file's size times the
		// number of images the cost of one write-back.
		out, err = y.rewriteAllImages(changed)
		if err != nil {
			return nil, nil, err
		}
		return out, changed, checkEdit(name, out, expected)
	}
	out, err = setKustomizationImagesEach(name, src, changed)
	return out, changed, err
}

// rewriteAllImages renders the images block anew with every image's
// entry set, or adds the block: the one edit for a layout the edits from
// one parse do not handle, when too many images change to edit them one
// at a time.
func (y *yamlText) rewriteAllImages(images []writeback.ImageUpdate) ([]byte, error) {
	wants := make([]kustomizeImage, len(images))
	for i, img := range images {
		wants[i] = kustomizeImageFor(img)
	}
	root := y.root()
	if root != nil && !isNull(root) && (len(root.Content) == 0 || root.Style&yaml.FlowStyle != 0) {
		return nil, fmt.Errorf("%s: the kustomization is a flow-style map ({...}); write it in block style to let images be added", y.where(root))
	}
	if root != nil && !isNull(root) {
		if key, val := mappingGet(root, "images"); key != nil {
			return y.rewriteImagesBlock(key, val, wants...)
		}
	}
	indent := 0
	if root != nil && !isNull(root) {
		indent = root.Content[0].Column - 1
	}
	lines := []string{pad(indent) + "images:"}
	for _, want := range wants {
		entry, err := renderKustomizeEntry(want, indent, indent+2)
		if err != nil {
			return nil, err
		}
		lines = append(lines, entry...)
	}
	return y.insertAfterLine(y.lines(), lines), nil
}

// withKustomizeImages is the meaning of a kustomization after setting the
// images' entries in turn; changed gets the images whose entry was not
// yet as wanted.
func withKustomizeImages(doc any, images []writeback.ImageUpdate, changed *[]writeback.ImageUpdate) (any, error) {
	v := copyYAMLValue(doc)
	if v == nil {
		v = map[string]any{}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a kustomization: the top level is not a map")
	}
	for _, img := range images {
		modified, err := setKustomizeImage(m, kustomizeImageFor(img))
		if err != nil {
			return nil, err
		}
		if modified {
			*changed = append(*changed, img)
		}
	}
	return m, nil
}

// setKustomizationImagesEach edits one image at a time, parsing the text
// anew after each edit: the way for layouts the edits from one parse do
// not handle.
func setKustomizationImagesEach(name string, src []byte, images []writeback.ImageUpdate) ([]byte, error) {
	out := src
	for _, img := range images {
		want := kustomizeImageFor(img)
		y, err := parseYAMLText(name, out)
		if err != nil {
			return nil, err
		}
		if err := checkKustomizationShape(y); err != nil {
			return nil, err
		}
		var before any
		if err := y.doc.Decode(&before); err != nil {
			return nil, fmt.Errorf("%s: invalid YAML: %w", name, err)
		}
		expected, err := withKustomizeImage(before, want)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if reflect.DeepEqual(normalizeYAMLValue(before), expected) {
			continue
		}
		if out, err = editUntil(name, out, expected, func(y *yamlText) ([]byte, error) { return nextKustomizeEdit(y, want) }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// kustomizeEditsAtOnce makes the text edits of every image's entry from
// the one parse y: values replaced in place, fields added or removed as
// whole lines, new entries appended to the block. ok is false for a
// layout that needs an edit parsed before the next (flow style, a field
// sharing its line, an entry two images name, no block list to add to).
func (y *yamlText) kustomizeEditsAtOnce(images []writeback.ImageUpdate) (_ []byte, ok bool) {
	root := y.root()
	if root == nil || root.Kind != yaml.MappingNode || root.Style&yaml.FlowStyle != 0 {
		return nil, false
	}
	key, val := mappingGet(root, "images")
	if key == nil || val.Kind != yaml.SequenceNode || val.Style&yaml.FlowStyle != 0 || len(val.Content) == 0 {
		return nil, false
	}
	if len(y.src) > 0 && y.src[len(y.src)-1] != '\n' {
		return nil, false // an insertion at the end would need a line end first
	}
	first := val.Content[0]
	dash, dashOK := y.dashColumn(first)
	nl := y.newline()
	var edits []textEdit
	// Inserted at one offset: the fields of an entry before a new entry
	// appended after it, and each in the images' order.
	const fieldInsert, entryAppend = 0, 1
	claimed := map[*yaml.Node]bool{}
	for _, img := range images {
		want := kustomizeImageFor(img)
		named := false
		for _, e := range val.Content {
			if !want.entryOf(e) {
				continue
			}
			named = true
			if claimed[e] || e.Style&yaml.FlowStyle != 0 || e.Kind != yaml.MappingNode {
				return nil, false
			}
			claimed[e] = true
			var added []string
			for _, f := range want.fields() {
				k, v := mappingGet(e, f.key)
				switch {
				case k == nil && f.value == "":
				case k == nil:
					r, err := renderString(f.value, 0)
					if err != nil {
						return nil, false
					}
					added = append(added, pad(e.Column-1)+f.key+": "+r+nl)
				case f.value == "":
					if k.Line == e.Line || maxLine(v) != k.Line {
						return nil, false
					}
					edits = append(edits, textEdit{start: y.lineStart(k.Line), end: y.lineStart(k.Line + 1)})
				case v.ShortTag() == "!!str" && v.Value == f.value:
				default:
					ed, err := y.replaceValueEdit(k, v, f.value, false)
					if err != nil {
						return nil, false
					}
					edits = append(edits, ed)
				}
			}
			if len(added) > 0 {
				at := y.lineStart(maxLine(e) + 1)
				edits = append(edits, textEdit{start: at, end: at, text: strings.Join(added, ""), order: fieldInsert})
			}
		}
		if named {
			continue
		}
		if !dashOK || first.Kind != yaml.MappingNode || first.Style&yaml.FlowStyle != 0 {
			return nil, false
		}
		lines, err := renderKustomizeEntry(want, dash, first.Column-1)
		if err != nil {
			return nil, false
		}
		at := y.lineStart(maxLine(val) + 1)
		edits = append(edits, textEdit{start: at, end: at, text: strings.Join(lines, nl) + nl, order: entryAppend})
	}
	return y.applyEdits(edits)
}

// checkKustomizationShape reports, with its line, a kustomization whose
// images cannot be set: not a map, or images not a list.
func checkKustomizationShape(y *yamlText) error {
	root := y.root()
	if root == nil || isNull(root) {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: not a kustomization: the top level is a %s, not a map", y.where(root), kindName(root))
	}
	if _, v := mappingGet(root, "images"); v != nil && v.Kind != yaml.SequenceNode && !isNull(v) {
		return fmt.Errorf("%s: images is a %s, not a list", y.where(v), kindName(v))
	}
	return nil
}

// editUntil applies one text edit at a time, parsing again after each,
// until the text means what is expected. Each step is small (one value,
// one line), which keeps every offset valid.
func editUntil(name string, src []byte, expected any, step func(*yamlText) ([]byte, error)) ([]byte, error) {
	const maxSteps = 16
	for i := 0; ; i++ {
		y, err := parseYAMLText(name, src)
		if err != nil {
			return nil, fmt.Errorf("%s: editing it in place would produce invalid YAML (%v); not written", name, strings.TrimPrefix(err.Error(), name+": "))
		}
		if got, err := decodeAny(name, src); err == nil && reflect.DeepEqual(normalizeYAMLValue(got), expected) {
			return src, nil
		}
		if i == maxSteps {
			return nil, checkEdit(name, src, expected)
		}
		if src, err = step(y); err != nil {
			return nil, err
		}
	}
}

// withKustomizeImage is the meaning of a kustomization after setting one
// image entry: the entry named like it gets its fields, else one is
// appended.
func withKustomizeImage(doc any, want kustomizeImage) (any, error) {
	v := copyYAMLValue(doc)
	if v == nil {
		v = map[string]any{}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a kustomization: the top level is not a map")
	}
	if _, err := setKustomizeImage(m, want); err != nil {
		return nil, err
	}
	return m, nil
}

// setKustomizeImage sets one image entry in a kustomization's meaning,
// and tells whether that changed it.
func setKustomizeImage(m map[string]any, want kustomizeImage) (modified bool, _ error) {
	var list []any
	switch l := m["images"].(type) {
	case nil:
	case []any:
		list = l
	default:
		return false, fmt.Errorf("images is a %T, not a list", l)
	}
	found := false
	for i, e := range list {
		entry, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if name, ok := entry["name"].(string); !ok || !want.matches(name) {
			continue
		}
		found = true
		for _, f := range want.fields() {
			old, had := entry[f.key]
			if f.value == "" {
				modified = modified || had
				delete(entry, f.key)
			} else {
				modified = modified || !had || old != any(f.value)
				entry[f.key] = f.value
			}
		}
		list[i] = entry
	}
	if !found {
		entry := map[string]any{"name": want.name}
		for _, f := range want.fields() {
			if f.value != "" {
				entry[f.key] = f.value
			}
		}
		list = append(list, entry)
		modified = true
	}
	m["images"] = list
	return modified, nil
}

// nextKustomizeEdit makes one text edit toward the wanted entry.
func nextKustomizeEdit(y *yamlText, want kustomizeImage) ([]byte, error) {
	root := y.root()
	if root == nil || isNull(root) {
		lines, err := renderKustomizeEntry(want, 0, 2)
		if err != nil {
			return nil, err
		}
		return y.insertAfterLine(y.lines(), append([]string{"images:"}, lines...)), nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a kustomization: the top level is a %s, not a map", y.where(root), kindName(root))
	}
	if len(root.Content) == 0 || root.Style&yaml.FlowStyle != 0 {
		return nil, fmt.Errorf("%s: the kustomization is a flow-style map ({...}); write it in block style to let images be added", y.where(root))
	}
	key, val := mappingGet(root, "images")
	if key == nil {
		// Kustomize puts the dash at the key's column.
		indent := root.Content[0].Column - 1
		lines, err := renderKustomizeEntry(want, indent, indent+2)
		if err != nil {
			return nil, err
		}
		return y.insertAfterLine(y.lines(), append([]string{pad(indent) + "images:"}, lines...)), nil
	}
	if isNull(val) {
		if _, empty := y.emptyValueAfter(key); empty {
			lines, err := renderKustomizeEntry(want, key.Column-1, key.Column+1)
			if err != nil {
				return nil, err
			}
			return y.insertAfterLine(key.Line, lines), nil
		}
		return y.rewriteImagesBlock(key, val, want)
	}
	if val.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s: images is a %s, not a list", y.where(val), kindName(val))
	}
	if val.Style&yaml.FlowStyle != 0 || len(val.Content) == 0 {
		return y.rewriteImagesBlock(key, val, want)
	}
	named := false
	for _, e := range val.Content {
		if !want.entryOf(e) {
			continue
		}
		named = true
		if out, ok, err := y.editKustomizeEntry(key, val, e, want); ok || err != nil {
			return out, err
		}
	}
	first := val.Content[0]
	dash, ok := y.dashColumn(first)
	if named || !ok || first.Kind != yaml.MappingNode || first.Style&yaml.FlowStyle != 0 {
		return y.rewriteImagesBlock(key, val, want)
	}
	lines, err := renderKustomizeEntry(want, dash, first.Column-1)
	if err != nil {
		return nil, err
	}
	return y.insertAfterLine(maxLine(val), lines), nil
}

// editKustomizeEntry makes one edit to an existing entry, or reports
// (ok false) that the entry is already as wanted.
func (y *yamlText) editKustomizeEntry(key, val, e *yaml.Node, want kustomizeImage) (_ []byte, ok bool, _ error) {
	if e.Style&yaml.FlowStyle != 0 {
		out, err := y.rewriteImagesBlock(key, val, want)
		return out, true, err
	}
	for _, f := range want.fields() {
		k, v := mappingGet(e, f.key)
		switch {
		case k == nil && f.value == "":
			continue
		case k == nil:
			r, err := renderString(f.value, 0)
			if err != nil {
				return nil, true, err
			}
			return y.insertAfterLine(maxLine(e), []string{pad(e.Column-1) + f.key + ": " + r}), true, nil
		case f.value == "":
			// Only a line holding nothing but this key can go; the first
			// key shares its line with the entry's dash.
			if k.Line == e.Line || maxLine(v) != k.Line {
				out, err := y.rewriteImagesBlock(key, val, want)
				return out, true, err
			}
			return y.deleteLines(k.Line, k.Line), true, nil
		case v.ShortTag() == "!!str" && v.Value == f.value:
			continue
		default:
			out, err := y.replaceValue(k, v, f.value, false)
			if err != nil {
				out, err = y.rewriteImagesBlock(key, val, want)
			}
			return out, true, err
		}
	}
	return nil, false, nil
}

// replaceValue rewrites one scalar value in place, keeping its quoting.
func (y *yamlText) replaceValue(k, v *yaml.Node, value string, inFlow bool) ([]byte, error) {
	ed, err := y.replaceValueEdit(k, v, value, inFlow)
	if err != nil {
		return nil, err
	}
	return y.splice(ed.start, ed.end, ed.text), nil
}

// replaceValueEdit is the text edit of replaceValue.
func (y *yamlText) replaceValueEdit(k, v *yaml.Node, value string, inFlow bool) (textEdit, error) {
	if isNull(v) {
		if colon, empty := y.emptyValueAfter(k); empty {
			r, err := renderString(value, 0)
			if err != nil {
				return textEdit{}, err
			}
			return textEdit{start: colon, end: colon, text: " " + r}, nil
		}
	}
	start, end, ok := y.scalarSpan(v, inFlow)
	if !ok {
		return textEdit{}, fmt.Errorf("%s: the value of %s cannot be rewritten in place (it spans lines, or has an anchor or a tag)", y.where(v), k.Value)
	}
	var quote byte
	if c := y.src[start]; c == '"' || c == '\'' {
		quote = c
	}
	r, err := renderString(value, quote)
	if err != nil {
		return textEdit{}, err
	}
	return textEdit{start: start, end: end, text: r}, nil
}

// dashColumn finds the column of the "-" that starts a sequence entry.
func (y *yamlText) dashColumn(entry *yaml.Node) (int, bool) {
	line := []rune(y.lineText(entry.Line))
	if entry.Column-1 > len(line) {
		return 0, false
	}
	before := strings.TrimRight(string(line[:entry.Column-1]), " ")
	if !strings.HasSuffix(before, "-") || strings.TrimLeft(before, " ") != "-" {
		return 0, false
	}
	return len(before) - 1, true
}

// rewriteImagesBlock renders the whole images block anew, in kustomize's
// own layout, for layouts the line edits do not handle (flow style, for
// example). Everything outside the block is kept; comments inside it are
// lost.
func (y *yamlText) rewriteImagesBlock(key, val *yaml.Node, wants ...kustomizeImage) ([]byte, error) {
	var entries []*yaml.Node
	switch {
	case val.Kind == yaml.SequenceNode:
		entries = append(entries, val.Content...)
	case !isNull(val):
		return nil, fmt.Errorf("%s: images is a %s, not a list", y.where(val), kindName(val))
	}
	for _, want := range wants {
		found := false
		for i, e := range entries {
			if want.entryOf(e) {
				entries[i] = withKustomizeFields(e, want)
				found = true
			}
		}
		if !found {
			entries = append(entries, withKustomizeFields(&yaml.Node{
				Kind: yaml.MappingNode, Tag: "!!map",
				Content: []*yaml.Node{strNode("name"), strNode(want.name)},
			}, want))
		}
	}
	indent := key.Column - 1
	lines := []string{pad(indent) + "images:"}
	if _, empty := y.emptyValueAfter(key); empty {
		lines[0] = y.lineText(key.Line) // its comment kept
	}
	for _, e := range entries {
		e.Style &^= yaml.FlowStyle
		out, err := marshalNode(e)
		if err != nil {
			return nil, fmt.Errorf("%s: render images: %w", y.name, err)
		}
		for i, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			prefix := "  "
			if i == 0 {
				prefix = "- "
			}
			lines = append(lines, pad(indent)+prefix+l)
		}
	}
	end := y.blockEnd(key, val)
	nl := y.newline()
	return y.splice(y.lineStart(key.Line), y.lineStart(end+1), strings.Join(lines, nl)+nl), nil
}

// blockEnd is the last line of a key's value: its nodes' lines, then the
// lines indented deeper than the key (or continuing a list at its column).
func (y *yamlText) blockEnd(key, val *yaml.Node) int {
	end := max(maxLine(val), key.Line)
	keyIndent := y.indentOf(key.Line)
	for l := end + 1; l <= y.lines(); l++ {
		t := strings.TrimSpace(y.lineText(l))
		if t == "" {
			break
		}
		ind := y.indentOf(l)
		if ind > keyIndent || (ind == keyIndent && (strings.HasPrefix(t, "-") || strings.HasPrefix(t, "]"))) {
			end = l
			continue
		}
		break
	}
	return end
}

// withKustomizeFields returns a copy of an entry node with the managed
// fields set as wanted, other keys kept in place.
func withKustomizeFields(e *yaml.Node, want kustomizeImage) *yaml.Node {
	c := *e
	c.Content = append([]*yaml.Node(nil), e.Content...)
	for _, f := range want.fields() {
		idx := -1
		for i := 0; i+1 < len(c.Content); i += 2 {
			if c.Content[i].Value == f.key {
				idx = i
				break
			}
		}
		switch {
		case idx >= 0 && f.value == "":
			c.Content = append(c.Content[:idx], c.Content[idx+2:]...)
		case idx >= 0:
			c.Content[idx+1] = strNode(f.value)
		case f.value != "":
			c.Content = append(c.Content, strNode(f.key), strNode(f.value))
		}
	}
	return &c
}

// renderKustomizeEntry renders a new entry with its dash at column
// dashIndent and its keys at keyIndent.
func renderKustomizeEntry(want kustomizeImage, dashIndent, keyIndent int) ([]string, error) {
	gap := max(keyIndent-dashIndent-1, 1)
	name, err := renderString(want.name, 0)
	if err != nil {
		return nil, err
	}
	lines := []string{pad(dashIndent) + "-" + pad(gap) + "name: " + name}
	for _, f := range want.fields() {
		if f.value == "" {
			continue
		}
		r, err := renderString(f.value, 0)
		if err != nil {
			return nil, err
		}
		lines = append(lines, pad(dashIndent+1+gap)+f.key+": "+r)
	}
	return lines, nil
}

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func pad(n int) string { return strings.Repeat(" ", max(n, 0)) }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "map"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "YAML alias"
	default:
		if isNull(n) {
			return "null"
		}
		return "value"
	}
}
