package git

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/image-updater/argocd-image-updater/internal/safe"
)

// Templates (git-branch from an Application's annotations, the commit
// message and pull request from the operator) run with limits, so that no
// template can hold the repository lock, burn a core or fill memory.
// text/template cannot be stopped from outside once it runs: it stops at
// the first error a write or a function returns, and at nothing else. So
// the work it can do between two of those is bounded before it runs, and
// every write and function call fails once the time is up:
//   - range only over fields of the data (the images or changes of one
//     write), nested at most maxRangeDepth deep, never over a number or a
//     computed value; and the steps a render can take (each action, each
//     iteration, with each range taken as long as the longest list or map
//     of the data) at most maxTemplateSteps, checked before it runs;
//   - no {{define}}, {{block}} or {{template}}: calls of templates nest
//     into an amount of work no output or range limit sees (a few lines
//     make 2^62 calls that write nothing);
//   - printf with widths and precisions of at most maxFormatWidth, and
//     every function that builds a string (print, printf, println, html,
//     js, urlquery) refuses to build one over maxTemplateOutput, so a
//     variable doubled in a range cannot grow;
//   - at most maxTemplateOutput bytes of output and templateTimeout of
//     time. The render runs on the caller's goroutine: when it returns, it
//     has stopped.
const (
	maxRangeDepth     = 3
	maxTemplateSteps  = 200_000
	maxFormatWidth    = 256
	maxTemplateOutput = 64 << 10
	templateTimeout   = 2 * time.Second
)

// errTemplateLimit is wrapped by errors of templates that break a limit.
var errTemplateLimit = errors.New("template exceeds the limits of write-back templates")

// parseLimitedTemplate parses text and checks the limits that can be seen
// before running it without the data.
func parseLimitedTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=error").Funcs(limitedFuncs(&renderBudget{})).Parse(text)
	if err != nil {
		return nil, err
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("%w: {{define}} and {{block}} are not allowed", errTemplateLimit)
	}
	if t.Tree != nil {
		if err := checkRanges(t.Root, 0); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkRanges refuses range over anything but a field of the data, and
// ranges nested deeper than maxRangeDepth.
func checkRanges(n parse.Node, depth int) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkRanges(c, depth); err != nil {
				return err
			}
		}
	case *parse.RangeNode:
		if depth+1 > maxRangeDepth {
			return fmt.Errorf("%w: range nested more than %d deep", errTemplateLimit, maxRangeDepth)
		}
		if !rangesOverField(n.Pipe) {
			return fmt.Errorf("%w: range over %s: only fields of the data (such as .Images) can be ranged over", errTemplateLimit, n.Pipe)
		}
		if err := checkRanges(n.List, depth+1); err != nil {
			return err
		}
		return checkRanges(n.ElseList, depth)
	case *parse.IfNode:
		if err := checkRanges(n.List, depth); err != nil {
			return err
		}
		return checkRanges(n.ElseList, depth)
	case *parse.WithNode:
		if err := checkRanges(n.List, depth); err != nil {
			return err
		}
		return checkRanges(n.ElseList, depth)
	case *parse.TemplateNode:
		return fmt.Errorf("%w: {{template %q}} is not allowed", errTemplateLimit, n.Name)
	}
	return nil
}

// rangesOverField reports whether a range pipeline is a lone field chain:
// .Images, $.Images or $x.Field.
func rangesOverField(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return true
	case *parse.VariableNode:
		return len(a.Ident) > 1
	}
	return false
}

// templateSteps is an upper bound on the steps a render of n takes when
// each range runs at most longest times: each command and argument of a
// pipeline is a step, and a range's body counts once per iteration. It
// saturates past maxTemplateSteps.
func templateSteps(n parse.Node, longest int) int {
	const over = maxTemplateSteps + 1
	add := func(a, b int) int { return min(a+b, over) }
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return 0
		}
		steps := 0
		for _, c := range n.Nodes {
			steps = add(steps, templateSteps(c, longest))
		}
		return steps
	case *parse.RangeNode:
		body := 1 + templateSteps(n.List, longest) // an iteration is a step
		if longest > 0 && body > over/longest {
			body = over
		} else {
			body *= max(longest, 1)
		}
		return add(add(pipeSteps(n.Pipe), body), templateSteps(n.ElseList, longest))
	case *parse.IfNode:
		return add(add(pipeSteps(n.Pipe), templateSteps(n.List, longest)), templateSteps(n.ElseList, longest))
	case *parse.WithNode:
		return add(add(pipeSteps(n.Pipe), templateSteps(n.List, longest)), templateSteps(n.ElseList, longest))
	case *parse.ActionNode:
		return pipeSteps(n.Pipe)
	case *parse.PipeNode:
		return pipeSteps(n)
	default:
		return 1
	}
}

// pipeSteps counts a pipeline's commands and arguments, nested
// pipelines included.
func pipeSteps(p *parse.PipeNode) int {
	if p == nil {
		return 1
	}
	steps := 1
	for _, c := range p.Cmds {
		steps++
		for _, a := range c.Args {
			steps += templateSteps(a, 0)
		}
	}
	return steps
}

// longestCollection is the length of the longest slice, array or map in
// data, and the largest integer (a range over a field can be a range over
// a number): as many times as any range of a template over it can run.
func longestCollection(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return longestCollection(v.Elem())
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				n = max(n, longestCollection(v.Field(i)))
			}
		}
		return n
	case reflect.Slice, reflect.Array:
		n := v.Len()
		for i := range v.Len() {
			n = max(n, longestCollection(v.Index(i)))
		}
		return n
	case reflect.Map:
		n := v.Len()
		for it := v.MapRange(); it.Next(); {
			n = max(n, longestCollection(it.Value()))
		}
		return n
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(min(max(v.Int(), 0), math.MaxInt32))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return int(min(v.Uint(), math.MaxInt32))
	}
	return 0
}

// renderBudget is what one render may still use: the time, and the
// output. Its writes and functions fail once either is spent, which is
// what makes text/template stop.
type renderBudget struct {
	buf      bytes.Buffer
	max      int
	deadline time.Time
}

func (b *renderBudget) expired() error {
	if !b.deadline.IsZero() && time.Now().After(b.deadline) {
		return fmt.Errorf("%w: still running after %s", errTemplateLimit, templateTimeout)
	}
	return nil
}

func (b *renderBudget) Write(p []byte) (int, error) {
	if err := b.expired(); err != nil {
		return 0, err
	}
	if b.buf.Len()+len(p) > b.max {
		return 0, fmt.Errorf("%w: output over %d bytes", errTemplateLimit, b.max)
	}
	return b.buf.Write(p)
}

// limitedFuncs are the functions that build strings, each refusing to
// build one over maxTemplateOutput, and failing once the time is up.
func limitedFuncs(b *renderBudget) template.FuncMap {
	wrap := func(f func(...any) string, grows int) func(...any) (string, error) {
		return func(args ...any) (string, error) {
			if err := b.expired(); err != nil {
				return "", err
			}
			if err := checkArgsSize(0, args, grows); err != nil {
				return "", err
			}
			return f(args...), nil
		}
	}
	return template.FuncMap{
		"printf": func(format string, args ...any) (string, error) {
			if err := b.expired(); err != nil {
				return "", err
			}
			return limitedPrintf(format, args...)
		},
		"print":    wrap(fmt.Sprint, 1),
		"println":  wrap(fmt.Sprintln, 1),
		"html":     wrap(template.HTMLEscaper, 6), // "&#34;" for '"'
		"js":       wrap(template.JSEscaper, 6),   // "\u003C" for '<'
		"urlquery": wrap(template.URLQueryEscaper, 3),
	}
}

// checkArgsSize refuses arguments whose text, grown up to grows times and
// added to size, could make a string over maxTemplateOutput. A string
// argument counts its length; another value (from the data, or a
// constant) its printed length, counted only up to the limit.
func checkArgsSize(size int, args []any, grows int) error {
	if size > maxTemplateOutput {
		return fmt.Errorf("%w: a string over %d bytes", errTemplateLimit, maxTemplateOutput)
	}
	for _, a := range args {
		if s, ok := a.(string); ok {
			size += len(s)
		} else {
			size += len(fmt.Sprint(a))
		}
		if size*grows > maxTemplateOutput {
			return fmt.Errorf("%w: a string over %d bytes", errTemplateLimit, maxTemplateOutput)
		}
	}
	return nil
}

// limitedPrintf is fmt.Sprintf that refuses widths and precisions over
// maxFormatWidth and '*' (a width taken from an argument).
func limitedPrintf(format string, args ...any) (string, error) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
	spec: // flags, width and precision, up to the verb
		for i++; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '*':
				return "", fmt.Errorf("%w: printf width or precision from an argument", errTemplateLimit)
			case c >= '0' && c <= '9':
				j := i
				for j < len(format) && format[j] >= '0' && format[j] <= '9' {
					j++
				}
				if n, err := strconv.Atoi(format[i:j]); err != nil || n > maxFormatWidth {
					return "", fmt.Errorf("%w: printf width or precision %s over %d", errTemplateLimit, format[i:j], maxFormatWidth)
				}
				i = j - 1
			case c == '+' || c == '-' || c == ' ' || c == '#' || c == '.' || c == '[' || c == ']':
			default:
				break spec
			}
		}
	}
	// Each verb adds at most maxFormatWidth bytes of padding.
	if err := checkArgsSize(len(format)+strings.Count(format, "%")*maxFormatWidth, args, 1); err != nil {
		return "", err
	}
	out := fmt.Sprintf(format, args...)
	if len(out) > maxTemplateOutput {
		return "", fmt.Errorf("%w: a string over %d bytes", errTemplateLimit, maxTemplateOutput)
	}
	return out, nil
}

// renderLimited executes t with data within maxTemplateSteps,
// maxTemplateOutput and templateTimeout.
func renderLimited(t *template.Template, data any) (string, error) {
	return renderWithin(t, data, templateTimeout)
}

func renderWithin(t *template.Template, data any, timeout time.Duration) (string, error) {
	if t.Tree != nil {
		longest := longestCollection(reflect.ValueOf(data))
		if steps := templateSteps(t.Root, longest); steps > maxTemplateSteps {
			return "", fmt.Errorf("%w: its ranges, over up to %d entries each, could take more than %d steps", errTemplateLimit, longest, maxTemplateSteps)
		}
	}
	b := &renderBudget{max: maxTemplateOutput, deadline: time.Now().Add(timeout)}
	// A clone with this render's functions: the parsed template is shared
	// by renders running at once.
	run, err := t.Clone()
	if err != nil {
		return "", err
	}
	run.Funcs(limitedFuncs(b))
	if err := safe.Call(func() error { return run.Execute(b, data) }); err != nil {
		return "", err
	}
	return b.buf.String(), nil
}
