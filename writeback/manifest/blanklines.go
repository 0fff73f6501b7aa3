package manifest

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/image-updater/argocd-image-updater/internal/repoyaml"
)

// The encoder keeps comments where they were but drops blank lines. A file
// that must be re-encoded (a value the text edit cannot reach) keeps its
// blank lines by carrying each as a marker comment through the encoding,
// at the indentation of the line after it, so that it stays between the
// same two lines; the markers become blank lines again afterwards. Blank
// lines that belong to a value (inside a block scalar, a multi-line
// scalar or a flow collection) are left as they are: the encoder writes
// the value, and a comment there would change it or be moved.

const blankLineMarker = "#argocd-image-updater:blank-line"

// markBlankLines returns src with its blank lines as marker comments, and
// the function that turns the markers in an encoding of it back into
// blank lines. When no line can be marked safely (src does not parse, or
// the marked text would mean something else), src is returned as it is
// and the function returns its input.
func markBlankLines(name string, src []byte) (marked []byte, unmark func([]byte) []byte) {
	none := func(b []byte) []byte { return b }
	if !hasBlankLine(src) {
		return src, none
	}
	marker := blankLineMarker
	for i := 0; bytes.Contains(src, []byte(marker)); i++ {
		marker = blankLineMarker + "-" + strconv.Itoa(i)
	}
	// The encoder writes LF line ends whatever the file had, and the
	// parser reads a comment that ends in CR apart from what follows.
	text := strings.ReplaceAll(string(src), "\r\n", "\n")
	doc, err := repoyaml.Parse(name, withoutDirectives([]byte(text)))
	if err != nil {
		return src, none
	}
	lines := strings.SplitAfter(text, "\n")
	valueLines := map[int]bool{} // 0-based lines that belong to a value
	protectValues(doc, -1, lines, valueLines)

	var b strings.Builder
	count := 0
	for i, line := range lines {
		if strings.TrimSpace(line) != "" || valueLines[i] || i == len(lines)-1 && line == "" {
			b.WriteString(line)
			continue
		}
		indent := ""
		for _, next := range lines[i+1:] {
			if strings.TrimSpace(next) != "" {
				indent = next[:len(next)-len(strings.TrimLeft(next, " "))]
				break
			}
		}
		b.WriteString(indent + marker)
		if strings.HasSuffix(line, "\n") {
			b.WriteString("\n")
		}
		count++
	}
	if count == 0 {
		return src, none
	}
	marked = []byte(b.String())
	before, err1 := decodeAny(name, src)
	after, err2 := decodeAny(name, marked)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(normalizeYAMLValue(before), normalizeYAMLValue(after)) {
		return src, none
	}
	return marked, func(out []byte) []byte { return unmarkBlankLines(name, out, marker) }
}

// unmarkBlankLines turns the marker comments of an encoding back into
// blank lines. The encoder may have moved a marker below a block scalar
// that keeps its final line breaks, where a blank line would join the
// value: then the markers are dropped instead, and if even that would
// change the meaning, they stay as the comments they are.
func unmarkBlankLines(name string, out []byte, marker string) []byte {
	rewrite := func(blank bool) []byte {
		var b bytes.Buffer
		for line := range bytes.Lines(out) {
			if string(bytes.TrimSpace(line)) != marker {
				b.Write(line)
			} else if blank {
				b.WriteString("\n")
			}
		}
		return b.Bytes()
	}
	want, err := decodeAny(name, out)
	if err != nil {
		return out
	}
	for _, blank := range []bool{true, false} {
		b := rewrite(blank)
		if got, err := decodeAny(name, b); err == nil && reflect.DeepEqual(normalizeYAMLValue(got), normalizeYAMLValue(want)) {
			return b
		}
	}
	return out
}

// hasBlankLine tells whether src has a line of blanks alone.
func hasBlankLine(src []byte) bool {
	for line := range bytes.Lines(src) {
		if len(bytes.TrimSpace(line)) == 0 {
			return true
		}
	}
	return false
}

// protectValues marks the lines that belong to the values under n: after
// a scalar that may span lines, the lines below it that are blank or
// indented beyond parent (the indentation of its key or list dash, -1 at
// the top) up to its last such non-blank line, and for a block scalar that
// keeps its final line breaks ("|+"), the blank lines after it too; every
// non-blank line of a flow collection.
func protectValues(n *yaml.Node, parent int, lines []string, out map[int]bool) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			protectValues(c, -1, lines, out)
		}
	case yaml.MappingNode:
		if n.Style&yaml.FlowStyle != 0 {
			protectBelow(n.Line, parent, lines, out, false)
			return
		}
		// Keys are not followed: a key spanning lines ("? |") is rare
		// enough that a blank line inside one is left to the check below.
		for i := 0; i+1 < len(n.Content); i += 2 {
			protectValues(n.Content[i+1], n.Content[i].Column-1, lines, out)
		}
	case yaml.SequenceNode:
		if n.Style&yaml.FlowStyle != 0 {
			protectBelow(n.Line, parent, lines, out, false)
			return
		}
		for _, c := range n.Content {
			protectValues(c, n.Column-1, lines, out)
		}
	case yaml.ScalarNode:
		keep := false
		if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 && n.Line-1 < len(lines) {
			header := lines[n.Line-1][min(n.Column-1, len(lines[n.Line-1])):]
			header, _, _ = strings.Cut(header, "#")
			keep = strings.Contains(header, "+")
		}
		protectBelow(n.Line, parent, lines, out, keep)
	}
}

// protectBelow marks the lines after line (1-based) that are blank or
// indented beyond parent, up to the last non-blank one of them, or all of
// them with trailing.
func protectBelow(line, parent int, lines []string, out map[int]bool, trailing bool) {
	last := line - 1 // 0-based index of the node's own line
	i := line
	for ; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\r\n")
		if strings.TrimSpace(l) == "" {
			continue
		}
		if len(l)-len(strings.TrimLeft(l, " ")) <= parent {
			break
		}
		last = i
	}
	end := last
	if trailing {
		end = i - 1
	}
	for j := line; j <= end; j++ {
		out[j] = true
	}
}
