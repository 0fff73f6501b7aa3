package manifest

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/internal/repoyaml"
	"github.com/image-updater/argocd-image-updater/writeback"
	"go.yaml.in/yaml/v3"
)

// SetSourceOverrides merges the updates into an override file: the
// kustomize images, helm parameters or plugin env list is updated like the
// argocd method updates the Application (entries of other images and other
// keys kept), new kustomize images and plugin variables appended in the
// updates' order and helm parameters sorted by name. For a plugin source,
// images without a plugin target become helm parameters. src is nil for a file that does not exist
// yet. The file is machine-written, so it is re-encoded as a whole when
// something changed, in the layout Argo CD Image Updater writes (two-space
// indent, list items at their key's indent, "forcestring"), so that a file
// it wrote changes only in the values; the lines before a "---" document
// start are kept as they are.
func SetSourceOverrides(name string, src []byte, sourceType application.SourceType, images []writeback.ImageUpdate) ([]byte, []writeback.ImageUpdate, error) {
	edits, err := sourceEdits(name, sourceType, images)
	if err != nil {
		return nil, nil, err
	}
	prefix, body := splitDocumentStart(src)
	var doc yaml.Node
	if len(bytes.TrimSpace(body)) > 0 {
		parsed, err := repoyaml.Parse(name, body)
		if err != nil {
			return nil, nil, err
		}
		doc = *parsed
	} else if err := repoyaml.CheckSize(name, src); err != nil {
		return nil, nil, err
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 && !isNull(doc.Content[0]) {
		root = doc.Content[0]
	} else {
		root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}, HeadComment: doc.HeadComment}
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("%s:%d: the top level is a %s, not a map", name, root.Line, kindName(root))
	}
	var changed []writeback.ImageUpdate
	for _, e := range edits {
		c, err := e.apply(name, root)
		if err != nil {
			return nil, nil, err
		}
		changed = append(changed, c...)
	}
	if len(changed) == 0 {
		return src, nil, nil
	}
	out, err := marshalCompact(&doc)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: render: %w", name, err)
	}
	return append(prefix, out...), changed, nil
}

// sourceEdits are the lists of a source's overrides the updates go to:
// the kustomize images, the Helm parameters, or a plugin's environment
// (and, for images without a plugin target, the Helm parameters, as Argo
// CD Image Updater writes them for plugin sources).
func sourceEdits(name string, sourceType application.SourceType, images []writeback.ImageUpdate) ([]listEdit, error) {
	switch sourceType {
	case application.SourceKustomize:
		return []listEdit{{kustomizeImages, images}}, nil
	case application.SourceHelm:
		return []listEdit{{helmParameters, images}}, nil
	case application.SourcePlugin:
		var env, params []writeback.ImageUpdate
		for _, img := range images {
			if img.PluginTarget() {
				env = append(env, img)
			} else {
				params = append(params, img)
			}
		}
		var edits []listEdit
		for _, e := range []listEdit{{pluginEnv, env}, {helmParameters, params}} {
			if len(e.images) > 0 {
				edits = append(edits, e)
			}
		}
		return edits, nil
	default:
		return nil, fmt.Errorf("%s: source type %q cannot be written (want %s, %s or %s)", name, sourceType, application.SourceKustomize, application.SourceHelm, application.SourcePlugin)
	}
}

// overrideList is one list of an override file and how updates merge
// into it.
type overrideList struct {
	block, field string
	update       func(current []any, images []writeback.ImageUpdate) ([]any, []writeback.ImageUpdate)
	// node renders an entry the update produced; orig is the entry it
	// replaces, if any.
	node func(orig *yaml.Node, v any) *yaml.Node
	// sorted: the entries are kept sorted by name.
	sorted bool
}

var (
	kustomizeImages = overrideList{block: "kustomize", field: "images", update: UpdateKustomizeImages,
		node: func(_ *yaml.Node, v any) *yaml.Node { s, _ := v.(string); return strNode(s) }}
	// v1.3.0 keeps the parameters sorted by name.
	helmParameters = overrideList{block: "helm", field: "parameters", update: UpdateHelmParameters, node: helmParameterNode, sorted: true}
	pluginEnv      = overrideList{block: "plugin", field: "env", update: UpdatePluginEnv, node: pluginEnvNode}
)

type listEdit struct {
	list   overrideList
	images []writeback.ImageUpdate
}

// apply merges the updates into the list under root, creating it when
// missing; entries left as they were keep their nodes.
func (e listEdit) apply(name string, root *yaml.Node) ([]writeback.ImageUpdate, error) {
	l := e.list
	settings, err := childCollection(name, root, l.block, yaml.MappingNode)
	if err != nil {
		return nil, err
	}
	list, err := childCollection(name, settings, l.field, yaml.SequenceNode)
	if err != nil {
		return nil, err
	}
	var current []any
	if err := list.Decode(&current); err != nil {
		return nil, fmt.Errorf("%s:%d: %s.%s: %w", name, list.Line, l.block, l.field, err)
	}
	next, changed := l.update(current, e.images)
	if len(changed) == 0 {
		return nil, nil
	}
	content := make([]*yaml.Node, len(next))
	for i, v := range next {
		var orig *yaml.Node
		if i < len(list.Content) {
			orig = list.Content[i]
		}
		if orig != nil && i < len(current) && reflect.DeepEqual(current[i], v) {
			content[i] = orig
		} else {
			content[i] = l.node(orig, v)
		}
	}
	if l.sorted {
		slices.SortStableFunc(content, func(a, b *yaml.Node) int { return strings.Compare(parameterName(a), parameterName(b)) })
	}
	list.Content = content
	list.Style &^= yaml.FlowStyle
	return changed, nil
}

// parameterName is a helm parameter entry's name ("" for an entry that is
// not a map).
func parameterName(n *yaml.Node) string {
	if _, v := mappingGet(n, "name"); v != nil {
		return v.Value
	}
	return ""
}

// splitDocumentStart splits off the lines before a "---" document start:
// blank lines, comments and directives (%YAML), with the marker line. An
// encoder would drop the marker and directives, so a file that has them
// keeps them verbatim. prefix is empty when the file has no marker there;
// a marker indented or followed by content is not split off.
func splitDocumentStart(src []byte) (prefix, body []byte) {
	for off := 0; off < len(src); {
		end := len(src)
		if i := bytes.IndexByte(src[off:], '\n'); i >= 0 {
			end = off + i + 1
		}
		line := strings.TrimRight(string(src[off:end]), "\r\n")
		if isDocumentStart(line) {
			prefix = src[:end:end]
			if !bytes.HasSuffix(prefix, []byte("\n")) {
				prefix = append(prefix, '\n')
			}
			return prefix, src[end:]
		}
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") && !strings.HasPrefix(line, "%") {
			break
		}
		off = end
	}
	return nil, src
}

// isDocumentStart tells whether a line is a bare "---" marker at column 0,
// perhaps with a comment.
func isDocumentStart(line string) bool {
	rest, ok := strings.CutPrefix(line, "---")
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return false
	}
	rest = strings.TrimSpace(rest)
	return rest == "" || strings.HasPrefix(rest, "#")
}

// childCollection returns a map's child map or list, creating it (or
// replacing a null) when missing.
func childCollection(file string, parent *yaml.Node, key string, kind yaml.Kind) (*yaml.Node, error) {
	tag := "!!map"
	if kind == yaml.SequenceNode {
		tag = "!!seq"
	}
	for i := 0; i+1 < len(parent.Content); i += 2 {
		if parent.Content[i].Value != key {
			continue
		}
		v := parent.Content[i+1]
		if isNull(v) {
			v = &yaml.Node{Kind: kind, Tag: tag}
			parent.Content[i+1] = v
		}
		if v.Kind != kind {
			want := "map"
			if kind == yaml.SequenceNode {
				want = "list"
			}
			return nil, fmt.Errorf("%s:%d: %s is a %s, not a %s", file, v.Line, key, kindName(v), want)
		}
		return v, nil
	}
	v := &yaml.Node{Kind: kind, Tag: tag}
	parent.Content = append(parent.Content, strNode(key), v)
	return v, nil
}

// helmParameterNode renders a parameter entry UpdateHelmParameters
// produced, with "forcestring" (the key as Argo CD Image Updater writes it;
// Argo CD reads the file through JSON, whose field names match in any
// case).
func helmParameterNode(orig *yaml.Node, v any) *yaml.Node {
	return namedValueNode(orig, v, "forcestring")
}

// pluginEnvNode renders an environment entry UpdatePluginEnv produced.
func pluginEnvNode(orig *yaml.Node, v any) *yaml.Node { return namedValueNode(orig, v, "") }

// namedValueNode renders a {name, value} entry, with flag true when set.
// An existing entry keeps its keys' order and its other keys; only value
// and flag change.
func namedValueNode(orig *yaml.Node, v any, flag string) *yaml.Node {
	entry, _ := v.(map[string]any)
	name, _ := entry["name"].(string)
	value, _ := entry["value"].(string)
	boolNode := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}
	if orig == nil || orig.Kind != yaml.MappingNode {
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
			strNode("name"), strNode(name),
			strNode("value"), strNode(value),
		}}
		if flag != "" {
			n.Content = append(n.Content, strNode(flag), boolNode)
		}
		return n
	}
	c := *orig
	c.Content = append([]*yaml.Node(nil), orig.Content...)
	c.Style &^= yaml.FlowStyle
	set := func(key string, n *yaml.Node) {
		for i := 0; i+1 < len(c.Content); i += 2 {
			if strings.EqualFold(c.Content[i].Value, key) {
				c.Content[i+1] = n
				return
			}
		}
		c.Content = append(c.Content, strNode(key), n)
	}
	set("value", strNode(value))
	if flag != "" {
		set(flag, boolNode)
	}
	return &c
}
