package manifest

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/internal/repoyaml"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// ApplicationDefinition names an Application whose definition is a
// document in its parent Application's manifests (app of apps), and the
// source of it an edit writes.
type ApplicationDefinition struct {
	Namespace, Name string
	// DefaultNamespace is where Argo CD creates an Application whose
	// document names no namespace: the parent's destination namespace;
	// "" when that is not known, and such a document is then no proof of
	// being the Application's definition.
	DefaultNamespace string
	// Source is the index in spec.sources of the source written; -1 for
	// spec.source.
	Source     int
	SourceType application.SourceType
}

func (d ApplicationDefinition) String() string { return d.Namespace + "/" + d.Name }

// SourceChange is what an edit of an Application's definition writes into
// its source: new versions of its images, and a new targetRevision (the
// version of its chart) unless Revision is empty.
type SourceChange struct {
	Images   []writeback.ImageUpdate
	Revision string
}

// Match is where a file defines an Application.
type Match struct {
	// Line is where the document that defines it starts; 0 for none.
	Line int
	// Unproven are the lines of the documents of its kind and name that
	// name no namespace while the namespace Argo CD creates them in is
	// not known (ApplicationDefinition.DefaultNamespace is ""): they may
	// be another namespace's Application, and are not edited.
	Unproven []int
}

// Found tells whether a document defines the Application.
func (m Match) Found() bool { return m.Line != 0 }

// SourceChanged is what such an edit changed.
type SourceChanged struct {
	Images   []writeback.ImageUpdate
	Revision bool
}

// SetApplicationSource writes a change into the document of src that
// defines the Application def (kind Application of argoproj.io, its name,
// its namespace, see defines): the images into its source's kustomize images, Helm
// parameters or plugin environment, merged as the argocd method merges
// them into the live Application, and the revision into its
// targetRevision. m tells which document defines it, if any. Only
// the edited block of the source (kustomize:, helm: or plugin:) is
// rendered anew, with the comments it holds, and the targetRevision value
// replaced in place; the rest of the file stays as it is, other documents
// included.
func SetApplicationSource(name string, src []byte, def ApplicationDefinition, change SourceChange) (out []byte, m Match, changed SourceChanged, _ error) {
	if err := repoyaml.CheckSize(name, src); err != nil {
		return nil, Match{}, changed, err
	}
	var edits []listEdit
	if len(change.Images) > 0 {
		var err error
		if edits, err = sourceEdits(name, def.SourceType, change.Images); err != nil {
			return nil, Match{}, changed, err
		}
	}
	out = src
	for _, d := range documents(src) {
		// Blank lines in front keep the parser's line numbers the file's.
		padded := append([]byte(strings.Repeat("\n", d.line-1)), src[d.start:d.end]...)
		y, err := parseYAMLText(name, padded)
		if err != nil {
			return nil, Match{}, SourceChanged{}, err
		}
		root := y.root()
		switch defines(root, def) {
		case definedNot:
			continue
		case definedUnproven:
			m.Unproven = append(m.Unproven, root.Line)
			continue
		}
		if m.Line != 0 {
			return nil, Match{}, SourceChanged{}, fmt.Errorf("%s: the documents at lines %d and %d both define Application %s", name, m.Line, root.Line, def)
		}
		m.Line = root.Line
		edited, c, err := y.editApplicationSource(root, def, edits, change.Revision)
		if err != nil {
			return nil, Match{}, SourceChanged{}, err
		}
		if len(c.Images) > 0 || c.Revision {
			changed = c
			doc := edited[d.line-1:]
			out = append(append(append([]byte{}, src[:d.start]...), doc...), src[d.end:]...)
		}
	}
	return out, m, changed, nil
}

// document is one YAML document's bytes in a file, and the line it starts
// on.
type document struct{ start, end, line int }

// documents splits a file at its "---" lines.
func documents(src []byte) []document {
	var docs []document
	cur := document{line: 1}
	line := 1
	for off := 0; off < len(src); line++ {
		end := len(src)
		if i := bytes.IndexByte(src[off:], '\n'); i >= 0 {
			end = off + i + 1
		}
		if isDocumentStart(strings.TrimRight(string(src[off:end]), "\r\n")) && off > cur.start {
			cur.end = off
			docs = append(docs, cur)
			cur = document{start: off, line: line}
		}
		off = end
	}
	cur.end = len(src)
	return append(docs, cur)
}

// definition is whether a document defines an Application.
type definition int

const (
	definedNot definition = iota
	definedYes
	// definedUnproven is a document of its kind and name that names no
	// namespace, where the namespace it is created in is not known.
	definedUnproven
)

// defines tells whether a document is the definition of def: of kind
// Application of argoproj.io, named def.Name, in def.Namespace, written
// in metadata.namespace or, where that is empty, def.DefaultNamespace. A
// name alone proves nothing: another namespace may hold an Application of
// that name.
func defines(root *yaml.Node, def ApplicationDefinition) definition {
	return Document{Kind: "Application", Namespace: def.Namespace, Name: def.Name, DefaultNamespace: def.DefaultNamespace}.definedIn(root)
}

func definedIf(ok bool) definition {
	if ok {
		return definedYes
	}
	return definedNot
}

// editApplicationSource merges the edits into the source of the
// Application document root, and sets its targetRevision to revision
// unless empty, as a text edit of the blocks and the value they change.
func (y *yamlText) editApplicationSource(root *yaml.Node, def ApplicationDefinition, edits []listEdit, revision string) ([]byte, SourceChanged, error) {
	_, spec := mappingGet(root, "spec")
	var source *yaml.Node
	where := "spec.source"
	if def.Source < 0 {
		_, source = mappingGet(spec, "source")
	} else {
		where = fmt.Sprintf("spec.sources[%d]", def.Source)
		if _, list := mappingGet(spec, "sources"); list != nil && list.Kind == yaml.SequenceNode && def.Source < len(list.Content) {
			source = list.Content[def.Source]
		}
	}
	switch {
	case source == nil:
		return nil, SourceChanged{}, fmt.Errorf("%s:%d: Application %s has no %s", y.name, root.Line, def, where)
	case source.Kind != yaml.MappingNode:
		return nil, SourceChanged{}, fmt.Errorf("%s:%d: %s of Application %s is a %s, not a map", y.name, source.Line, where, def, kindName(source))
	case source.Style&yaml.FlowStyle != 0 || len(source.Content) == 0:
		return nil, SourceChanged{}, fmt.Errorf("%s:%d: %s of Application %s is written in flow style ({...}), which is not edited in place", y.name, source.Line, where, def)
	}
	// Where each block was before the edit, and where a new one goes.
	type span struct{ key, end int }
	before := map[string]span{}
	for i := 0; i+1 < len(source.Content); i += 2 {
		k, v := source.Content[i], source.Content[i+1]
		before[k.Value] = span{k.Line, y.blockEnd(k, v)}
	}
	last := source.Content[len(source.Content)-2]
	afterLast := y.blockEnd(last, source.Content[len(source.Content)-1])
	indent := source.Content[0].Column - 1

	var changed []writeback.ImageUpdate
	var blocks []string
	for _, e := range edits {
		c, err := e.apply(y.name, source)
		if err != nil {
			return nil, SourceChanged{}, err
		}
		if len(c) > 0 {
			changed = append(changed, c...)
			blocks = append(blocks, e.list.block)
		}
	}
	var revisionEdit *textEdit
	if revision != "" {
		k, v := mappingGet(source, "targetRevision")
		switch {
		case v == nil:
			line, err := renderString(revision, 0)
			if err != nil {
				return nil, SourceChanged{}, fmt.Errorf("%s: targetRevision %q: %w", y.name, revision, err)
			}
			e := y.insertAfterLineEdit(afterLast, []string{pad(indent) + "targetRevision: " + line})
			e.order = 1
			revisionEdit = &e
			source.Content = append(source.Content, strNode("targetRevision"), strNode(revision))
		case v.Value != revision || v.ShortTag() != "!!str":
			e, err := y.replaceValueEdit(k, v, revision, false)
			if err != nil {
				return nil, SourceChanged{}, err
			}
			revisionEdit = &e
			v.Value, v.Tag = revision, "!!str"
		}
	}
	if len(changed) == 0 && revisionEdit == nil {
		return y.src, SourceChanged{}, nil
	}
	var want any
	if err := root.Decode(&want); err != nil {
		return nil, SourceChanged{}, fmt.Errorf("%s:%d: %w", y.name, root.Line, err)
	}
	var textEdits []textEdit
	for _, block := range blocks {
		k, v := mappingGet(source, block)
		key := *k
		key.HeadComment = "" // stays on its lines above
		v.Style &^= yaml.FlowStyle
		text, err := marshalCompact(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{&key, v}})
		if err != nil {
			return nil, SourceChanged{}, fmt.Errorf("%s: render %s: %w", y.name, block, err)
		}
		lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
		for i := range lines {
			if lines[i] != "" {
				lines[i] = pad(indent) + lines[i]
			}
		}
		if s, ok := before[block]; ok {
			// From the key on: a dash before it on its line stays.
			start, ok := y.offset(s.key, k.Column)
			if !ok {
				return nil, SourceChanged{}, fmt.Errorf("%s:%d: %s.%s: unusual layout; not written", y.name, s.key, where, block)
			}
			lines[0] = strings.TrimLeft(lines[0], " ")
			textEdits = append(textEdits, textEdit{start: start, end: y.lineStart(s.end + 1), text: strings.Join(lines, y.newline()) + y.newline()})
		} else {
			textEdits = append(textEdits, y.insertAfterLineEdit(afterLast, lines))
		}
	}
	if revisionEdit != nil {
		textEdits = append(textEdits, *revisionEdit)
	}
	edited, ok := y.applyEdits(textEdits)
	if !ok {
		return nil, SourceChanged{}, fmt.Errorf("%s:%d: %s of Application %s: unusual layout; not written", y.name, source.Line, where, def)
	}
	if err := checkEdit(y.name, edited, want); err != nil {
		return nil, SourceChanged{}, err
	}
	return edited, SourceChanged{Images: changed, Revision: revisionEdit != nil}, nil
}
