package chartrepo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/image-updater/argocd-image-updater/internal/budget"
)

// Bounds of one index, whoever serves it. Real indexes list some tens of
// thousands of versions (the largest public ones, tens of MiB of YAML);
// what is kept is the charts' names and versions, not the rest of each
// entry.
const (
	// MaxVersions bounds the versions kept of one index, all charts
	// together: about 10 MiB of strings at the bound.
	MaxVersions = 500_000
	// maxLine is how much of a line is read; the rest of a longer one (a
	// description, a certificate) is skipped, since keys and versions
	// are at the start of theirs.
	maxLine = 64 << 10
	// maxVersionLen bounds one version string; longer ones are no
	// version a chart has.
	maxVersionLen = 256
)

// ErrTooManyVersions is what an index past MaxVersions fails with.
var ErrTooManyVersions = errors.New("too many chart versions")

// Index is what the updater reads of a repository's index.yaml: the
// versions of each chart, in the order listed.
type Index struct {
	Charts map[string][]string
	// held is what the index counts against its cycle's budget.
	held *held
}

// Versions are the listed versions of chart.
func (ix Index) Versions(chart string) []string { return ix.Charts[chart] }

// Bytes is what the index takes in memory, approximated from above.
func (ix Index) Bytes() int64 {
	var n int64
	for name, versions := range ix.Charts {
		n += chartBytes(name) + int64(cap(versions))*budget.StringHeader
		for _, v := range versions {
			n += budget.Data(len(v))
		}
	}
	return n
}

// Release gives back to its cycle's budget what the index holds, once its
// charts are chosen; the index is not to be used after.
func (ix Index) Release() {
	if ix.held != nil {
		ix.held.once.Do(func() { ix.held.budget.Release(ix.held.bytes) })
	}
}

type held struct {
	once   sync.Once
	budget *budget.Budget
	bytes  int64
}

// chartSlot is what a chart's entry of Charts takes besides its data: the
// key's and the value's headers, in a map table up to twice as large as
// its entries.
const chartSlot = 2 * (budget.StringHeader + budget.SliceHeader + 8)

func chartBytes(name string) int64 { return chartSlot + budget.Data(len(name)) }

// ParseIndex reads a Helm repository index from r as a stream, keeping
// only each chart's name and versions: the index is never held whole,
// so its size costs time, not memory. It reads the two forms Helm
// repositories are served in: the block YAML `helm repo index` writes
// (and most servers copy), and JSON. A YAML index in another style (flow
// collections, anchors in place of versions) is refused rather than
// misread.
func ParseIndex(r io.Reader) (Index, error) { return parseIndex(r, &collector{}) }

// parseIndex reads an index into c.
func parseIndex(r io.Reader, c *collector) (Index, error) {
	c.ix = Index{Charts: map[string][]string{}}
	br := bufio.NewReaderSize(r, 64<<10)
	// The first non-space byte tells JSON from YAML.
	for {
		b, err := br.Peek(1)
		if err != nil {
			if err == io.EOF {
				return Index{}, errors.New("the index is empty")
			}
			return Index{}, err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = br.ReadByte()
			continue
		case '{':
			return parseJSONIndex(br, c)
		}
		return parseYAMLIndex(br, c)
	}
}

// collector keeps the versions within MaxVersions: of the charts in want
// alone, when want is not nil, counting the bytes they take with take, if
// not nil, as they are read.
type collector struct {
	ix   Index
	n    int
	want map[string]bool
	take func(int64) error
	// bytes are what was counted with take (Index.Bytes of ix).
	bytes int64
}

func (c *collector) count(n int64) error {
	if c.take != nil {
		if err := c.take(n); err != nil {
			return err
		}
	}
	c.bytes += n
	return nil
}

// chart registers a chart, which counts as a version against the bound.
func (c *collector) chart(name string) error {
	if _, ok := c.ix.Charts[name]; ok || c.want != nil && !c.want[name] {
		return nil
	}
	if c.n >= MaxVersions {
		return fmt.Errorf("the index lists more than %d charts and versions: %w", MaxVersions, ErrTooManyVersions)
	}
	if err := c.count(chartBytes(name)); err != nil {
		return err
	}
	c.n++
	c.ix.Charts[name] = nil
	return nil
}

func (c *collector) add(chart, version string) error {
	if version == "" || len(version) > maxVersionLen || c.want != nil && !c.want[chart] {
		return nil
	}
	if c.n >= MaxVersions {
		return fmt.Errorf("the index lists more than %d versions: %w", MaxVersions, ErrTooManyVersions)
	}
	versions := c.ix.Charts[chart]
	grown := cap(versions)
	versions = append(versions, version)
	if err := c.count(int64(cap(versions)-grown)*budget.StringHeader + budget.Data(len(version))); err != nil {
		return err
	}
	c.n++
	c.ix.Charts[chart] = versions
	return nil
}

// parseYAMLIndex reads block YAML line by line: the top-level "entries"
// key, under it one key per chart, under each a sequence of entries whose
// own "version" key (at the entry's first level, not in a nested map such
// as dependencies) is the version.
func parseYAMLIndex(br *bufio.Reader, c *collector) (Index, error) {
	inEntries, sawEntries := false, false
	chartIndent, itemIndent, keyIndent := -1, -1, -1
	chart, inChart := "", false
	// blockIndent is the indent of a key whose block scalar (| or >)
	// follows: lines deeper than it are the scalar's text.
	blockIndent := -1
	line := 0
	for {
		text, err := readLine(br)
		if err != nil && err != io.EOF {
			return Index{}, err
		}
		if len(text) == 0 && err == io.EOF {
			break
		}
		line++
		body := bytes.TrimLeft(text, " ")
		indent := len(text) - len(body)
		body = bytes.TrimRight(body, " \t\r\n")
		if len(body) == 0 || body[0] == '#' {
			if err == io.EOF {
				break
			}
			continue
		}
		if blockIndent >= 0 {
			if indent > blockIndent {
				continue
			}
			blockIndent = -1
		}
		if body[0] == '\t' {
			return Index{}, fmt.Errorf("line %d: indented with a tab", line)
		}
		switch {
		case indent == 0:
			chart, inChart, chartIndent, itemIndent, keyIndent = "", false, -1, -1, -1
			key, value, ok := splitKey(body)
			inEntries = ok && key == "entries"
			if inEntries {
				sawEntries = true
				switch string(value) {
				case "", "{}", "null", "~":
				default:
					return Index{}, fmt.Errorf("line %d: entries is not a block mapping; this reader takes block YAML or JSON", line)
				}
			}
			if isBlockScalar(value) {
				blockIndent = 0
			}
		case !inEntries:
		case body[0] == '-' && inChart && indent >= chartIndent && (itemIndent < 0 || indent == itemIndent):
			// "- key: value": an entry, whose keys are at the indent of
			// its first key.
			itemIndent = indent
			rest := bytes.TrimLeft(body[1:], " ")
			if len(rest) == 0 {
				keyIndent = -1 // the keys follow, at the indent of the first
				continue
			}
			keyIndent = indent + (len(body) - len(rest))
			if v, found, err := versionOf(rest, line); err != nil {
				return Index{}, err
			} else if found {
				if err := c.add(chart, v); err != nil {
					return Index{}, err
				}
			} else if _, value, _ := splitKey(rest); isBlockScalar(value) {
				blockIndent = keyIndent
			}
		case chartIndent < 0 || indent == chartIndent:
			key, value, ok := splitKey(body)
			if !ok || body[0] == '-' {
				return Index{}, fmt.Errorf("line %d: expected a chart name under entries; this reader takes block YAML (as helm repo index writes it) or JSON", line)
			}
			if len(value) > 0 {
				if string(value) == "[]" || string(value) == "null" || string(value) == "~" {
					chart, inChart, chartIndent = "", false, indent
					if err := c.chart(key); err != nil {
						return Index{}, err
					}
					continue
				}
				return Index{}, fmt.Errorf("line %d: the entries of chart %s are not a block sequence; this reader takes block YAML or JSON", line, key)
			}
			chart, inChart, chartIndent, itemIndent, keyIndent = key, true, indent, -1, -1
			if err := c.chart(chart); err != nil {
				return Index{}, err
			}
		case indent < chartIndent:
			return Index{}, fmt.Errorf("line %d: unexpected indentation under entries", line)
		case !inChart:
		case itemIndent < 0:
			return Index{}, fmt.Errorf("line %d: the entries of chart %s are not a block sequence", line, chart)
		default:
			if keyIndent < 0 && indent > itemIndent {
				keyIndent = indent
			}
			if indent != keyIndent {
				if _, value, ok := splitKey(body); ok && isBlockScalar(value) {
					blockIndent = indent
				}
				continue // nested under a key of the entry
			}
			v, found, err := versionOf(body, line)
			if err != nil {
				return Index{}, err
			}
			if found {
				if err := c.add(chart, v); err != nil {
					return Index{}, err
				}
			} else if _, value, _ := splitKey(body); isBlockScalar(value) {
				blockIndent = indent
			}
		}
		if err == io.EOF {
			break
		}
	}
	if !sawEntries {
		return Index{}, errors.New("the index has no entries")
	}
	return c.ix, nil
}

// readLine reads one line, of which at most maxLine bytes are kept.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		part, err := br.ReadSlice('\n')
		if len(out) < maxLine {
			out = append(out, part[:min(len(part), maxLine-len(out))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return out, err
	}
}

// splitKey splits "key: value" (the key plain or quoted); ok is false for
// a line that is no mapping key.
func splitKey(body []byte) (key string, value []byte, ok bool) {
	if len(body) > 0 && (body[0] == '"' || body[0] == '\'') {
		q, rest, ok := unquote(body)
		if !ok {
			return "", nil, false
		}
		rest = bytes.TrimLeft(rest, " ")
		if len(rest) == 0 || rest[0] != ':' {
			return "", nil, false
		}
		return q, bytes.TrimSpace(rest[1:]), true
	}
	i := bytes.Index(body, []byte(": "))
	if i < 0 {
		if !bytes.HasSuffix(body, []byte(":")) {
			return "", nil, false
		}
		i = len(body) - 1
	}
	return string(bytes.TrimSpace(body[:i])), bytes.TrimSpace(body[i+1:]), true
}

// versionOf reads "version: <value>", telling whether the line is that
// key.
func versionOf(body []byte, line int) (string, bool, error) {
	key, value, ok := splitKey(body)
	if !ok || key != "version" {
		return "", false, nil
	}
	if i := bytes.Index(value, []byte(" #")); i >= 0 && value[0] != '"' && value[0] != '\'' {
		value = bytes.TrimSpace(value[:i])
	}
	if len(value) == 0 {
		return "", false, fmt.Errorf("line %d: a version that is not on its line", line)
	}
	switch value[0] {
	case '"', '\'':
		v, rest, ok := unquote(value)
		if !ok || len(bytes.TrimSpace(rest)) > 0 && bytes.TrimSpace(rest)[0] != '#' {
			return "", false, fmt.Errorf("line %d: a quoted version that does not end on its line", line)
		}
		return v, true, nil
	case '&', '*', '!', '|', '>', '[', '{':
		return "", false, fmt.Errorf("line %d: a version written with %q; this reader takes plain or quoted versions", line, value[0])
	}
	return string(value), true, nil
}

// unquote reads a single- or double-quoted scalar at the start of b.
func unquote(b []byte) (string, []byte, bool) {
	q := b[0]
	if q == '\'' {
		var out []byte
		for i := 1; i < len(b); i++ {
			if b[i] == '\'' {
				if i+1 < len(b) && b[i+1] == '\'' {
					out = append(out, '\'')
					i++
					continue
				}
				return string(out), b[i+1:], true
			}
			out = append(out, b[i])
		}
		return "", nil, false
	}
	var out []byte
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '"':
			return string(out), b[i+1:], true
		case '\\':
			i++
			if i >= len(b) {
				return "", nil, false
			}
			if r, ok := yamlEscapes[b[i]]; ok {
				out = utf8.AppendRune(out, r)
				continue
			}
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[b[i]]
			if n == 0 || i+n >= len(b) {
				return "", nil, false
			}
			v, err := strconv.ParseUint(string(b[i+1:i+1+n]), 16, 32)
			if err != nil {
				return "", nil, false
			}
			out = utf8.AppendRune(out, rune(v))
			i += n
		default:
			out = append(out, b[i])
		}
	}
	return "", nil, false
}

// yamlEscapes are YAML's one-character escapes in double quotes.
var yamlEscapes = map[byte]rune{
	'0': 0, 'a': '\a', 'b': '\b', 't': '\t', '\t': '\t', 'n': '\n', 'v': '\v', 'f': '\f', 'r': '\r',
	'e': 0x1b, ' ': ' ', '"': '"', '/': '/', '\\': '\\', 'N': 0x85, '_': 0xa0, 'L': 0x2028, 'P': 0x2029,
}

// isBlockScalar tells whether a key's value starts a block scalar.
func isBlockScalar(value []byte) bool {
	return len(value) > 0 && (value[0] == '|' || value[0] == '>')
}

// parseJSONIndex reads a JSON index token by token.
func parseJSONIndex(r io.Reader, c *collector) (Index, error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return Index{}, err
	}
	sawEntries := false
	for dec.More() {
		key, err := stringToken(dec)
		if err != nil {
			return Index{}, err
		}
		if key != "entries" {
			if err := skipValue(dec); err != nil {
				return Index{}, err
			}
			continue
		}
		sawEntries = true
		if err := expectDelim(dec, '{'); err != nil {
			return Index{}, fmt.Errorf("entries: %w", err)
		}
		for dec.More() {
			chart, err := stringToken(dec)
			if err != nil {
				return Index{}, err
			}
			if err := c.chart(chart); err != nil {
				return Index{}, err
			}
			if err := expectDelim(dec, '['); err != nil {
				return Index{}, fmt.Errorf("entries.%s: %w", chart, err)
			}
			for dec.More() {
				if err := expectDelim(dec, '{'); err != nil {
					return Index{}, fmt.Errorf("an entry of %s: %w", chart, err)
				}
				for dec.More() {
					k, err := stringToken(dec)
					if err != nil {
						return Index{}, err
					}
					if k != "version" {
						if err := skipValue(dec); err != nil {
							return Index{}, err
						}
						continue
					}
					v, err := stringToken(dec)
					if err != nil {
						return Index{}, fmt.Errorf("a version of %s: %w", chart, err)
					}
					if err := c.add(chart, v); err != nil {
						return Index{}, err
					}
				}
				if _, err := dec.Token(); err != nil {
					return Index{}, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return Index{}, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return Index{}, err
		}
	}
	if !sawEntries {
		return Index{}, errors.New("the index has no entries")
	}
	return c.ix, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("expected %q, found %v", want, t)
	}
	return nil
}

func stringToken(dec *json.Decoder) (string, error) {
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	s, ok := t.(string)
	if !ok {
		return "", fmt.Errorf("expected a string, found %v", t)
	}
	if len(s) > maxLine {
		s = s[:maxLine]
	}
	return s, nil
}

// maxDepth bounds the nesting skipValue follows.
const maxDepth = 100

// skipValue skips one value, however large, token by token.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
			if depth > maxDepth {
				return fmt.Errorf("values nested more than %d deep", maxDepth)
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
