// Package repoyaml parses the YAML a repository supplies (kustomizations,
// Helm values files, override files), within a bound on its values that
// holds after aliases are expanded. Every YAML file read from a repository
// is parsed here, so the bound cannot be missed by one caller.
//
// The node tree yaml.v3 parses holds an anchored value once, however many
// aliases name it; decoding it into Go values, comparing and copying them
// expands every alias. A 90 KB file within the bound on its text can so
// decode to half a million values (about 150 MiB of heap per decode).
// Parse counts the values of the expanded document on the node tree, each
// anchored node once, and refuses a document that expands past the bound,
// before anything decodes it.
package repoyaml

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// MaxValues bounds the values of a document, counted with its aliases
// expanded. Parsing, decoding and checking one edit allocates about
// 1.2 KB per value, so 50,000 keeps one edit under about 60 MiB, and is
// ample for real values files and kustomizations (25,000 lines of block
// YAML).
const MaxValues = 50_000

// ErrTooLarge is what errors for documents past the bound are (errors.Is).
var ErrTooLarge = errors.New("too many values")

// ErrInvalid is what errors for texts that are no YAML are (errors.Is).
var ErrInvalid = errors.New("invalid YAML")

// tooLarge is an error for a document past the bound: its message is the
// whole story, and it is ErrTooLarge.
type tooLarge struct{ msg string }

func (e tooLarge) Error() string        { return e.msg }
func (e tooLarge) Is(target error) bool { return target == ErrTooLarge }

func tooLargef(format string, args ...any) error { return tooLarge{fmt.Sprintf(format, args...)} }

// Option changes a bound, for tests.
type Option func(*limits)

type limits struct{ values int }

// WithMaxValues sets the bound on values (MaxValues by default).
func WithMaxValues(n int) Option { return func(l *limits) { l.values = n } }

func newLimits(opts []Option) limits {
	l := limits{values: MaxValues}
	for _, o := range opts {
		o(&l)
	}
	return l
}

// CheckSize refuses a text with more values than the bound, estimated
// from its bytes before it is parsed: the characters that separate or
// open values (",:-[{" and line ends), never fewer than the values there
// are. It bounds what parsing costs; Parse also counts what aliases add.
func CheckSize(name string, src []byte, opts ...Option) error {
	l := newLimits(opts)
	n := 1
	for _, c := range src {
		switch c {
		case ',', ':', '-', '[', '{', '\n':
			n++
		}
	}
	if n > l.values {
		return tooLargef("%s: about %d values, more than the %d a write-back edits (a file this large is refused so that it cannot exhaust the controller's memory)", name, n, l.values)
	}
	return nil
}

// Parse parses the first document of src into its node tree, refusing
// a text past the bound (CheckSize) and a document whose aliases expand
// it past the bound. name is the file's path, for messages. Decoding the
// returned tree, or any node of it, is bounded too.
func Parse(name string, src []byte, opts ...Option) (*yaml.Node, error) {
	if err := CheckSize(name, src, opts...); err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrInvalid, err)
	}
	if err := CheckExpanded(name, &doc, opts...); err != nil {
		return nil, err
	}
	return &doc, nil
}

// Unmarshal decodes the first document of src into v, within the bounds
// of Parse.
func Unmarshal(name string, src []byte, v any, opts ...Option) error {
	doc, err := Parse(name, src, opts...)
	if err != nil {
		return err
	}
	if doc.Kind == 0 {
		return nil // an empty text, which yaml.Unmarshal leaves v alone for
	}
	if err := doc.Decode(v); err != nil {
		return fmt.Errorf("%s: invalid YAML: %w", name, err)
	}
	return nil
}

// CheckExpanded refuses a node tree whose values, aliases expanded, are
// more than the bound. Each anchored node is counted once and remembered,
// so the count costs one walk of the tree however deep the aliases nest.
// It is for trees that Parse made and code then changed.
func CheckExpanded(name string, n *yaml.Node, opts ...Option) error {
	c := counter{limit: newLimits(opts).values, anchored: map[*yaml.Node]int{}}
	total := c.count(n)
	switch {
	case c.cycle != nil:
		return fmt.Errorf("%s:%d: invalid YAML: the alias *%s is inside the value it names", name, c.cycle.Line, c.cycle.Value)
	case total > c.limit && c.over != nil && c.over.Kind == yaml.AliasNode:
		return tooLargef("%s:%d: the alias *%s takes the file past the %d values a write-back edits, counted with aliases expanded (a file whose aliases expand this far is refused so that it cannot exhaust the controller's memory)", name, c.over.Line, c.over.Value, c.limit)
	case total > c.limit:
		return tooLargef("%s:%d: the file passes the %d values a write-back edits here, counted with aliases expanded (a file this large is refused so that it cannot exhaust the controller's memory)", name, c.over.Line, c.limit)
	}
	return nil
}

type counter struct {
	limit int
	// anchored holds the expanded size of each anchored node counted,
	// -1 while it is being counted (an alias to it then is a cycle).
	anchored map[*yaml.Node]int
	total    int        // values counted so far, aliases expanded
	over     *yaml.Node // the node that took the count past the limit
	cycle    *yaml.Node // an alias inside the value it names
}

// count returns n's values with aliases expanded, at most limit+1: the
// walk stops once the limit is passed.
func (c *counter) count(n *yaml.Node) int {
	if n == nil || c.cycle != nil || c.total > c.limit {
		return 0
	}
	if n.Kind == yaml.AliasNode {
		size := c.anchoredSize(n)
		if c.cycle != nil {
			return 0
		}
		c.total += size
		if c.total > c.limit && c.over == nil {
			c.over = n
		}
		return size
	}
	size := 0
	if n.Kind != yaml.DocumentNode {
		size = 1
		if c.total++; c.total > c.limit && c.over == nil {
			c.over = n
		}
	}
	for _, ch := range n.Content {
		size += c.count(ch)
		if c.total > c.limit || c.cycle != nil {
			break
		}
	}
	return min(size, c.limit+1)
}

// anchoredSize is the expanded size of the node an alias names, counted
// once per node without adding to the running total.
func (c *counter) anchoredSize(alias *yaml.Node) int {
	target := alias.Alias
	if target == nil {
		return 0
	}
	if size, ok := c.anchored[target]; ok {
		if size < 0 {
			c.cycle = alias
			return 0
		}
		return size
	}
	c.anchored[target] = -1
	sub := counter{limit: c.limit, anchored: c.anchored}
	size := sub.count(target)
	if sub.cycle != nil {
		c.cycle = sub.cycle
		return 0
	}
	c.anchored[target] = size
	return size
}
