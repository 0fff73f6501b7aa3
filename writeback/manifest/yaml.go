package manifest

import (
	"bytes"
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/image-updater/argocd-image-updater/internal/repoyaml"
	"go.yaml.in/yaml/v3"
)

// The git targets edit files people also edit by hand. Re-encoding a whole
// file would drop their comments, key order and blank lines, so edits are
// made on the text: yaml.v3 parses the file to find where a value sits
// (line and column), and only that value's bytes, or a few inserted or
// deleted lines, change. Every edit is then checked by parsing the result
// and comparing its meaning with what the edit intended, so a layout the
// text edit does not understand is an error, never a silently wrong file.

// Every file is parsed through repoyaml, which bounds its values with
// aliases expanded: the edits decode, copy and compare whole documents.

// yamlText is a YAML file's text with its first document parsed.
type yamlText struct {
	name       string // the file's path in the repository, for messages
	src        []byte
	lineStarts []int // byte offset of each line; index 0 is line 1
	doc        yaml.Node
}

func parseYAMLText(name string, src []byte) (*yamlText, error) {
	doc, err := repoyaml.Parse(name, withoutDirectives(src))
	if err != nil {
		return nil, err
	}
	y := &yamlText{name: name, src: src, lineStarts: []int{0}, doc: *doc}
	for i, b := range src {
		if b == '\n' {
			y.lineStarts = append(y.lineStarts, i+1)
		}
	}
	return y, nil
}

// root is the document's top node, or nil for a file without content.
func (y *yamlText) root() *yaml.Node {
	if y.doc.Kind != yaml.DocumentNode || len(y.doc.Content) == 0 {
		return nil
	}
	return y.doc.Content[0]
}

// where names a node's position for messages.
func (y *yamlText) where(n *yaml.Node) string {
	return fmt.Sprintf("%s:%d", y.name, n.Line)
}

// newline is the file's line ending, so inserted lines match it.
func (y *yamlText) newline() string {
	if i := bytes.IndexByte(y.src, '\n'); i > 0 && y.src[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// lineStart is the offset of a line's first byte; the line after the last
// one starts at the end of the text.
func (y *yamlText) lineStart(line int) int {
	if line-1 < len(y.lineStarts) {
		return y.lineStarts[line-1]
	}
	return len(y.src)
}

// lineText is a line without its line ending.
func (y *yamlText) lineText(line int) string {
	start, end := y.lineStart(line), y.lineStart(line+1)
	return strings.TrimRight(string(y.src[start:end]), "\r\n")
}

// lines is the number of lines, counting a last line without a newline.
func (y *yamlText) lines() int {
	n := len(y.lineStarts)
	if y.lineStarts[n-1] == len(y.src) {
		n--
	}
	return n
}

// offset converts a yaml.v3 position (1-based line, 1-based column counted
// in characters) into a byte offset.
func (y *yamlText) offset(line, column int) (int, bool) {
	if line < 1 || line > len(y.lineStarts) {
		return 0, false
	}
	off := y.lineStarts[line-1]
	for c := 1; c < column; c++ {
		if off >= len(y.src) || y.src[off] == '\n' {
			return 0, false
		}
		_, size := utf8.DecodeRune(y.src[off:])
		off += size
	}
	return off, true
}

// scalarSpan returns the byte range of a scalar's token when it sits on
// one line, so it can be replaced in place. Block scalars, anchored or
// tagged values and multi-line scalars are refused.
func (y *yamlText) scalarSpan(n *yaml.Node, inFlow bool) (start, end int, ok bool) {
	if n.Kind != yaml.ScalarNode || n.Style&(yaml.LiteralStyle|yaml.FoldedStyle|yaml.TaggedStyle) != 0 || n.Anchor != "" {
		return 0, 0, false
	}
	start, ok = y.offset(n.Line, n.Column)
	if !ok || start >= len(y.src) {
		return 0, 0, false
	}
	switch c := y.src[start]; c {
	case '"', '\'':
		for i := start + 1; i < len(y.src); i++ {
			switch y.src[i] {
			case '\n':
				return 0, 0, false
			case '\\':
				if c == '"' {
					i++
				}
			case c:
				if c == '\'' && i+1 < len(y.src) && y.src[i+1] == '\'' {
					i++
					continue
				}
				end = i + 1
				var v string
				if repoyaml.Unmarshal(y.name, y.src[start:end], &v) != nil || v != n.Value {
					return 0, 0, false
				}
				return start, end, true
			}
		}
		return 0, 0, false
	case '&', '!', '*', '|', '>':
		return 0, 0, false
	}
	end = start
	for end < len(y.src) {
		c := y.src[end]
		if c == '\n' || c == '\r' || (c == '#' && end > start && (y.src[end-1] == ' ' || y.src[end-1] == '\t')) {
			break
		}
		if inFlow && (c == ',' || c == ']' || c == '}') {
			break
		}
		if c == ':' && end+1 < len(y.src) && (y.src[end+1] == ' ' || y.src[end+1] == '\n' || y.src[end+1] == '\r') {
			break
		}
		end++
	}
	for end > start && (y.src[end-1] == ' ' || y.src[end-1] == '\t') {
		end--
	}
	// A plain scalar continued on the next line has a longer value than
	// its first line shows.
	if string(y.src[start:end]) != n.Value {
		return 0, 0, false
	}
	return start, end, true
}

// emptyValueAfter tells whether a key is followed by nothing but a colon
// and perhaps a comment on its line ("key:" meaning null), and returns the
// offset just after the colon.
func (y *yamlText) emptyValueAfter(key *yaml.Node) (int, bool) {
	_, end, ok := y.scalarSpan(key, false)
	if !ok {
		return 0, false
	}
	i := end
	for i < len(y.src) && (y.src[i] == ' ' || y.src[i] == '\t') {
		i++
	}
	if i >= len(y.src) || y.src[i] != ':' {
		return 0, false
	}
	colon := i + 1
	rest := strings.TrimSpace(strings.TrimRight(string(y.src[colon:y.lineStart(key.Line+1)]), "\r\n"))
	return colon, rest == "" || strings.HasPrefix(rest, "#")
}

// splice returns the text with src[start:end] replaced.
func (y *yamlText) splice(start, end int, text string) []byte {
	out := make([]byte, 0, len(y.src)-(end-start)+len(text))
	out = append(out, y.src[:start]...)
	out = append(out, text...)
	return append(out, y.src[end:]...)
}

// textEdit replaces src[start:end] with text. Insertions at one offset
// (start == end) go in the order of order, then of the edits' list.
type textEdit struct {
	start, end int
	text       string
	order      int
}

// applyEdits makes edits computed on the same text all at once; ok is
// false when two of them overlap.
func (y *yamlText) applyEdits(edits []textEdit) (_ []byte, ok bool) {
	slices.SortStableFunc(edits, func(a, b textEdit) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		// An insertion before a replacement that starts where it is.
		if c := cmp.Compare(a.end-a.start, b.end-b.start); c != 0 {
			return c
		}
		return cmp.Compare(a.order, b.order)
	})
	var out bytes.Buffer
	at := 0
	for _, e := range edits {
		if e.start < at {
			return nil, false
		}
		out.Write(y.src[at:e.start])
		out.WriteString(e.text)
		at = e.end
	}
	out.Write(y.src[at:])
	return out.Bytes(), true
}

// insertAfterLine inserts whole lines after a line (0 = at the top),
// adding a final newline to the text first when it lacks one.
func (y *yamlText) insertAfterLine(line int, lines []string) []byte {
	e := y.insertAfterLineEdit(line, lines)
	return y.splice(e.start, e.end, e.text)
}

// insertAfterLineEdit is the text edit of insertAfterLine.
func (y *yamlText) insertAfterLineEdit(line int, lines []string) textEdit {
	nl := y.newline()
	block := strings.Join(lines, nl) + nl
	at := y.lineStart(line + 1)
	if at == len(y.src) && len(y.src) > 0 && y.src[len(y.src)-1] != '\n' {
		block = nl + block
	}
	return textEdit{start: at, end: at, text: block}
}

// deleteLines removes lines first..last.
func (y *yamlText) deleteLines(first, last int) []byte {
	return y.splice(y.lineStart(first), y.lineStart(last+1), "")
}

// maxLine is the last line any node below n starts on.
func maxLine(n *yaml.Node) int {
	m := n.Line
	for _, c := range n.Content {
		if l := maxLine(c); l > m {
			m = l
		}
	}
	return m
}

// indentOf counts the spaces that start a line.
func (y *yamlText) indentOf(line int) int {
	s := y.lineText(line)
	return len(s) - len(strings.TrimLeft(s, " "))
}

// mappingGet returns the key and value nodes of a key in a mapping.
func mappingGet(m *yaml.Node, key string) (k, v *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// isNull tells whether a node is YAML null ("", "~", "null").
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// renderString renders a string as a YAML scalar that reads back as that
// string. quote, when it is a double or single quote, keeps that style.
func renderString(value string, quote byte) (string, error) {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
	switch quote {
	case '"':
		n.Style = yaml.DoubleQuotedStyle
	case '\'':
		n.Style = yaml.SingleQuotedStyle
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		return "", err
	}
	s := strings.TrimSuffix(string(out), "\n")
	if strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("value %q does not fit on one line", value)
	}
	return s, nil
}

// marshalNode renders a node with two-space indentation.
func marshalNode(n *yaml.Node) ([]byte, error) { return marshal(n, false) }

// marshalCompact renders a node as Argo CD Image Updater renders its
// files: two-space indentation, list items at their key's indentation.
func marshalCompact(n *yaml.Node) ([]byte, error) { return marshal(n, true) }

func marshal(n *yaml.Node, compact bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if compact {
		enc.CompactSeqIndent()
	}
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// withoutDirectives turns the directives before a "---" document start
// into comments of the same length, for the parser, which knows only
// %YAML 1.1: the lines are kept as they are, and positions stay.
func withoutDirectives(src []byte) []byte {
	prefix, _ := splitDocumentStart(src)
	if !bytes.Contains(prefix, []byte("%")) {
		return src
	}
	out := bytes.Clone(src)
	for i := 0; i < len(prefix); {
		if out[i] == '%' {
			out[i] = '#'
		}
		j := bytes.IndexByte(out[i:len(prefix)], '\n')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return out
}

// decodeAny is a file's meaning, for checking an edit.
func decodeAny(name string, src []byte) (any, error) {
	var v any
	if err := repoyaml.Unmarshal(name, withoutDirectives(src), &v); err != nil {
		return nil, err
	}
	return v, nil
}

// checkEdit verifies that the edited text means exactly what the edit
// intended: want is the original's meaning with the intended change made.
func checkEdit(name string, edited []byte, want any) error {
	got, err := decodeAny(name, edited)
	if err != nil {
		return fmt.Errorf("%s: editing it in place would produce invalid YAML (%v); not written", name, strings.TrimPrefix(err.Error(), name+": "))
	}
	if !reflect.DeepEqual(normalizeYAMLValue(got), normalizeYAMLValue(want)) {
		return fmt.Errorf("%s: editing it in place would change more than the intended values (unusual layout); not written", name)
	}
	return nil
}

// normalizeYAMLValue turns the two map types yaml.v3 decodes into one, so
// that values built in code compare equal to decoded ones.
func normalizeYAMLValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = normalizeYAMLValue(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[fmt.Sprint(k)] = normalizeYAMLValue(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalizeYAMLValue(e)
		}
		return out
	default:
		return v
	}
}

// copyYAMLValue deep-copies decoded YAML so the copy can be changed.
func copyYAMLValue(v any) any { return normalizeYAMLValue(v) }
