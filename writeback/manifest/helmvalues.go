package manifest

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/image-updater/argocd-image-updater/writeback"
	"gopkg.in/yaml.v3"
)

// valuesPathElem is one step of a Helm value path: a map key, or a list
// index ("images[1].tag" is key images, index 1, key tag).
type valuesPathElem struct {
	key     string
	index   int
	isIndex bool
}

// parseValuesPath parses a path as Helm's --set writes it: keys separated
// by dots, "\." for a dot inside a key, "[n]" for a list index.
func parseValuesPath(p string) ([]valuesPathElem, error) {
	var elems []valuesPathElem
	var key strings.Builder
	pending := false // a key has started (possibly empty so far)
	afterIndex := false
	bad := func(why string) ([]valuesPathElem, error) {
		return nil, fmt.Errorf("invalid value path %q: %s", p, why)
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\' && i+1 < len(p):
			key.WriteByte(p[i+1])
			i++
			pending = true
		case c == '.':
			if afterIndex && !pending {
				afterIndex = false
				continue
			}
			if key.Len() == 0 {
				return bad("empty key")
			}
			elems = append(elems, valuesPathElem{key: key.String()})
			key.Reset()
			pending = false
		case c == '[':
			if key.Len() > 0 {
				elems = append(elems, valuesPathElem{key: key.String()})
				key.Reset()
			} else if !afterIndex {
				return bad("an index must follow a key")
			}
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return bad("missing ]")
			}
			n, err := strconv.Atoi(p[i+1 : i+end])
			if err != nil || n < 0 {
				return bad("index must be a number")
			}
			elems = append(elems, valuesPathElem{index: n, isIndex: true})
			i += end
			pending, afterIndex = false, true
		default:
			if afterIndex && !pending {
				return bad("expected . or [ after ]")
			}
			key.WriteByte(c)
			pending = true
		}
	}
	if key.Len() > 0 {
		elems = append(elems, valuesPathElem{key: key.String()})
	} else if !afterIndex {
		return bad("empty key")
	}
	return elems, nil
}

func valuesPathString(path []valuesPathElem) string {
	var b strings.Builder
	for i, e := range path {
		switch {
		case e.isIndex:
			fmt.Fprintf(&b, "[%d]", e.index)
		case i > 0:
			b.WriteString("." + strings.ReplaceAll(e.key, ".", `\.`))
		default:
			b.WriteString(strings.ReplaceAll(e.key, ".", `\.`))
		}
	}
	return b.String()
}

// SetHelmValues sets the values an update's Helm parameters name (image
// name and tag, or image spec) in a values file, changing only those
// values' text. changed lists the updates that altered the file.
func SetHelmValues(name string, src []byte, images []writeback.ImageUpdate) (out []byte, changed []writeback.ImageUpdate, _ error) {
	out = src
	for _, img := range images {
		modified := false
		for _, p := range helmParametersFor(img) {
			path, err := parseValuesPath(p.name)
			if err != nil {
				return nil, nil, fmt.Errorf("image %s: %w", img.Key(), err)
			}
			next, ok, err := setValuesPath(name, out, path, p.value)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				out, modified = next, true
			}
		}
		if modified {
			changed = append(changed, img)
		}
	}
	return out, changed, nil
}

// setValuesPath sets one value, creating missing map keys on the way.
func setValuesPath(name string, src []byte, path []valuesPathElem, value string) ([]byte, bool, error) {
	y, err := parseYAMLText(name, src)
	if err != nil {
		return nil, false, err
	}
	before, err := decodeAny(src)
	if err != nil {
		return nil, false, fmt.Errorf("%s: invalid YAML: %w", name, err)
	}
	// When the path cannot be set, the text walk below says why, with a
	// line number.
	expected, semErr := withValuesPath(copyYAMLValue(before), path, value)
	if semErr == nil && reflect.DeepEqual(normalizeYAMLValue(before), expected) {
		return src, false, nil
	}
	out, err := y.editValuesPath(path, value)
	if err != nil {
		return nil, false, err
	}
	if semErr != nil {
		return nil, false, fmt.Errorf("%s: cannot set %s: %w", name, valuesPathString(path), semErr)
	}
	if err := checkEdit(name, out, expected); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// withValuesPath is the meaning of a values file after setting one value.
func withValuesPath(v any, path []valuesPathElem, value string) (any, error) {
	if len(path) == 0 {
		return value, nil
	}
	e := path[0]
	if e.isIndex {
		l, ok := v.([]any)
		if !ok || e.index >= len(l) {
			return nil, fmt.Errorf("no index %d", e.index)
		}
		n, err := withValuesPath(l[e.index], path[1:], value)
		l[e.index] = n
		return l, err
	}
	var m map[string]any
	switch t := v.(type) {
	case nil:
		m = map[string]any{}
	case map[string]any:
		m = t
	default:
		return nil, fmt.Errorf("%s is not a map", e.key)
	}
	n, err := withValuesPath(m[e.key], path[1:], value)
	m[e.key] = n
	return m, err
}

// editValuesPath makes the text edit that sets one value: rewrite the
// scalar in place, or insert the missing keys below the deepest existing
// map on the path.
func (y *yamlText) editValuesPath(path []valuesPathElem, value string) ([]byte, error) {
	node := y.root()
	if node == nil || isNull(node) {
		lines, err := renderValuesKeys(y.name, path, 0, 0, value)
		if err != nil {
			return nil, err
		}
		return y.insertAfterLine(y.lines(), lines), nil
	}
	var parentKey *yaml.Node
	inFlow := false
	for i, el := range path {
		at := valuesPathString(path[:i+1])
		if el.isIndex {
			if node.Kind != yaml.SequenceNode {
				return nil, fmt.Errorf("%s: %s is a %s, not a list", y.where(node), valuesPathString(path[:i]), kindName(node))
			}
			if el.index >= len(node.Content) {
				return nil, fmt.Errorf("%s: %s has %d entries, so %s does not exist (list entries are not created)", y.where(node), valuesPathString(path[:i]), len(node.Content), at)
			}
			inFlow = node.Style&yaml.FlowStyle != 0
			parentKey, node = nil, node.Content[el.index]
			continue
		}
		if isNull(node) && parentKey != nil {
			if _, empty := y.emptyValueAfter(parentKey); empty {
				lines, err := renderValuesKeys(y.name, path, i, parentKey.Column+1, value)
				if err != nil {
					return nil, err
				}
				return y.insertAfterLine(parentKey.Line, lines), nil
			}
		}
		if node.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: %s is a %s, not a map", y.where(node), valuesPathString(path[:i]), kindName(node))
		}
		k, v := mappingGet(node, el.key)
		if k == nil {
			if node.Style&yaml.FlowStyle != 0 || len(node.Content) == 0 {
				return nil, fmt.Errorf("%s: cannot add %s to a flow-style map ({...}); write that map in block style", y.where(node), at)
			}
			lines, err := renderValuesKeys(y.name, path, i, node.Content[0].Column-1, value)
			if err != nil {
				return nil, err
			}
			return y.insertAfterLine(maxLine(node), lines), nil
		}
		inFlow = node.Style&yaml.FlowStyle != 0
		parentKey, node = k, v
	}
	at := valuesPathString(path)
	if node.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("%s: %s is a %s, not a single value", y.where(node), at, kindName(node))
	}
	if parentKey == nil {
		parentKey = &yaml.Node{Value: at}
	}
	out, err := y.replaceValue(parentKey, node, value, inFlow)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// renderValuesKeys renders the keys path[from:], nested, ending in the
// value, the first key at column indent.
func renderValuesKeys(file string, path []valuesPathElem, from, indent int, value string) ([]string, error) {
	var lines []string
	for i := from; i < len(path); i++ {
		el := path[i]
		if el.isIndex {
			return nil, fmt.Errorf("%s: %s does not exist (list entries are not created)", file, valuesPathString(path[:i+1]))
		}
		k, err := renderString(el.key, 0)
		if err != nil {
			return nil, err
		}
		line := pad(indent+2*(i-from)) + k + ":"
		if i == len(path)-1 {
			v, err := renderString(value, 0)
			if err != nil {
				return nil, err
			}
			line += " " + v
		}
		lines = append(lines, line)
	}
	return lines, nil
}
