package manifest

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/image-updater/argocd-image-updater/appwatch"
	"github.com/image-updater/argocd-image-updater/writeback"
	"gopkg.in/yaml.v3"
)

// SetSourceOverrides merges the updates into an override file: the
// kustomize images or helm parameters list is updated like the argocd
// method updates the Application (entries of other images and other keys
// kept in place, new entries appended in the updates' order). src is nil
// for a file that does not exist yet. The file is machine-written, so it
// is re-encoded as a whole when something changed.
func SetSourceOverrides(name string, src []byte, sourceType appwatch.SourceType, images []writeback.ImageUpdate) ([]byte, []writeback.ImageUpdate, error) {
	block, field := "kustomize", "images"
	switch sourceType {
	case appwatch.SourceKustomize:
	case appwatch.SourceHelm:
		block, field = "helm", "parameters"
	default:
		return nil, nil, fmt.Errorf("%s: source type %q cannot be written (want %s or %s)", name, sourceType, appwatch.SourceKustomize, appwatch.SourceHelm)
	}
	var doc yaml.Node
	if len(bytes.TrimSpace(src)) > 0 {
		if err := yaml.Unmarshal(src, &doc); err != nil {
			return nil, nil, fmt.Errorf("%s: invalid YAML: %w", name, err)
		}
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
	settings, err := childCollection(name, root, block, yaml.MappingNode)
	if err != nil {
		return nil, nil, err
	}
	list, err := childCollection(name, settings, field, yaml.SequenceNode)
	if err != nil {
		return nil, nil, err
	}
	var current []any
	if err := list.Decode(&current); err != nil {
		return nil, nil, fmt.Errorf("%s:%d: %s.%s: %w", name, list.Line, block, field, err)
	}
	var next []any
	var changed []writeback.ImageUpdate
	if sourceType == appwatch.SourceHelm {
		next, changed = UpdateHelmParameters(current, images)
	} else {
		next, changed = UpdateKustomizeImages(current, images)
	}
	if len(changed) == 0 {
		return src, nil, nil
	}
	content := make([]*yaml.Node, len(next))
	for i, v := range next {
		var orig *yaml.Node
		if i < len(list.Content) {
			orig = list.Content[i]
		}
		switch {
		case orig != nil && i < len(current) && reflect.DeepEqual(current[i], v):
			content[i] = orig
		case sourceType == appwatch.SourceHelm:
			content[i] = helmParameterNode(orig, v)
		default:
			s, _ := v.(string)
			content[i] = strNode(s)
		}
	}
	list.Content = content
	list.Style &^= yaml.FlowStyle
	out, err := marshalNode(&doc)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: render: %w", name, err)
	}
	return out, changed, nil
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
// produced. An existing entry keeps its keys' order and its other keys;
// only value and forceString change.
func helmParameterNode(orig *yaml.Node, v any) *yaml.Node {
	entry, _ := v.(map[string]any)
	name, _ := entry["name"].(string)
	value, _ := entry["value"].(string)
	boolNode := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}
	if orig == nil || orig.Kind != yaml.MappingNode {
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
			strNode("name"), strNode(name),
			strNode("value"), strNode(value),
			strNode("forceString"), boolNode,
		}}
	}
	c := *orig
	c.Content = append([]*yaml.Node(nil), orig.Content...)
	c.Style &^= yaml.FlowStyle
	set := func(key string, n *yaml.Node) {
		for i := 0; i+1 < len(c.Content); i += 2 {
			if c.Content[i].Value == key {
				c.Content[i+1] = n
				return
			}
		}
		c.Content = append(c.Content, strNode(key), n)
	}
	set("value", strNode(value))
	set("forceString", boolNode)
	return &c
}
