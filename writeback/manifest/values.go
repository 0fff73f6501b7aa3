package manifest

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/image-updater/argocd-image-updater/internal/repoyaml"
	"github.com/image-updater/argocd-image-updater/writeback/appset"
)

// Document chooses the document of a file an edit is made in: the one of
// Kind in argoproj.io named Name in Namespace (or in DefaultNamespace
// when it names none, as Argo CD creates it there); the zero Document is
// a file of one document, as a git files generator reads.
type Document struct {
	Kind, Namespace, Name string
	DefaultNamespace      string
}

func (d Document) String() string { return d.Kind + " " + d.Namespace + "/" + d.Name }

// SetValues rewrites string values of the document d of src in place,
// each at its path, from its From to its To, keeping the rest of the file
// as it is (comments, quoting, other documents). A value that is not From
// any more is an error naming its line: the file is not what the edit was
// planned on. JSON files are edited as the YAML they are.
func SetValues(name string, src []byte, d Document, values []appset.Value) ([]byte, error) {
	if err := repoyaml.CheckSize(name, src); err != nil {
		return nil, err
	}
	out := src
	for _, v := range values {
		var err error
		if out, err = setValue(name, out, d, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func setValue(name string, src []byte, d Document, v appset.Value) ([]byte, error) {
	docs := documents(src)
	found := false
	for _, doc := range docs {
		padded := append([]byte(strings.Repeat("\n", doc.line-1)), src[doc.start:doc.end]...)
		y, err := parseYAMLText(name, padded)
		if err != nil {
			return nil, err
		}
		root := y.root()
		if d.Kind != "" && !d.isIn(root) {
			continue
		}
		if d.Kind == "" && len(docs) > 1 {
			return nil, fmt.Errorf("%s holds %d documents, not one", name, len(docs))
		}
		if found {
			return nil, fmt.Errorf("%s: two documents define %s", name, d)
		}
		found = true
		parent, node, err := walkPath(root, v.Path)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, v.Path, err)
		}
		if node.Kind != yaml.ScalarNode || node.Value != v.From {
			return nil, fmt.Errorf("%s: %s: %s is %q, not %q", name, y.where(node), v.Path, node.Value, v.From)
		}
		start, end, ok := y.scalarSpan(node, parent.Style&yaml.FlowStyle != 0)
		if !ok {
			return nil, fmt.Errorf("%s: %s cannot be rewritten in place (it spans lines, or has an anchor or a tag)", y.where(node), v.Path)
		}
		var quote byte
		if c := y.src[start]; c == '"' || c == '\'' {
			quote = c
		}
		r, err := renderString(v.To, quote)
		if err != nil {
			return nil, err
		}
		edited := y.splice(start, end, r)
		// The edit is checked by reading it back.
		check, err := parseYAMLText(name, edited)
		if err != nil {
			return nil, fmt.Errorf("%s: the edit of %s does not parse: %w", name, v.Path, err)
		}
		if _, n, err := walkPath(check.root(), v.Path); err != nil || n.Value != v.To {
			return nil, fmt.Errorf("%s: %s could not be rewritten in place", y.where(node), v.Path)
		}
		return append(append(append([]byte{}, src[:doc.start]...), edited[doc.line-1:]...), src[doc.end:]...), nil
	}
	if d.Kind == "" {
		return nil, fmt.Errorf("%s is empty", name)
	}
	return nil, &NotDefinedError{File: name, Document: d}
}

// NotDefinedError is SetValues's error for a file no document of which is
// the one asked for.
type NotDefinedError struct {
	File     string
	Document Document
}

func (e *NotDefinedError) Error() string {
	return fmt.Sprintf("no document of %s defines %s", e.File, e.Document)
}

// isIn tells whether root is the document d (see definedIn).
func (d Document) isIn(root *yaml.Node) bool { return d.definedIn(root) == definedYes }

// definedIn tells whether root is the document d: of its kind in
// argoproj.io, its name, and its namespace written in metadata.namespace
// or, where that is empty, d.DefaultNamespace. A name alone proves
// nothing: another namespace may hold one of that name.
func (d Document) definedIn(root *yaml.Node) definition {
	if root == nil || root.Kind != yaml.MappingNode {
		return definedNot
	}
	_, kind := mappingGet(root, "kind")
	_, version := mappingGet(root, "apiVersion")
	_, meta := mappingGet(root, "metadata")
	_, name := mappingGet(meta, "name")
	_, ns := mappingGet(meta, "namespace")
	switch {
	case kind == nil || kind.Value != d.Kind || version == nil || !strings.HasPrefix(version.Value, "argoproj.io/") || name == nil || name.Value != d.Name:
		return definedNot
	case ns != nil && (ns.Kind != yaml.ScalarNode || ns.Value != ""):
		return definedIf(ns.Kind == yaml.ScalarNode && ns.Value == d.Namespace)
	case d.DefaultNamespace == "":
		return definedUnproven
	}
	return definedIf(d.DefaultNamespace == d.Namespace)
}

// walkPath is the node at p under root, and the collection holding it.
func walkPath(root *yaml.Node, p appset.Path) (parent, node *yaml.Node, _ error) {
	node = root
	for i, st := range p {
		parent = node
		switch {
		case st.Key != "":
			_, node = mappingGet(node, st.Key)
		case node != nil && node.Kind == yaml.SequenceNode && st.Index < len(node.Content):
			node = node.Content[st.Index]
		default:
			node = nil
		}
		if node == nil {
			return nil, nil, fmt.Errorf("no %s", p[:i+1])
		}
	}
	if parent == nil {
		return nil, nil, fmt.Errorf("an empty path")
	}
	return parent, node, nil
}
